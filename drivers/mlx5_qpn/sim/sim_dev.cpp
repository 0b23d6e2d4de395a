/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated mlx5 device (the default backend).
 *
 * One POSIX shared-memory segment per device name holds everything a ConnectX would hold for all
 * processes on the host: the QPN table (rdmavt rules, sim_qpn_table.h), a record per RESERVED_QPN
 * object and per ordinary QP (who owns it), UAR pages, counters and the table of open handles.
 * "Firmware commands" run under one process-shared robust mutex, which models the serialisation
 * of the command interface; a process that dies inside one leaves EOWNERDEAD, and the next command
 * repairs the device by rebuilding the bitmap from the records.
 *
 * Why POSIX shm and not DPDK memzones: separate DPDK primaries (different --file-prefix) and forked
 * children without EAL must all see one device, exactly like processes sharing one HCA.
 */
#include "mlx5_qpn_sim.h"
#include "mlx5_qpn_ops.h"
#include "mlx5_qpn_prm_status.h"
#include "sim_qpn_table.h"
#include "sim_dc.h"
#include "lease/mlx5_qpn_lease.h"
#include "qpn_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <new>

#include <rte_common.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_service.h>
#include <rte_service_component.h>

RTE_LOG_REGISTER(mlx5_qpn_sim_logtype, mlx5_qpn.sim, INFO);

#define SIM_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, mlx5_qpn_sim_logtype, "mlx5_qpn_sim: " fmt "\n", ##__VA_ARGS__)

using namespace mlx5_qpn_sim;

