/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cross-process CM transport: one POSIX shared-memory segment per fabric name, so that separate
 * DPDK primaries (each with its own --file-prefix and no hugepages, hence no DPDK multi-process)
 * can exchange CM frames. Everything in the segment is position-independent: indices, GUIDs and
 * std::atomic words, never a pointer.
 *
 * The segment is opened through lib/shm (qpn_shm.h): created exclusively (mode 0600) or adopted
 * only if it is this user's alone; its init lock is taken with a bounded wait. Its header is
 * validated at open and the geometry is then cached in the handle: nothing read back later
 * (node indices, ring positions, lengths) is used without a mask or a bound.
 *
 * Layout: a header (magic, version, geometry, drop counter), the user table (one record per
 * open handle: a qpn::shm::ProcId), the service directory, the node table, then per node a ring
 * of fixed-size frame slots. Each ring is a bounded queue in the manner of Vyukov's MPMC queue:
 * every slot carries a sequence number that says which lap of the ring it is ready for,
 * producers claim a position with a CAS on the head, write the slot and publish it by storing
 * the sequence (release); the single consumer reads the slot once its sequence says "full for
 * my position" (acquire) and hands the slot to the next lap. No lock is held across a copy.
 *
 * A sender that dies between claiming a position and publishing it must not stall the queue.
 * So a sender also marks the slot with a claim word, (position, its user record, the record's
 * generation, WRITING), set by a CAS before it copies. The consumer, finding a position claimed
 * (head past it) but not published:
 *  - claim WRITING for this position: waits while that user lives (the copy is a few hundred
 *    bytes); once it is dead (ProcId liveness, or its user record reused), CASes the claim to
 *    SKIPPED and hands the slot on (the frame is lost and counted, as on a real fabric);
 *  - no claim for this position yet: a sender between its two CASes, or one that died there;
 *    after a grace period the consumer CASes the claim to SKIPPED. A live but very slow sender
 *    then fails its claim CAS and drops its frame without touching the slot.
 * Either way exactly one side owns the slot's bytes.
 *
 * The sequence is stored minus the slot index: a zero-filled segment (what ftruncate gives) is
 * then a valid empty ring, and the rings' pages are only touched as they fill.
 *
 * Node ownership: a node slot records its GUID and its owner (pid + start time). A node whose
 * owner died is taken over by the next attach that needs it. Queue positions are never reset;
 * every frame carries its destination GUID and the receiver drops (and counts) frames addressed
 * to a previous owner. The segment is removed when its last user closes it (or when an open
 * that created it fails); an open that finds no live user starts it afresh.
 */
#include "cm_internal.h"
#include "qpn_shm.h"

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <string>

#include <unistd.h>

namespace cm_impl {
void (*shm_send_test_hook)(int stage) = nullptr;
uint64_t shm_stall_grace_ns = 1000000000ull;
} // namespace cm_impl

namespace {

constexpr uint32_t kMagic = 0x4d51434eu; /* "NCQM" in memory order: the fabric is ready */
constexpr uint32_t kVersion = 2;         /* 2: ProcIds, user table, slot claims */
constexpr const char *kPrefix = "/mlx5_qpn_cmfab_";
constexpr unsigned kMaxUsers = 64;       /* open handles, all processes */

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be address-free");

enum : uint32_t { NODE_FREE = 0, NODE_CLAIMING = 1, NODE_IN_USE = 2 };
enum : uint32_t { DIR_FREE = 0, DIR_WRITING = 1, DIR_VALID = 2 };

/* Slot claim word: (position + 1) << 16 | user << 8 | (user generation & 63) << 2 | state.
 * 0 (a zero-filled segment) is "never claimed"; positions compare on 48 bits. */
enum : uint64_t { CLAIM_WRITING = 1, CLAIM_SKIPPED = 2 };
constexpr uint64_t claim_of(uint64_t pos, unsigned user, uint32_t gen, uint64_t state)
{
	return ((pos + 1) << 16) | (uint64_t(user & 0xff) << 8) | (uint64_t(gen & 63) << 2) | state;
}
constexpr uint64_t claim_pos(uint64_t c) { return c >> 16; }
constexpr uint64_t pos_bits(uint64_t pos) { return (pos + 1) & (~uint64_t(0) >> 16); }

/* A process as two atomics (a racy read is well defined; see alive_of()). */
struct AtomicProc {
	std::atomic<int32_t> pid;
	uint32_t rsvd;
	std::atomic<uint64_t> start;
	void set(const qpn::shm::ProcId &p)
	{
		start.store(p.start_time, std::memory_order_relaxed);
		pid.store(p.pid, std::memory_order_release);
	}
	void clear() { pid.store(0, std::memory_order_release); }
	qpn::shm::ProcId get() const
	{
		qpn::shm::ProcId p{};
		p.pid = pid.load(std::memory_order_acquire);
		p.start_time = start.load(std::memory_order_relaxed);
		return p;
	}
};

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
	std::atomic<uint64_t> start;
};

