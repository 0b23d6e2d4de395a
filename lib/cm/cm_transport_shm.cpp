/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cross-process CM transport: one POSIX shared-memory segment per fabric name, so that separate
 * DPDK primaries (each with its own --file-prefix and no hugepages, hence no DPDK multi-process)
 * can exchange CM frames. Everything in the segment is position-independent: indices, GUIDs and
 * std::atomic words, never a pointer.
 *
 * Layout: a header (magic, version, geometry, drop counter), the service directory, the node
 * table, then per node a ring of fixed-size frame slots. Each ring is a bounded queue in the
 * manner of Vyukov's MPMC queue: every slot carries a sequence number that says which lap of the
 * ring it is ready for, producers claim a position with a CAS on the head, write the slot and
 * publish it by storing the sequence (release); the single consumer reads the slot once its
 * sequence says "full for my position" (acquire) and hands the slot to the next lap. No lock is
 * held across a copy, so a stalled sender delays only its own slot.
 *
 * The sequence is stored minus the slot index: a zero-filled segment (what ftruncate gives) is
 * then a valid empty ring, and the rings' pages are only touched as they fill.
 *
 * Node ownership: a node slot records its GUID and its owner's pid. A node whose owner died
 * (kill(pid, 0) fails with ESRCH) is taken over by the next attach that needs it. Queue
 * positions are never reset (a sender might be in the middle of an enqueue); instead every frame
 * carries its destination GUID and the receiver drops (and counts) frames addressed to a
 * previous owner.
 */
#include "cm_internal.h"

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

constexpr uint32_t kMagic = 0x4d51434eu; /* "NCQM" in memory order: the fabric is ready */
constexpr uint32_t kVersion = 1;
constexpr const char *kPrefix = "/mlx5_qpn_cmfab_";

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be address-free");

enum : uint32_t { NODE_FREE = 0, NODE_CLAIMING = 1, NODE_IN_USE = 2 };
enum : uint32_t { DIR_FREE = 0, DIR_WRITING = 1, DIR_VALID = 2 };

/*
 * A directory entry is written rarely and read by pollers of other processes: a sequence word
 * (odd while written) lets a reader detect a concurrent rewrite, and the fields are relaxed
 * atomics so the racy read is well-defined and simply discarded.
 */
struct alignas(64) DirEntry {
	std::atomic<uint32_t> state;
	std::atomic<uint32_t> seq;
	std::atomic<uint64_t> service_id;
	std::atomic<uint64_t> node_guid;
	std::atomic<uint64_t> dc_key;
	std::atomic<uint32_t> dct_number;
	std::atomic<int32_t> pid;
};

struct alignas(64) NodeHdr {
	std::atomic<uint32_t> state;
	std::atomic<int32_t> pid;
	std::atomic<uint64_t> guid;
	/* Producers (any process) and the consumer on separate cache lines. */
	alignas(64) std::atomic<uint64_t> head;
	alignas(64) std::atomic<uint64_t> tail;
};

struct alignas(64) FrameSlot {
	std::atomic<uint64_t> seq; /* lap sequence minus the slot index */
	uint64_t src;
	uint64_t dst;
	uint16_t len;
	uint8_t data[MLX5_QPN_CM_FRAME_MAX];
};

struct alignas(64) Header {
	std::atomic<uint32_t> magic;
	uint32_t version;
	uint32_t max_nodes;
	uint32_t slots;
	uint64_t size;
	alignas(64) std::atomic<uint64_t> drops;
	DirEntry dir[MLX5_QPN_CM_SHM_MAX_SERVICES];
	NodeHdr nodes[MLX5_QPN_CM_SHM_MAX_NODES];
};

struct Attachment {
	mlx5_qpn_cm_shm_fabric *fab;
	unsigned idx;  /* node slot in the segment */
	uint64_t guid; /* 0: unused */
};

bool name_ok(const char *name)
{
	if (name == nullptr)
		return false;
	size_t n = strnlen(name, MLX5_QPN_CM_SHM_NAMESIZE + 1);
	if (n == 0 || n > MLX5_QPN_CM_SHM_NAMESIZE)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '_' || c == '-' || c == '.';
		if (!ok)
			return false;
	}
	return true;
}

std::string shm_path(const char *name) { return std::string(kPrefix) + name; }

