/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_POOL_OPS_H
#define QPN_POOL_OPS_H

/*
 * Internal to lib/pool/ (not installed): what the pool's source files share. The parts of the
 * pool (PoolRef .. Pool below), and the fast paths (alloc_one, free_one, qpn_to_slot,
 * enter/leave) defined here inline so that they inline into the public entry points of
 * qpn_pool.cpp exactly as in one file. The rest is declared here and defined in the file named
 * for it:
 *   qpn_pool.cpp             create / lookup / free, the public alloc and free entry points
 *   qpn_pool_stack.cpp       the shared free stack (push, pop)
 *   qpn_pool_quarantine.cpp  buckets, epochs, drain, next release
 *   qpn_pool_cache.cpp       thread caches: binding, thread exit, stealing, refill
 *   qpn_pool_remote.cpp      remote frees: queue, drain, rescue
 *   qpn_pool_range.cpp       the range table: add, remove, lookup slow paths
 *   qpn_pool_registry.cpp    process-local registry of pools, this process's table entry
 *   qpn_pool_recover.cpp     crash recovery: reclaim and audit
 *   qpn_pool_stats.cpp       counters, dump
 * Everything is in qpn::detail with hidden visibility: no new symbol leaves the library, and
 * calls between these files are direct, never through the PLT.
 */

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <mutex>

#include <pthread.h>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "mlx5_qpn_log.h"
#include <rte_prefetch.h>

#include "qpn_pool_internal.h"
#include "qpn_pool_test_hooks.h"
#include "qpn_shm.h"

extern int mlx5_qpn_pool_logtype;
#define POOL_LOG(level, ...) MLX5_QPN_LOG(pool, level, __VA_ARGS__)

#pragma GCC visibility push(hidden)

