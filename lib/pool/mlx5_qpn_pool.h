/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_POOL_H
#define MLX5_QPN_POOL_H

/**
 * @file
 * Lock-free pool of reserved QP numbers with a timewait quarantine.
 *
 * A pool is seeded with ranges of 24-bit QPNs (normally ranges reserved from an mlx5 device as
 * RESERVED_QPN objects) and hands them out at line rate:
 *
 * - every thread that calls the pool gets a cache of its own — EAL lcores, threads registered
 *   with rte_thread_register() and plain non-EAL threads alike — so the fast path touches only
 *   thread-local state plus the QPN's own 8-byte slot;
 * - caches exchange whole batches with a lock-free shared pool (one CAS per batch);
 * - a released QPN is kept in *quarantine* for at least the pool's quarantine time, measured on
 *   CLOCK_MONOTONIC, before any thread or process can get it again: a peer's IB CM keeps the old
 *   (GUID, QPN) pair in timewait and would reject a REQ that reuses it as stale;
 * - free of a QPN that is not allocated (never was, already freed by any thread, outside every
 *   range) is refused with -EINVAL at the call and changes nothing; of two frees of one QPN in
 *   flight at once, the QPN is released once (see mlx5_qpn_pool_free());
 * - alloc fails with -ENOSPC only when no QPN is free anywhere (other threads' caches and QPNs
 *   on their way between two of the pool's lists included), and with -EAGAIN when QPNs exist but
 *   all of them are in quarantine or in transit;
 * - a process that dies while sharing the pool costs the others nothing but its own QPNs, which
 *   come back after the quarantine (see mlx5_qpn_pool_reclaim_dead()).
 *
 * All state lives in one DPDK memzone and holds no process-local pointer, so primary and
 * secondary processes can share a pool (see mlx5_qpn_pool_lookup()).
 *
 * Thread safety: every function may be called concurrently from any thread of any process
 * that shares the pool, except mlx5_qpn_pool_destroy(), which must be the last call.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mlx5_qpn_pool_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest valid QPN: QPNs are 24 bits wide. */
#define MLX5_QPN_MAX 0xFFFFFFu

/** Longest pool name, without the terminating NUL. */
#define MLX5_QPN_POOL_NAMESIZE 24

/** Opaque pool handle; it points into DPDK shared memory. */
struct mlx5_qpn_pool;

/** Pool creation parameters. */
struct mlx5_qpn_pool_params {
	const char *name; /**< Unique name (at most MLX5_QPN_POOL_NAMESIZE characters). */
	uint64_t
		quarantine_ns; /**< Minimum time between a release and the next hand-out; 0: off. */
	uint32_t cache_size;   /**< QPNs a thread cache exchanges per batch (1..65536). */
	uint32_t capacity;     /**< Most QPNs the pool will ever hold (sum of all ranges). */
	int socket_id;         /**< NUMA socket for the memory, or SOCKET_ID_ANY. */
};

/** Counters of a pool, summed over all caches; a consistent snapshot only when idle. */
struct mlx5_qpn_pool_stats {
	uint64_t capacity;      /**< QPNs in all ranges. */
	uint64_t in_use;        /**< Allocated and not yet freed. */
	uint64_t in_quarantine; /**< Freed, not yet available again. */
	uint64_t free;   /**< Available now or after a drain: capacity - in_use - in_quarantine. */
	uint64_t allocs; /**< Successful allocations. */
	uint64_t frees;  /**< Successful frees. */
	uint64_t cache_hits;     /**< Allocations served by the caller's cache. */
	uint64_t cache_misses;   /**< Allocations that went to the shared pool. */
	uint64_t refills;        /**< Batches taken from the shared pool. */
	uint64_t flushes;        /**< Batches given back to the shared pool. */
	uint64_t steals;         /**< Caches of other threads emptied to avoid stranding QPNs. */
	uint64_t refused_frees;  /**< Frees refused with -EINVAL. */
	uint64_t enospc;         /**< Allocations that failed with -ENOSPC. */
	uint64_t eagain;         /**< Allocations that failed with -EAGAIN. */
	uint32_t nb_ranges;      /**< Ranges in the pool. */
	uint32_t nb_caches;      /**< Caches currently claimed by threads. */
	uint64_t dead_processes; /**< Dead processes whose QPNs were reclaimed (not reset). */
	uint64_t reclaimed;      /**< QPNs recovered from dead processes and interrupted calls. */
	/** Frees that had returned 0 but were refused when the QPN's cache applied them: a free
	 *  from a thread other than the allocating one that was in flight at the same time as
	 *  another free of the same QPN (see mlx5_qpn_pool_free()). Not counted in refused_frees. */
	uint64_t refused_async;
};

