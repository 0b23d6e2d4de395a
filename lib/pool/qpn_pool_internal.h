/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_POOL_INTERNAL_H
#define QPN_POOL_INTERNAL_H

/*
 * Internal layout of a QPN pool. Everything here lives in DPDK shared memory and holds indices,
 * never process-local pointers, so that secondary processes can use the pool as it is.
 *
 * The design in one paragraph (doc/guides/design_pool.md has the long form):
 * every QPN of every range has one 64-bit *slot word* (the only per-QPN memory: 8 bytes). A slot
 * word holds the QPN's state (free / in use / in quarantine), its generation, and two 24-bit
 * links that thread it into singly linked chains. A *batch* is a chain whose head's aux field
 * names its tail and whose tail's aux field holds its length. Batches move between three homes:
 * a thread's cache (owner-only), the shared free stack (a Treiber stack of batches, ABA-tagged),
 * and the shared quarantine (a ring of time buckets, each a stack of sealed batches tagged with
 * the epoch of its newest member). An in-use slot names the cache that handed it out; only the
 * thread that holds that cache (its owner inside a call, or a thief that holds it) writes the
 * slot, so the owner's free is a plain load and store, with no atomic read-modify-write. Others
 * queue the free in that cache's remote queue (`rq`), which its holder validates and applies;
 * slots handed out without a cache are freed by compare-and-swap, by anyone.
 *
 * Crash recovery: a table of the processes that use the pool (pid + start time); a cache's owner
 * word and an in-use slot's aux name the process; a reclaim stops the world (holds every cache
 * like a thief) and sweeps what no live home reaches (design_pool.md §11).
 */

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <pthread.h>

#include "mlx5_qpn_config.h"
#include "mlx5_qpn_pool.h"