/* Whether process @p pid exists. EPERM means it exists under another user. */
bool pid_alive(int32_t pid)
{
	if (pid <= 0)
		return false;
	if (pid == getpid())
		return true;
	return kill(pid, 0) == 0 || errno == EPERM;
}

} // namespace

struct mlx5_qpn_cm_shm_fabric {
	Header *h = nullptr;
	size_t size = 0;
	char name[MLX5_QPN_CM_SHM_NAMESIZE + 1] = {};
	std::mutex mu; /* this handle's attachments (attach/detach/close of one process) */
	Attachment att[MLX5_QPN_CM_SHM_MAX_NODES] = {};
};

namespace {

FrameSlot *ring_of(const mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	auto *base = reinterpret_cast<uint8_t *>(fab->h) + sizeof(Header);
	return reinterpret_cast<FrameSlot *>(base) + size_t(idx) * fab->h->slots;
}

/*
 * A new owner of a node slot fixes the one thing a consumer that died can leave behind: a slot
 * handed to the next lap while the tail was not advanced yet. (A consumer that died before
 * handing the slot back leaves it full: the new owner reads it again and drops it as stale.)
 */
void repair_tail(mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	NodeHdr &n = fab->h->nodes[idx];
	const uint64_t cap = fab->h->slots, mask = cap - 1;
	FrameSlot *ring = ring_of(fab, idx);
	uint64_t pos = n.tail.load(std::memory_order_acquire);
	while (ring[pos & mask].seq.load(std::memory_order_acquire) == (pos & ~mask) + cap)
		pos++;
	n.tail.store(pos, std::memory_order_release);
}

int shm_send(void *ctx, uint64_t dst_guid, const void *frame, uint16_t len)
{
	auto *self = static_cast<Attachment *>(ctx);
	if (self == nullptr || frame == nullptr || len == 0 || len > MLX5_QPN_CM_FRAME_MAX)
		return -EINVAL;
	if (self->guid == 0)
		return -ENOTCONN; /* detached: the hooks outlived their node */
	Header *h = self->fab->h;
	unsigned dst = MLX5_QPN_CM_SHM_MAX_NODES;
	for (unsigned i = 0; i < h->max_nodes; i++) {
		if (h->nodes[i].state.load(std::memory_order_acquire) == NODE_IN_USE &&
		    h->nodes[i].guid.load(std::memory_order_relaxed) == dst_guid) {
			dst = i;
			break;
		}
	}
	if (dst == MLX5_QPN_CM_SHM_MAX_NODES || dst_guid == 0) {
		h->drops.fetch_add(1, std::memory_order_relaxed);
		return -EHOSTUNREACH;
	}
	NodeHdr &n = h->nodes[dst];
	FrameSlot *ring = ring_of(self->fab, dst);
	const uint64_t mask = uint64_t(h->slots) - 1;
	uint64_t pos = n.head.load(std::memory_order_relaxed);
	FrameSlot *s;
	for (;;) {
		s = &ring[pos & mask];
		uint64_t seq = s->seq.load(std::memory_order_acquire);
		auto dif = static_cast<int64_t>(seq - (pos & ~mask));
		if (dif == 0) {
			if (n.head.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed))
				break;
		} else if (dif < 0) {
			/* The slot still holds last lap's frame: the queue is full. */
			h->drops.fetch_add(1, std::memory_order_relaxed);
			return -ENOBUFS;
		} else {
			pos = n.head.load(std::memory_order_relaxed);
		}
	}
	s->src = self->guid;
	s->dst = dst_guid;
	s->len = len;
	std::memcpy(s->data, frame, len);
	s->seq.store((pos & ~mask) + 1, std::memory_order_release);
	return 0;
}