/**
 * Create a pool in DPDK shared memory.
 *
 * @param params  creation parameters; copied.
 * @return the pool, or NULL with rte_errno set: EINVAL (bad parameter), EEXIST (name in use),
 *         ENOMEM (no memory), E_RTE_SECONDARY (called from a secondary process).
 */
struct mlx5_qpn_pool *mlx5_qpn_pool_create(const struct mlx5_qpn_pool_params *params);

/**
 * Find a pool created by this or another process of the same DPDK instance.
 *
 * @return the pool, or NULL with rte_errno = ENOENT.
 */
struct mlx5_qpn_pool *mlx5_qpn_pool_lookup(const char *name);

/**
 * Destroy a pool. All QPNs are forgotten; the caller returns the ranges to their device.
 * Not thread safe: no other call on the pool may run or follow. NULL is ignored.
 *
 * Every thread of this process that used the pool loses its binding to it (the inline calls
 * compare only the pool pointer). A pool shared with other processes and created again at the
 * same address: each thread of the *other* processes must make one out-of-line call on the new
 * pool (e.g. mlx5_qpn_pool_cache_flush()) before its inline calls.
 */
void mlx5_qpn_pool_destroy(struct mlx5_qpn_pool *pool);

/**
 * Add the range [first, first + count) of QPNs; they become free at once.
 *
 * Ranges may be added while other threads allocate and free.
 *
 * @return 0; -EINVAL if the range is empty, holds QPN 0xFFFFFF (the multicast QPN: a range may
 *         end at 0xFFFFFE at most) or overlaps a range of the pool; -ENOSPC if the pool's
 *         capacity or range table is full.
 */
int mlx5_qpn_pool_range_add(struct mlx5_qpn_pool *pool, uint32_t first, uint32_t count);

/**
 * Take the range that starts at `first` out of the pool, so that its QPNs can go back to their
 * device. It succeeds only when every QPN of the range is free (not allocated, not in
 * quarantine, not in a busy thread's cache); idle caches are emptied first. The pool holds its
 * free list for one pass over it meanwhile: an allocation that finds nothing else free waits for
 * that pass. The range's slots are reused by a later range of the same size after a grace period
 * (1 s or the quarantine time, whichever is longer).
 *
 * If the caller dies during the call, the waiting threads notice it (bounded wait) and a reclaim
 * (mlx5_qpn_pool_reclaim_dead()) puts the pool back in a consistent state, with the range in it.
 *
 * @return 0; -EBUSY if some of its QPNs are not free (try again later); -ENOENT if no range of
 *         the pool starts at `first`; -EINVAL.
 */
int mlx5_qpn_pool_range_remove(struct mlx5_qpn_pool *pool, uint32_t first);

/** @internal The slow path of mlx5_qpn_pool_alloc_gen() through locals: the caller's variables
 *  never reach an out-of-line call, so the compiler may keep them in registers. They are
 *  written on failure too (0), as the callers' compilers now see every path. */
static inline int
mlx5_qpn_pool_alloc_out(struct mlx5_qpn_pool *pool, uint32_t *qpn, uint32_t *generation)
{
	uint32_t q = 0, g = 0;
	int rc = mlx5_qpn_pool_alloc_slow(pool, qpn != NULL ? &q : NULL,
					  generation != NULL ? &g : NULL);

	if (qpn != NULL)
		*qpn = q;
	if (generation != NULL)
		*generation = g;
	return rc;
}