namespace qpn::detail {

constexpr auto rlx = std::memory_order_relaxed;
constexpr auto acq = std::memory_order_acquire;
constexpr auto rel = std::memory_order_release;
constexpr auto acq_rel = std::memory_order_acq_rel;
constexpr auto sc = std::memory_order_seq_cst;

/*
 * Per-cache counters have one writer (the cache's owner, or a thief counting in its own cache),
 * so they are bumped with a load and a store: a locked read-modify-write here would cost more
 * than the whole allocation. Readers (stats) may see a value a moment old.
 */
inline void
bump(std::atomic<uint64_t> &c, uint64_t n = 1)
{
	c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/* Count n allocs (frees) that the caller's own cache served into its sequence word: two per
 * operation, the parity stays even. The parity is the owner's inline busy flag, stepped without
 * a locked instruction before the owner looks at `gate`: only the owner writes the word (a
 * thief's counts go to the pool's counters). */
inline void
count_own(std::atomic<uint64_t> &seq, uint64_t n = 1)
{
	bump(seq, 2 * n);
}

/* The operations a sequence word counts (an inline call in progress is not one yet). */
constexpr uint64_t
seq_count(uint64_t seq)
{
	return seq >> 1;
}

/* Is v's owner outside the pool: in no out-of-line call (`busy`), no inline alloc or free (odd
 * sequence word)? Meaningful after the thief's gate store and heavy_barrier(). */
inline bool
outside(const qpn::Cache &v)
{
	return v.busy.load(std::memory_order_acquire) == 0 &&
	       ((v.alloc_seq.load(std::memory_order_acquire) |
		 v.free_seq.load(std::memory_order_acquire)) &
		1) == 0;
}

/* Hold cache v's gate as thief `thief` (a process index + 1, or kAnyThief); false if another
 * thief holds it. The remote bit may come and go meanwhile: it is kept. */
inline bool
hold_gate(qpn::Cache &v, uint32_t thief, std::memory_order mo)
{
	uint32_t g = v.gate.load(std::memory_order_relaxed);
	do {
		if ((g & qpn::kGateThief) != 0)
			return false;
	} while (!v.gate.compare_exchange_weak(g, g | thief, mo, std::memory_order_relaxed));
	return true;
}

/* Let go of a cache held with hold_gate(), keeping its remote bit. */
inline void
release_gate(qpn::Cache &v)
{
	v.gate.fetch_and(qpn::kGateRemote, std::memory_order_release);
}

/* Forget a cache's chains without giving them back: for a cache whose chains cannot be trusted
 * (its owner or a thief died inside it); a reclaim's sweep finds their QPNs unreachable. */
inline void
drop_chains(qpn::Cache &v)
{
	for (qpn::Chain *c : {&v.ready, &v.spare, &v.open}) {
		c->count.store(0, std::memory_order_relaxed);
		c->head.store(qpn::kNil, std::memory_order_relaxed);
		c->tail.store(qpn::kNil, std::memory_order_relaxed);
	}
	v.moving.store(0, std::memory_order_relaxed);
}

/* ---- clock ---------------------------------------------------------------------------------- */

#ifdef QPN_POOL_TEST_HOOKS
/* Test seam (qpn_pool_test_hooks.h). Defined in qpn_pool.cpp. */
extern std::atomic<int64_t> g_clock_offset;
#endif

/* The pool's clock: CLOCK_MONOTONIC, plus the test offset in a build with the test hooks. */
inline uint64_t
now_ns()
{
	uint64_t t = qpn::shm::mono_ns();
#ifdef QPN_POOL_TEST_HOOKS
	t += static_cast<uint64_t>(g_clock_offset.load(std::memory_order_relaxed));
#endif
	return t;
}

/* CLOCK_MONOTONIC without the test offset: deadlines of bounded waits and rate limits. */
inline uint64_t
real_ns()
{
	return qpn::shm::mono_ns();
}

/* ---- asymmetric fence for cache stealing (qpn_pool_cache.cpp says why) -------------------- */

enum class Barrier { kUnknown, kPrivate, kGlobal, kNone };
extern std::atomic<int> g_barrier;
/* 1: this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0: it could not be, -1: not
 * yet asked (again -1 in a fork child: registration is per mm). */
extern std::atomic<int> g_fenced;

Barrier barrier_kind();
/* Register this process for the expedited global barrier (once); true if it is registered. */
bool fence_register();

/*
 * How far a thief's barrier must reach to fence a cache's owner (its owner word):
 *  - kProcess: a thread of this process (MEMBARRIER_CMD_PRIVATE_EXPEDITED, IPIs);
 *  - kExpedited: a process whose pool table entry says it registered for the expedited global
 *    barrier (MEMBARRIER_CMD_GLOBAL_EXPEDITED, IPIs to the CPUs running such processes);
 *  - kGlobal: any other (MEMBARRIER_CMD_GLOBAL: an RCU grace period, whose kthreads compete for
 *    the CPU with busy-polling lcores: measured 70-260 ms on the 2-core VM with both cores
 *    polling, every cross-process steal an allocation stall that long).
 * Ordered: a barrier for several owners takes the widest.
 */
enum class Scope { kProcess = 0, kExpedited = 1, kGlobal = 2 };
Scope fence_scope(const mlx5_qpn_pool *p, uint64_t owner);
/* Full barrier on every CPU running a thread of the scope; false if there is none to use. */
bool heavy_barrier(Scope s);

/* ---- process-local registry: which pools are alive (for thread-exit flushes) ----------------- */

/* Recursive: a thread that exits holds it (on_thread_exit) while release_cache() may rescue a
 * remote queue, whose try_hold() asks my_proc(), which takes it too. */
extern std::recursive_mutex g_reg_mutex;
struct RegEntry {
	mlx5_qpn_pool *pool;
	uint64_t uid;
	int32_t proc; /* this process's index in the pool's process table; -1: not yet */
};
extern RegEntry g_registry[64];

void registry_add(mlx5_qpn_pool *p);
/* Forget p, and clear every thread's inline binding to it (bind_link()). */
void registry_del(mlx5_qpn_pool *p);
/* The calling thread's inline binding (mlx5_qpn_pool_tls) joins / leaves the process-wide list
 * that registry_del() clears: the inline calls compare the pool pointer only, so a binding to a
 * destroyed pool must not survive it (a pool created again at the same address would match). */
void bind_link();
void bind_unlink();
/* In a fork child: the list names the parent's threads; start it again empty. */
void bind_forget_all();
/* This process's index in the pool's table (process-local cache in the registry). */
int32_t my_proc(mlx5_qpn_pool *p);
/* Is the pool of a thread binding still alive in this process? (g_reg_mutex held) */
bool registry_alive(const mlx5_qpn_pool *p, uint64_t uid);

/* ---- the algorithms, as members of a thin accessor ------------------------------------------ */

/* On declarations too: the callers in other files must know the slow paths are cold, so that
 * they move the calls out of line (into their .cold part) as in one file. */
#define QPN_HOT  inline __attribute__((always_inline))
#define QPN_COLD __attribute__((noinline, cold))

/*
 * The pool's algorithms, in parts: each part is the interface of one thing the pool holds in
 * shared memory, and sees only the parts below it (the compiler refuses a call upwards):
 *
 *   PoolRef      the pool and its slot words
 *   RangeMap     QPN <-> slot through the range table        qpn_pool_range.cpp
 *   FreeStack    the shared free stack of batches             qpn_pool_stack.cpp
 *   Quarantine   the time buckets, epochs, drain, seal        qpn_pool_quarantine.cpp
 *   Recovery     dead processes, the stop-the-world reclaim   qpn_pool_recover.cpp
 *   CacheChains  a cache's chains to and from the shared homes qpn_pool_cache.cpp
 *   RemoteQueue  frees queued for a cache's holder            qpn_pool_remote.cpp
 *   Pool         alloc and free: a cache, or none; refill, steal, the -ENOSPC verdict
 *
 * Each part is one pointer (single inheritance, no virtual): a part's call into a lower one is
 * a direct call on the same object, as in one class. Hidden, with the fast path inline below:
 * the public entry points inline it, not call it through the PLT.
 */
class PoolRef {
public:
	explicit PoolRef(mlx5_qpn_pool *p) : p_(p) {}

	std::atomic<uint64_t> &slot(uint32_t i) const
	{
		return reinterpret_cast<std::atomic<uint64_t> *>(p_ + 1)[i];
	}
	uint32_t cache_index(const Cache *c) const { return static_cast<uint32_t>(c - p_->caches); }

	mlx5_qpn_pool *p_;
};

/* QPN <-> slot through the range table. The cache's hint makes the common case one compare. */
class RangeMap : public PoolRef {
public:
	using PoolRef::PoolRef;
	bool qpn_to_slot(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const;
	QPN_COLD bool qpn_to_slot_slow(uint32_t qpn, uint32_t *slot_out,
				       std::atomic<uint32_t> *hint) const;
	uint32_t slot_to_qpn(uint32_t s, std::atomic<uint32_t> *hint) const;
	QPN_COLD uint32_t slot_to_qpn_slow(uint32_t s, std::atomic<uint32_t> *hint) const;
};

/* The shared free stack of batches (a Treiber stack, ABA-tagged). */
class FreeStack : public RangeMap {
public:
	using RangeMap::RangeMap;
	/* Make [head .. tail] (linked by next) a batch of `count`: head's aux, tail's aux. */
	void chain_write_batch(uint32_t head, uint32_t tail, uint32_t count);
	void push_free(uint32_t head, uint32_t last_tail);
	bool pop_free(Chain &into);
};

/* The shared quarantine: a ring of time buckets of sealed batches. */
class Quarantine : public FreeStack {
public:
	using FreeStack::FreeStack;
	void push_quarantine(uint32_t head, uint32_t tail, uint64_t stamp);
	uint64_t bucket_expiry(uint64_t tag, uint64_t now) const;
	uint64_t drain(uint64_t now);
	bool quarantine_next(uint64_t *when) const;
	/* A cache's `open` chain into a bucket, stamped `stamp`. */
	void seal(Chain &open, uint64_t stamp);
	/* seal() of c's own `open`, which then holds no remote free (`open_remote`). */
	void seal_open(Cache &c, uint64_t stamp)
	{
		seal(c.open, stamp);
		c.open_remote.store(0, rlx);
	}
};

/* Crash recovery: which processes are dead, and the reclaim that recovers what they held. */
class Recovery : public Quarantine {
public:
	using Quarantine::Quarantine;
	bool holder_dead(uint32_t plus1) const;
	QPN_COLD bool maybe_reclaim(Cache *self);
	int reclaim(Cache *self, bool block);
	int reclaim_locked(Cache *self);
	void fix_counters(uint64_t in_use, uint64_t in_quarantine); /* qpn_pool_stats.cpp */
	QPN_COLD void wait_stw();
};

/* A cache's chains (ready, spare, open) and their exchanges with the shared homes. */
class CacheChains : public Recovery {
public:
	using Recovery::Recovery;
	template <bool kCas>
	int link_freed(Cache &c, uint32_t s, uint64_t w, bool check_gen, uint32_t gen, bool own);
	QPN_COLD void rotate_full(Cache &c, uint32_t s);
	void give_back(Chain &c);
	void flush_cache(Cache &c);
	void seal_at_refill(Cache &c);
	void join_short(Cache &c);

	/* What the owner's own release of a QPN compares and writes, without a call per QPN (the
	 * inline free through the binding, free_bulk's run): the slot word of a QPN cache c handed
	 * out and of one released into its chain (generation and next 0), and how long the chain
	 * may be before the release is the slow path's (link_freed(): a full `ready` rotates at
	 * batch, an `open` reaching batch is sealed at batch - 1). */
	struct OwnRelease {
		uint64_t owned;
		uint64_t released;
		uint32_t into_max;
	};
	OwnRelease own_release(const Cache &c) const
	{
		const bool quar = p_->quarantine_ns != 0;
		return {slot_make(cache_index(&c), owner_holder(c.owner.load(rlx)), kInUse, 0),
			slot_make(0, kNil, quar ? kQuarantine : kFree, 0),
			quar ? p_->batch - 1 : p_->batch};
	}
};

/* Frees of a cache's in-use QPNs by threads that do not hold it (qpn_pool_remote.cpp). */
class RemoteQueue : public CacheChains {
public:
	using CacheChains::CacheChains;
	QPN_COLD int free_remote(Cache *self, uint32_t s, uint64_t w);
	bool mark_queued(uint32_t s, uint64_t w);
	int withdraw(std::atomic<uint64_t> &q, uint64_t e);
	QPN_COLD void drain_remote(Cache &c, bool own);
	bool try_hold(Cache &v);
	void rescue(Cache &v);
	bool remote_empty(const Cache &v) const;
};

/* Alloc and free, through the caller's cache or without one; refill, stealing, the verdict. */
class Pool : public RemoteQueue {
public:
	using RemoteQueue::RemoteQueue;
	int alloc_one(Cache *c, uint32_t *qpn, uint32_t *gen, uint32_t flags = 0);
	QPN_COLD int alloc_bypass(uint32_t *qpn, uint32_t *gen, uint32_t flags = 0);
	int free_one(Cache *c, uint32_t qpn, bool check_gen, uint32_t gen);
	QPN_COLD int free_shared(Cache *c, uint32_t s, uint64_t w, bool check_gen, uint32_t gen);
	QPN_COLD int refill(Cache &c);
	unsigned steal(Cache *self);
	bool anything_held(const Cache *self) const;
	bool nothing_anywhere(const Cache *self) const;
	QPN_COLD bool wait_collector(Cache *self);
};

QPN_HOT bool
RangeMap::qpn_to_slot(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const
{
	if (hint != nullptr) {
		/* p_ read into a local: GCC then keeps it in a register across the callers' loop
		 * instead of reloading it (callgrind counts one instruction less per bulk call). */
		const mlx5_qpn_pool *p = p_;
		uint32_t h = hint->load(rlx);
		if (h < p->nb_ranges.load(acq)) {
			const Range &r = p->ranges[h];
			uint32_t f = r.first.load(rlx);
			if (qpn - f < r.count.load(rlx)) {
				*slot_out = r.base.load(rlx) + (qpn - f);
				return true;
			}
		}
	}
	return qpn_to_slot_slow(qpn, slot_out, hint);
}

QPN_HOT uint32_t
RangeMap::slot_to_qpn(uint32_t s, std::atomic<uint32_t> *hint) const
{
	const mlx5_qpn_pool *p = p_; /* in a local: as in qpn_to_slot() */
	uint32_t h = hint != nullptr ? hint->load(rlx) : 0;
	if (h < p->nb_ranges.load(acq)) {
		const Range &r = p->ranges[h];
		uint32_t b = r.base.load(rlx);
		if (s - b < r.count.load(rlx))
			return r.first.load(rlx) + (s - b);
	}
	return slot_to_qpn_slow(s, hint);
}

QPN_HOT int
Pool::alloc_one(Cache *c, uint32_t *qpn, uint32_t *gen, uint32_t flags)
{
	/* Hits are not counted here: stats derive them (allocs - misses + failures). */
	if (c->ready.count.load(rlx) == 0) {
		if (c->spare.count.load(rlx) == 0)
			bump(c->misses);
		int rc = refill(*c);
		if (rc != 0)
			return rc;
	}
	uint32_t s = c->ready.head.load(rlx);
	uint32_t left = c->ready.count.load(rlx) - 1;
	uint64_t w = slot(s).load(rlx);
	c->ready.count.store(left, rlx);
	if (left != 0) {
		uint32_t nx = slot_next(w);
		c->ready.head.store(nx, rlx);
		rte_prefetch0(&slot(nx));
	}
	/* The slot is ours alone (it sat in our cache): a plain store suffices. It names our cache
	 * (only its holder may write the slot until it is freed) and records the holder's process
	 * (from the owner word, on the cache line already loaded), so that a reclaim can recover it
	 * if the process dies. */
	uint32_t g = (slot_gen(w) + 1) & kGenMask;
	slot(s).store(slot_make(cache_index(c), owner_holder(c->owner.load(rlx)) | flags, kInUse,
				g),
		      rlx);
	*qpn = slot_to_qpn(s, &c->range_hint);
	if (gen != nullptr)
		*gen = g;
	return 0;
}

/* In use, handed out (not inside a bulk that may roll back), not freed already by a free that
 * waits in a remote queue (kQueued), and of the given generation. */
QPN_HOT bool
freeable(uint64_t w, bool check_gen, uint32_t gen)
{
	return slot_state(w) == kInUse && (slot_aux(w) & (kUnpublished | kQueued)) == 0 &&
	       (!check_gen || slot_gen(w) == (gen & kGenMask));
}

/* What the holder of cache `me` checks before it applies a queued free of generation gen:
 * freeable() and named by `me`, the queued mark ignored (the entry's own freer sets it, after
 * the entry: it may be there or not yet). */
QPN_HOT bool
applicable(uint64_t w, uint32_t gen, uint32_t me)
{
	return freeable(slot_with_aux(w, slot_aux(w) & ~kQueued), true, gen) && slot_next(w) == me;
}

/*
 * Release slot `s` (word `w`: freeable) into cache c's chains. The caller holds c. kCas: the slot
 * was handed out without a cache, so any thread may free it and a CAS out of kInUse decides
 * between racing frees (the loser is refused). Otherwise the slot is named by c and nobody but
 * c's holder writes it: a plain store.
 */
template <bool kCas>
QPN_HOT int
CacheChains::link_freed(Cache &c, uint32_t s, uint64_t w, bool check_gen, uint32_t gen, bool own)
{
	const bool quar = p_->quarantine_ns != 0;
	Chain &into = quar ? c.open : c.ready;
	uint32_t n = into.count.load(rlx);
	/* Without quarantine a full `ready` starts a new chain with this QPN (below): link to none. */
	const bool full = !quar && n >= p_->batch;
	uint32_t head = n != 0 && !full ? into.head.load(rlx) : kNil;
	auto &sw = slot(s);
	if (kCas) {
		for (;;) {
			uint64_t nw = slot_make(head, kNil, quar ? kQuarantine : kFree,
						slot_gen(w));
			if (sw.compare_exchange_weak(w, nw, acq_rel, rlx))
				break;
			if (!freeable(w, check_gen, gen) || slot_next(w) != kNil)
				return -EINVAL;
		}
	} else {
		sw.store(slot_make(head, kNil, quar ? kQuarantine : kFree, slot_gen(w)), rlx);
	}
	if (own) {
		count_own(c.free_seq);
	} else {
		p_->bypass_frees.fetch_add(1, rlx);
		if (quar)
			p_->bypass_quarantined.fetch_add(1, rlx);
	}
	QPN_TEST_HOOK_RLX(free_counted);
	if (unlikely(full)) {
		rotate_full(c, s);
		return 0;
	}
	into.head.store(s, rlx);
	if (n == 0)
		into.tail.store(s, rlx);
	into.count.store(n + 1, rlx);
	/* Counted in `frees` only: a pool with a quarantine quarantines every free (stats). */
	if (quar && n + 1 >= p_->batch)
		seal_open(c, now_ns());
	return 0;
}

/*
 * Release. A slot handed out by the caller's own cache (the common case) is freed with a plain
 * load and store: only the holder of the cache that handed it out writes an in-use slot. A slot
 * of another cache goes to that cache's remote queue (free_remote); a slot handed out without a
 * cache is freed by CAS (free_shared). c: the caller's cache, held; nullptr if it has none.
 */
QPN_HOT int
Pool::free_one(Cache *c, uint32_t qpn, bool check_gen, uint32_t gen)
{
	uint32_t s;
	if (qpn > MLX5_QPN_MAX || !qpn_to_slot(qpn, &s, c != nullptr ? &c->range_hint : nullptr))
		return -EINVAL;
	uint64_t w = slot(s).load(rlx);
	if (!freeable(w, check_gen, gen))
		return -EINVAL;
	const uint32_t by = slot_next(w);
	if (likely(c != nullptr && by == cache_index(c)))
		return link_freed<false>(*c, s, w, check_gen, gen, true);
	if (by != kNil)
		return free_remote(c, s, w);
	return free_shared(c, s, w, check_gen, gen);
}

/* ---- crash recovery (qpn_pool_recover.cpp) --------------------------------------------------- */

/* Cacheless calls announce themselves in their process entry, so that a reclaim can wait them
 * out (and ignore the counts of dead processes). */
class Bypass {
public:
	explicit Bypass(Pool &pool)
	{
		int32_t me = my_proc(pool.p_);
		ctr_ = me >= 0 ? &pool.p_->procs[me].busy : &pool.p_->anon_busy;
		for (;;) {
			ctr_->fetch_add(1, sc);
			if (pool.p_->stw.load(sc) == 0)
				return;
			ctr_->fetch_sub(1, sc);
			pool.wait_stw();
		}
	}
	~Bypass() { ctr_->fetch_sub(1, sc); }
	Bypass(const Bypass &) = delete;
	Bypass &operator=(const Bypass &) = delete;

private:
	std::atomic<uint32_t> *ctr_;
};

/* Lock the range table. A holder that died leaves it to us, with the pool to audit. */
bool lock_ranges(mlx5_qpn_pool *p, bool block, bool *owner_died);

/* ---- thread binding (qpn_pool_cache.cpp) ---------------------------------------------------- */

/*
 * Each thread keeps, per pool it uses, the index of the cache it claimed. EAL lcores, registered
 * non-EAL threads and plain threads are treated alike: a cache is claimed on first use with a
 * CAS of its owner word and given back (flushed) when the thread exits, so a non-EAL thread gets
 * the same lock-free fast path as an lcore and never shares a cache.
 */
struct Binding {
	mlx5_qpn_pool *pool;
	uint64_t uid;
	uint32_t cache;
};

struct ThreadCaches {
	Binding b[8];
	uint32_t n;
	uint32_t rq_seq; /* this thread's remote frees: the order its queued frees are applied in */
};

/* Plain thread_local (no C++ destructor): the flush at thread exit is a pthread key destructor,
 * which runs when a thread exits but not when the process does (after rte_eal_cleanup() the
 * pool memory may be gone). */
/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per pool call; constinit:
 * no dynamic initialisation, so no TLS wrapper call where another file reads it. */
extern constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadCaches t_caches;

__attribute__((noinline)) Cache *bind_cache(mlx5_qpn_pool *p);

/* Point the calling thread's inline fast path (mlx5_qpn_pool_tls) at cache c of pool p, which
 * it holds; fast_unbind(): at nothing (its next call takes the slow path). */
void fast_bind(mlx5_qpn_pool *p, const Cache *c);
void fast_unbind();

/* A thief holds our cache: wait outside the pool, a bounded time, for it to let go. True if it
 * did (the caller announces itself again). qpn_pool_cache.cpp. */
QPN_COLD bool wait_thief(const Cache *c);

/* Enter the pool with our cache, or nullptr if we must bypass it. */
inline Cache *
enter(mlx5_qpn_pool *p)
{
	ThreadCaches &tc = t_caches;
	Cache *c = nullptr;
	if (likely(tc.n != 0 && tc.b[0].pool == p && tc.b[0].uid == p->uid))
		c = &p->caches[tc.b[0].cache];
	else
		c = bind_cache(p);
	if (c == nullptr)
		return nullptr;
	uint32_t g;
	for (int tries = 0;; tries++) {
		c->busy.store(1, rlx);
		std::atomic_signal_fence(std::memory_order_seq_cst);
		g = c->gate.load(acq);
		if (likely((g & kGateThief) == 0))
			break;
		c->busy.store(0, rel);
		if (tries != 0 || !wait_thief(c))
			return nullptr;
	}
	/* Frees of our QPNs by other threads wait here (on the line loaded anyway) until we apply
	 * them: only we may write our in-use slots. */
	if (unlikely(g != 0))
		Pool(p).drain_remote(*c, true);
	return c;
}

inline void
leave(Cache *c)
{
	if (c != nullptr)
		c->busy.store(0, rel);
}

inline bool
valid_pool(const mlx5_qpn_pool *p)
{
	return p != nullptr && p->magic == kPoolMagic;
}

} /* namespace qpn::detail */

#pragma GCC visibility pop

#endif /* QPN_POOL_OPS_H */
