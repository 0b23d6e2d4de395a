/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory fabric's segment and nodes (cm_shm.h): open (create exclusively or adopt,
 * validate the header, register as a user), close (the last user removes the segment), unlink,
 * and attaching a node GUID to a slot (taken over from a dead owner when needed).
 */
#include "cm_shm.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include <unistd.h>

using namespace cm_impl::shm;

namespace cm_impl::shm {

bool
alive_of(const AtomicProc &p)
{
	qpn::shm::ProcId id = p.get();
	return qpn::shm::is_self(id) || qpn::shm::alive(id);
}

} // namespace cm_impl::shm

namespace {

bool
name_ok(const char *name)
{
	if (name == nullptr)
		return false;
	size_t n = strnlen(name, MLX5_QPN_CM_SHM_NAMESIZE + 1);
	if (n == 0 || n > MLX5_QPN_CM_SHM_NAMESIZE)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
		if (!ok)
			return false;
	}
	return true;
}

/* The segment's path: a fixed buffer, so that no open path allocates (nothing here may throw). */
struct ShmPath {
	char s[64];
	explicit ShmPath(const char *name) { std::snprintf(s, sizeof(s), "%s%s", kPrefix, name); }
	const char *c_str() const { return s; }
};
static_assert(sizeof(ShmPath::s) > sizeof("/mlx5_qpn_cmfab_") + MLX5_QPN_CM_SHM_NAMESIZE,
	      "room for the prefix and the longest valid name");

size_t
size_for(unsigned max_nodes, unsigned slots)
{
	return sizeof(Header) + size_t(max_nodes) * slots * sizeof(FrameSlot);
}

bool
geometry_ok(unsigned max_nodes, unsigned slots)
{
	return max_nodes >= 1 && max_nodes <= MLX5_QPN_CM_SHM_MAX_NODES && slots >= 2 &&
	       slots <= 65536 && (slots & (slots - 1)) == 0;
}

/* Claim node slot @p i (already CLAIMING by us) for @p guid. */
void
node_take(mlx5_qpn_cm_shm_fabric *fab, unsigned i, uint64_t guid)
{
	NodeHdr &n = fab->h->nodes[i];
	n.owner.set(qpn::shm::self());
	n.guid.store(guid, std::memory_order_relaxed);
	repair_tail(fab, i);
	n.state.store(NODE_IN_USE, std::memory_order_release);
}

void
detach_locked(mlx5_qpn_cm_shm_fabric *fab, Attachment &a)
{
	Header *h = fab->h;
	dir_withdraw(h, a.guid);
	NodeHdr &n = h->nodes[a.idx];
	/* GUID first: once the slot is FREE another process may claim it and set its own. */
	n.guid.store(0, std::memory_order_relaxed);
	n.owner.clear();
	n.state.store(NODE_FREE, std::memory_order_release);
	a.guid = 0;
}

/* Is anyone but user record @p except alive? Init lock held. Dead users' records are freed. */
bool
other_users_alive(Header *h, unsigned except)
{
	bool any = false;
	for (unsigned i = 0; i < kMaxUsers; i++) {
		if (i == except || h->users[i].proc.pid.load(std::memory_order_acquire) == 0)
			continue;
		if (alive_of(h->users[i].proc))
			any = true;
		else
			h->users[i].proc.clear();
	}
	return any;
}

/* Fill a zero-filled segment. Init lock held. */
void
init_header(Header *h, unsigned max_nodes, unsigned slots, size_t size)
{
	h->version = kVersion;
	h->max_nodes = max_nodes;
	h->slots = slots;
	h->size = size;
	h->magic.store(kMagic, std::memory_order_release);
}

/*
 * Check the header of a segment another opener created, read without mapping (its geometry says
 * how much to map). *fresh: its creator died before initialising it. One line on a refusal.
 */