struct alignas(64) NodeHdr {
	std::atomic<uint32_t> state;
	uint32_t rsvd;
	std::atomic<uint64_t> guid;
	AtomicProc owner;
	/* Producers (any process) and the consumer on separate cache lines. */
	alignas(64) std::atomic<uint64_t> head;
	alignas(64) std::atomic<uint64_t> tail;
};

struct UserRec {
	AtomicProc proc;        /* pid 0: free */
	std::atomic<uint32_t> gen; /* bumped at each claim of the record */
	uint32_t rsvd;
};

struct alignas(64) FrameSlot {
	std::atomic<uint64_t> seq;   /* lap sequence minus the slot index */
	std::atomic<uint64_t> claim; /* see claim_of() */
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
	UserRec users[kMaxUsers];
	DirEntry dir[MLX5_QPN_CM_SHM_MAX_SERVICES];
	NodeHdr nodes[MLX5_QPN_CM_SHM_MAX_NODES];
};

/* The fixed fields of Header, as plain words (read with segment_read before mapping). */
struct RawHeader {
	uint32_t magic, version, max_nodes, slots;
	uint64_t size;
};
static_assert(offsetof(Header, version) == offsetof(RawHeader, version) &&
		      offsetof(Header, size) == offsetof(RawHeader, size),
	      "RawHeader mirrors Header");

struct Attachment {
	mlx5_qpn_cm_shm_fabric *fab;
	unsigned idx;  /* node slot in the segment */
	uint64_t guid; /* 0: unused */
	/* Consumer side (one thread at a time): the position found claimed but unpublished, and
	 * since when (for the grace period of a claim not marked yet). */
	uint64_t stall_pos;
	uint64_t stall_since;
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

uint64_t mono_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool alive_of(const AtomicProc &p)
{
	qpn::shm::ProcId id = p.get();
	return qpn::shm::is_self(id) || qpn::shm::alive(id);
}

size_t size_for(unsigned max_nodes, unsigned slots)
{
	return sizeof(Header) + size_t(max_nodes) * slots * sizeof(FrameSlot);
}

bool geometry_ok(unsigned max_nodes, unsigned slots)
{
	return max_nodes >= 1 && max_nodes <= MLX5_QPN_CM_SHM_MAX_NODES && slots >= 2 &&
	       slots <= 65536 && (slots & (slots - 1)) == 0;
}

} // namespace

struct mlx5_qpn_cm_shm_fabric {
	Header *h = nullptr;
	qpn::shm::Segment seg;
	/* Geometry validated at open and never read back from the segment again. */
	unsigned max_nodes = 0;
	uint64_t slots = 0;
	unsigned user = 0;     /* this handle's user record */
	uint32_t user_gen = 0;
	pid_t pid = 0;         /* the process that opened it (a fork()ed copy is not a user) */
	char name[MLX5_QPN_CM_SHM_NAMESIZE + 1] = {};
	std::mutex mu; /* this handle's attachments (attach/detach/close of one process) */
	Attachment att[MLX5_QPN_CM_SHM_MAX_NODES] = {};
	std::atomic<bool> corrupt_logged{false};
};

