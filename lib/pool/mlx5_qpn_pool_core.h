/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_POOL_CORE_H
#define MLX5_QPN_POOL_CORE_H

/**
 * @file
 * The part of a pool's layout that the inline fast path of mlx5_qpn_pool.h reads and writes.
 *
 * Do not include this file directly and do not use these names: they are the ABI of the inline
 * functions, not an interface. As with rte_mempool.h's cache, an application compiled against
 * this header has the layout below built into its code: a change of any structure or constant
 * here is an ABI break (new SONAME, applications rebuilt). Everything else of a pool stays
 * private to the library.
 *
 * What the fast path touches: the calling thread's binding (mlx5_qpn_pool_tls, thread-local),
 * the first cache line of its cache (mlx5_qpn_pool_cache_line), the QPN's slot word, and the
 * range entry of its last hit. Everything in shared memory is read and written with relaxed
 * atomics (plain loads and stores on x86): only the cache's holder writes these fields, and a
 * thread that empties an idle cache (a *thief*) first makes sure that its owner is outside the
 * pool (the `alloc_seq`/`free_seq`/`busy` words against `gate`, below).
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @internal A slot word (one per QPN, 8 bytes):
 *  bits 0-23 next (in use: the index of the cache that handed it out), 24-47 aux (in use: the
 *  holder's process index, the unpublished flag and the queued flag: freed by another thread,
 *  waiting in the cache's queue), 48-49 state, 50-63 generation. The inline free releases only
 *  a word equal to its own hand-out's but for the generation, so a flagged word goes out of
 *  line.
 *  QUARANTINE stays after the drain (a drained slot is free by where it is, not by its word);
 *  the fast path reads the state only to require IN_USE on a free. */
#define MLX5_QPN_POOL_SLOT_NIL         0xFFFFFFu
#define MLX5_QPN_POOL_SLOT_STATE_SHIFT 48
#define MLX5_QPN_POOL_SLOT_FREE        0ull
#define MLX5_QPN_POOL_SLOT_IN_USE      1ull
#define MLX5_QPN_POOL_SLOT_QUARANTINE  2ull
#define MLX5_QPN_POOL_SLOT_GEN_SHIFT   50
#define MLX5_QPN_POOL_SLOT_GEN_MASK    0x3FFFu
/** @internal Everything of a slot word but its generation. */
#define MLX5_QPN_POOL_SLOT_OWNED_MASK ((1ull << MLX5_QPN_POOL_SLOT_GEN_SHIFT) - 1)

/** @internal `gate` bit: other threads queued frees of this cache's QPNs for its holder. */
#define MLX5_QPN_POOL_GATE_REMOTE 0x80000000u

/** @internal A chain of slots held by a cache: [head .. tail], `count` long (0: empty).
 *  `head` and `count` share one aligned 8-byte word (head the low half): the fast path writes
 *  both with one store (mlx5_qpn_pool_chain_set()). */
struct mlx5_qpn_pool_chain {
	uint32_t head;
	uint32_t count;
	uint32_t tail;
	uint32_t reserved;
} __attribute__((aligned(8)));

/** @internal The first cache line of a thread cache, in shared memory.
 *
 *  The owner announces that it is inside the pool before it loads `gate`: an inline call makes
 *  its sequence word odd, an out-of-line call sets `busy`. A thief stores `gate`, runs
 *  membarrier(2) (a full barrier on the owner's CPU), then loads the three: either the owner
 *  sees the thief or the thief sees the owner. The sequence words are the counters too, so an
 *  inline call stores nothing to announce itself that it would not store anyway. */
struct mlx5_qpn_pool_cache_line {
	uint64_t owner; /**< who claimed the cache (0: nobody) */
	uint32_t busy;  /**< the owner is inside an out-of-line pool call */
	/** Non-zero: take the slow path. Low 31 bits: a thief holds the cache (its process index + 1);
	 *  MLX5_QPN_POOL_GATE_REMOTE: frees queued by other threads wait to be applied. */
	uint32_t gate;
	struct mlx5_qpn_pool_chain ready; /**< free QPNs, LIFO: alloc pops here */
	struct mlx5_qpn_pool_chain open;  /**< released QPNs not yet time-stamped (quarantine) */
	/** Twice the allocations the cache served, plus one while its owner is inside an inline
	 *  alloc. Only the owner writes it (a thief's counts go to the pool's): the inline alloc adds
	 *  one on entry and one when it hands out a QPN, or takes its one back to go out of line. */
	uint64_t alloc_seq;
	uint64_t free_seq; /**< the same for frees */
};

/** @internal A thread's binding to the pool it used last (thread-local, process-local). */
struct mlx5_qpn_pool_binding {
	struct mlx5_qpn_pool *pool;             /**< NULL: no binding */
	struct mlx5_qpn_pool_cache_line *cache; /**< never NULL (a closed dummy if unbound) */
	uint64_t *slots;                        /**< the pool's slot words */
	/** Where a free links the QPN: `ready`, or `open` with a quarantine. */
	struct mlx5_qpn_pool_chain *into;
	/** cache->owner when bound (kept for the library; the inline calls compare `pool` only:
	 *  a destroy clears `pool` in every binding of the process, atomically) */
	uint64_t owner;
	uint64_t owned; /**< slot word of a QPN this cache handed out, generation 0 */
	/** Slot word of a QPN released into `into`, next and generation 0. A free xors the slot
	 *  word with `owned` (leaving only the generation if it is ours), then with this and the
	 *  next slot: the released word, generation kept. */
	uint64_t released;
	/** `into` may hold one more without a flush (batch; no quarantine) or a seal (batch - 1). */
	uint32_t into_max;
	/** The range of the last hit, copied when bound: QPNs [first, first + count) have slots
	 *  [base, base + count). A copy stays right for every slot the cache can hold: slots reach a
	 *  cache only through the slow path, which copies again, and a removed range's slots are
	 *  reused only after a grace period, by a range whose entry the next copy reads. */
	uint32_t first;
	uint32_t count;
	uint32_t base;
};