/**
 * Allocate one QPN.
 *
 * Inline (as rte_mempool_get()): a hit in the calling thread's cache touches the thread's
 * binding, one cache line of its cache and the QPN's slot, with no atomic read-modify-write and
 * no call; everything else (the first call of a thread, an empty cache, a thief holding the
 * cache, queued remote frees, a QPN of another range than the last one) is the out-of-line
 * mlx5_qpn_pool_alloc_slow(). The layout this inlines is in mlx5_qpn_pool_core.h: ABI.
 *
 * @param pool            the pool.
 * @param[out] qpn        the QPN (0 when the call fails).
 * @param[out] generation if not NULL, the QPN's generation: it changes at every hand-out, so a
 *                        data path can tell an old owner's completion from a new owner's.
 * @return 0; -ENOSPC if no QPN is free anywhere; -EAGAIN if every free QPN is in quarantine
 *         (mlx5_qpn_pool_next_release() tells when one comes back); -EINVAL on NULL arguments.
 */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_alloc_gen(struct mlx5_qpn_pool *pool, uint32_t *qpn, uint32_t *generation)
{
	struct mlx5_qpn_pool_binding *b = &mlx5_qpn_pool_tls;
	struct mlx5_qpn_pool_cache_line *c = b->cache;
	uint32_t n, s, off, next;
	uint64_t w, hc, *slots;

	/* Bound to this pool (a destroy clears every thread's binding to it: no owner check). */
	if (__builtin_expect(!mlx5_qpn_pool_bound(b, pool) || qpn == NULL, 0))
		return mlx5_qpn_pool_alloc_out(pool, qpn, generation);
	mlx5_qpn_pool_seq_enter(&c->alloc_seq);
	/* The gate first: the chain is read only after it (acquire). A chain read before could be
	 * one a thief emptied and let go of between the two reads. */
	if (__builtin_expect(mlx5_qpn_pool_gate_closed(c), 0))
		goto slow;
	hc = mlx5_qpn_pool_chain_get(&c->ready);
	n = (uint32_t)(hc >> 32);
	if (__builtin_expect(n == 0, 0))
		goto slow;
	s = (uint32_t)hc;
	off = s - b->base;
	if (__builtin_expect(off >= b->count, 0))
		goto slow; /* another range: the slow path looks it up and keeps it */
	slots = b->slots;  /* read once: every atomic below makes the compiler read again */
	w = __atomic_load_n(&slots[s], __ATOMIC_RELAXED);
	next = (uint32_t)(w & MLX5_QPN_POOL_SLOT_NIL);
	mlx5_qpn_pool_chain_set(&c->ready, next, n - 1);
	/* The next one's slot: a cold line when QPNs come back from a long quarantine. */
	__builtin_prefetch(&slots[next]);
	/* In use, naming our cache, the generation one up: all ones below the generation plus one
	 * carries into it (and wraps it at 14 bits), leaving zeros for `owned`. Only we write the
	 * slot until it is freed. */
	w = ((w | MLX5_QPN_POOL_SLOT_OWNED_MASK) + 1) | b->owned;
	__atomic_store_n(&slots[s], w, __ATOMIC_RELAXED);
	*qpn = b->first + off;
	mlx5_qpn_pool_seq_step(&c->alloc_seq, 1, 1);
	if (generation != NULL)
		*generation = (uint32_t)(w >> MLX5_QPN_POOL_SLOT_GEN_SHIFT);
	return 0;
slow:
	mlx5_qpn_pool_seq_step(&c->alloc_seq, -1, 1);
	return mlx5_qpn_pool_alloc_out(pool, qpn, generation);
}

/** Allocate one QPN; mlx5_qpn_pool_alloc_gen() without the generation. */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_alloc(struct mlx5_qpn_pool *pool, uint32_t *qpn)
{
	return mlx5_qpn_pool_alloc_gen(pool, qpn, NULL);
}

/**
 * Allocate n QPNs, all or none.
 *
 * Until the call returns 0, the QPNs it took are handed to nobody: a free of one of them (a
 * guessed or stale QPN, from any thread) is refused with -EINVAL, and a failing call gives them
 * back without quarantine.
 *
 * @return 0 with qpns[0..n) filled; otherwise nothing is allocated and the error is that of
 *         mlx5_qpn_pool_alloc().
 */
int mlx5_qpn_pool_alloc_bulk(struct mlx5_qpn_pool *pool, uint32_t *qpns, unsigned int n);

