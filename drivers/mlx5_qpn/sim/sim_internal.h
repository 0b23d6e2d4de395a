/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_SIM_INTERNAL_H
#define MLX5_QPN_SIM_INTERNAL_H

/*
 * Internal: the emulated mlx5 device (the default backend), shared by the files of sim/.
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
 *
 * The files, one concern each:
 *  - sim_internal.h   this header: the segment layout (SimShm), the handle (SimDev), constants;
 *  - sim_segment.cpp  segment and liveness: open/attach/close of the shared segment, owners,
 *                     reclaim of dead processes, mlx5_qpn_sim_destroy() and the purge hook
 *                     (the device's GUID; the generic layer removes its lease file);
 *  - sim_devargs.cpp  its own devargs keys (table, defaults, cross-key checks) and its
 *                     registration (the backend descriptor, mlx5_qpn_backend.h);
 *  - sim_validate.cpp checks of devargs and of everything read back from the segment;
 *  - sim_records.cpp  the record hash (one record per object or QP, naming its owner);
 *  - sim_fw.cpp       the firmware command model: device mutex, repair, fw_begin/fw_fail and
 *                     fault injection, the mutex test hooks;
 *  - sim_rsvd_qpn.cpp RESERVED_QPN objects, the single-QPN model, ordinary and special QPs;
 *  - sim_uar.cpp      UAR pages and the doorbell service;
 *  - sim_dc_cmd.cpp   DC commands (CQ/DCI/DCT create/destroy, run), one prologue and epilogue;
 *  - sim_dc.cpp       the DC tables and their page arena (create, destroy, reset, repair);
 *  - sim_dc_exec.cpp  the DC execution step: send WQEs, SRQ delivery, CQEs, lost SENDs;
 *  - sim_ops.cpp      the ops table (mlx5_qpn_sim_ops), caps, stats and the small queries.
 *
 * Nothing declared here leaves the library: the declarations are hidden (they had internal
 * linkage when this was one file); only mlx5_qpn_sim.h and mlx5_qpn_sim_ops are the interface.
 */

#include "mlx5_qpn_sim.h"
#include "mlx5_qpn_sim_devargs.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_ops.h"
#include "sim_qpn_table.h"
#include "sim_dc.h"
#include "qpn_shm.h"
#include "mlx5_qpn_prm.h"
#include "mlx5_qpn_prm_wqe.h"

#include <cstddef>
#include <cstdint>
#include <pthread.h>
#include <sys/types.h>

#include <rte_log.h>

#include "mlx5_qpn_log.h"

/* Registered once, in sim_ops.cpp (RTE_LOG_REGISTER). */
extern int mlx5_qpn_sim_logtype;

#define SIM_LOG(level, ...) MLX5_QPN_LOG(sim, level, __VA_ARGS__)

#pragma GCC visibility push(hidden)

namespace mlx5_qpn_sim {

constexpr uint64_t kSimMagic = 0x4d49535135584c4dULL; /* "MLX5QSIM" little endian */
/* 2: DC data path; 3: owners are ProcIds; 4: DCI time-outs and dc_err_every; 5: DCTs receive
 * through an SRQ. */
constexpr uint32_t kSimVersion = 5;
constexpr uint32_t kSimStateReady = 0x52454459; /* "REDY" */
constexpr uint32_t kMaxOwners = 64;
constexpr uint32_t kNbUars = 64;
constexpr uint32_t kUarPage = 4096;
constexpr uint32_t kRecBits = 18;
constexpr uint32_t kRecCap = 1u << kRecBits;
constexpr uint32_t kRecMaxLive = kRecCap / 2; /* keeps linear probing short */

/* DCI and DCT numbers are QPs of the table too; aux holds their DC table index. */
enum : uint8_t { REC_OBJ = 1, REC_QP = 2, REC_DCI = 3, REC_DCT = 4 };
enum CmdKind { CMD_QUERY, CMD_CREATE, CMD_DESTROY, CMD_MODIFY };

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
	SimOwner owners[kMaxOwners];
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
	uint64_t last_seen; /* last doorbell value consumed (atomic) */
	uint64_t count;     /* doorbells consumed on this page (atomic) */
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
	uint32_t dc_err_every; /* every N-th SEND is lost (0 off) */
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
	uint64_t doorbells; /* atomic: updated by pollers outside the mutex */
};

struct SimShm {
	SimPrefix pre;
	pthread_mutex_t mutex;
	SimCfg cfg;
	SimCounters ctr;
	uint64_t fault_cmds; /* creates and modifies seen by fault injection */
	uint32_t gen_next;
	uint32_t recs_live;
	SimUarMeta uar_meta[kNbUars];
	alignas(4096) uint8_t uar[kNbUars][kUarPage];
	QpnTable table;
	SimRec recs[kRecCap];
	SimDc dc;
	alignas(4096) uint8_t dc_arena[kDcArena];
};

/* rdma-core's mlx5dv_reserved_qpn_alloc model: per-context blocks of 2^granularity QPNs, kept
 * in creation order (SimDev::blks): QPNs are handed out from the last (newest) block only, and
 * a block leaves the list, in place, when its last QPN comes back. */
