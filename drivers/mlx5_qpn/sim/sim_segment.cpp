/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's segment and its owners: open (create, reset or attach to the shared
 * segment "/mlx5_qpn_<name>", then register a handle), close (release the handle; the last live
 * owner removes the segment), the liveness of handles and the reclaim of what dead processes
 * held, and mlx5_qpn_sim_destroy() (the purge hook).
 */
#include "sim_internal.h"

#include <atomic>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

using namespace mlx5_qpn_sim;

namespace mlx5_qpn_sim {

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

bool
owner_alive(const SimOwner &o)
{
	return qpn::shm::alive(o.proc);
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
		for (uint32_t i = 0; i < kRecCap; i++) {
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
	for (uint32_t i = 0; i < kNbUars; i++) {
		if (s->uar_meta[i].in_use && s->uar_meta[i].owner == slot) {
			std::atomic_ref<uint32_t>(s->uar_meta[i].in_use)
				.store(0, std::memory_order_release);
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

	for (uint16_t i = 0; i < kMaxOwners; i++) {
		if (s->pre.owners[i].live && !owner_alive(s->pre.owners[i])) {
			SIM_LOG(INFO, "reclaiming the resources of dead process %d (handle %u)",
				int(s->pre.owners[i].proc.pid), unsigned(i));
			owner_release(s, i, true);
			n++;
		}
	}
	return n;
}

/* Initialise a zero-filled segment (init lock held, nobody else attached). */
static int
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
	s->pre.magic = kSimMagic;
	s->pre.version = kSimVersion;
	s->pre.size = sizeof(SimShm);
	std::atomic_ref<uint32_t>(s->pre.state).store(kSimStateReady, std::memory_order_release);
	return 0;
}

static bool
any_live_owner(const SimPrefix *p)
{
	for (uint32_t i = 0; i < kMaxOwners; i++)
		if (p->owners[i].live && owner_alive(p->owners[i]))
			return true;
	return false;
}

/* (Re)create the segment empty at the right size and initialise it. Init lock held. */
static int
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
static int
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
	if (pre.magic != kSimMagic) {
		if (pre.magic == 0 && pre.version == 0 && pre.state == 0)
			return fresh(); /* its creator died before initialising it */
		SIM_LOG(ERR,
			"device %s: shared memory %s is not an emulated device (bad magic); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name);
		return -EPROTO;
	}
	if (!owners_ok(pre)) {
		SIM_LOG(ERR,
			"device %s: shared memory %s is corrupted (owner table); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name);
		return -EPROTO;
	}
	if (!any_live_owner(&pre))
		return fresh(); /* nobody alive holds it */

	if (pre.version != kSimVersion || pre.size != sizeof(SimShm) || fsize != sizeof(SimShm) ||
	    pre.state != kSimStateReady) {
		SIM_LOG(ERR,
			"device %s: shared memory %s of layout version %u (size %" PRIu64
			", state 0x%x) is in use by live processes (this build: version %u)",
			da->name, seg->name, unsigned(pre.version), pre.size, unsigned(pre.state),
			unsigned(kSimVersion));
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
		SIM_LOG(ERR,
			"device %s: shared memory %s is corrupted (%s); remove it (mlx5_qpn_sim_destroy)",
			da->name, seg->name, bad);
		return -EPROTO;
	}
	reclaim_dead(s);
	SimCfg mine;
	cfg_from(da, &mine);
	if (!cfg_equal(mine, s->cfg))
		SIM_LOG(NOTICE,
			"device %s is open elsewhere: its parameters stay as created, this opener's differ",
			da->name);
	dev_unlock(s);
	*out = s;
	return 0;
}

static void
dev_free(SimDev *d)
{
	for (uint32_t k = 0; k < d->nb_blks; k++)
		delete[] d->blks[k].bits;
	delete[] d->blks;
	pthread_mutex_destroy(&d->lock);
	delete d;
}

int
sim_open(const mlx5_qpn_devargs *da, mlx5_qpn_backend **out)
{
	if ((da == nullptr) || (out == nullptr))
		return -EINVAL;
	int rc = validate(da);
	if (rc)
		return rc;

	auto *d = new (std::nothrow) SimDev();
	if (d == nullptr)
		return -ENOMEM;
	d->base.ops = &mlx5_qpn_sim_ops;
	d->pid = getpid();
	snprintf(d->name, sizeof(d->name), "%s", da->name);
	d->fw_first_fit = mlx5_qpn_sim_cargs(da)->fw_first_fit != 0;
	d->qpn_limit = mlx5_qpn_sim_cargs(da)->limit;
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
		for (uint16_t i = 0; i < kMaxOwners; i++) {
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
			SIM_LOG(ERR, "device %s: all %u handles are open", da->name, kMaxOwners);
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

void
sim_close(mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	bool last = false;

	if (d->pid != getpid()) {
		/* A fork()ed copy of the handle: the parent still owns everything; only drop the
		 * child's copy of the process-local memory. */
		SIM_LOG(WARNING,
			"device %s: handle closed in a child process; the parent keeps its objects",
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

} // namespace mlx5_qpn_sim

extern "C" {

int
mlx5_qpn_sim_purge(const char *name, uint64_t *guid)
{
	*guid = 0;
	if ((name == nullptr) || !name_ok(name)) {
		SIM_LOG(ERR, "invalid emulated device name");
		return -EINVAL;
	}
	char shm_name[64];
	shm_name_of(name, shm_name, sizeof(shm_name));
	/* The device's GUID: as created (devargs guid=), else the one its name gives. */
	*guid = guid_from_name(name);
	int fd = shm_open(shm_name, O_RDONLY | O_CLOEXEC, 0);
	struct stat st;
	/* Invariant 1: a live owner holds objects of this device; a fresh device made after the
	 * removal would hand them out again. The prefix (owner table) is the same in every layout
	 * version; a table that fails its check is a corrupted segment, which a purge removes. */
	SimPrefix pre;
	if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) >= sizeof(pre) &&
	    pread(fd, &pre, sizeof(pre), 0) == ssize_t(sizeof(pre)) && pre.magic == kSimMagic &&
	    owners_ok(pre)) {
		for (const SimOwner &o : pre.owners) {
			if (!o.live || !owner_alive(o))
				continue;
			SIM_LOG(ERR,
				"device %s is open in live process %d: not removed (close it there first)",
				name, int(o.proc.pid));
			close(fd);
			return -EBUSY;
		}
	}
	if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) == sizeof(SimShm)) {
		size_t len = offsetof(SimShm, cfg) + sizeof(SimCfg);
		void *p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			const SimShm *s = static_cast<const SimShm *>(p);
			if (s->pre.magic == kSimMagic && s->cfg.guid != 0)
				*guid = s->cfg.guid;
			munmap(p, len);
		}
	}
	if (fd >= 0)
		close(fd);
	return qpn::shm::segment_unlink(shm_name);
}

int
mlx5_qpn_sim_destroy(const char *name)
{
	uint64_t guid;
	return mlx5_qpn_sim_purge(name, &guid);
}

} /* extern "C" */