/** @internal The inline release of mlx5_qpn_pool_free() and mlx5_qpn_pool_free_gen(). */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_free_inline(struct mlx5_qpn_pool *pool, uint32_t qpn, int check_gen,
			  uint32_t generation)
{
	struct mlx5_qpn_pool_binding *b = &mlx5_qpn_pool_tls;
	struct mlx5_qpn_pool_cache_line *c = b->cache;
	struct mlx5_qpn_pool_chain *into = b->into;
	uint32_t n, s, off, head;
	uint64_t w, hc, *slot;

	if (__builtin_expect(!mlx5_qpn_pool_bound(b, pool), 0))
		return mlx5_qpn_pool_free_slow(pool, qpn, check_gen, generation);
	/* One compare: in the range of the last hit (a QPN above 0xFFFFFE never is). */
	off = qpn - b->first;
	if (__builtin_expect(off >= b->count, 0))
		return mlx5_qpn_pool_free_slow(pool, qpn, check_gen, generation);
	s = b->base + off;
	slot = &b->slots[s]; /* read once: every atomic below makes the compiler read again */
	mlx5_qpn_pool_seq_enter(&c->free_seq);
	/* The gate first, then the slot and the chain (see mlx5_qpn_pool_alloc_gen()). */
	if (__builtin_expect(mlx5_qpn_pool_gate_closed(c), 0))
		goto slow;
	/* Handed out by our cache (in use, published, naming it): then only the generation is
	 * left. */
	w = __atomic_load_n(slot, __ATOMIC_RELAXED) ^ b->owned;
	hc = mlx5_qpn_pool_chain_get(into);
	n = (uint32_t)(hc >> 32);
	/* Ours, of the generation asked for; and no flush (full `ready`) or seal (`open` reaching a
	 * batch) due. Anything else, refusals included, is decided by the slow path. */
	if (__builtin_expect(n >= b->into_max || (w & MLX5_QPN_POOL_SLOT_OWNED_MASK) != 0 ||
				     (check_gen &&
				      (uint32_t)(w >> MLX5_QPN_POOL_SLOT_GEN_SHIFT) !=
					      (generation & MLX5_QPN_POOL_SLOT_GEN_MASK)),
			     0))
		goto slow;
	/* Linked to the chain's head (none if empty), the generation kept. */
	head = (uint32_t)hc;
	if (__builtin_expect(n == 0, 0)) {
		head = MLX5_QPN_POOL_SLOT_NIL;
		__atomic_store_n(&into->tail, s, __ATOMIC_RELAXED);
	}
	__atomic_store_n(slot, head ^ b->released ^ w, __ATOMIC_RELAXED);
	mlx5_qpn_pool_chain_set(into, s, n + 1);
	mlx5_qpn_pool_seq_step(&c->free_seq, 1, 1);
	return 0;
slow:
	mlx5_qpn_pool_seq_step(&c->free_seq, -1, 1);
	return mlx5_qpn_pool_free_slow(pool, qpn, check_gen, generation);
}

/**
 * Release a QPN into quarantine (or straight back to the pool if the quarantine time is 0).
 *
 * A QPN freed by the thread that allocated it (more precisely: the thread that holds the cache
 * it came from) is released at once, with no atomic read-modify-write, inline (as
 * rte_mempool_put(); the out-of-line part is mlx5_qpn_pool_free_slow()). A QPN freed by another
 * thread or process is checked, then queued for the allocating cache, whose holder releases it
 * on its next pool call; until then mlx5_qpn_pool_qpn_state() reports it allocated and its
 * quarantine has not started. Nothing is stranded: an exited thread's queue is applied at once
 * by the freer, and an idle thread's when another thread's allocation finds the pool dry and
 * empties idle caches (its quarantine then starts at that moment: late, never early).
 *
 * Double frees are refused with -EINVAL at the call, from any thread or process: a free that
 * comes after an accepted one (it began after that one returned) is refused, also while the
 * accepted free still waits in the allocating cache's queue, also when the allocating thread
 * frees twice while another thread holds its cache. The one exception is two frees of one QPN
 * in flight at once, at least one of them from a thread other than the allocating one: both
 * may return 0; the QPN is then released once and the other free is refused when the queue is
 * applied, counted in mlx5_qpn_pool_stats.refused_async. The pool stays consistent either way
 * (the QPN is never released twice). A late free after the QPN was handed out again frees the
 * new hand-out: only mlx5_qpn_pool_free_gen() refuses that.
 *
 * @return 0; -EINVAL if the QPN is not allocated (never was, already freed, outside every range);
 *         the pool is then unchanged and the refusal is counted.
 */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_free(struct mlx5_qpn_pool *pool, uint32_t qpn)
{
	return mlx5_qpn_pool_free_inline(pool, qpn, 0, 0);
}


/**
 * Release a QPN only if it still has the given generation (guards against a late double free
 * by a previous owner after the QPN was handed out again).
 *
 * A generation whose hand-out was freed already is refused at the call, whether that free has
 * been applied (the QPN free, in quarantine or handed out again) or still waits in the
 * allocating cache's queue; the exception of mlx5_qpn_pool_free() (two frees in flight at once)
 * applies. Generations wrap at 2^14 hand-outs of one QPN.
 *
 * @return 0; -EINVAL as mlx5_qpn_pool_free(), or if the generation does not match.
 */
static inline __attribute__((always_inline)) int
mlx5_qpn_pool_free_gen(struct mlx5_qpn_pool *pool, uint32_t qpn, uint32_t generation)
{
	return mlx5_qpn_pool_free_inline(pool, qpn, 1, generation);
}