namespace qpn {

/* ---- slot word ------------------------------------------------------------------------------ */

constexpr uint32_t kNil = 0xFFFFFF;      /* "no slot" in a 24-bit link */
constexpr uint32_t kMaxSlots = 0xFFFFFF; /* slot indices are 24 bits and kNil is taken */

enum SlotState : uint64_t {
	kFree = 0,       /* in a cache or the free stack: may be handed out */
	kInUse = 1,      /* handed out; only free() leaves this state (by its cache's holder) */
	kQuarantine = 2, /* released; not before its batch's epoch has expired */
	kRetired = 3,    /* its range was removed from the pool: in no list, never handed out */
};

/*
 *  63        50 49  48 47            24 23             0
 * +------------+------+----------------+----------------+
 * | generation | state|  aux (24 bits) | next (24 bits) |
 * +------------+------+----------------+----------------+
 * next: the following slot of the chain. aux: in a batch head, the batch's tail; in a batch
 * tail (when head != tail), the batch's length. The generation is bumped at every hand-out.
 * In an in-use slot, next is the index of the cache that handed it out (kNil: none, the
 * cacheless path): only whoever holds that cache may write the slot with a plain store
 * (design_pool.md §4); a remote freer only sets kQueued in aux, by CAS. In an in-use slot aux is
 *   23: kUnpublished | 22: kQueued | 21-0: holder (process index; kNoHolder)
 */
constexpr unsigned kGenBits = 14;

/*
 * In an in-use slot `aux` links nothing; it says who may free the QPN. kUnpublished: taken by an
 * alloc_bulk() that has not returned yet. Such a QPN was handed to nobody, so free() refuses it
 * (a guessed or stale QPN must not be released out of a bulk that may still roll back).
 * kQueued: a free from a thread that does not hold the naming cache was accepted and waits in
 * that cache's remote queue; set by the freer's CAS, so that every later free of the QPN, from
 * any thread, is refused at its call (design_pool.md §4). The low bits name the holder
 * (kNoHolder: not recorded).
 */
constexpr uint32_t kUnpublished = 0x800000;
constexpr uint32_t kQueued = 0x400000;
constexpr uint32_t kHolderMask = 0x3FFFFF;
constexpr uint32_t kNoHolder = kHolderMask;
constexpr uint32_t kGenMask = (1u << kGenBits) - 1;

constexpr uint32_t
slot_next(uint64_t w)
{
	return static_cast<uint32_t>(w & 0xFFFFFF);
}
constexpr uint32_t
slot_aux(uint64_t w)
{
	return static_cast<uint32_t>((w >> 24) & 0xFFFFFF);
}
constexpr uint64_t
slot_state(uint64_t w)
{
	return (w >> 48) & 3;
}
constexpr uint32_t
slot_gen(uint64_t w)
{
	return static_cast<uint32_t>(w >> 50);
}
constexpr uint64_t
slot_make(uint32_t next, uint32_t aux, uint64_t state, uint32_t gen)
{
	return static_cast<uint64_t>(next & 0xFFFFFF) |
	       (static_cast<uint64_t>(aux & 0xFFFFFF) << 24) | (state << 48) |
	       (static_cast<uint64_t>(gen & kGenMask) << 50);
}
/* The inline fast path (mlx5_qpn_pool_core.h) builds and reads slot words with these. */
static_assert(kNil == MLX5_QPN_POOL_SLOT_NIL && kGenMask == MLX5_QPN_POOL_SLOT_GEN_MASK);
static_assert(slot_make(0, 0, kInUse, kGenMask) >> MLX5_QPN_POOL_SLOT_GEN_SHIFT == kGenMask &&
	      slot_make(0, 0, kQuarantine, 0) == MLX5_QPN_POOL_SLOT_QUARANTINE
							 << MLX5_QPN_POOL_SLOT_STATE_SHIFT &&
	      slot_make(0, 0, kInUse, 0) == MLX5_QPN_POOL_SLOT_IN_USE
						    << MLX5_QPN_POOL_SLOT_STATE_SHIFT &&
	      slot_make(kNil, kNil, kQuarantine, 0) ==
		      (slot_make(kNil, kNil, kQuarantine, 0) & MLX5_QPN_POOL_SLOT_OWNED_MASK));

constexpr uint64_t
slot_with_next(uint64_t w, uint32_t next)
{
	return (w & ~0xFFFFFFull) | next;
}
constexpr uint64_t
slot_with_aux(uint64_t w, uint32_t aux)
{
	return (w & ~(0xFFFFFFull << 24)) | (static_cast<uint64_t>(aux) << 24);
}

/* ---- tagged stack heads: 24-bit slot index + 40-bit tag ------------------------------------- */

constexpr uint32_t
head_idx(uint64_t h)
{
	return static_cast<uint32_t>(h & 0xFFFFFF);
}
constexpr uint64_t
head_tag(uint64_t h)
{
	return h >> 24;
}
constexpr uint64_t
head_make(uint32_t idx, uint64_t tag)
{
	return (tag << 24) | (idx & 0xFFFFFF);
}
constexpr uint64_t kTagMask = (1ull << 40) - 1;

/* ---- ranges ---------------------------------------------------------------------------------- */

/*
 * A range of QPNs and the slots that stand for them. `count` is `size` while the range is in the
 * pool and 0 once it was removed, so that a removed range matches no QPN and no slot. A removed
 * entry (and its slot region) is taken again by a later range of the same size only after a grace
 * period (kRegionGraceNs), so that a reader that loaded the old values has long finished with
 * them. The fields are atomics because of that reuse; readers load them relaxed (plain loads).
 */
struct Range {
	std::atomic<uint32_t> first;      /* first QPN */
	std::atomic<uint32_t> count;      /* QPNs while live; 0 once removed */
	std::atomic<uint32_t> base;       /* slot index of `first` */
	std::atomic<uint32_t> size;       /* QPNs (and slots) of the entry */
	std::atomic<uint64_t> removed_ns; /* when it was removed; 0 while live */
};

/* ---- per-thread cache ----------------------------------------------------------------------- */

/* A chain held by one cache: [head .. tail], `count` long (count == 0: empty). head and count
 * side by side in one 8-byte word: the inline fast path stores both at once
 * (mlx5_qpn_pool_chain_set()); the slow paths read and write them one by one. */
struct alignas(8) Chain {
	std::atomic<uint32_t> head;
	std::atomic<uint32_t> count;
	std::atomic<uint32_t> tail;
	uint32_t reserved;
};

/*
 * One cache per thread. Only its owner writes it, except a *thief* (a thread that found the
 * shared pool dry) that empties it while the owner is outside the pool: see Pool::steal(). The
 * fields are relaxed atomics so that the thief's reads are well defined; on x86 they compile to
 * plain loads and stores.
 */
/*
 * Owner word of a cache: who claimed it, in one word so that a claim names its process atomically
 * (a process that dies right after claiming is still known).
 *   63       44 43      22 21      0
 *  +----------+----------+---------+
 *  | proc + 1 | pid (22) | tid(22) |   proc: index in the pool's process table; 0: none recorded
 *  +----------+----------+---------+
 */
constexpr uint64_t
owner_make(uint32_t proc_plus1, uint32_t pid, uint32_t tid)
{
	return (static_cast<uint64_t>(proc_plus1) << 44) |
	       (static_cast<uint64_t>(pid & 0x3FFFFF) << 22) | (tid & 0x3FFFFF);
}
constexpr uint32_t
owner_pid(uint64_t o)
{
	return static_cast<uint32_t>((o >> 22) & 0x3FFFFF);
}
/* The holder recorded in the slots it allocates: its process index, or kNoHolder. */
constexpr uint32_t
owner_holder(uint64_t o)
{
	return static_cast<uint32_t>((o >> 44) - 1) & kHolderMask;
}

/*
 * A remote free: slot index, the generation the freer saw, and the freer's own count of its
 * remote frees (26 bits, wrapping). The holder of the cache frees the slot only if it is still
 * in use, named by this cache, with this generation; it applies a freer's entries in the order of
 * that count, which the entries' cells do not keep (drain_remote()).
 */
constexpr unsigned kRemoteEntries = 8;
constexpr unsigned kRqSeqShift = 24 + kGenBits;
constexpr uint32_t kRqSeqMask = (1u << (64 - kRqSeqShift)) - 1;
constexpr uint64_t
rq_make(uint32_t slot, uint32_t gen, uint32_t seq)
{
	/* Never 0 (empty): the slot is at most 0xFFFFFE. */
	return 1 + (static_cast<uint64_t>(slot) | (static_cast<uint64_t>(gen & kGenMask) << 24) |
		    (static_cast<uint64_t>(seq & kRqSeqMask) << kRqSeqShift));
}
constexpr uint32_t
rq_slot(uint64_t e)
{
	return static_cast<uint32_t>((e - 1) & 0xFFFFFF);
}
constexpr uint32_t
rq_gen(uint64_t e)
{
	return static_cast<uint32_t>((e - 1) >> 24) & kGenMask;
}
constexpr uint32_t
rq_seq(uint64_t e)
{
	return static_cast<uint32_t>((e - 1) >> kRqSeqShift);
}
/* Entry a was queued before entry b by the same freer (counts compared modulo 2^26). */
constexpr bool
rq_before(uint64_t a, uint64_t b)
{
	return ((rq_seq(b) - rq_seq(a)) & kRqSeqMask) - 1 < (kRqSeqMask >> 1);
}
static_assert(rq_slot(rq_make(0xFFFFFE, kGenMask, kRqSeqMask)) == 0xFFFFFE &&
	      rq_gen(rq_make(0xFFFFFE, kGenMask, kRqSeqMask)) == kGenMask &&
	      rq_seq(rq_make(0xFFFFFE, kGenMask, kRqSeqMask)) == kRqSeqMask &&
	      rq_before(rq_make(1, 0, kRqSeqMask), rq_make(0, 0, 0)) &&
	      !rq_before(rq_make(0, 0, 0), rq_make(1, 0, kRqSeqMask)));

struct alignas(64) Cache {
	/* Line 0 is struct mlx5_qpn_pool_cache_line of mlx5_qpn_pool_core.h, which the inline fast
	 * path of the public header reads and writes (layout asserted below): ABI. */
	std::atomic<uint64_t> owner; /* 0: unclaimed; else owner_make() */
	std::atomic<uint32_t> busy;  /* owner is inside an out-of-line pool call */
	/* A thief holds the cache (low 31 bits: its process index + 1, or kAnyThief; the owner
	 * bypasses it) and/or kGateRemote (`rq` may hold entries: the holder drains it). One word,
	 * so that the fast path looks at one field to know it may go on. */
	std::atomic<uint32_t> gate;
	Chain ready; /* free QPNs, LIFO: alloc pops here */
	Chain open;  /* released QPNs not yet time-stamped (quarantine only) */
	/* 2 x allocs (frees) served, + 1 while the owner is inside an inline alloc (free): written
	 * by the owner alone, read through outside() and seq_count(). */
	std::atomic<uint64_t> alloc_seq;
	std::atomic<uint64_t> free_seq;