int shm_recv_burst(void *ctx, mlx5_qpn_cm_frame *frames, unsigned int n)
{
	auto *self = static_cast<Attachment *>(ctx);
	if (self == nullptr || frames == nullptr)
		return -EINVAL;
	if (self->guid == 0)
		return -ENOTCONN; /* detached: the slot may be another process's queue now */
	Header *h = self->fab->h;
	NodeHdr &node = h->nodes[self->idx];
	FrameSlot *ring = ring_of(self->fab, self->idx);
	const uint64_t cap = h->slots, mask = cap - 1;
	uint64_t pos = node.tail.load(std::memory_order_relaxed);
	unsigned got = 0;
	while (got < n) {
		FrameSlot &s = ring[pos & mask];
		uint64_t seq = s.seq.load(std::memory_order_acquire);
		if (seq != (pos & ~mask) + 1)
			break; /* empty (or a sender still copying into it) */
		uint16_t len = s.len;
		if (s.dst == self->guid && len != 0 && len <= MLX5_QPN_CM_FRAME_MAX) {
			frames[got].src_guid = s.src;
			frames[got].len = len;
			std::memcpy(frames[got].data, s.data, len);
			got++;
		} else {
			h->drops.fetch_add(1, std::memory_order_relaxed); /* for a previous owner */
		}
		s.seq.store((pos & ~mask) + cap, std::memory_order_release);
		pos++;
		node.tail.store(pos, std::memory_order_release);
	}
	return int(got);
}

/* Claim node slot @p i (already CLAIMING by us) for @p guid. */
void node_take(mlx5_qpn_cm_shm_fabric *fab, unsigned i, uint64_t guid)
{
	NodeHdr &n = fab->h->nodes[i];
	n.pid.store(getpid(), std::memory_order_relaxed);
	n.guid.store(guid, std::memory_order_relaxed);
	repair_tail(fab, i);
	n.state.store(NODE_IN_USE, std::memory_order_release);
}

/* Remove this process's directory entries of @p guid. */
void dir_withdraw(Header *h, uint64_t guid)
{
	for (auto &e : h->dir) {
		if (e.state.load(std::memory_order_acquire) != DIR_VALID ||
		    e.node_guid.load(std::memory_order_relaxed) != guid ||
		    e.pid.load(std::memory_order_relaxed) != getpid())
			continue;
		uint32_t st = DIR_VALID;
		if (!e.state.compare_exchange_strong(st, DIR_WRITING, std::memory_order_acq_rel))
			continue;
		e.seq.fetch_add(1, std::memory_order_acq_rel);
		e.node_guid.store(0, std::memory_order_release);
		e.seq.fetch_add(1, std::memory_order_release);
		e.state.store(DIR_FREE, std::memory_order_release);
	}
}

void detach_locked(mlx5_qpn_cm_shm_fabric *fab, Attachment &a)
{
	Header *h = fab->h;
	dir_withdraw(h, a.guid);
	NodeHdr &n = h->nodes[a.idx];
	/* GUID first: once the slot is FREE another process may claim it and set its own. */
	n.guid.store(0, std::memory_order_relaxed);
	n.pid.store(0, std::memory_order_relaxed);
	n.state.store(NODE_FREE, std::memory_order_release);
	a.guid = 0;
}

int open_segment(const char *name, unsigned max_nodes, unsigned slots, Header **out_h,
		 size_t *out_size)
{
	std::string path = shm_path(name);
	int fd = shm_open(path.c_str(), O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return -errno;
	/* The lock serialises creation: an opener waits until the creator has published the
	 * magic, and a creator that died before that leaves a segment the next opener redoes. */
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			int err = errno;
			close(fd);
			return -err;
		}
	}
	int rc = 0;
	Header *h = nullptr;
	size_t size = 0;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (static_cast<size_t>(st.st_size) >= sizeof(Header)) {
		void *p = mmap(nullptr, sizeof(Header), PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			rc = -errno;
			goto out;
		}
		auto *ph = static_cast<Header *>(p);
		bool ready = ph->magic.load(std::memory_order_acquire) == kMagic;
		uint32_t version = ph->version;
		size = ph->size;
		munmap(p, sizeof(Header));
		if (ready && version != kVersion) {
			CM_LOG(ERR, "shm fabric %s: layout version %u, this library has %u", name,
			       version, kVersion);
			rc = -EPROTO;
			goto out;
		}
		if (ready && size <= static_cast<size_t>(st.st_size)) {
			p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED) {
				rc = -errno;
				goto out;
			}
			h = static_cast<Header *>(p);
			goto out;
		}
	}
	/* New (or never finished): size it, which zero-fills it, then fill the header. */
	size = sizeof(Header) + size_t(max_nodes) * slots * sizeof(FrameSlot);
	if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
		rc = -errno;
		goto out;
	}
	{
		void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			rc = -errno;
			goto out;
		}
		h = static_cast<Header *>(p);
		h->version = kVersion;
		h->max_nodes = max_nodes;
		h->slots = slots;
		h->size = size;
		h->magic.store(kMagic, std::memory_order_release);
	}