namespace {

FrameSlot *ring_of(const mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	auto *base = reinterpret_cast<uint8_t *>(fab->h) + sizeof(Header);
	return reinterpret_cast<FrameSlot *>(base) + size_t(idx % fab->max_nodes) * fab->slots;
}

void log_corrupt(mlx5_qpn_cm_shm_fabric *fab, const char *what)
{
	if (!fab->corrupt_logged.exchange(true, std::memory_order_relaxed))
		CM_LOG(ERR, "shm fabric %s: shared memory %s%s is corrupted (%s)", fab->name, kPrefix,
		       fab->name, what);
}

/*
 * A new owner of a node slot fixes the one thing a consumer that died can leave behind: a slot
 * handed to the next lap while the tail was not advanced yet. (A consumer that died before
 * handing the slot back leaves it full: the new owner reads it again and drops it as stale.)
 */
void repair_tail(mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	NodeHdr &n = fab->h->nodes[idx];
	const uint64_t cap = fab->slots, mask = cap - 1;
	FrameSlot *ring = ring_of(fab, idx);
	uint64_t pos = n.tail.load(std::memory_order_acquire);
	for (uint64_t k = 0; k < cap &&
			     ring[pos & mask].seq.load(std::memory_order_acquire) == (pos & ~mask) + cap;
	     k++)
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
	mlx5_qpn_cm_shm_fabric *fab = self->fab;
	Header *h = fab->h;
	unsigned dst = MLX5_QPN_CM_SHM_MAX_NODES;
	for (unsigned i = 0; i < fab->max_nodes; i++) {
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
	FrameSlot *ring = ring_of(fab, dst);
	const uint64_t mask = fab->slots - 1;
	uint64_t pos = n.head.load(std::memory_order_relaxed);
	FrameSlot *s;
	for (unsigned stuck = 0;;) {
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
			/* Another producer took pos: follow the head. A head that does not move
			 * while the slot claims a later lap is a corrupted ring: bounded. */
			uint64_t now = n.head.load(std::memory_order_relaxed);
			if (now == pos && ++stuck > 100000) {
				log_corrupt(fab, "ring sequence ahead of its head");
				h->drops.fetch_add(1, std::memory_order_relaxed);
				return -EIO;
			}
			pos = now;
		}
	}
	if (cm_impl::shm_send_test_hook != nullptr)
		cm_impl::shm_send_test_hook(1); /* position taken, slot not claimed */
	/* Claim the slot for this position unless the consumer gave up on it already. */
	const uint64_t mine = claim_of(pos, fab->user, fab->user_gen, CLAIM_WRITING);
	uint64_t c = s->claim.load(std::memory_order_acquire);
	for (;;) {
		if (claim_pos(c) >= pos_bits(pos)) {
			/* Skipped by the consumer after its grace period (and maybe taken by the
			 * next lap already): the slot is not ours. */
			h->drops.fetch_add(1, std::memory_order_relaxed);
			return -ETIMEDOUT;
		}
		if (s->claim.compare_exchange_weak(c, mine, std::memory_order_acq_rel,
						   std::memory_order_acquire))
			break;
	}
	if (cm_impl::shm_send_test_hook != nullptr)
		cm_impl::shm_send_test_hook(2); /* slot claimed, frame not published */
	s->src = self->guid;
	s->dst = dst_guid;
	s->len = len;
	std::memcpy(s->data, frame, len);
	s->seq.store((pos & ~mask) + 1, std::memory_order_release);
	return 0;
}

/*
 * Position pos is claimed (the head is past it) but not published. True if the consumer may
 * skip it: its sender is dead, or never marked its claim within the grace period. The claim is
 * then SKIPPED, so a sender that was only slow backs off without touching the slot.
 */
bool skip_unpublished(Attachment *a, FrameSlot &s, uint64_t pos, const char **why)
{
	Header *h = a->fab->h;
	uint64_t c = s.claim.load(std::memory_order_acquire);
	const uint64_t posbits = pos_bits(pos);
	if (claim_pos(c) == posbits) {
		*why = "its sender died while writing it";
		if ((c & 3) == CLAIM_SKIPPED)
			return true;
		unsigned user = unsigned(c >> 8) & 0xff;
		uint32_t gen = uint32_t(c >> 2) & 63;
		bool dead = true;
		if (user < kMaxUsers) {
			UserRec &u = h->users[user];
			dead = (u.gen.load(std::memory_order_acquire) & 63) != gen || !alive_of(u.proc);
		}
		if (!dead)
			return false; /* copying: it finishes soon */
	} else {
		*why = "its sender never claimed it (died before, or stalled past the grace period)";
		uint64_t now = mono_ns();
		if (a->stall_pos != pos || a->stall_since == 0) {
			a->stall_pos = pos;
			a->stall_since = now;
			return false;
		}
		if (now - a->stall_since < cm_impl::shm_stall_grace_ns)
			return false;
	}
	return s.claim.compare_exchange_strong(c, claim_of(pos, 0, 0, CLAIM_SKIPPED),
					       std::memory_order_acq_rel, std::memory_order_acquire);
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
	const uint64_t cap = self->fab->slots, mask = cap - 1;
	uint64_t pos = node.tail.load(std::memory_order_relaxed);
	unsigned got = 0;
	while (got < n) {
		FrameSlot &s = ring[pos & mask];
		uint64_t seq = s.seq.load(std::memory_order_acquire);
		const char *why = "";
		if (seq != (pos & ~mask) + 1) {
			/* Empty, a sender still copying, or a sender that died there. */
			if (node.head.load(std::memory_order_acquire) <= pos ||
			    !skip_unpublished(self, s, pos, &why))
				break;
			/* The claim is ours now, but its sender may have published and left just
			 * before it was judged (its user record is cleared at close): read again. */
			seq = s.seq.load(std::memory_order_acquire);
		}
		if (seq != (pos & ~mask) + 1) {
			h->drops.fetch_add(1, std::memory_order_relaxed);
			CM_LOG(WARNING, "shm fabric %s: node %016" PRIx64 ": queue position %" PRIu64 " skipped: %s",
			       self->fab->name, self->guid, pos, why);
		} else {
			uint16_t len = s.len;
			if (s.dst == self->guid && len != 0 && len <= MLX5_QPN_CM_FRAME_MAX) {
				frames[got].src_guid = s.src;
				frames[got].len = len;
				std::memcpy(frames[got].data, s.data, len);
				got++;
			} else {
				h->drops.fetch_add(1, std::memory_order_relaxed); /* previous owner's */
			}
		}
		s.seq.store((pos & ~mask) + cap, std::memory_order_release);
		pos++;
		node.tail.store(pos, std::memory_order_release);
		self->stall_since = 0;
	}
	return int(got);
}

/* Claim node slot @p i (already CLAIMING by us) for @p guid. */
void node_take(mlx5_qpn_cm_shm_fabric *fab, unsigned i, uint64_t guid)
{
	NodeHdr &n = fab->h->nodes[i];
	n.owner.set(qpn::shm::self());
	n.guid.store(guid, std::memory_order_relaxed);
	repair_tail(fab, i);
	n.state.store(NODE_IN_USE, std::memory_order_release);
}

bool dir_is_mine(const DirEntry &e)
{
	qpn::shm::ProcId id{};
	id.pid = e.pid.load(std::memory_order_relaxed);
	id.start_time = e.start.load(std::memory_order_relaxed);
	return qpn::shm::is_self(id);
}

bool dir_alive(int32_t pid, uint64_t start)
{
	qpn::shm::ProcId id{};
	id.pid = pid;
	id.start_time = start;
	return qpn::shm::is_self(id) || qpn::shm::alive(id);
}

/* Remove this process's directory entries of @p guid. */
void dir_withdraw(Header *h, uint64_t guid)
{
	for (auto &e : h->dir) {
		if (e.state.load(std::memory_order_acquire) != DIR_VALID ||
		    e.node_guid.load(std::memory_order_relaxed) != guid || !dir_is_mine(e))
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
	n.owner.clear();
	n.state.store(NODE_FREE, std::memory_order_release);
	a.guid = 0;
}

/* Is anyone but user record @p except alive? Init lock held. Dead users' records are freed. */
bool other_users_alive(Header *h, unsigned except)
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
void init_header(Header *h, unsigned max_nodes, unsigned slots, size_t size)
{
	h->version = kVersion;
	h->max_nodes = max_nodes;
	h->slots = slots;
	h->size = size;
	h->magic.store(kMagic, std::memory_order_release);
}

/*
 * Open or create the segment, validate it, register this handle as a user. On success the
 * handle holds the mapping and the (unlocked) segment. One line on every refusal.
 */
int open_segment(mlx5_qpn_cm_shm_fabric *fab, const char *name, unsigned max_nodes,
		 unsigned slots)
{
	std::string path = shm_path(name);
	qpn::shm::Segment *seg = &fab->seg;
	int rc = qpn::shm::segment_open_locked(path.c_str(), seg);
	if (rc != 0) {
		CM_LOG(ERR, "shm fabric %s: cannot open %s: %s", name, path.c_str(), std::strerror(-rc));
		return rc;
	}
	bool fresh = seg->created;
	size_t fsize = 0;
	rc = qpn::shm::segment_file_size(seg, &fsize);
	if (rc == 0 && !fresh && fsize < sizeof(Header))
		fresh = true; /* its creator died before sizing it */
	if (rc == 0 && !fresh) {
		/* Read the header without mapping: its geometry says how much to map. */
		RawHeader raw{};
		rc = qpn::shm::segment_read(seg, &raw, sizeof(raw), 0);
		const RawHeader *ph = &raw;
		uint32_t magic = ph->magic;
		const char *bad = nullptr;
		if (rc != 0) {
			bad = "short header";
		} else if (magic == 0 && ph->version == 0 && ph->size == 0) {
			fresh = true; /* its creator died before initialising it */
		} else if (magic != kMagic) {
			bad = "bad magic";
		} else if (ph->version != kVersion) {
			CM_LOG(ERR, "shm fabric %s: layout version %u, this library has %u", name,
			       ph->version, kVersion);
			rc = -EPROTO;
		} else if (!geometry_ok(ph->max_nodes, ph->slots)) {
			bad = "geometry";
		} else if (ph->size != size_for(ph->max_nodes, ph->slots) || ph->size != fsize) {
			bad = "size";
		}
		if (bad != nullptr) {
			CM_LOG(ERR, "shm fabric %s: shared memory %s is corrupted (%s); remove it (mlx5_qpn_cm_shm_unlink)",
			       name, path.c_str(), bad);
			rc = -EPROTO;
		}
		if (rc == 0 && !fresh) {
			fab->max_nodes = ph->max_nodes;
			fab->slots = ph->slots;
			rc = qpn::shm::segment_map(seg, ph->size, false);
			if (rc == 0) {
				fab->h = static_cast<Header *>(seg->addr);
				/* Nobody alive uses it: start afresh with this opener's geometry. */
				if (!other_users_alive(fab->h, kMaxUsers)) {
					qpn::shm::segment_unmap(seg);
					fab->h = nullptr;
					fresh = true;
				}
			}
		}
	}
	if (rc == 0 && fresh) {
		size_t size = size_for(max_nodes, slots);
		rc = qpn::shm::segment_map(seg, size, true); /* zero-filled */
		if (rc == 0) {
			fab->h = static_cast<Header *>(seg->addr);
			fab->max_nodes = max_nodes;
			fab->slots = slots;
			init_header(fab->h, max_nodes, slots, size);
		}
	}
	if (rc == 0) {
		rc = -ENOSPC;
		for (unsigned i = 0; i < kMaxUsers; i++) {
			UserRec &u = fab->h->users[i];
			if (u.proc.pid.load(std::memory_order_acquire) != 0 && alive_of(u.proc))
				continue;
			fab->user = i;
			fab->user_gen = u.gen.fetch_add(1, std::memory_order_acq_rel) + 1;
			u.proc.set(qpn::shm::self());
			rc = 0;
			break;
		}
		if (rc != 0)
			CM_LOG(ERR, "shm fabric %s: all %u user records held by live processes", name,
			       kMaxUsers);
	}
	if (rc != 0) {
		fab->h = nullptr;
		/* A refused open leaves nothing behind that it made. */
		qpn::shm::segment_close(seg, fresh, true);
		return rc;
	}
	qpn::shm::segment_unlock(seg);
	return 0;
}

} // namespace

extern "C" {

int mlx5_qpn_cm_shm_fabric_open(const char *name, unsigned int max_nodes,
				unsigned int slots_per_node, struct mlx5_qpn_cm_shm_fabric **out)
{
	if (out == nullptr || !name_ok(name) || !geometry_ok(max_nodes, slots_per_node)) {
		CM_LOG(ERR, "shm fabric open: invalid parameters (name of 1..%d characters from "
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

void mlx5_qpn_cm_shm_fabric_close(struct mlx5_qpn_cm_shm_fabric *fab)
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

int mlx5_qpn_cm_shm_unlink(const char *name)
{
	if (!name_ok(name))
		return -EINVAL;
	std::string path = shm_path(name);
	return qpn::shm::segment_unlink(path.c_str());
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
	const qpn::shm::ProcId me = qpn::shm::self();
	for (int pass = 0; pass < 2; pass++) {
		for (auto &e : h->dir) {
			uint32_t st = e.state.load(std::memory_order_acquire);
			/* First pass: free entries; second: entries of dead publishers (and state
			 * words that are none of ours). */
			bool known = st == DIR_FREE || st == DIR_WRITING || st == DIR_VALID;
			if (pass == 0 ? st != DIR_FREE
				      : known && (st != DIR_VALID ||
						  dir_alive(e.pid.load(std::memory_order_relaxed),
							    e.start.load(std::memory_order_relaxed))))
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
			e.pid.store(me.pid, std::memory_order_release);
			e.start.store(me.start_time, std::memory_order_release);
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
		uint64_t start = e.start.load(std::memory_order_acquire);
		if (e.seq.load(std::memory_order_relaxed) != s1)
			continue; /* rewritten while read */
		if (v.service_id != service_id || v.node_guid == 0 || !dir_alive(v.pid, start))
			continue;
		out[got++] = v;
	}
	return int(got);
}

} // extern "C"