int
check_header(const char *name, const ShmPath &path, qpn::shm::Segment *seg, size_t fsize,
	     RawHeader *raw, bool *fresh)
{
	int rc = qpn::shm::segment_read(seg, raw, sizeof(*raw), 0);
	const char *bad = nullptr;
	if (rc != 0) {
		bad = "short header";
	} else if (raw->magic == 0 && raw->version == 0 && raw->size == 0) {
		*fresh = true;
		return 0;
	} else if (raw->magic != kMagic) {
		bad = "bad magic";
	} else if (raw->version != kVersion) {
		CM_LOG(ERR, "shm fabric %s: layout version %u, this library has %u", name,
		       raw->version, kVersion);
		return -EPROTO;
	} else if (!geometry_ok(raw->max_nodes, raw->slots)) {
		bad = "geometry";
	} else if (raw->size != size_for(raw->max_nodes, raw->slots) || raw->size != fsize) {
		bad = "size";
	}
	if (bad != nullptr) {
		CM_LOG(ERR,
		       "shm fabric %s: shared memory %s is corrupted (%s); remove it (mlx5_qpn_cm_shm_fabric_unlink)",
		       name, path.c_str(), bad);
		return -EPROTO;
	}
	return 0;
}

/*
 * Whether the opened segment must be (re)created: *fresh when this opener created it or its
 * creator died before sizing or initialising it; otherwise its header is checked into @p raw.
 */
int
examine_segment(const char *name, const ShmPath &path, qpn::shm::Segment *seg, RawHeader *raw,
		bool *fresh)
{
	*fresh = seg->created;
	size_t fsize = 0;
	int rc = qpn::shm::segment_file_size(seg, &fsize);
	if (rc != 0 || *fresh)
		return rc;
	if (fsize < sizeof(Header)) {
		*fresh = true; /* its creator died before sizing it */
		return 0;
	}
	return check_header(name, path, seg, fsize, raw, fresh);
}

/*
 * Map a valid segment with its creator's geometry. When nobody alive uses it, unmap it and set
 * *fresh: it starts afresh with this opener's geometry.
 */
int
adopt_segment(mlx5_qpn_cm_shm_fabric *fab, const RawHeader &raw, bool *fresh)
{
	fab->max_nodes = raw.max_nodes;
	fab->slots = raw.slots;
	int rc = qpn::shm::segment_map(&fab->seg, raw.size, false);
	if (rc != 0)
		return rc;
	fab->h = static_cast<Header *>(fab->seg.addr);
	if (!other_users_alive(fab->h, kMaxUsers)) {
		qpn::shm::segment_unmap(&fab->seg);
		fab->h = nullptr;
		*fresh = true;
	}
	return 0;
}

/* Map the segment zero-filled with this opener's geometry and initialise its header. */
int
create_segment(mlx5_qpn_cm_shm_fabric *fab, unsigned max_nodes, unsigned slots)
{
	size_t size = size_for(max_nodes, slots);
	int rc = qpn::shm::segment_map(&fab->seg, size, true); /* zero-filled */
	if (rc != 0)
		return rc;
	fab->h = static_cast<Header *>(fab->seg.addr);
	fab->max_nodes = max_nodes;
	fab->slots = slots;
	init_header(fab->h, max_nodes, slots, size);
	return 0;
}

/* Register this handle in a user record that is free or was a dead process's. */
int
register_user(mlx5_qpn_cm_shm_fabric *fab, const char *name)
{
	for (unsigned i = 0; i < kMaxUsers; i++) {
		UserRec &u = fab->h->users[i];
		if (u.proc.pid.load(std::memory_order_acquire) != 0 && alive_of(u.proc))
			continue;
		fab->user = i;
		fab->user_gen = u.gen.fetch_add(1, std::memory_order_acq_rel) + 1;
		u.proc.set(qpn::shm::self());
		return 0;
	}
	CM_LOG(ERR, "shm fabric %s: all %u user records held by live processes", name, kMaxUsers);
	return -ENOSPC;
}