/**
 * Release n QPNs. Each is checked on its own: the valid ones are released even when others
 * are refused.
 *
 * @return 0 if all were released; -EINVAL if at least one was refused.
 */
int mlx5_qpn_pool_free_bulk(struct mlx5_qpn_pool *pool, const uint32_t *qpns, unsigned int n);

/**
 * Read the state of one QPN.
 *
 * @param pool             the pool.
 * @param qpn              the QPN.
 * @param[out] generation  if not NULL, the current generation.
 * @return 1 if allocated, 0 if free or in quarantine, -EINVAL if outside every range.
 */
int mlx5_qpn_pool_qpn_state(struct mlx5_qpn_pool *pool, uint32_t qpn, uint32_t *generation);

/**
 * Recover the QPNs of processes that died while sharing the pool.
 *
 * Every process that uses the pool has an entry in the pool's process table (pid and start
 * time, so a recycled pid is not taken for the dead process); every allocated QPN records the
 * entry of the process that allocated it. For each process that is gone (no such pid, another
 * start time, or a zombie), this call takes over its caches (even one it died inside), and puts
 * every QPN it held in use, had released, or had cached into quarantine, stamped now: none comes
 * back before the quarantine time has passed since the death was noticed. QPNs it had cached
 * that were never quarantined go straight back to the free pool; cached QPNs that came back from
 * a quarantine are quarantined again (late, never early: the drain does not rewrite the slots of
 * the QPNs it releases, so they cannot be told from released ones). A range call
 * (mlx5_qpn_pool_range_remove(), mlx5_qpn_pool_range_add()) the process died in is undone or
 * completed so that the pool is consistent, and the in_use and in_quarantine statistics are set
 * from a census of the slots (a process killed inside a call may have counted it or not).
 *
 * The pool runs the same check by itself, rate-limited, when an allocation finds nothing free
 * and when a thread waits for a range removal whose caller died; this call makes it happen now.
 * While it runs (an audit of the whole pool, O(capacity)) other threads work without their
 * caches and cacheless calls wait for it; it gives up after 0.5 s if a live thread stays inside
 * the pool that long.
 *
 * @param pool  the pool.
 * @return the number of QPNs recovered (>= 0; 0 when no process died); -EINVAL (bad pool);
 *         -EAGAIN (live threads did not leave the pool in time, or the membarrier(2) needed to
 *         hold other processes' caches is unavailable: try again); -ENOMEM.
 *
 * Thread safety: any thread of any process sharing the pool; concurrent calls serialise.
 */
int mlx5_qpn_pool_reclaim_dead(struct mlx5_qpn_pool *pool);

/**
 * Earliest CLOCK_MONOTONIC time (ns) at which a quarantined QPN may become free.
 *
 * @return 0 and *when_ns; -ENOENT if nothing is in quarantine.
 */
int mlx5_qpn_pool_next_release(struct mlx5_qpn_pool *pool, uint64_t *when_ns);

/**
 * Move every QPN whose quarantine has ended back to the free pool now (allocations do this on
 * their own when a cache refills; a control thread may call it to keep the counters current).
 *
 * @return the number of QPNs released from quarantine (>= 0); -EINVAL.
 */
int mlx5_qpn_pool_drain(struct mlx5_qpn_pool *pool);

/**
 * Give the calling thread's cache back to the shared pool (ready QPNs are returned, QPNs it
 * holds in quarantine are sealed and handed on). A thread that stops using a pool may call this;
 * a thread that exits does it automatically, and other threads take idle caches when the shared
 * pool runs dry, so no QPN is ever stranded.
 */
void mlx5_qpn_pool_cache_flush(struct mlx5_qpn_pool *pool);

/** The quarantine time in ns. */
uint64_t mlx5_qpn_pool_quarantine_ns(const struct mlx5_qpn_pool *pool);

/** The pool's name. */
const char *mlx5_qpn_pool_name(const struct mlx5_qpn_pool *pool);

/**
 * Read the counters.
 *
 * @return 0; -EINVAL on NULL arguments.
 */
int mlx5_qpn_pool_stats_get(struct mlx5_qpn_pool *pool, struct mlx5_qpn_pool_stats *stats);

/** Zero the event counters (not the QPN accounting). */
void mlx5_qpn_pool_stats_reset(struct mlx5_qpn_pool *pool);

/** Print the pool's parameters, ranges and counters. */
void mlx5_qpn_pool_dump(FILE *f, struct mlx5_qpn_pool *pool);

/** Current CLOCK_MONOTONIC time in ns: the clock of the quarantine. */
uint64_t mlx5_qpn_clock_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_POOL_H */