struct SingleBlock {
	mlx5_qpn_range_obj obj;
	uint32_t size;
	uint32_t next; /* forward-only cursor */
	uint32_t returned;
	uint64_t *bits; /* handed out and not yet returned */
};

struct SimDev {
	mlx5_qpn_backend base; /* first: the handle leads to mlx5_qpn_sim_ops (sim_open sets it) */
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
	bool dc_off;        /* data path switched off (mlx5_qpn_sim_dc_enable) */
	bool fw_first_fit;  /* this opener's objects come from the lowest free block (devarg;
			       * per handle, so the shared layout does not change) */
	uint32_t qpn_limit; /* this opener's limit= devarg, reported in its caps */
	bool dc_uar_mapped;
	mlx5_qpn_uar dc_uar; /* rung by every DCI of this handle, like a shared bfreg */
};


inline SimDev *
to_dev(mlx5_qpn_backend *be)
{
	return reinterpret_cast<SimDev *>(be);
}

/* ---- QPN <-> table index (the AIP prefix) ---- */

inline uint8_t
prefix_of(const SimShm *s)
{
	return s->cfg.aip ? kAipPrefix : 0;
}

inline uint32_t
index_of(const SimShm *s, uint32_t qpn)
{
	return s->cfg.aip ? (qpn & (kAipSpace - 1)) : qpn;
}

inline uint32_t
qpn_of(const SimShm *s, uint32_t idx)
{
	return s->cfg.aip ? (idx | (uint32_t(kAipPrefix) << kAipShift)) : idx;
}

/* The space a record of this device may name: 2^16 with the AIP prefix, else 2^24. */
inline uint32_t
space_of(const SimShm *s)
{
	return s->cfg.aip ? kAipSpace : kQpnSpace;
}

/* ---- segment and liveness (sim_segment.cpp) ---- */

/* The emulated device as it registers itself (sim_devargs.cpp). */
extern const mlx5_qpn_backend_desc g_backend;

bool name_ok(const char *name);
void shm_name_of(const char *name, char *out, size_t len);
uint64_t guid_from_name(const char *name);
bool owner_alive(const SimOwner &o);
/* Release everything an owner slot holds and free the slot. Mutex held. */
void owner_release(SimShm *s, uint16_t slot, bool dead);
/* Take back what dead processes held. Mutex held. @return the number of dead handles. */
int reclaim_dead(SimShm *s);
int sim_open(const mlx5_qpn_devargs *da, mlx5_qpn_backend **out);
void sim_close(mlx5_qpn_backend *be);

/* ---- validation of devargs and of the segment (sim_validate.cpp) ---- */

const char *hdr_bad(const SimShm *s);
bool rec_ok(const SimShm *s, const SimRec &r);
bool owners_ok(const SimPrefix &p);
const char *shm_bad(const SimShm *s);
int validate(const mlx5_qpn_devargs *da);
void cfg_from(const mlx5_qpn_devargs *da, SimCfg *c);
bool cfg_equal(const SimCfg &a, const SimCfg &b);

/* ---- record hash (sim_records.cpp) ---- */

SimRec *rec_find(SimShm *s, uint32_t key);
bool rec_insert(SimShm *s, const SimRec &r);
void rec_delete(SimShm *s, SimRec *r);
/* Free one record and what it holds in the table. Mutex held. */
void rec_release(SimShm *s, SimRec *r);

/* ---- firmware command model (sim_fw.cpp) ---- */

/* Bound on every wait for the device mutex or the segment's init lock (a test hook lowers it). */
extern uint64_t g_lock_timeout_ns;
int dev_lock(SimShm *s, const char *name);
void dev_unlock(SimShm *s);
uint8_t fw_begin(SimShm *s, CmdKind kind);
int fw_fail(SimShm *s, uint8_t status);

/* ---- QPNs: RESERVED_QPN objects, single QPNs, ordinary QPs (sim_rsvd_qpn.cpp) ---- */

int sim_range_reserve(mlx5_qpn_backend *be, uint32_t log_size, mlx5_qpn_range_obj *obj);
int sim_range_release(mlx5_qpn_backend *be, const mlx5_qpn_range_obj *obj);
int sim_qpn_reserve_one(mlx5_qpn_backend *be, uint32_t *qpn);
int sim_qpn_release_one(mlx5_qpn_backend *be, uint32_t qpn);
int sim_cmd_count(mlx5_qpn_backend *be, uint64_t *n);
uint8_t qp_alloc_locked(SimDev *d, uint8_t kind, uint32_t aux, uint32_t *qpn);
int sim_qp_create(mlx5_qpn_backend *be, uint32_t *qpn);
int sim_qp_destroy(mlx5_qpn_backend *be, uint32_t qpn);

/* ---- UAR pages and the doorbell service (sim_uar.cpp) ---- */

void svc_unregister(SimDev *d);
int sim_uar_map(mlx5_qpn_backend *be, mlx5_qpn_uar *uar);
int sim_uar_unmap(mlx5_qpn_backend *be, mlx5_qpn_uar *uar);

} // namespace mlx5_qpn_sim

#pragma GCC visibility pop

#endif /* MLX5_QPN_SIM_INTERNAL_H */