out:
	flock(fd, LOCK_UN);
	close(fd);
	if (rc == 0) {
		*out_h = h;
		*out_size = size;
	}
	return rc;
}

} // namespace

extern "C" {

int mlx5_qpn_cm_shm_fabric_open(const char *name, unsigned int max_nodes,
				unsigned int slots_per_node, struct mlx5_qpn_cm_shm_fabric **out)
{
	if (out == nullptr || !name_ok(name) || max_nodes == 0 ||
	    max_nodes > MLX5_QPN_CM_SHM_MAX_NODES || slots_per_node < 2 ||
	    slots_per_node > 65536 || (slots_per_node & (slots_per_node - 1)) != 0) {
		CM_LOG(ERR, "shm fabric open: invalid parameters (name of 1..%d characters from "
			    "[A-Za-z0-9_.-], 1..%d nodes, slots a power of two in 2..65536)",
		       MLX5_QPN_CM_SHM_NAMESIZE, MLX5_QPN_CM_SHM_MAX_NODES);
		return -EINVAL;
	}
	auto *fab = new (std::nothrow) mlx5_qpn_cm_shm_fabric();
	if (fab == nullptr)
		return -ENOMEM;
	int rc = open_segment(name, max_nodes, slots_per_node, &fab->h, &fab->size);
	if (rc != 0) {
		if (rc != -EPROTO)
			CM_LOG(ERR, "shm fabric %s: cannot open %s%s: %s", name, kPrefix, name,
			       std::strerror(-rc));
		delete fab;
		return rc;
	}
	std::snprintf(fab->name, sizeof(fab->name), "%s", name);
	for (auto &a : fab->att)
		a.fab = fab;
	*out = fab;
	return 0;
}

void mlx5_qpn_cm_shm_fabric_close(struct mlx5_qpn_cm_shm_fabric *fab)
{
	if (fab == nullptr)
		return;
	{
		std::lock_guard<std::mutex> g(fab->mu);
		for (auto &a : fab->att)
			if (a.guid != 0)
				detach_locked(fab, a);
	}
	munmap(fab->h, fab->size);
	delete fab;
}

int mlx5_qpn_cm_shm_unlink(const char *name)
{
	if (!name_ok(name))
		return -EINVAL;
	std::string path = shm_path(name);
	return shm_unlink(path.c_str()) == 0 ? 0 : -errno;
}

int mlx5_qpn_cm_shm_attach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid,
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
	for (unsigned i = 0; i < h->max_nodes && slot < 0; i++) {
		NodeHdr &n = h->nodes[i];
		if (n.state.load(std::memory_order_acquire) != NODE_IN_USE ||
		    n.guid.load(std::memory_order_relaxed) != guid)
			continue;
		int32_t pid = n.pid.load(std::memory_order_relaxed);
		if (pid_alive(pid)) {
			CM_LOG(ERR, "shm fabric %s: node %016" PRIx64 " already attached by pid %d",
			       fab->name, guid, int(pid));
			return -EEXIST;
		}
		uint32_t st = NODE_IN_USE;
		if (n.state.compare_exchange_strong(st, NODE_CLAIMING, std::memory_order_acq_rel))
			slot = int(i);
	}
	/* A free slot, else one whose owner died. */
	for (unsigned i = 0; i < h->max_nodes && slot < 0; i++) {
		uint32_t st = NODE_FREE;
		if (h->nodes[i].state.compare_exchange_strong(st, NODE_CLAIMING,
							      std::memory_order_acq_rel))
			slot = int(i);
	}
	for (unsigned i = 0; i < h->max_nodes && slot < 0; i++) {
		NodeHdr &n = h->nodes[i];
		if (n.state.load(std::memory_order_acquire) != NODE_IN_USE ||
		    pid_alive(n.pid.load(std::memory_order_relaxed)))
			continue;
		uint32_t st = NODE_IN_USE;
		if (n.state.compare_exchange_strong(st, NODE_CLAIMING, std::memory_order_acq_rel)) {
			CM_LOG(INFO, "shm fabric %s: node %016" PRIx64 " of dead pid %d reclaimed",
			       fab->name, n.guid.load(std::memory_order_relaxed),
			       int(n.pid.load(std::memory_order_relaxed)));
			slot = int(i);
		}
	}
	if (slot < 0) {
		CM_LOG(ERR, "shm fabric %s: all %u nodes in use by live processes", fab->name,
		       h->max_nodes);
		return -ENOSPC;
	}
	node_take(fab, unsigned(slot), guid);
	a->idx = unsigned(slot);
	a->guid = guid;
	tp->ctx = a;
	tp->send = shm_send;
	tp->recv_burst = shm_recv_burst;
	return 0;
}