	/* Line 1 on: the slow paths'. */
	alignas(64) Chain spare; /* a second full batch: hysteresis between refill and flush */
	std::atomic<uint32_t> range_hint;
	std::atomic<uint32_t> refill_seq; /* refills so far: paces the quarantine drain */
	std::atomic<uint16_t> moving;     /* a refill is taking a batch off the free stack */
	/* `open` holds frees taken from the remote queue: a refill does not seal it
	 * (CacheChains::seal_at_refill()). Written by the cache's holder only. */
	std::atomic<uint16_t> open_remote;
	std::atomic<uint64_t> misses;
	std::atomic<uint64_t> refills;
	std::atomic<uint64_t> flushes;
	std::atomic<uint64_t> steals;
	std::atomic<uint64_t> refused;
	std::atomic<uint64_t> enospc;
	std::atomic<uint64_t> eagain;
	std::atomic<uint64_t> refused_async; /* rq entries refused when drained */

	/* Frees of this cache's in-use QPNs by threads that do not hold it (rq_make() entries, 0:
	 * empty). Written by those threads (CAS from 0), drained by whoever holds the cache. */
	alignas(64) std::atomic<uint64_t> rq[kRemoteEntries];
};
static_assert(sizeof(Cache) == 256, "a power of two: alloc derives a cache's index by a shift");
/* The inline fast path's view of line 0 (mlx5_qpn_pool_core.h) is this one. */
#define QPN_SAME_OFFSET(a, b)                                                                      \
	static_assert(offsetof(Cache, a) == offsetof(mlx5_qpn_pool_cache_line, b))
QPN_SAME_OFFSET(owner, owner);
QPN_SAME_OFFSET(busy, busy);
QPN_SAME_OFFSET(gate, gate);
QPN_SAME_OFFSET(ready, ready);
QPN_SAME_OFFSET(open, open);
QPN_SAME_OFFSET(alloc_seq, alloc_seq);
QPN_SAME_OFFSET(free_seq, free_seq);
#undef QPN_SAME_OFFSET
static_assert(offsetof(Cache, spare) == 64, "line 0 is the fast path's alone");
static_assert(sizeof(Chain) == sizeof(mlx5_qpn_pool_chain) &&
	      offsetof(Chain, head) == offsetof(mlx5_qpn_pool_chain, head) &&
	      offsetof(Chain, count) == offsetof(mlx5_qpn_pool_chain, count) &&
	      offsetof(Chain, tail) == offsetof(mlx5_qpn_pool_chain, tail));
static_assert(offsetof(Chain, count) == offsetof(Chain, head) + 4 && alignof(Chain) == 8,
	      "mlx5_qpn_pool_chain_set() stores head and count as one little-endian word");

/* ---- process table (crash recovery) ---------------------------------------------------------- */

constexpr uint32_t kMaxProcs = 64;
constexpr uint32_t kAnyThief = 0x7FFFFFFF; /* a thief whose process has no table entry */
constexpr uint32_t kGateRemote = MLX5_QPN_POOL_GATE_REMOTE;
constexpr uint32_t kGateThief = ~kGateRemote;

/* One process that uses the pool. `ident` (qpn_pool_proc.h: pid + start time) is claimed by CAS
 * from 0; it is cleared only by a reclaim, after every QPN the process held was recovered. */
struct alignas(64) ProcEntry {
	std::atomic<uint64_t> ident;
	std::atomic<uint32_t> busy; /* its threads inside a cacheless call (see Bypass) */
	/* 1: registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED before it claimed any cache, so a
	 * thief of another process fences its threads with IPIs (fence_scope()); stored after
	 * `ident` is claimed, before the process writes its index into an owner word. */
	std::atomic<uint32_t> fenced;
};

/* ---- the pool ------------------------------------------------------------------------------- */

/* Time buckets of the shared quarantine. A bucket holds batches whose epochs map to it; its
 * head carries the newest epoch pushed into it, so a drain can never release anything early. */
constexpr unsigned kBuckets = 16;
constexpr uint64_t kRegionGraceNs = 1000000000ull; /* 1 s, or the quarantine if longer */
/* "MLX5QNP5": raised with each layout change of the pool header, its caches or its slot words, so
 * that a process of another build refuses the pool (-EINVAL) instead of misreading it. 2: Chain
 * {head, count}; 3: the freer's count in a remote queue entry; 4: a cache's `open_remote`; 5: the
 * kQueued bit of an in-use slot. */
constexpr uint64_t kPoolMagic = 0x4d4c5835514e5035ull;

struct EventCounters {
	uint64_t hits, misses, refills, flushes, steals, refused, enospc, eagain, refused_async;
};

/* The stats_reset() baseline: atomics, as a reset may race with readers (a reader may see a
 * baseline that is half old, half new: fine for counters). */
struct EventBase {
	std::atomic<uint64_t> hits, misses, refills, flushes, steals, refused, enospc, eagain,
		refused_async;
};

} /* namespace qpn */