/** @internal Step a sequence word of the caller's cache (alloc_seq, free_seq) by `d` (+1 or -1).
 *  It has one writer (the cache's owner), so no locked instruction: on x86-64 one `inc`/`dec` of
 *  the aligned word (a thief reads the old or the new value), elsewhere (and under
 *  ThreadSanitizer, which must see it) a relaxed load and a store. `leave`: the step that ends a
 *  call, ordered after every store of the call (release; on x86 a compiler barrier suffices). */
static inline __attribute__((always_inline)) void
mlx5_qpn_pool_seq_step(uint64_t *seq, int d, int leave)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	if (leave)
		__atomic_signal_fence(__ATOMIC_RELEASE);
	if (d > 0)
		__asm__ volatile("incq %0" : "+m"(*seq));
	else
		__asm__ volatile("decq %0" : "+m"(*seq));
#else
	__atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + (uint64_t)(int64_t)d,
			 leave ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
#endif
}

/** @internal Set a chain's head and count. On x86-64 one aligned 8-byte store (single-copy
 *  atomic, and so is each half for a reader of one field): a pop or push of the fast path
 *  stores one word less. Elsewhere, and under ThreadSanitizer, two relaxed stores. Only the
 *  holder of the cache calls it, inside a call announced by its sequence word. */
static inline __attribute__((always_inline)) void
mlx5_qpn_pool_chain_set(struct mlx5_qpn_pool_chain *ch, uint32_t head, uint32_t count)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	typedef uint64_t __attribute__((may_alias)) mlx5_qpn_pool_u64a;

	__atomic_store_n((mlx5_qpn_pool_u64a *)&ch->head, ((uint64_t)count << 32) | head,
			 __ATOMIC_RELAXED);
#else
	__atomic_store_n(&ch->count, count, __ATOMIC_RELAXED);
	__atomic_store_n(&ch->head, head, __ATOMIC_RELAXED);
#endif
}

/** @internal A chain's head (low half) and count (high half), read as mlx5_qpn_pool_chain_set()
 *  writes them: one 8-byte load on x86-64 (the store before it forwards to a load of the same
 *  width and address; two 4-byte loads of an 8-byte store would wait for it to retire). */
static inline __attribute__((always_inline)) uint64_t
mlx5_qpn_pool_chain_get(const struct mlx5_qpn_pool_chain *ch)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	typedef uint64_t __attribute__((may_alias)) mlx5_qpn_pool_u64a;

	return __atomic_load_n((const mlx5_qpn_pool_u64a *)&ch->head, __ATOMIC_RELAXED);
#else
	uint64_t count = __atomic_load_n(&ch->count, __ATOMIC_RELAXED);

	return (count << 32) | __atomic_load_n(&ch->head, __ATOMIC_RELAXED);
#endif
}

/** @internal Enter an inline call: the sequence word turns odd, then `gate` may be loaded. */
static inline __attribute__((always_inline)) void
mlx5_qpn_pool_seq_enter(uint64_t *seq)
{
	mlx5_qpn_pool_seq_step(seq, 1, 0);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* membarrier(2) on the thief's side */
}

/** @internal Is `gate` closed (a thief, or queued remote frees)? Loaded with acquire: the
 *  chains are read only after it. On x86-64 one compare with the field in memory (a load is
 *  an acquire there; the fence keeps the compiler from reading the chains before it). */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_gate_closed(const struct mlx5_qpn_pool_cache_line *c)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	int ne;

	__asm__ volatile("cmpl $0, %1" : "=@ccne"(ne) : "m"(c->gate));
	__atomic_signal_fence(__ATOMIC_ACQUIRE);
	return ne;
#else
	return __atomic_load_n(&c->gate, __ATOMIC_ACQUIRE) != 0;
#endif
}

/** @internal Is the binding for this pool? `pool` is the one field of a binding another thread
 *  writes (a destroy clears it, atomically), so it is read as a relaxed atomic: on x86-64 one
 *  compare with the field in memory (what a plain load gives; the compiler's atomic load would
 *  be a separate move), elsewhere and under ThreadSanitizer an atomic load. */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_bound(struct mlx5_qpn_pool_binding *b, const struct mlx5_qpn_pool *pool)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	int ne;

	__asm__("cmpq %2, %1" : "=@ccne"(ne) : "m"(b->pool), "r"(pool));
	return !ne;
#else
	return __atomic_load_n(&b->pool, __ATOMIC_RELAXED) == pool;
#endif
}

/** @internal The calling thread's binding (initial-exec TLS, as DPDK's per-lcore variables). */
extern __thread struct mlx5_qpn_pool_binding mlx5_qpn_pool_tls
	__attribute__((tls_model("initial-exec")));

/** @internal The out-of-line paths of mlx5_qpn_pool_alloc_gen(), mlx5_qpn_pool_free() and
 *  mlx5_qpn_pool_free_gen(): the full calls (every check, binding, refill, flush, quarantine
 *  seal, remote frees, stealing). Same contract as those functions. */
int mlx5_qpn_pool_alloc_slow(struct mlx5_qpn_pool *pool, uint32_t *qpn, uint32_t *generation);
/** @internal see mlx5_qpn_pool_alloc_slow(); check_gen: compare the generation too. */
int mlx5_qpn_pool_free_slow(struct mlx5_qpn_pool *pool, uint32_t qpn, int check_gen,
			    uint32_t generation);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_POOL_CORE_H */