int mlx5_qpn_cm_shm_detach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid)
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

uint64_t mlx5_qpn_cm_shm_drops(const struct mlx5_qpn_cm_shm_fabric *fab)
{
	return fab ? fab->h->drops.load(std::memory_order_relaxed) : 0;
}

int mlx5_qpn_cm_shm_publish(struct mlx5_qpn_cm_shm_fabric *fab,
			    const struct mlx5_qpn_cm_shm_service *svc)
{
	if (fab == nullptr || svc == nullptr || svc->node_guid == 0)
		return -EINVAL;
	{
		std::lock_guard<std::mutex> g(fab->mu);
		bool mine = false;
		for (auto &a : fab->att)
			mine |= a.guid == svc->node_guid;
		if (!mine)
			return -ENOENT;
	}
	Header *h = fab->h;
	for (int pass = 0; pass < 2; pass++) {
		for (auto &e : h->dir) {
			uint32_t st = e.state.load(std::memory_order_acquire);
			/* First pass: free entries; second: entries of dead publishers. */
			if (pass == 0 ? st != DIR_FREE
				      : st != DIR_VALID ||
						pid_alive(e.pid.load(std::memory_order_relaxed)))
				continue;
			if (!e.state.compare_exchange_strong(st, DIR_WRITING,
							     std::memory_order_acq_rel))
				continue;
			e.seq.fetch_add(1, std::memory_order_acq_rel);
			/* Release stores, acquire loads in lookup(): a reader that sees any new field
			 * also sees the odd sequence before it and skips the entry (no fences, which
			 * GCC's ThreadSanitizer does not model). */
			e.service_id.store(svc->service_id, std::memory_order_release);
			e.node_guid.store(svc->node_guid, std::memory_order_release);
			e.dc_key.store(svc->dc_key, std::memory_order_release);
			e.dct_number.store(svc->dct_number, std::memory_order_release);
			e.pid.store(getpid(), std::memory_order_release);
			e.seq.fetch_add(1, std::memory_order_release);
			e.state.store(DIR_VALID, std::memory_order_release);
			return 0;
		}
	}
	CM_LOG(ERR, "shm fabric %s: service directory full (%d entries)", fab->name,
	       MLX5_QPN_CM_SHM_MAX_SERVICES);
	return -ENOSPC;
}

int mlx5_qpn_cm_shm_lookup(const struct mlx5_qpn_cm_shm_fabric *fab, uint64_t service_id,
			   struct mlx5_qpn_cm_shm_service *out, unsigned int n)
{
	if (fab == nullptr || (out == nullptr && n != 0))
		return -EINVAL;
	unsigned got = 0;
	for (auto &e : fab->h->dir) {
		if (got >= n)
			break;
		uint32_t s1 = e.seq.load(std::memory_order_acquire);
		if ((s1 & 1) != 0 || e.state.load(std::memory_order_acquire) != DIR_VALID)
			continue;
		mlx5_qpn_cm_shm_service v;
		v.service_id = e.service_id.load(std::memory_order_acquire);
		v.node_guid = e.node_guid.load(std::memory_order_acquire);
		v.dc_key = e.dc_key.load(std::memory_order_acquire);
		v.dct_number = e.dct_number.load(std::memory_order_acquire);
		v.pid = e.pid.load(std::memory_order_acquire);
		if (e.seq.load(std::memory_order_relaxed) != s1)
			continue; /* rewritten while read */
		if (v.service_id != service_id || v.node_guid == 0 || !pid_alive(v.pid))
			continue;
		out[got++] = v;
	}
	return int(got);
}

} // extern "C"