struct mlx5_qpn_pool {
	uint64_t magic;
	uint64_t uid; /* unique per creation: guards thread-local cache bindings */
	char name[MLX5_QPN_POOL_NAMESIZE + 1];
	uint64_t quarantine_ns;
	uint64_t epoch_ns; /* width of one quarantine bucket */
	uint64_t t0_ns;    /* epochs count from here */
	uint32_t batch;    /* cache_size */
	uint32_t capacity; /* slots allocated */
	int32_t socket_id;
	uint32_t nb_caches;

	alignas(64) std::atomic<uint64_t> free_top;              /* free stack: idx | tag */
	alignas(64) std::atomic<uint64_t> bucket[qpn::kBuckets]; /* idx | epoch */
	alignas(64) std::atomic<uint64_t> released;              /* left quarantine (drained) */
	/* Threads holding QPNs privately between two homes (a drained bucket on its way to the free
	 * stack, a popped batch on the cacheless path): while non-zero, "nothing free" is -EAGAIN,
	 * never -ENOSPC. Slow paths only; sequentially consistent with the heads it is read with. */
	std::atomic<uint32_t> transit;
	std::atomic<uint64_t> bypass_allocs; /* counters of cacheless calls */
	std::atomic<uint64_t> bypass_frees;
	std::atomic<uint64_t> bypass_quarantined;
	std::atomic<uint64_t> bypass_refused;

