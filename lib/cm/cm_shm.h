/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_CM_SHM_H
#define MLX5_QPN_CM_SHM_H

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
/*
 * The files of the transport, one concern each:
 *  - cm_shm.h           this header: the segment layout and the handle;
 *  - cm_shm_ring.cpp    the per-node frame rings: send, receive, skipping a dead sender's slot;
 *  - cm_shm_directory.cpp the service directory: publish, lookup, withdraw;
 *  - cm_shm_fabric.cpp  the segment (open, validate, users, close, unlink) and node attachment.
 * Not installed; nothing here leaves the library (config/mlx5_qpn.map exports the C API only).
 */
#include "cm_internal.h"
#include "qpn_shm.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>


namespace cm_impl::shm {

constexpr uint32_t kMagic = 0x4d51434eu; /* "NCQM" in memory order: the fabric is ready */
constexpr uint32_t kVersion = 3; /* 2: ProcIds, user table, slot claims; 3: frame send times */
inline constexpr const char *kPrefix = "/mlx5_qpn_cmfab_";
constexpr unsigned kMaxUsers = 64; /* open handles, all processes */

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be address-free");

enum : uint32_t { NODE_FREE = 0, NODE_CLAIMING = 1, NODE_IN_USE = 2 };
enum : uint32_t { DIR_FREE = 0, DIR_WRITING = 1, DIR_VALID = 2 };

/* Slot claim word: (position + 1) << 16 | user << 8 | (user generation & 63) << 2 | state.
 * 0 (a zero-filled segment) is "never claimed"; positions compare on 48 bits. */
enum : uint64_t { CLAIM_WRITING = 1, CLAIM_SKIPPED = 2 };
constexpr uint64_t
claim_of(uint64_t pos, unsigned user, uint32_t gen, uint64_t state)
{
	return ((pos + 1) << 16) | (uint64_t(user & 0xff) << 8) | (uint64_t(gen & 63) << 2) | state;
}
constexpr uint64_t
claim_pos(uint64_t c)
{
	return c >> 16;
}
constexpr uint64_t
pos_bits(uint64_t pos)
{
	return (pos + 1) & (~uint64_t(0) >> 16);
}

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
	std::atomic<uint32_t> dct_qpn;
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
	AtomicProc proc;           /* pid 0: free */
	std::atomic<uint32_t> gen; /* bumped at each claim of the record */
	uint32_t rsvd;
};

struct alignas(64) FrameSlot {
	std::atomic<uint64_t> seq;   /* lap sequence minus the slot index */
	std::atomic<uint64_t> claim; /* see claim_of() */
	uint64_t src;
	uint64_t dst;
	uint64_t sent_ns; /* the sender's time (mlx5_qpn_cm_frame::sent_ns) */
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

/* Is the process behind @p p alive (or this process)? */
bool alive_of(const AtomicProc &p);
/* A new owner of node slot @p idx repairs the ring's tail (cm_shm_ring.cpp). */
void repair_tail(mlx5_qpn_cm_shm_fabric *fab, unsigned idx);
/* The transport hooks of an attached node (ctx: its Attachment). */
int shm_send(void *ctx, uint64_t dst_guid, const void *frame, uint16_t len, uint64_t sent_ns);
int shm_recv_burst(void *ctx, mlx5_qpn_cm_frame *frames, unsigned int n);
/* Remove this process's directory entries of @p guid (cm_shm_directory.cpp). */
void dir_withdraw(Header *h, uint64_t guid);

} // namespace cm_impl::shm

struct mlx5_qpn_cm_shm_fabric {
	cm_impl::shm::Header *h = nullptr;
	qpn::shm::Segment seg;
	/* Geometry validated at open and never read back from the segment again. */
	unsigned max_nodes = 0;
	uint64_t slots = 0;
	unsigned user = 0; /* this handle's user record */
	uint32_t user_gen = 0;
	pid_t pid = 0; /* the process that opened it (a fork()ed copy is not a user) */
	char name[MLX5_QPN_CM_SHM_NAMESIZE + 1] = {};
	std::mutex mu; /* this handle's attachments (attach/detach/close of one process) */
	cm_impl::shm::Attachment att[MLX5_QPN_CM_SHM_MAX_NODES] = {};
	std::atomic<bool> corrupt_logged{false};
};


#endif /* MLX5_QPN_CM_SHM_H */