namespace {

constexpr uint64_t SIM_MAGIC = 0x4d49535135584c4dULL; /* "MLX5QSIM" little endian */
constexpr uint32_t SIM_VERSION = 3;                  /* 2: DC data path; 3: owners are ProcIds */
constexpr uint32_t SIM_STATE_READY = 0x52454459;      /* "REDY" */
constexpr uint32_t MAX_OWNERS = 64;
constexpr uint32_t NB_UARS = 64;
constexpr uint32_t UAR_PAGE = 4096;
constexpr uint32_t UAR_DB_OFFSET = 0x800;
constexpr uint32_t REC_BITS = 18;
constexpr uint32_t REC_CAP = 1u << REC_BITS;
constexpr uint32_t REC_MAX_LIVE = REC_CAP / 2;        /* keeps linear probing short */
constexpr uint32_t OBJ_TYPE_RESERVED_QPN = 0x2c;

/* DCI and DCT numbers are QPs of the table too; aux holds their DC table index. */
enum : uint8_t { REC_OBJ = 1, REC_QP = 2, REC_DCI = 3, REC_DCT = 4 };
enum CmdKind { CMD_QUERY, CMD_CREATE, CMD_DESTROY };

/* An open handle. Kept in the fixed prefix so that a segment of another layout version can still
 * tell whether anyone is using it (pid at offset 0, start time at 8, live at 16 since version 2). */
struct SimOwner {
	qpn::shm::ProcId proc; /* pid + start time: a reused pid is not the owner */
	uint32_t live;         /* 0 or 1 */
	uint32_t gen;
};
static_assert(offsetof(SimOwner, live) == 16 && sizeof(SimOwner) == 24, "prefix layout");

/* Never changes between layout versions. */
struct SimPrefix {
	uint64_t magic;
	uint32_t version;
	uint32_t state;
	uint64_t size;
	SimOwner owners[MAX_OWNERS];
};

/* An object or an ordinary QP; key = table index + 1 (0: empty slot). */
struct SimRec {
	uint32_t key;
	uint16_t owner;
	uint8_t kind;
	uint8_t log_size;
	uint32_t gen;
	uint32_t aux;
};

struct SimUarMeta {
	uint32_t in_use;
	uint16_t owner;
	uint16_t rsvd;
	uint32_t gen;
	uint32_t rsvd2;
	uint64_t last_seen;   /* last doorbell value consumed (atomic) */
	uint64_t count;       /* doorbells consumed on this page (atomic) */
};

struct SimCfg {
	uint64_t guid;
	uint32_t nb_ports;
	uint32_t cap_reserved_qpn;
	uint32_t log_gran;
	uint32_t log_max_alloc;
	uint32_t log_max_num;
	uint32_t log_max_qp;
	uint32_t aip;
	uint32_t fault_nodevx;
	uint32_t fault_fw_rate;
	uint32_t fault_fw_after;
	uint32_t fault_fw_status;
	uint32_t slow_cmd_us;
	uint32_t limit;
	QpnTableCfg table;
};

struct SimCounters {
	uint64_t commands;
	uint64_t cmd_failed;
	uint64_t faults_injected;
	uint64_t failed_by_status[MLX5_QPN_SIM_NB_STATUS];
	uint64_t objs_live;
	uint64_t qpns_reserved;
	uint64_t qps_live;
	uint64_t uars_live;
	uint64_t reclaimed_objs;
	uint64_t reclaimed_qps;
	uint64_t repairs;
	uint64_t doorbells;   /* atomic: updated by pollers outside the mutex */
};

struct SimShm {
	SimPrefix pre;
	pthread_mutex_t mutex;
	SimCfg cfg;
	SimCounters ctr;
	uint64_t fault_cmds;  /* creation commands seen by fault injection */
	uint32_t gen_next;
	uint32_t recs_live;
	SimUarMeta uar_meta[NB_UARS];
	alignas(4096) uint8_t uar[NB_UARS][UAR_PAGE];
	QpnTable table;
	SimRec recs[REC_CAP];
	SimDc dc;
	alignas(4096) uint8_t dc_arena[DC_ARENA];
};

/* rdma-core's mlx5dv_reserved_qpn_alloc model: per-context blocks of 2^granularity QPNs. */
struct SingleBlock {
	mlx5_qpn_range_obj obj;
	uint32_t size;
	uint32_t next;        /* forward-only cursor */
	uint32_t returned;
	uint64_t *bits;       /* handed out and not yet returned */
};

struct SimDev {
	SimShm *shm;
	qpn::shm::Segment seg;
	uint16_t slot;
	uint32_t gen;
	pid_t pid;
	char name[MLX5_QPN_DEV_NAMESIZE];
	pthread_mutex_t lock; /* single-QPN blocks: one mutex per context, as rdma-core */
	SingleBlock *blks;
	uint32_t nb_blks;
	uint32_t cap_blks;
	bool svc_registered;
	uint32_t svc_id;
	bool dc_off;          /* data path switched off (mlx5_qpn_sim_dc_enable) */
	bool fw_first_fit;    /* this opener's objects come from the lowest free block (devarg;
			       * per handle, so the shared layout does not change) */
	bool dc_uar_mapped;
	mlx5_qpn_uar dc_uar;  /* rung by every DCI of this handle, like a shared bfreg */
};

SimDev *
to_dev(mlx5_qpn_backend *be)
{
	return reinterpret_cast<SimDev *>(be);
}

/* fork() children inherit EAL's memory but not its threads: never register services there. */
bool g_forked;
pid_t g_atfork_pid;

void
on_fork_child()
{
	g_forked = true;
}

__attribute__((constructor)) void
sim_register_atfork()
{
	g_atfork_pid = getpid();
	pthread_atfork(nullptr, nullptr, on_fork_child);
}

bool
name_ok(const char *name)
{
	size_t n = strnlen(name, MLX5_QPN_DEV_NAMESIZE);

	if (n == 0 || n >= MLX5_QPN_DEV_NAMESIZE)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

void
shm_name_of(const char *name, char *out, size_t len)
{
	snprintf(out, len, "/mlx5_qpn_%s", name);
}

uint64_t
guid_from_name(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a: stable across runs and hosts */

	for (const char *p = name; *p; p++) {
		h ^= uint8_t(*p);
		h *= 0x100000001b3ULL;
	}
	/* Mellanox OUI 00:02:c9 in the top 24 bits, as a ConnectX node GUID. */
	return (uint64_t(0x0002c9) << 40) | (h & 0xffffffffffULL);
}

/* Bound on every wait for the device mutex or the segment's init lock (a test hook lowers it). */
uint64_t g_lock_timeout_ns = qpn::shm::kLockTimeoutNs;

bool
owner_alive(const SimOwner &o)
{
	return qpn::shm::alive(o.proc);
}

/* ---- record hash (open addressing, linear probing, backward-shift deletion) ---- */

uint32_t
rec_hash(uint32_t key)
{
	return (key * 0x9e3779b1u) >> (32 - REC_BITS);
}

SimRec *
rec_find(SimShm *s, uint32_t key)
{
	for (uint32_t i = rec_hash(key), n = 0; n < REC_CAP; i = (i + 1) & (REC_CAP - 1), n++) {
		if (s->recs[i].key == key)
			return &s->recs[i];
		if (s->recs[i].key == 0)
			return nullptr;
	}
	return nullptr;
}

bool
rec_insert(SimShm *s, const SimRec &r)
{
	if (s->recs_live >= REC_MAX_LIVE)
		return false;
	/* Bounded: a corrupted recs_live must not turn a full table into an endless probe. */
	for (uint32_t i = rec_hash(r.key), n = 0; n < REC_CAP; i = (i + 1) & (REC_CAP - 1), n++) {
		if (s->recs[i].key == 0) {
			s->recs[i] = r;
			s->recs_live++;
			return true;
		}
	}
	return false;
}

void
rec_delete(SimShm *s, SimRec *r)
{
	uint32_t i = uint32_t(r - s->recs);
	uint32_t j = i;

	s->recs[i].key = 0;
	for (uint32_t n = 0; n < REC_CAP; n++) {
		j = (j + 1) & (REC_CAP - 1);
		if (s->recs[j].key == 0)
			break;
		uint32_t k = rec_hash(s->recs[j].key);
		/* The entry at j may stay if its home k lies cyclically in (i, j]. */
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		s->recs[i] = s->recs[j];
		s->recs[j].key = 0;
		i = j;
	}
	if (s->recs_live)
		s->recs_live--;
}

uint8_t
prefix_of(const SimShm *s)
{
	return s->cfg.aip ? AIP_PREFIX : 0;
}

uint32_t
index_of(const SimShm *s, uint32_t qpn)
{
	return s->cfg.aip ? (qpn & (AIP_SPACE - 1)) : qpn;
}

uint32_t
qpn_of(const SimShm *s, uint32_t idx)
{
	return s->cfg.aip ? (idx | (uint32_t(AIP_PREFIX) << AIP_SHIFT)) : idx;
}

/* ---- validation of what is read back from the segment ----
 *
 * Another process of this user may have crashed mid-write or be buggy: nothing read back is used
 * before it is checked. hdr_ok() is cheap (a few dozen compares) and runs at every lock of the
 * device mutex; shm_valid() walks every table and runs at attach (and rec_ok()/dc checks guard
 * each use afterwards). */

/* The space a record of this device may name: 2^16 with the AIP prefix, else 2^24. */
uint32_t
space_of(const SimShm *s)
{
	return s->cfg.aip ? AIP_SPACE : QPN_SPACE;
}

/* The device parameters, as validate() checks devargs. NULL if fine, else the bad field. */
const char *
cfg_bad(const SimCfg &c)
{
	if (c.nb_ports < 1 || c.nb_ports > MAX_PORTS)
		return "ports";
	if (c.cap_reserved_qpn > 1)
		return "cap_reserved_qpn";
	if (c.aip > 1)
		return "aip";
	if (c.log_max_alloc > (c.aip ? AIP_SHIFT : QPN_BITS))
		return "log_max_alloc";
	if (c.log_gran > c.log_max_alloc)
		return "log_gran";
	if (c.log_max_num > QPN_BITS)
		return "log_max_num";
	if (c.log_max_qp > QPN_BITS)
		return "log_max_qp";
	if (c.fault_fw_status >= MLX5_QPN_SIM_NB_STATUS)
		return "fault_fw_status";
	if (!QpnTable::cfg_ok(c.table) || c.table.nb_ports != c.nb_ports)
		return "QPN table parameters";
	return nullptr;
}

/* Header, parameters and the table's scalar fields. NULL if fine, else what is wrong. */
const char *
hdr_bad(const SimShm *s)
{
	if (s->pre.magic != SIM_MAGIC)
		return "magic";
	if (s->pre.version != SIM_VERSION)
		return "layout version";
	if (s->pre.size != sizeof(SimShm))
		return "size";
	if (__atomic_load_n(&s->pre.state, __ATOMIC_ACQUIRE) != SIM_STATE_READY)
		return "state";
	if (const char *bad = cfg_bad(s->cfg))
		return bad;
	if (!s->table.valid())
		return "QPN table";
	if (s->recs_live > REC_MAX_LIVE)
		return "record count";
	if (__atomic_load_n(&s->dc.nb_active, __ATOMIC_RELAXED) > DC_MAX_DCI)
		return "DC active count";
	return nullptr;
}

/* A record: key inside the device's space, a known kind, an owner slot, a block inside the space
 * and aligned, a DC table index inside its table. */
bool
rec_ok(const SimShm *s, const SimRec &r)
{
	if (r.key == 0 || r.key > space_of(s) || r.owner >= MAX_OWNERS)
		return false;
	uint32_t idx = r.key - 1;
	switch (r.kind) {
	case REC_OBJ:
		return r.log_size <= QPN_BITS && (idx & ((uint32_t(1) << r.log_size) - 1)) == 0 &&
		       (uint32_t(1) << r.log_size) <= space_of(s) - idx;
	case REC_QP:
		return r.log_size == 0;
	case REC_DCI:
		return r.log_size == 0 && r.aux < DC_MAX_DCI;
	case REC_DCT:
		return r.log_size == 0 && r.aux < DC_MAX_DCT;
	default:
		return false;
	}
}

bool
owners_ok(const SimPrefix &p)
{
	for (uint32_t i = 0; i < MAX_OWNERS; i++)
		if (p.owners[i].live > 1)
			return false;
	return true;
}

/* Everything, once, at attach (mutex held). NULL if fine, else what is wrong. */
const char *
shm_bad(const SimShm *s)
{
	if (const char *bad = hdr_bad(s))
		return bad;
	if (!owners_ok(s->pre))
		return "owner table";
	uint32_t n = 0;
	for (uint32_t i = 0; i < REC_CAP; i++) {
		if (s->recs[i].key == 0)
			continue;
		if (!rec_ok(s, s->recs[i]))
			return "QPN record";
		n++;
	}
	if (n != s->recs_live)
		return "record count";
	for (uint32_t i = 0; i < NB_UARS; i++)
		if (s->uar_meta[i].in_use > 1 || s->uar_meta[i].owner >= MAX_OWNERS)
			return "UAR table";
	if (!dc_valid(&s->dc, MAX_OWNERS, NB_UARS))
		return "DC tables";
	return nullptr;
}

/* Free one record and what it holds in the table. Mutex held. */
void
rec_release(SimShm *s, SimRec *r)
{
	uint32_t qpn = qpn_of(s, r->key - 1);

	if (!rec_ok(s, *r)) {
		rec_delete(s, r); /* corrupted since attach: drop it, never index with it */
		return;
	}
	if (r->kind == REC_OBJ) {
		s->table.free_block(qpn, r->log_size, prefix_of(s));
		s->ctr.objs_live--;
		s->ctr.qpns_reserved -= uint64_t(1) << r->log_size;
	} else {
		s->table.free(qpn, prefix_of(s));
		s->ctr.qps_live--;
	}
	rec_delete(s, r);
}

/* Release everything an owner slot holds and free the slot. Mutex held. */
void
owner_release(SimShm *s, uint16_t slot, bool dead)
{
	bool again = true;

	dc_owner_release(&s->dc, slot); /* its queues; the QPNs are records, freed below */
	/* Backward-shift deletion may move a later entry into the slot just freed: re-check it,
	 * and repeat the pass until nothing of this owner is left. */
	while (again) {
		again = false;
		for (uint32_t i = 0; i < REC_CAP; i++) {
			while (s->recs[i].key && s->recs[i].owner == slot) {
				if (dead) {
					if (s->recs[i].kind == REC_OBJ)
						s->ctr.reclaimed_objs++;
					else
						s->ctr.reclaimed_qps++;
				}
				rec_release(s, &s->recs[i]);
				again = true;
			}
		}
	}
	for (uint32_t i = 0; i < NB_UARS; i++) {
		if (s->uar_meta[i].in_use && s->uar_meta[i].owner == slot) {
			__atomic_store_n(&s->uar_meta[i].in_use, 0, __ATOMIC_RELEASE);
			s->ctr.uars_live--;
		}
	}
	s->pre.owners[slot].live = 0;
	s->pre.owners[slot].proc = qpn::shm::ProcId{};
}

/* Take back what dead processes held. Mutex held. */
int
reclaim_dead(SimShm *s)
{
	int n = 0;

	for (uint16_t i = 0; i < MAX_OWNERS; i++) {
		if (s->pre.owners[i].live && !owner_alive(s->pre.owners[i])) {
			SIM_LOG(INFO, "reclaiming the resources of dead process %d (handle %u)",
				int(s->pre.owners[i].proc.pid), unsigned(i));
			owner_release(s, i, true);
			n++;
		}
	}
	return n;
}

/* A process died inside a command: the records are the truth, rebuild the rest from them. */
void
repair(SimShm *s)
{
	SimRec *copy = static_cast<SimRec *>(malloc(sizeof(SimRec) * REC_MAX_LIVE));

	if (copy) {
		/* The hash may be mid-shift: re-insert every entry once. */
		uint32_t n = 0;
		for (uint32_t i = 0; i < REC_CAP && n < REC_MAX_LIVE; i++)
			if (s->recs[i].key && rec_ok(s, s->recs[i]))
				copy[n++] = s->recs[i];
		memset(s->recs, 0, sizeof(s->recs));
		s->recs_live = 0;
		for (uint32_t i = 0; i < n; i++)
			if (!rec_find(s, copy[i].key))
				rec_insert(s, copy[i]);
		free(copy);
	}
	s->table.reset_bitmap();
	s->ctr.objs_live = s->ctr.qpns_reserved = s->ctr.qps_live = 0;
	for (uint32_t i = 0; i < REC_CAP; i++) {
		const SimRec &r = s->recs[i];
		if (!r.key || !rec_ok(s, r))
			continue;
		if (r.kind == REC_OBJ) {
			s->table.mark_range(r.key - 1, uint32_t(1) << r.log_size);
			s->ctr.objs_live++;
			s->ctr.qpns_reserved += uint64_t(1) << r.log_size;
		} else {
			s->table.mark_range(r.key - 1, 1);
			s->ctr.qps_live++;
		}
	}
	dc_rebuild(&s->dc);
	s->ctr.repairs++;
	reclaim_dead(s);
}

/*
 * Take the device mutex with a bounded wait and check the header before anything is used.
 * @return 0 (locked); -ETIMEDOUT (held by a hung process); -EIO (not a mutex any more);
 *         -EPROTO (header or parameters corrupted; not locked).
 */
int
dev_lock(SimShm *s, const char *name)
{
	int rc = qpn::shm::mutex_lock(&s->mutex, g_lock_timeout_ns);

	if (rc == -ETIMEDOUT) {
		SIM_LOG(ERR, "device %s: the device mutex is held by another process for more than %" PRIu64 " ms",
			name, g_lock_timeout_ns / 1000000);
		return rc;
	}
	if (rc < 0) {
		SIM_LOG(ERR, "device %s: the device mutex in shared memory /mlx5_qpn_%s is corrupted",
			name, name);
		return -EIO;
	}
	const char *bad = hdr_bad(s);
	if (bad) {
		if (rc == 1)
			pthread_mutex_consistent(&s->mutex);
		pthread_mutex_unlock(&s->mutex);
		SIM_LOG(ERR, "device %s: shared memory /mlx5_qpn_%s is corrupted (%s)", name, name, bad);
		return -EPROTO;
	}
	if (rc == 1) {
		SIM_LOG(WARNING, "device %s: a process died inside a device command: repairing the device",
			name);
		repair(s);
		pthread_mutex_consistent(&s->mutex);
	}
	return 0;
}

void
dev_unlock(SimShm *s)
{
	pthread_mutex_unlock(&s->mutex);
}

/* Start a firmware command (mutex held): count it, take its time, inject a fault.
 * @return 0 or the PRM status to fail it with. */
uint8_t
fw_begin(SimShm *s, CmdKind kind)
{
	s->ctr.commands++;
	if (s->cfg.slow_cmd_us) {
		struct timespec ts = {time_t(s->cfg.slow_cmd_us / 1000000),
				      long(s->cfg.slow_cmd_us % 1000000) * 1000};
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	if (kind != CMD_CREATE)
		return 0; /* destroy/query never fail by injection: close always cleans up */
	uint64_t n = ++s->fault_cmds;
	bool fail = (s->cfg.fault_fw_after && n > s->cfg.fault_fw_after) ||
		    (s->cfg.fault_fw_rate && n % s->cfg.fault_fw_rate == 0);
	if (!fail)
		return 0;
	s->ctr.faults_injected++;
	return uint8_t(s->cfg.fault_fw_status ? s->cfg.fault_fw_status :
						uint32_t(MLX5_QPN_CMD_STAT_NO_RES_ERR));
}

int
fw_fail(SimShm *s, uint8_t status)
{
	s->ctr.cmd_failed++;
	if (status < MLX5_QPN_SIM_NB_STATUS)
		s->ctr.failed_by_status[status]++;
	return -mlx5_qpn_cmd_status_to_errno(status);
}

int
validate(const mlx5_qpn_devargs *da)
{
	const char *bad = nullptr;
	unsigned val = 0;

	if (da->kind != MLX5_QPN_BACKEND_SIM)
		bad = "kind", val = unsigned(da->kind);
	else if (!name_ok(da->name))
		bad = "name";
	else if (da->ports < 1 || da->ports > MAX_PORTS)
		bad = "ports", val = da->ports;
	else if (da->cap_reserved_qpn != 0 && da->cap_reserved_qpn != 1)
		bad = "cap_reserved_qpn", val = unsigned(da->cap_reserved_qpn);
	else if (da->log_max_alloc > (da->aip ? AIP_SHIFT : QPN_BITS))
		bad = "log_max_alloc", val = da->log_max_alloc;
	else if (da->log_gran > da->log_max_alloc)
		bad = "log_gran", val = da->log_gran;
	else if (da->log_max_num > QPN_BITS)
		bad = "log_max_num", val = da->log_max_num;
	else if (da->log_max_qp > QPN_BITS)
		bad = "log_max_qp", val = da->log_max_qp;
	else if (da->aip > 1)
		bad = "aip", val = da->aip;
	else if (da->fault_fw_status >= MLX5_QPN_SIM_NB_STATUS)
		bad = "fault_fw_status", val = da->fault_fw_status;
	if (bad) {
		SIM_LOG(ERR, "invalid device argument %s=%u", bad, val);
		return -EINVAL;
	}
	QpnTableCfg tc;
	tc.qpn_inc = da->qpn_inc;
	tc.qos_shift = da->qos_shift;
	tc.res_start = da->rsvd_first;
	tc.res_count = da->rsvd_count;
	tc.nb_ports = da->ports;
	tc.premark_special = true;
	if (!QpnTable::cfg_ok(tc)) {
		SIM_LOG(ERR, "invalid QPN table arguments qpn_inc=%u qos_shift=%u rsvd_first=%u rsvd_count=%u",
			da->qpn_inc, da->qos_shift, da->rsvd_first, da->rsvd_count);
		return -EINVAL;
	}
	return 0;
}

void
cfg_from(const mlx5_qpn_devargs *da, SimCfg *c)
{
	*c = SimCfg();
	c->guid = da->guid ? da->guid : guid_from_name(da->name);
	c->nb_ports = da->ports;
	c->cap_reserved_qpn = uint32_t(da->cap_reserved_qpn);
	c->log_gran = da->log_gran;
	c->log_max_alloc = da->log_max_alloc;
	c->log_max_num = da->log_max_num;
	c->log_max_qp = da->log_max_qp;
	c->aip = da->aip;
	c->fault_nodevx = da->fault_nodevx;
	c->fault_fw_rate = da->fault_fw_rate;
	c->fault_fw_after = da->fault_fw_after;
	c->fault_fw_status = da->fault_fw_status;
	c->slow_cmd_us = da->slow_cmd_us;
	c->limit = da->limit;
	c->table.qpn_inc = da->qpn_inc;
	c->table.qos_shift = da->qos_shift;
	c->table.res_start = da->rsvd_first;
	c->table.res_count = da->rsvd_count;
	c->table.nb_ports = da->ports;
	c->table.premark_special = true; /* QP0/QP1 are never ordinary QPNs */
}

bool
cfg_equal(const SimCfg &a, const SimCfg &b)
{
	return a.guid == b.guid && a.nb_ports == b.nb_ports &&
	       a.cap_reserved_qpn == b.cap_reserved_qpn && a.log_gran == b.log_gran &&
	       a.log_max_alloc == b.log_max_alloc && a.log_max_num == b.log_max_num &&
	       a.log_max_qp == b.log_max_qp && a.aip == b.aip && a.fault_nodevx == b.fault_nodevx &&
	       a.fault_fw_rate == b.fault_fw_rate && a.fault_fw_after == b.fault_fw_after &&
	       a.fault_fw_status == b.fault_fw_status && a.slow_cmd_us == b.slow_cmd_us &&
	       a.limit == b.limit && a.table.qpn_inc == b.table.qpn_inc &&
	       a.table.qos_shift == b.table.qos_shift && a.table.res_start == b.table.res_start &&
	       a.table.res_count == b.table.res_count;
}

/* Initialise a zero-filled segment (init lock held, nobody else attached). */
int
shm_init(SimShm *s, const mlx5_qpn_devargs *da)
{
	int rc;

	cfg_from(da, &s->cfg);
	new (&s->table) QpnTable;
	rc = s->table.init(s->cfg.table);
	if (rc)
		return rc;
	rc = qpn::shm::mutex_init(&s->mutex);
	if (rc)
		return rc;
	s->pre.magic = SIM_MAGIC;
	s->pre.version = SIM_VERSION;
	s->pre.size = sizeof(SimShm);
	__atomic_store_n(&s->pre.state, SIM_STATE_READY, __ATOMIC_RELEASE);
	return 0;
}

bool
any_live_owner(const SimPrefix *p)
{
	for (uint32_t i = 0; i < MAX_OWNERS; i++)
		if (p->owners[i].live && owner_alive(p->owners[i]))
			return true;
	return false;
}

/* (Re)create the segment empty at the right size and initialise it. Init lock held. */
int
shm_create(qpn::shm::Segment *seg, const mlx5_qpn_devargs *da, SimShm **out)
{
	qpn::shm::segment_unmap(seg);
	int rc = qpn::shm::segment_map(seg, sizeof(SimShm), true);
	if (rc) {
		SIM_LOG(ERR, "device %s: cannot size and map shared memory %s: %s", da->name,
			seg->name, strerror(-rc));
		return rc;
	}
	SimShm *s = static_cast<SimShm *>(seg->addr);
	rc = shm_init(s, da);
	if (rc)
		return rc;
	*out = s;
	return 0;
}

/*
 * Attach to the named device, creating or resetting it as needed. Init lock held: owners
 * register only under it, so the set of live owners seen here can only shrink meanwhile.
 * A device nobody alive holds is reset with this opener's parameters (as a fresh device comes
 * up), whatever its bytes; one that live processes hold is used only if every table checks out,
 * else -EPROTO and one line naming the segment and the field.
 * *reset says whether this opener (re)initialised it (then a failure later removes it).
 */
int
shm_attach(qpn::shm::Segment *seg, const mlx5_qpn_devargs *da, SimShm **out, bool *reset)
{
	size_t fsize = 0;
	int rc = qpn::shm::segment_file_size(seg, &fsize);

	/* (Re)initialise: a failure later removes what this opener made. */
	auto fresh = [&] {
		*reset = true;
		return shm_create(seg, da, out);
	};
	*reset = false;
	if (rc)
		return rc;
	if (seg->created || fsize < sizeof(SimPrefix))
		return fresh(); /* new, or its creator died before sizing it */

	SimPrefix pre;
	rc = qpn::shm::segment_read(seg, &pre, sizeof(pre), 0);
	if (rc)
		return rc;
	if (pre.magic != SIM_MAGIC) {
		if (pre.magic == 0 && pre.version == 0 && pre.state == 0)
			return fresh(); /* its creator died before initialising it */
		SIM_LOG(ERR, "device %s: shared memory %s is not an emulated device (bad magic); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name);
		return -EPROTO;
	}
	if (!owners_ok(pre)) {
		SIM_LOG(ERR, "device %s: shared memory %s is corrupted (owner table); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name);
		return -EPROTO;
	}
	if (!any_live_owner(&pre))
		return fresh(); /* nobody alive holds it */

	if (pre.version != SIM_VERSION || pre.size != sizeof(SimShm) || fsize != sizeof(SimShm) ||
	    pre.state != SIM_STATE_READY) {
		SIM_LOG(ERR, "device %s: shared memory %s of layout version %u (size %" PRIu64 ", state 0x%x) is in use by live processes (this build: version %u)",
			da->name, seg->name, unsigned(pre.version), pre.size, unsigned(pre.state),
			unsigned(SIM_VERSION));
		return -EPROTO;
	}
	rc = qpn::shm::segment_map(seg, sizeof(SimShm), false);
	if (rc)
		return rc;
	SimShm *s = static_cast<SimShm *>(seg->addr);
	rc = dev_lock(s, da->name);
	if (rc)
		return rc;
	if (const char *bad = shm_bad(s)) {
		dev_unlock(s);
		SIM_LOG(ERR, "device %s: shared memory %s is corrupted (%s); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name, bad);
		return -EPROTO;
	}
	reclaim_dead(s);
	SimCfg mine;
	cfg_from(da, &mine);
	if (!cfg_equal(mine, s->cfg))
		SIM_LOG(NOTICE, "device %s is open elsewhere: its parameters stay as created, this opener's differ",
			da->name);
	dev_unlock(s);
	*out = s;
	return 0;
}

void
dev_free(SimDev *d)
{
	for (uint32_t k = 0; k < d->nb_blks; k++)
		free(d->blks[k].bits);
	free(d->blks);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int
sim_open(const mlx5_qpn_devargs *da, mlx5_qpn_backend **out)
{
	if (!da || !out)
		return -EINVAL;
	int rc = validate(da);
	if (rc)
		return rc;

	SimDev *d = static_cast<SimDev *>(calloc(1, sizeof(SimDev)));
	if (!d)
		return -ENOMEM;
	new (&d->seg) qpn::shm::Segment();
	d->pid = getpid();
	snprintf(d->name, sizeof(d->name), "%s", da->name);
	d->fw_first_fit = da->fw_first_fit != 0;
	pthread_mutex_init(&d->lock, nullptr);

	char shm_name[64];
	shm_name_of(da->name, shm_name, sizeof(shm_name));
	/* Exclusive creation, or an existing object that is ours alone; the init lock decides who
	 * initialises or resets, with a bounded wait. */
	rc = qpn::shm::segment_open_locked(shm_name, &d->seg, g_lock_timeout_ns);
	if (rc) {
		SIM_LOG(ERR, "device %s: cannot open shared memory %s: %s", da->name, shm_name,
			strerror(-rc));
		dev_free(d);
		return rc;
	}
	SimShm *s = nullptr;
	bool reset = false;
	rc = shm_attach(&d->seg, da, &s, &reset);
	if (rc == 0) {
		d->shm = s;
		rc = dev_lock(s, d->name);
	}
	if (rc == 0) {
		rc = -ENOSPC;
		for (uint16_t i = 0; i < MAX_OWNERS; i++) {
			SimOwner &o = s->pre.owners[i];
			if (o.live)
				continue;
			o.proc = qpn::shm::self();
			o.gen = ++s->gen_next;
			o.live = 1;
			d->slot = i;
			d->gen = o.gen;
			rc = 0;
			break;
		}
		dev_unlock(s);
		if (rc == -ENOSPC)
			SIM_LOG(ERR, "device %s: all %u handles are open", da->name, MAX_OWNERS);
	}
	if (rc) {
		/* A refused open leaves nothing behind: a segment this opener created or reset
		 * (nobody alive held it) is removed before the init lock drops, so a waiting
		 * opener does not adopt it. */
		qpn::shm::segment_close(&d->seg, reset, true);
		dev_free(d);
		return rc;
	}
	qpn::shm::segment_unlock(&d->seg);
	*out = reinterpret_cast<mlx5_qpn_backend *>(d);
	return 0;
}

int
sim_query_caps(mlx5_qpn_backend *be, mlx5_qpn_caps *caps)
{
	if (!be || !caps)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_QUERY);
	memset(caps, 0, sizeof(*caps));
	caps->node_guid = s->cfg.guid;
	caps->general_obj_types = s->cfg.cap_reserved_qpn ? uint64_t(1) << 44 : 0;
	caps->reserved_qpn_obj = uint8_t(s->cfg.cap_reserved_qpn);
	caps->log_reserved_qpn_granularity = uint8_t(s->cfg.log_gran);
	caps->log_reserved_qpn_max_alloc = uint8_t(s->cfg.log_max_alloc);
	caps->log_max_num_reserved_qpn = uint8_t(s->cfg.log_max_num);
	caps->log_max_qp = uint8_t(s->cfg.log_max_qp);
	caps->nb_ports = uint8_t(s->cfg.nb_ports);
	caps->devx = s->cfg.fault_nodevx ? 0 : 1;
	dev_unlock(s);
	return 0;
}

/* CREATE_GENERAL_OBJECT(RESERVED_QPN, log_obj_range = log_size). */
int
create_rsvd_qpn(SimDev *d, uint32_t log_size, mlx5_qpn_range_obj *obj)
{
	SimShm *s = d->shm;

	if (s->cfg.fault_nodevx) {
		/* The cap bit is set but the context has no DEVX: mlx5dv refuses before any
		 * command reaches the device. */
		SIM_LOG(DEBUG, "device %s: no DEVX on this context", d->name);
		return -EOPNOTSUPP;
	}
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (st)
		goto fail;
	if (!s->cfg.cap_reserved_qpn) {
		st = MLX5_QPN_CMD_STAT_BAD_OP_ERR;
		goto fail;
	}
	if (log_size < s->cfg.log_gran || log_size > s->cfg.log_max_alloc) {
		SIM_LOG(ERR, "device %s: RESERVED_QPN log_obj_range %u outside [%u, %u]", d->name,
			log_size, s->cfg.log_gran, s->cfg.log_max_alloc);
		st = MLX5_QPN_CMD_STAT_BAD_PARAM_ERR;
		goto fail;
	}
	{
		uint64_t n = uint64_t(1) << log_size;
		uint64_t lim = uint64_t(1) << s->cfg.log_max_num;
		if (s->cfg.limit && s->cfg.limit < lim)
			lim = s->cfg.limit;
		int got = -ENOMEM;
		/* The kernel destroys a dead process's objects at once and the firmware may hand
		 * their QPNs out next: never be more lenient than that. */
		reclaim_dead(s);
		for (int attempt = 0; attempt < 2; attempt++) {
			if (s->ctr.qpns_reserved + n <= lim && s->recs_live < REC_MAX_LIVE)
				got = s->table.reserve_block(log_size, prefix_of(s),
							     d->fw_first_fit);
			if (got >= 0 || attempt == 1)
				break;
			/* No room: dead processes' objects may be what fills it. */
			if (reclaim_dead(s) == 0)
				break;
		}
		if (got < 0) {
			SIM_LOG(DEBUG, "device %s: no room for 2^%u reserved QPNs (%" PRIu64 " of %" PRIu64 " reserved)",
				d->name, log_size, s->ctr.qpns_reserved, lim);
			st = MLX5_QPN_CMD_STAT_LIM_ERR;
			goto fail;
		}
		SimRec r = {};
		r.key = index_of(s, uint32_t(got)) + 1;
		r.owner = d->slot;
		r.kind = REC_OBJ;
		r.log_size = uint8_t(log_size);
		r.gen = ++s->gen_next;
		rec_insert(s, r); /* room checked above */
		s->ctr.objs_live++;
		s->ctr.qpns_reserved += n;
		obj->first_qpn = uint32_t(got);
		obj->log_size = uint8_t(log_size);
		obj->single = 0;
		obj->rsvd = 0;
		obj->handle = (uint64_t(r.gen) << 32) | OBJ_TYPE_RESERVED_QPN;
	}
	dev_unlock(s);
	return 0;
fail:
	rc = fw_fail(s, st);
	dev_unlock(s);
	return rc;
}

/* DESTROY_GENERAL_OBJECT: only the owning handle can name its object. */
int
destroy_rsvd_qpn(SimDev *d, const mlx5_qpn_range_obj *obj)
{
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	SimRec *r = nullptr;
	if (obj->first_qpn < (s->cfg.aip ? ((uint32_t(AIP_PREFIX) + 1) << AIP_SHIFT) : QPN_SPACE) &&
	    (!s->cfg.aip || (obj->first_qpn >> AIP_SHIFT) == AIP_PREFIX))
		r = rec_find(s, index_of(s, obj->first_qpn) + 1);
	if (!r || r->kind != REC_OBJ || r->owner != d->slot || r->log_size != obj->log_size ||
	    r->gen != uint32_t(obj->handle >> 32)) {
		SIM_LOG(ERR, "device %s: no RESERVED_QPN object 0x%x (2^%u) of this handle", d->name,
			obj->first_qpn, unsigned(obj->log_size));
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
		dev_unlock(s);
		return rc;
	}
	rec_release(s, r);
	dev_unlock(s);
	return 0;
}

int
sim_range_reserve(mlx5_qpn_backend *be, uint32_t log_size, mlx5_qpn_range_obj *obj)
{
	if (!be || !obj)
		return -EINVAL;
	return create_rsvd_qpn(to_dev(be), log_size, obj);
}

int
sim_range_release(mlx5_qpn_backend *be, const mlx5_qpn_range_obj *obj)
{
	if (!be || !obj)
		return -EINVAL;
	return destroy_rsvd_qpn(to_dev(be), obj);
}

int
sim_qpn_reserve_one(mlx5_qpn_backend *be, uint32_t *qpn)
{
	if (!be || !qpn)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->shm->cfg.cap_reserved_qpn || d->shm->cfg.fault_nodevx)
		return -EOPNOTSUPP; /* as mlx5dv_reserved_qpn_alloc without the object type or DEVX */

	pthread_mutex_lock(&d->lock);
	SingleBlock *b = d->nb_blks ? &d->blks[d->nb_blks - 1] : nullptr;
	if (!b || b->next == b->size) {
		if (d->nb_blks == d->cap_blks) {
			uint32_t cap = d->cap_blks ? 2 * d->cap_blks : 8;
			void *p = realloc(d->blks, sizeof(SingleBlock) * cap);
			if (!p) {
				pthread_mutex_unlock(&d->lock);
				return -ENOMEM;
			}
			d->blks = static_cast<SingleBlock *>(p);
			d->cap_blks = cap;
		}
		SingleBlock nb = {};
		/* The size comes from the object the device made (checked under its mutex), never
		 * from a shift by a field read back from shared memory without it. */
		int rc = create_rsvd_qpn(d, d->shm->cfg.log_gran, &nb.obj);
		if (rc) {
			pthread_mutex_unlock(&d->lock);
			return rc;
		}
		nb.size = uint32_t(1) << nb.obj.log_size;
		nb.bits = static_cast<uint64_t *>(calloc((nb.size + 63) / 64, sizeof(uint64_t)));
		if (!nb.bits) {
			destroy_rsvd_qpn(d, &nb.obj);
			pthread_mutex_unlock(&d->lock);
			return -ENOMEM;
		}
		nb.obj.single = 1;
		d->blks[d->nb_blks++] = nb;
		b = &d->blks[d->nb_blks - 1];
	}
	uint32_t i = b->next++;
	b->bits[i / 64] |= uint64_t(1) << (i % 64);
	*qpn = b->obj.first_qpn + i;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int
sim_qpn_release_one(mlx5_qpn_backend *be, uint32_t qpn)
{
	if (!be)
		return -EINVAL;
	SimDev *d = to_dev(be);
	int rc = -EINVAL;

	pthread_mutex_lock(&d->lock);
	for (uint32_t k = 0; k < d->nb_blks; k++) {
		SingleBlock *b = &d->blks[k];
		if (qpn < b->obj.first_qpn || qpn - b->obj.first_qpn >= b->size)
			continue;
		uint32_t i = qpn - b->obj.first_qpn;
		if (!(b->bits[i / 64] & (uint64_t(1) << (i % 64))))
			break; /* never handed out, or a double free */
		b->bits[i / 64] &= ~(uint64_t(1) << (i % 64));
		rc = 0;
		if (++b->returned == b->size) {
			/* Every QPN of the block was handed out and came back. */
			rc = destroy_rsvd_qpn(d, &b->obj);
			free(b->bits);
			d->blks[k] = d->blks[--d->nb_blks];
		}
		break;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc == -EINVAL)
		SIM_LOG(ERR, "device %s: QPN 0x%x is not a reserved QPN held by this handle", d->name,
			qpn);
	return rc;
}

/* An ordinary QP number from the table, recorded as `kind` for this handle. Mutex held.
 * @return 0 or the PRM status (LIM_ERR: no QPN left). */
uint8_t
qp_alloc_locked(SimDev *d, uint8_t kind, uint32_t aux, uint32_t *qpn)
{
	SimShm *s = d->shm;
	int got = -ENOMEM;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (s->ctr.qps_live < (uint64_t(1) << s->cfg.log_max_qp) &&
		    s->recs_live < REC_MAX_LIVE)
			got = s->table.alloc(QpType::ORDINARY, 1, prefix_of(s));
		if (got >= 0 || attempt == 1 || reclaim_dead(s) == 0)
			break;
	}
	if (got < 0)
		return MLX5_QPN_CMD_STAT_LIM_ERR;
	SimRec r = {};
	r.key = index_of(s, uint32_t(got)) + 1;
	r.owner = d->slot;
	r.kind = kind;
	r.gen = ++s->gen_next;
	r.aux = aux;
	rec_insert(s, r);
	s->ctr.qps_live++;
	*qpn = uint32_t(got);
	return 0;
}

int
sim_qp_create(mlx5_qpn_backend *be, uint32_t *qpn)
{
	if (!be || !qpn)
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (!st)
		st = qp_alloc_locked(d, REC_QP, 0, qpn);
	rc = st ? fw_fail(s, st) : 0;
	dev_unlock(s);
	return rc;
}

int
sim_qp_destroy(mlx5_qpn_backend *be, uint32_t qpn)
{
	if (!be)
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	SimRec *r = nullptr;
	if (s->table.test(qpn, prefix_of(s)))
		r = rec_find(s, index_of(s, qpn) + 1);
	if (!r || r->kind != REC_QP || r->owner != d->slot) {
		SIM_LOG(ERR, "device %s: no QP 0x%x of this handle", d->name, qpn);
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
	} else {
		rec_release(s, r);
	}
	dev_unlock(s);
	return rc;
}

int32_t
svc_run(void *arg)
{
	mlx5_qpn_backend *be = static_cast<mlx5_qpn_backend *>(arg);
	int n = mlx5_qpn_sim_poll(be);
	int w = 0;

	/* Skip the device mutex when no DCI exists anywhere. */
	if (__atomic_load_n(&to_dev(be)->shm->dc.nb_active, __ATOMIC_RELAXED) != 0 &&
	    !to_dev(be)->dc_off)
		w = mlx5_qpn_sim_dc_run(be);
	return (n > 0 || w > 0) ? 0 : -EAGAIN;
}

void
svc_register(SimDev *d)
{
	if (d->svc_registered || g_forked || getpid() != g_atfork_pid || rte_lcore_count() == 0)
		return;
	struct rte_service_spec spec;
	memset(&spec, 0, sizeof(spec));
	snprintf(spec.name, sizeof(spec.name), "sim_%.16s_%u", d->name, unsigned(d->slot));
	spec.callback = svc_run;
	spec.callback_userdata = d;
	spec.capabilities = RTE_SERVICE_CAP_MT_SAFE; /* the poll is lock-free */
	spec.socket_id = -1; /* SOCKET_ID_ANY */
	uint32_t id;
	if (rte_service_component_register(&spec, &id) != 0) {
		SIM_LOG(WARNING, "device %s: doorbell service not registered; call mlx5_qpn_sim_poll()",
			d->name);
		return;
	}
	rte_service_component_runstate_set(id, 1);
	rte_service_runstate_set(id, 1);
	d->svc_id = id;
	d->svc_registered = true;
}

void
svc_unregister(SimDev *d)
{
	if (!d->svc_registered)
		return;
	rte_service_runstate_set(d->svc_id, 0);
	rte_service_component_runstate_set(d->svc_id, 0);
	/* A service lcore may be inside the callback: wait until it has left. */
	for (int i = 0; i < 100000 && rte_service_may_be_active(d->svc_id) == 1; i++)
		usleep(10);
	rte_service_component_unregister(d->svc_id);
	d->svc_registered = false;
}

int
sim_uar_map(mlx5_qpn_backend *be, mlx5_qpn_uar *uar)
{
	if (!be || !uar)
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (!st) {
		st = MLX5_QPN_CMD_STAT_LIM_ERR;
		for (uint32_t i = 0; i < NB_UARS; i++) {
			SimUarMeta &m = s->uar_meta[i];
			if (m.in_use)
				continue;
			memset(s->uar[i], 0, UAR_PAGE);
			m.owner = d->slot;
			m.gen = ++s->gen_next;
			__atomic_store_n(&m.last_seen, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&m.count, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&m.in_use, 1, __ATOMIC_RELEASE);
			s->ctr.uars_live++;
			uar->base_addr = s->uar[i];
			uar->reg_addr = s->uar[i] + UAR_DB_OFFSET;
			uar->page_id = i;
			uar->mmap_off = offsetof(SimShm, uar) + uint64_t(i) * UAR_PAGE;
			uar->handle = (uint64_t(m.gen) << 32) | i;
			st = 0;
			break;
		}
	}
	if (st) {
		rc = fw_fail(s, st);
		dev_unlock(s);
		return rc;
	}
	dev_unlock(s);
	svc_register(d);
	return 0;
}

int
sim_uar_unmap(mlx5_qpn_backend *be, mlx5_qpn_uar *uar)
{
	if (!be || !uar)
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	uint32_t i = uar->page_id;
	if (i >= NB_UARS || !s->uar_meta[i].in_use || s->uar_meta[i].owner != d->slot ||
	    s->uar_meta[i].gen != uint32_t(uar->handle >> 32)) {
		SIM_LOG(ERR, "device %s: UAR page %u is not mapped by this handle", d->name, i);
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
		dev_unlock(s);
		return rc;
	}
	__atomic_store_n(&s->uar_meta[i].in_use, 0, __ATOMIC_RELEASE);
	s->ctr.uars_live--;
	dev_unlock(s);
	memset(uar, 0, sizeof(*uar));
	return 0;
}

void
sim_close(mlx5_qpn_backend *be)
{
	if (!be)
		return;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	bool last = false;

	if (d->pid != getpid()) {
		/* A fork()ed copy of the handle: the parent still owns everything; only drop the
		 * child's copy of the process-local memory. */
		SIM_LOG(WARNING, "device %s: handle closed in a child process; the parent keeps its objects",
			d->name);
	} else {
		svc_unregister(d);
		/* The init lock first: an opener registers under it, so "no live owner left" stays
		 * true until the name is gone, and a waiting opener sees the unlink (st_nlink 0)
		 * and creates a fresh device instead of adopting this one. */
		bool seg_locked = qpn::shm::segment_lock(&d->seg, g_lock_timeout_ns) == 0;
		if (dev_lock(s, d->name) == 0) {
			owner_release(s, d->slot, false);
			last = seg_locked && !any_live_owner(&s->pre);
			dev_unlock(s);
		}
	}
	/* The last live owner removes the device: nothing of anyone alive is in it. */
	qpn::shm::segment_close(&d->seg, last, true);
	dev_free(d);
}

} // namespace

extern "C" {

const struct mlx5_qpn_dev_ops mlx5_qpn_sim_ops = {
	.open = sim_open,
	.query_caps = sim_query_caps,
	.range_reserve = sim_range_reserve,
	.range_release = sim_range_release,
	.qpn_reserve_one = sim_qpn_reserve_one,
	.qpn_release_one = sim_qpn_release_one,
	.qp_create = sim_qp_create,
	.qp_destroy = sim_qp_destroy,
	.uar_map = sim_uar_map,
	.uar_unmap = sim_uar_unmap,
	.close = sim_close,
};

int
mlx5_qpn_sim_node_guid(struct mlx5_qpn_backend *be, uint64_t *guid)
{
	if (!be || !guid)
		return -EINVAL;
	*guid = to_dev(be)->shm->cfg.guid;
	return 0;
}

int
mlx5_qpn_sim_stats_get(struct mlx5_qpn_backend *be, struct mlx5_qpn_sim_stats *st)
{
	if (!be || !st)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->commands = s->ctr.commands;
	st->cmd_failed = s->ctr.cmd_failed;
	st->faults_injected = s->ctr.faults_injected;
	memcpy(st->failed_by_status, s->ctr.failed_by_status, sizeof(st->failed_by_status));
	st->objs_live = s->ctr.objs_live;
	st->qpns_reserved = s->ctr.qpns_reserved;
	st->qps_live = s->ctr.qps_live;
	st->uars_live = s->ctr.uars_live;
	st->qpns_used = s->table.used();
	for (uint32_t i = 0; i < MAX_OWNERS; i++)
		st->owners_live += s->pre.owners[i].live != 0;
	st->reclaimed_objs = s->ctr.reclaimed_objs;
	st->reclaimed_qps = s->ctr.reclaimed_qps;
	st->repairs = s->ctr.repairs;
	st->doorbells = __atomic_load_n(&s->ctr.doorbells, __ATOMIC_RELAXED);
	st->dc_wqes = s->dc.ctr.wqes;
	st->dc_delivered = s->dc.ctr.delivered;
	st->dc_err_cqes = s->dc.ctr.err_cqes;
	st->dc_stalls = s->dc.ctr.stalls;
	st->dc_cqs = s->dc.ctr.cqs;
	st->dc_dcis = s->dc.ctr.dcis;
	st->dc_dcts = s->dc.ctr.dcts;
	dev_unlock(s);
	return 0;
}

int
mlx5_qpn_sim_poll(struct mlx5_qpn_backend *be)
{
	if (!be)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int n = 0;

	for (uint32_t i = 0; i < NB_UARS; i++) {
		SimUarMeta &m = s->uar_meta[i];
		if (!__atomic_load_n(&m.in_use, __ATOMIC_ACQUIRE))
			continue;
		uint64_t v = __atomic_load_n(reinterpret_cast<uint64_t *>(s->uar[i] + UAR_DB_OFFSET),
					     __ATOMIC_ACQUIRE);
		uint64_t seen = __atomic_load_n(&m.last_seen, __ATOMIC_ACQUIRE);
		/* Whoever swaps the value in consumes the doorbell: concurrent pollers in any
		 * process count each new value once. */
		if (v != seen && __atomic_compare_exchange_n(&m.last_seen, &seen, v, false,
							     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			__atomic_fetch_add(&m.count, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->ctr.doorbells, 1, __ATOMIC_RELAXED);
			n++;
		}
	}
	return n;
}

int
mlx5_qpn_sim_service_id(struct mlx5_qpn_backend *be, uint32_t *id)
{
	if (!be || !id)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->svc_registered)
		return -ENOENT;
	*id = d->svc_id;
	return 0;
}

int
mlx5_qpn_sim_special_qp(struct mlx5_qpn_backend *be, int gsi, uint32_t port, uint32_t *qpn)
{
	if (!be || !qpn || (gsi != 0 && gsi != 1))
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (st) {
		rc = fw_fail(s, st);
	} else {
		rc = s->table.alloc(gsi ? QpType::GSI : QpType::SMI, port, prefix_of(s));
		if (rc >= 0) {
			*qpn = uint32_t(rc);
			rc = 0;
		} else {
			SIM_LOG(ERR, "device %s: QP%d of port %u exists already or the port is invalid",
				d->name, gsi, port);
			rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_PARAM_ERR);
		}
	}
	dev_unlock(s);
	return rc;
}

int
mlx5_qpn_sim_reclaim(struct mlx5_qpn_backend *be)
{
	if (!be)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	rc = reclaim_dead(s);
	dev_unlock(s);
	return rc;
}

/* ---- DC data path (see sim_dc.h) ---- */

namespace {

int
dct_lookup(void *ctx, uint32_t dctn)
{
	SimShm *s = static_cast<SimShm *>(ctx);
	uint32_t idx = index_of(s, dctn);

	if (qpn_of(s, idx) != dctn)
		return -1;
	const SimRec *r = rec_find(s, idx + 1);
	if (!r || r->kind != REC_DCT || r->aux >= DC_MAX_DCT)
		return -1;
	return int(r->aux);
}

/* Start a DC command: checks, mutex, firmware accounting. Returns 0 with the mutex held. */
int
dc_cmd_begin(mlx5_qpn_backend *be, CmdKind kind, uint8_t *st)
{
	if (!be)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	int rc = dev_lock(d->shm, d->name);
	if (rc)
		return rc;
	*st = fw_begin(d->shm, kind);
	return 0;
}

/* End a DC command: status -> errno (failures counted and logged), mutex released. */
int
dc_cmd_end(SimDev *d, uint8_t st, int rc, const char *what)
{
	SimShm *s = d->shm;

	if (st)
		rc = fw_fail(s, st);
	dev_unlock(s);
	if (rc)
		SIM_LOG(ERR, "device %s: %s failed: %s", d->name, what, strerror(-rc));
	return rc;
}

bool
handle_ok(uint64_t handle, uint32_t cap)
{
	return uint32_t(handle) < cap;
}

/* Free a DC QPN record of this handle. Mutex held. */
void
dc_qpn_free(SimDev *d, uint32_t qpn, uint8_t kind)
{
	SimShm *s = d->shm;
	SimRec *r = rec_find(s, index_of(s, qpn) + 1);

	if (r && r->kind == kind && r->owner == d->slot && qpn_of(s, index_of(s, qpn)) == qpn)
		rec_release(s, r);
}

} // namespace

int
mlx5_qpn_sim_cq_alloc(struct mlx5_qpn_backend *be, uint32_t log_depth,
		      struct mlx5_qpn_sim_cq_info *cq)
{
	uint8_t st = 0;
	if (!cq)
		return -EINVAL;
	if (be && (log_depth < 1 || log_depth > DC_LOG_CQ_MAX)) {
		SIM_LOG(ERR, "device %s: CQ log_depth %u outside [1, %u]", to_dev(be)->name,
			log_depth, DC_LOG_CQ_MAX);
		return -EINVAL;
	}
	int rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	if (!st) {
		uint32_t idx = 0, gen = ++s->gen_next;
		rc = dc_cq_create(&s->dc, s->dc_arena, d->slot, gen, log_depth, &idx);
		if (rc == 0) {
			memset(cq, 0, sizeof(*cq));
			cq->ring = dc_page_ptr(s->dc_arena, s->dc.cq[idx].page);
			cq->dbrec = s->dc.cq[idx].dbrec;
			cq->log_depth = log_depth;
			cq->cqn = idx;
			cq->handle = (uint64_t(gen) << 32) | idx;
		}
	}
	return dc_cmd_end(d, st, rc, "CREATE_CQ");
}

int
mlx5_qpn_sim_cq_free(struct mlx5_qpn_backend *be, const struct mlx5_qpn_sim_cq_info *cq)
{
	uint8_t st = 0;
	if (!cq || !handle_ok(cq->handle, DC_MAX_CQ))
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_DESTROY, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	rc = dc_cq_destroy(&d->shm->dc, d->slot, uint32_t(cq->handle), uint32_t(cq->handle >> 32));
	return dc_cmd_end(d, 0, rc, "DESTROY_CQ");
}

/* Is the CQ behind `handle` live and opened by this handle (its generation still current)? */
static bool
cq_is_mine(const SimDc *dc, const SimDev *d, uint64_t handle)
{
	uint32_t i = uint32_t(handle);
	return dc->cq[i].live && dc->cq[i].owner == d->slot && dc->cq[i].gen == uint32_t(handle >> 32);
}

/* DESTROY of a DCI or DCT (rec says which): the queue first, then its number in the QPN table. */
static int
dc_qp_destroy_cmd(struct mlx5_qpn_backend *be, uint64_t handle, uint32_t max, uint8_t rec,
		  const char *what)
{
	uint8_t st = 0;
	if (!handle_ok(handle, max))
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_DESTROY, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimDc *dc = &d->shm->dc;
	uint32_t idx = uint32_t(handle), gen = uint32_t(handle >> 32);
	uint32_t qpn = rec == REC_DCI ? dc->dci[idx].qpn : dc->dct[idx].number;
	rc = rec == REC_DCI ? dc_dci_destroy(dc, d->slot, idx, gen)
			    : dc_dct_destroy(dc, d->slot, idx, gen);
	if (rc == 0)
		dc_qpn_free(d, qpn, rec);
	return dc_cmd_end(d, 0, rc, what);
}

int
mlx5_qpn_sim_dci_alloc(struct mlx5_qpn_backend *be, const struct mlx5_qpn_sim_cq_info *cq,
		       uint32_t log_sq_bbs, struct mlx5_qpn_sim_dci_info *dci)
{
	uint8_t st = 0;
	if (!be || !cq || !dci || !handle_ok(cq->handle, DC_MAX_CQ) ||
	    log_sq_bbs > DC_LOG_SQ_MAX + DC_SQ_BB_SHIFT)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	/* The UAR page every DCI of this handle rings (mapped once, outside the device mutex:
	 * uar_map is a command of its own). */
	pthread_mutex_lock(&d->lock);
	int rc = 0;
	if (!d->dc_uar_mapped) {
		rc = sim_uar_map(be, &d->dc_uar);
		d->dc_uar_mapped = rc == 0;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return rc;
	rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimShm *s = d->shm;
	SimDc *dc = &s->dc;
	uint32_t cqi = uint32_t(cq->handle);
	if (!st && !cq_is_mine(dc, d, cq->handle))
		rc = -EINVAL;
	uint32_t qpn = 0;
	if (!st && !rc)
		st = qp_alloc_locked(d, REC_DCI, 0, &qpn);
	if (!st && !rc) {
		uint32_t idx = 0, gen = ++s->gen_next;
		rc = dc_dci_create(dc, s->dc_arena, d->slot, gen, qpn, cqi, log_sq_bbs,
				   d->dc_uar.page_id, &idx);
		if (rc) {
			dc_qpn_free(d, qpn, REC_DCI);
		} else {
			rec_find(s, index_of(s, qpn) + 1)->aux = idx;
			memset(dci, 0, sizeof(*dci));
			dci->qpn = qpn;
			dci->log_sq_bbs = log_sq_bbs;
			dci->sq = dc_page_ptr(s->dc_arena, dc->dci[idx].page);
			dci->dbrec = dc->dci[idx].dbrec;
			dci->uar_reg = d->dc_uar.reg_addr;
			dci->handle = (uint64_t(gen) << 32) | idx;
		}
	}
	return dc_cmd_end(d, st, rc, "CREATE_QP (DCI)");
}

int
mlx5_qpn_sim_dci_free(struct mlx5_qpn_backend *be, const struct mlx5_qpn_sim_dci_info *dci)
{
	if (!dci)
		return -EINVAL;
	return dc_qp_destroy_cmd(be, dci->handle, DC_MAX_DCI, REC_DCI, "DESTROY_QP (DCI)");
}

int
mlx5_qpn_sim_dct_alloc(struct mlx5_qpn_backend *be, const struct mlx5_qpn_sim_cq_info *cq,
		       uint64_t dc_key, struct mlx5_qpn_sim_dct_info *dct)
{
	uint8_t st = 0;
	if (!cq || !dct || !handle_ok(cq->handle, DC_MAX_CQ))
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	SimDc *dc = &s->dc;
	uint32_t cqi = uint32_t(cq->handle);
	if (!st && !cq_is_mine(dc, d, cq->handle))
		rc = -EINVAL;
	uint32_t number = 0;
	if (!st && !rc)
		st = qp_alloc_locked(d, REC_DCT, 0, &number);
	if (!st && !rc) {
		uint32_t idx = 0, gen = ++s->gen_next;
		rc = dc_dct_create(dc, s->dc_arena, d->slot, gen, number, cqi, dc_key, &idx);
		if (rc) {
			dc_qpn_free(d, number, REC_DCT);
		} else {
			rec_find(s, index_of(s, number) + 1)->aux = idx;
			memset(dct, 0, sizeof(*dct));
			dct->dctn = number;
			dct->rx_slots = DC_RX_SLOTS;
			dct->rx = dc_page_ptr(s->dc_arena, dc->dct[idx].page);
			dct->handle = (uint64_t(gen) << 32) | idx;
		}
	}
	return dc_cmd_end(d, st, rc, "CREATE_DCT");
}

int
mlx5_qpn_sim_dct_free(struct mlx5_qpn_backend *be, const struct mlx5_qpn_sim_dct_info *dct)
{
	if (!dct)
		return -EINVAL;
	return dc_qp_destroy_cmd(be, dct->handle, DC_MAX_DCT, REC_DCT, "DESTROY_DCT");
}

int
mlx5_qpn_sim_dc_run(struct mlx5_qpn_backend *be)
{
	if (!be)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	SimShm *s = d->shm;
	if (__atomic_load_n(&s->dc.nb_active, __ATOMIC_ACQUIRE) == 0)
		return 0;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	rc = dc_execute(&s->dc, s->dc_arena, dct_lookup, s);
	dev_unlock(s);
	return rc;
}

int
mlx5_qpn_sim_dc_enable(struct mlx5_qpn_backend *be, int on)
{
	if (!be || (on != 0 && on != 1))
		return -EINVAL;
	to_dev(be)->dc_off = !on;
	return 0;
}

int
mlx5_qpn_sim_destroy(const char *name)
{
	if (!name || !name_ok(name)) {
		SIM_LOG(ERR, "invalid emulated device name");
		return -EINVAL;
	}
	char shm_name[64];
	shm_name_of(name, shm_name, sizeof(shm_name));
	/* The device's lease file goes with it (its GUID: as created, else from the name). */
	uint64_t guid = guid_from_name(name);
	int fd = shm_open(shm_name, O_RDONLY | O_CLOEXEC, 0);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) == sizeof(SimShm)) {
		size_t len = offsetof(SimShm, cfg) + sizeof(SimCfg);
		void *p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			const SimShm *s = static_cast<const SimShm *>(p);
			if (s->pre.magic == SIM_MAGIC && s->cfg.guid != 0)
				guid = s->cfg.guid;
			munmap(p, len);
		}
	}
	if (fd >= 0)
		close(fd);
	/* The last close removes the device itself; a lease with cooling entries may remain. */
	int rc = qpn::shm::segment_unlink(shm_name);
	char lease_name[48];
	qpn::lease::name_of(guid, lease_name, sizeof(lease_name));
	if (shm_unlink(lease_name) == 0 && rc == -ENOENT)
		rc = 0;
	return rc;
}

int
mlx5_qpn_sim_test_hold_mutex(struct mlx5_qpn_backend *be)
{
	if (!be)
		return -EINVAL;
	SimDev *d = to_dev(be);
	return dev_lock(d->shm, d->name); /* never unlocked: the caller hangs or dies holding it */
}

uint64_t
mlx5_qpn_sim_set_lock_timeout_ns(uint64_t ns)
{
	uint64_t old = g_lock_timeout_ns;
	g_lock_timeout_ns = ns ? ns : qpn::shm::kLockTimeoutNs;
	return old;
}

} /* extern "C" */