/*
 * Open or create the segment, validate it, register this handle as a user. On success the
 * handle holds the mapping and the (unlocked) segment. One line on every refusal; a refused open
 * leaves nothing behind that it made.
 */
int
open_segment(mlx5_qpn_cm_shm_fabric *fab, const char *name, unsigned max_nodes, unsigned slots)
{
	const ShmPath path(name);
	qpn::shm::Segment *seg = &fab->seg;
	int rc = qpn::shm::segment_open_locked(path.c_str(), seg);
	if (rc != 0) {
		CM_LOG(ERR, "shm fabric %s: cannot open %s: %s", name, path.c_str(),
		       std::strerror(-rc));
		return rc;
	}
	bool fresh = false;
	RawHeader raw{};
	rc = examine_segment(name, path, seg, &raw, &fresh);
	if (rc == 0 && !fresh)
		rc = adopt_segment(fab, raw, &fresh);
	if (rc == 0 && fresh)
		rc = create_segment(fab, max_nodes, slots);
	if (rc == 0)
		rc = register_user(fab, name);
	if (rc != 0) {
		fab->h = nullptr;
		qpn::shm::segment_close(seg, fresh, true);
		return rc;
	}
	qpn::shm::segment_unlock(seg);
	return 0;
}

} // namespace

extern "C" {

int
mlx5_qpn_cm_shm_fabric_open(const char *name, unsigned int max_nodes, unsigned int slots_per_node,
			    struct mlx5_qpn_cm_shm_fabric **out)
{
	if (out == nullptr || !name_ok(name) || !geometry_ok(max_nodes, slots_per_node)) {
		CM_LOG(ERR,
		       "shm fabric open: invalid parameters (name of 1..%d characters from "
		       "[A-Za-z0-9_.-], 1..%d nodes, slots a power of two in 2..65536)",
		       MLX5_QPN_CM_SHM_NAMESIZE, MLX5_QPN_CM_SHM_MAX_NODES);
		return -EINVAL;
	}
	auto *fab = new (std::nothrow) mlx5_qpn_cm_shm_fabric();
	if (fab == nullptr)
		return -ENOMEM;
	std::snprintf(fab->name, sizeof(fab->name), "%s", name);
	int rc = open_segment(fab, name, max_nodes, slots_per_node);
	if (rc != 0) {
		delete fab;
		return rc;
	}
	fab->pid = getpid();
	for (auto &a : fab->att)
		a.fab = fab;
	*out = fab;
	return 0;
}

void
mlx5_qpn_cm_shm_fabric_close(struct mlx5_qpn_cm_shm_fabric *fab)
{
	if (fab == nullptr)
		return;
	bool last = false;
	if (fab->pid == getpid()) {
		{
			std::lock_guard<std::mutex> g(fab->mu);
			for (auto &a : fab->att)
				if (a.guid != 0)
					detach_locked(fab, a);
		}
		/* Under the init lock, so that an opener either registers before this decision or
		 * finds the name gone (st_nlink 0) and creates a fresh fabric. */
		if (qpn::shm::segment_lock(&fab->seg) == 0) {
			last = !other_users_alive(fab->h, fab->user);
			fab->h->users[fab->user].proc.clear();
		} else {
			fab->h->users[fab->user].proc.clear();
		}
	}
	qpn::shm::segment_close(&fab->seg, last, true);
	delete fab;
}

int
mlx5_qpn_cm_shm_fabric_unlink(const char *name)
{
	if (!name_ok(name))
		return -EINVAL;
	const ShmPath path(name);
	return qpn::shm::segment_unlink(path.c_str());
}

int
mlx5_qpn_cm_shm_fabric_attach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid,
			      struct mlx5_qpn_cm_transport *tp)
{
	if (fab == nullptr || tp == nullptr || guid == 0)
		return -EINVAL;
	std::lock_guard<std::mutex> g(fab->mu);
	Header *h = fab->h;
	Attachment *a = nullptr;
	for (auto &x : fab->att)
		if (x.guid == 0) {
			a = &x;
			break;
		}
	if (a == nullptr)
		return -ENOSPC;
	int slot = -1;
	/* The GUID already attached: refused if its owner lives, taken over if it died. */
	for (unsigned i = 0; i < fab->max_nodes && slot < 0; i++) {
		NodeHdr &n = h->nodes[i];
		if (n.state.load(std::memory_order_acquire) != NODE_IN_USE ||
		    n.guid.load(std::memory_order_relaxed) != guid)
			continue;
		if (alive_of(n.owner)) {
			CM_LOG(ERR, "shm fabric %s: node %016" PRIx64 " already attached by pid %d",
			       fab->name, guid, int(n.owner.pid.load(std::memory_order_relaxed)));
			return -EEXIST;
		}
		uint32_t st = NODE_IN_USE;
		if (n.state.compare_exchange_strong(st, NODE_CLAIMING, std::memory_order_acq_rel))
			slot = int(i);
	}
	/* A free slot, else one whose owner died. */
	for (unsigned i = 0; i < fab->max_nodes && slot < 0; i++) {
		uint32_t st = NODE_FREE;
		if (h->nodes[i].state.compare_exchange_strong(st, NODE_CLAIMING,
							      std::memory_order_acq_rel))
			slot = int(i);
	}
	for (unsigned i = 0; i < fab->max_nodes && slot < 0; i++) {
		NodeHdr &n = h->nodes[i];
		uint32_t st = n.state.load(std::memory_order_acquire);
		/* A state word that is none of ours (corrupted) is taken like a dead owner's. */
		bool stale = st != NODE_FREE && st != NODE_CLAIMING && st != NODE_IN_USE;
		if (!stale && (st != NODE_IN_USE || alive_of(n.owner)))
			continue;
		if (n.state.compare_exchange_strong(st, NODE_CLAIMING, std::memory_order_acq_rel)) {
			CM_LOG(INFO, "shm fabric %s: node %016" PRIx64 " of dead pid %d reclaimed",
			       fab->name, n.guid.load(std::memory_order_relaxed),
			       int(n.owner.pid.load(std::memory_order_relaxed)));
			slot = int(i);
		}
	}
	if (slot < 0) {
		CM_LOG(ERR, "shm fabric %s: all %u nodes in use by live processes", fab->name,
		       fab->max_nodes);
		return -ENOSPC;
	}
	node_take(fab, unsigned(slot), guid);
	a->idx = unsigned(slot);
	a->guid = guid;
	a->stall_pos = 0;
	a->stall_since = 0;
	tp->ctx = a;
	tp->send = shm_send;
	tp->recv_burst = shm_recv_burst;
	return 0;
}

int
mlx5_qpn_cm_shm_fabric_detach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid)
{
	if (fab == nullptr || guid == 0)
		return -EINVAL;
	std::lock_guard<std::mutex> g(fab->mu);
	for (auto &a : fab->att)
		if (a.guid == guid) {
			detach_locked(fab, a);
			return 0;
		}
	return -ENOENT;
}

uint64_t
mlx5_qpn_cm_shm_fabric_drops(const struct mlx5_qpn_cm_shm_fabric *fab)
{
	return fab != nullptr ? fab->h->drops.load(std::memory_order_relaxed) : 0;
}

/* The 2.1 ABI's names: the same functions under second symbols (mlx5_qpn_cm.h). */
int mlx5_qpn_cm_shm_attach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid,
			   struct mlx5_qpn_cm_transport *tp)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_attach")));
int mlx5_qpn_cm_shm_detach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_detach")));
int mlx5_qpn_cm_shm_unlink(const char *name)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_unlink")));
uint64_t mlx5_qpn_cm_shm_drops(const struct mlx5_qpn_cm_shm_fabric *fab)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_drops")));

} // extern "C"