	/* Writers of the range table only (slow path). A process-shared pthread mutex rather than an
	 * rte_spinlock: ThreadSanitizer models the former, not DPDK's inline-asm lock. */
	alignas(64) pthread_mutex_t range_lock;
	std::atomic<uint32_t> nb_ranges;  /* published range entries, removed ones included */
	std::atomic<uint32_t> nb_sorted;  /* live ranges in sorted[] */
	std::atomic<uint32_t> collecting; /* range_remove() holds the free stack: its process
						  * index + 1 (kAnyThief if none), 0: nobody */
	std::atomic<uint32_t> nb_slots;   /* high-water mark of the slot regions used */
	std::atomic<uint32_t> live_slots; /* slots of live ranges (the capacity) */
	std::atomic<uint32_t> sorted_seq; /* seqlock over sorted[] */
	std::atomic<uint16_t> sorted[MLX5_QPN_MAX_RANGES]; /* range indices ordered by first QPN */
	qpn::Range ranges[MLX5_QPN_MAX_RANGES]; /* append-only; entry i immutable once published */

	qpn::EventBase stats_base; /* mlx5_qpn_pool_stats_reset() snapshot */

	/* Crash recovery (Recovery::reclaim). `stw`: identity of a reclaimer that holds every cache and
	 * keeps cacheless calls out while it audits the pool, 0: none. */
	alignas(64) qpn::ProcEntry procs[qpn::kMaxProcs];
	std::atomic<uint64_t> stw;
	std::atomic<uint32_t> anon_busy;      /* cacheless calls of processes without an entry */
	std::atomic<uint32_t> need_audit;     /* the range lock's holder died */
	std::atomic<uint64_t> next_check_ns;  /* rate limit of the automatic death check */
	std::atomic<uint64_t> dead_processes; /* dead processes reclaimed */
	std::atomic<uint64_t> reclaimed;      /* QPNs recovered from them */

	qpn::Cache caches[MLX5_QPN_MAX_CACHES];
	/* followed by std::atomic<uint64_t> slots[capacity] */
};

/* ---- pools in caller-provided memory (tests; mlx5_qpn_pool_create() uses them too) ---------- */

/* Bytes a pool of `capacity` QPNs needs. */
size_t qpn_pool_size(uint32_t capacity);

/*
 * Build a pool in `mem` (len >= qpn_pool_size(), 64-byte aligned, zeroed or not). Memory shared
 * with fork()ed processes (MAP_SHARED) makes a pool they all use; no EAL call is made here.
 * Returns the pool, or NULL with rte_errno = EINVAL.
 */
struct mlx5_qpn_pool *qpn_pool_init_at(void *mem, size_t len,
				       const struct mlx5_qpn_pool_params *prm);

/* Retire a pool built by qpn_pool_init_at(); the memory is the caller's again. */
void qpn_pool_fini_at(struct mlx5_qpn_pool *pool);

#endif /* QPN_POOL_INTERNAL_H */
