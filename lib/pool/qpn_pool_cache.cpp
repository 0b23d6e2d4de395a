/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-thread caches: the asymmetric fence that lets a thief empty an idle cache, flushing,
 * stealing, the -ENOSPC verdict, refill, the cacheless allocation, and the binding of a thread to
 * its cache (claimed on first use, given back at thread exit).
 */
#include <cerrno>

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_pause.h>

#include "qpn_pool_ops.h"
#include "qpn_pool_test_hooks.h"

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

/* ---- asymmetric fence for cache stealing ---------------------------------------------------- */

/*
 * A thief must know that a cache's owner is outside the pool before it touches the cache, and
 * the owner must not pay for a full fence on every call. membarrier(2) moves the cost to the
 * thief: the owner only announces itself (an odd sequence word inline, `busy` out of line) and
 * loads `gate`, the thief stores `gate`, runs membarrier (a full barrier on every CPU running a
 * thread of ours), then looks at the announcements (outside()). Either the owner's load sees
 * `gate`, or the thief sees the owner (Dekker with the two fences split unevenly). For caches
 * owned by another process the expedited global command (fence_scope() says when it reaches the
 * owner; the grace-period command otherwise).
 */
std::atomic<int> g_barrier{static_cast<int>(Barrier::kUnknown)};

static long
sys_membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

Barrier
barrier_kind()
{
	auto b = static_cast<Barrier>(g_barrier.load(acq));
	if (b != Barrier::kUnknown)
		return b;
	long q = sys_membarrier(MEMBARRIER_CMD_QUERY);
	Barrier kind = Barrier::kNone;
	if (q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
		kind = (q & MEMBARRIER_CMD_GLOBAL) ? Barrier::kGlobal : Barrier::kPrivate;
	if (kind == Barrier::kNone)
		POOL_LOG(WARNING, "membarrier unavailable: idle caches cannot be stolen");
	g_barrier.store(static_cast<int>(kind), rel);
	return kind;
}

std::atomic<int> g_fenced{-1};

bool
fence_register()
{
	int f = g_fenced.load(acq);
	if (f >= 0)
		return f == 1;
	long q = sys_membarrier(MEMBARRIER_CMD_QUERY);
	f = static_cast<int>(q > 0 && ((q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) &&
			     sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0);
	g_fenced.store(f, rel);
	return f == 1;
}

Scope
fence_scope(const mlx5_qpn_pool *p, uint64_t owner)
{
	if (owner_pid(owner) == (static_cast<uint32_t>(getpid()) & 0x3FFFFF))
		return Scope::kProcess;
	uint32_t op = static_cast<uint32_t>(owner >> 44);
	if (op != 0 && op - 1 < kMaxProcs && p->procs[op - 1].fenced.load(acq) == 1)
		return Scope::kExpedited;
	return Scope::kGlobal;
}

bool
heavy_barrier(Scope s)
{
	Barrier b = barrier_kind();
	if (b == Barrier::kNone)
		return false;
	auto issued = []([[maybe_unused]] Scope k) {
		QPN_TEST_COUNT(barriers[static_cast<int>(k)]);
	};
	switch (s) {
	case Scope::kProcess:
		issued(s);
		return sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
	case Scope::kExpedited:
		/* Falls back to the grace period if the kernel refuses (it does not once an owner
		 * could register). */
		issued(s);
		if (sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
			return true;
		[[fallthrough]];
	case Scope::kGlobal:
		if (b != Barrier::kGlobal)
			return false;
		issued(Scope::kGlobal);
		return sys_membarrier(MEMBARRIER_CMD_GLOBAL) == 0;
	}
	return false;
}

static uint64_t
self_token(uint32_t proc_plus1)
{
	return owner_make(proc_plus1, static_cast<uint32_t>(getpid()),
			  static_cast<uint32_t>(gettid()));
}

/* ---- caches ------------------------------------------------------------------------------- */

/* Give a cache chain of free QPNs back to the free stack. */
void
CacheChains::give_back(Chain &c)
{
	uint32_t n = c.count.load(rlx);
	if (n == 0)
		return;
	uint32_t h = c.head.load(rlx), t = c.tail.load(rlx);
	chain_write_batch(h, t, n);
	push_free(h, t);
	c.count.store(0, rlx);
	c.head.store(kNil, rlx);
	c.tail.store(kNil, rlx);
}

void
CacheChains::flush_cache(Cache &c)
{
	if (c.ready.count.load(rlx) != 0 || c.spare.count.load(rlx) != 0)
		bump(c.flushes);
	give_back(c.ready);
	give_back(c.spare);
	seal_open(c, now_ns());
}

/*
 * Empty the caches of threads that are outside the pool, so that no QPN is stranded in an idle
 * thread's cache. Returns the number of caches emptied.
 */
unsigned
Pool::steal(Cache *self)
{
	unsigned n = 0;
	int32_t me = my_proc(p_);
	const uint32_t thief = me >= 0 ? static_cast<uint32_t>(me) + 1 : kAnyThief;
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		Cache &v = p_->caches[i];
		if (&v == self)
			continue;
		uint64_t owner = v.owner.load(acq);
		if (owner == 0)
			continue;
		if (v.ready.count.load(rlx) + v.spare.count.load(rlx) + v.open.count.load(rlx) ==
			    0 &&
		    (v.gate.load(rlx) & kGateRemote) == 0)
			continue;
		if (!hold_gate(v, thief, acq_rel))
			continue; /* another thief is at it */
		if (heavy_barrier(fence_scope(p_, owner)) && outside(v)) {
			/* frees queued for it: only its holder may apply them */
			drain_remote(v, false);
			flush_cache(v);
			n++;
		}
		release_gate(v);
	}
	if (self != nullptr && n != 0)
		bump(self->steals, n);
	return n;
}

/* Does any cache (other than self) hold QPNs? They exist but are not reachable right now. */
bool
Pool::anything_held(const Cache *self) const
{
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		const Cache &v = p_->caches[i];
		if (&v == self)
			continue;
		if (v.moving.load(sc) != 0 ||
		    v.ready.count.load(sc) + v.spare.count.load(sc) + v.open.count.load(sc) != 0 ||
		    !remote_empty(v))
			return true;
	}
	return false;
}

/*
 * The -ENOSPC verdict: no QPN free anywhere, after the caller found the free stack and the
 * quarantine empty. A QPN can hide from a scan only while some thread moves it between two
 * homes. A move announced from before its source looks empty until its destination has it is
 * seen by a scan that reads its source, then the announcement, then its destination: `transit`
 * (a drain: bucket -> free stack; the cacheless pop: free stack -> free stack), `collecting`
 * (range_remove: free stack -> free stack), a cache's `moving` (a refill: free stack -> cache).
 * A move that fills its destination before it empties its source (a seal: open chain ->
 * bucket; a flush or steal: cache -> free stack) is seen by a scan that reads the source before
 * the destination. The order below does both for every move: quarantine (buckets, open
 * chains), announcements, free stack, caches and their `moving`, announcements, free stack,
 * quarantine. (It read the announcements first: a drain that took a bucket between that read
 * and the read of the buckets, and pushed it after the read of the free stack, was missed:
 * -ENOSPC while QPNs existed.) Not seen: a batch sealed and expired within one scan. Any doubt is
 * -EAGAIN: try again.
 */
bool
Pool::nothing_anywhere(const Cache *self) const
{
	uint64_t when;
	auto announced = [this] {
		return p_->transit.load(sc) != 0 || p_->collecting.load(sc) != 0;
	};
	auto stack = [this] { return head_idx(p_->free_top.load(sc)) != kNil; };
	if (quarantine_next(&when))
		return false;
	QPN_TEST_HOOK(verdict_scan);
	if (announced() || stack() || anything_held(self) || announced() || stack())
		return false;
	return !quarantine_next(&when);
}

/*
 * range_remove() holds the free stack for one pass over it: an allocation that found the pool
 * empty in that window waits for it (the only wait in the pool, and only while a range is being
 * removed). Returns true if it waited, so the caller looks again.
 */
QPN_COLD bool
Pool::wait_collector(Cache *self)
{
	uint32_t col = p_->collecting.load(acq);
	if (col == 0)
		return false;
	/* Bounded: a collector that died is detected (its process index is in `collecting`) and
	 * recovered by a reclaim; one that is only slow is waited for at most ~100 ms, then the
	 * caller reports -EAGAIN. */
	const uint64_t deadline = real_ns() + 100 * 1000 * 1000;
	for (uint32_t i = 1; (col = p_->collecting.load(acq)) != 0; i++) {
		rte_pause();
		if ((i & 1023) != 0)
			continue;
		/* The collector may be a control thread on our CPU (EAL pins those to the main
		 * lcore's): spinning out our time slice would only keep it from finishing. */
		sched_yield();
		if (holder_dead(col))
			reclaim(self, false);
		if (real_ns() > deadline)
			break;
	}
	return true;
}

/*
 * A free found `ready` full (cache_size QPNs; no quarantine). The full chain becomes the spare and
 * the freed slot `s` (already linked to nothing) starts a new `ready`; only when the spare is full
 * too does it go back to the free stack, as one batch of exactly cache_size. A cache thus holds
 * between 0 and 2 * cache_size free QPNs: a pop from the free stack leaves cache_size, a flush
 * leaves cache_size + 1, so between two exchanges with the free stack come at least cache_size
 * net allocations or frees. (Before, a cache flushed at cache_size + 1 down to cache_size and a
 * cache that took that batch back refilled and flushed on every alloc/free pair.)
 */
QPN_COLD void
CacheChains::rotate_full(Cache &c, uint32_t s)
{
	if (c.spare.count.load(rlx) != 0) {
		give_back(c.spare);
		bump(c.flushes);
	}
	c.spare.head.store(c.ready.head.load(rlx), rlx);
	c.spare.tail.store(c.ready.tail.load(rlx), rlx);
	c.spare.count.store(c.ready.count.load(rlx), rlx);
	c.ready.head.store(s, rlx);
	c.ready.tail.store(s, rlx);
	c.ready.count.store(1, rlx);
}

/*
 * With a quarantine, a refill also seals what the cache released since the last seal, so that
 * a batch stays the batch it was: in alloc/free pairs the QPNs released while one `ready` batch
 * was used up are exactly that batch, sealed whole. Sealing only when `open` reaches a batch
 * splices the end of one batch onto the start of the next as soon as the two are out of step
 * (a partial batch from a thread's exit flush, a hold pattern, two lcores); spliced again at every
 * pass through the quarantine, batches end up as runs of a few QPNs from all over the range, and
 * the alloc then meets a cold slot line every few QPNs instead of every eight. Sealing early is
 * safe: the stamp is now, after every release in the chain.
 *
 * Not when `open` holds frees taken from the remote queue (`open_remote`): those
 * come as late as the freer is behind, by a lag that varies, so a refill cuts them at a
 * different place at every pass, and the cuts pile up (qpn-perf's cross-lcore run, with the
 * owner's wait for a thief in: 7-18 runs per 8192 frees growing to 99-354 over one run with the
 * cut, 37-67 and flat without it; results.md). Such a chain is
 * sealed when it reaches a batch, a window of the freer's order as long as a batch, whatever the
 * lag.
 */
void
CacheChains::seal_at_refill(Cache &c)
{
	if (p_->quarantine_ns == 0)
		return;
	if (c.open.count.load(rlx) != 0 && c.open_remote.load(rlx) == 0)
		seal_open(c, now_ns());
}

/*
 * A short batch just popped into `ready` (quarantine only): join the next batches of the free
 * stack onto it until it holds cache_size QPNs. Short batches come from threads that exit or are
 * stolen from (their chains flushed as they are) and from patterns that stop in the middle of a
 * batch. A refill seals what the cache released, so without this a short batch came back from
 * the quarantine as the same short batch for ever, costing a refill more per pass, and a pool
 * whose threads come and go gathered more of them (qpn-perf, one launch, --lcores=on: the
 * quarantine pair's refills per 2 million pairs grew 7935 -> 8703 over six repetitions, 7813
 * for whole batches; 7700 -> 7479 with this). Joined, the QPNs are released and sealed as whole
 * batches and at most one short one, so the number of short batches never grows and falls when
 * two meet. Bounded: at most 8 more pops; `ready` ends below 2 * cache_size. The caller
 * announced the move (`moving`): the popped batches are in no home until linked.
 */
void
CacheChains::join_short(Cache &c)
{
	Chain &ready = c.ready;
	for (int k = 0; k < 8 && ready.count.load(rlx) < p_->batch; k++) {
		Chain more;
		if (!pop_free(more))
			return;
		bump(c.refills); /* a batch taken from the shared pool */
		auto &tw = slot(ready.tail.load(rlx));
		tw.store(slot_with_next(tw.load(rlx), more.head.load(rlx)), rlx);
		ready.tail.store(more.tail.load(rlx), rlx);
		ready.count.store(ready.count.load(rlx) + more.count.load(rlx), rlx);
	}
}

/*
 * The cache ran dry: take the spare batch, else a batch from the free stack, else drain expired
 * quarantine buckets, else steal idle caches. Fails with -ENOSPC when no QPN is anywhere, and
 * with -EAGAIN when some exist but are in quarantine (or in a cache whose owner is mid-call).
 */
QPN_COLD int
Pool::refill(Cache &c)
{
	/* Queued frees whose `remote` flag was never set (their freer died between its entry and
	 * the flag): looked at here too, every cache_size allocs, so none waits for ever. */
	if (!remote_empty(c)) {
		drain_remote(c, true);
		if (c.ready.count.load(rlx) != 0)
			return 0; /* they refilled us (no quarantine) */
	}
	if (c.spare.count.load(rlx) != 0) {
		c.ready.head.store(c.spare.head.load(rlx), rlx);
		c.ready.tail.store(c.spare.tail.load(rlx), rlx);
		c.ready.count.store(c.spare.count.load(rlx), rlx);
		c.spare.count.store(0, rlx);
		seal_at_refill(c);
		return 0;
	}
	/*
	 * Expired quarantine before fresh stock, every 8th refill of a cache (a clock read and a scan
	 * of the bucket heads; every refill would cost ~10% of the quarantine fast path): the
	 * quarantine then holds about rate x time QPNs instead of growing until the free stack runs
	 * dry. A device's control thread also drains it every millisecond.
	 */
	uint32_t nr = c.refill_seq.load(rlx) + 1;
	c.refill_seq.store(nr, rlx);
	if (p_->quarantine_ns != 0 && (nr & 7) == 0)
		drain(now_ns());
	for (int round = 0; round < 3; round++) {
		/* Announced before the pop empties the stack, withdrawn once the batch is in `ready`. */
		c.moving.store(1, rlx);
		bool got = pop_free(c.ready);
		if (got && p_->quarantine_ns != 0)
			join_short(c);
		c.moving.store(0, rel);
		if (got) {
			bump(c.refills);
			seal_at_refill(c);
			return 0;
		}
		uint64_t now = now_ns();
		/* Our own released QPNs start their quarantine clock now at the latest. */
		seal_open(c, now);
		if (p_->quarantine_ns != 0 && drain(now) != 0)
			continue;
		if (round == 0 && steal(&c) != 0)
			continue;
		if (wait_collector(&c))
			continue;
		break;
	}
	/* Nothing anywhere: QPNs of a process that died may be stranded (rate-limited check). */
	if (maybe_reclaim(&c) && pop_free(c.ready)) {
		bump(c.refills);
		return 0;
	}
	if (!nothing_anywhere(&c)) {
		bump(c.eagain);
		return -EAGAIN;
	}
	bump(c.enospc);
	return -ENOSPC;
}

/* No cache for this thread (all claimed, or a thief holds ours): work on the shared pool. */
QPN_COLD int
Pool::alloc_bypass(uint32_t *qpn, uint32_t *gen, uint32_t flags)
{
	Chain b;
	/* The popped batch is private until its rest is pushed back: in transit. */
	p_->transit.fetch_add(1, sc);
	bool ok = pop_free(b);
	if (!ok && p_->quarantine_ns != 0 && drain(now_ns()) != 0)
		ok = pop_free(b);
	if (!ok && steal(nullptr) != 0)
		ok = pop_free(b);
	if (!ok && wait_collector(nullptr))
		ok = pop_free(b);
	if (!ok) {
		p_->transit.fetch_sub(1, sc);
		return nothing_anywhere(nullptr) ? -ENOSPC : -EAGAIN;
	}
	uint32_t s = b.head.load(rlx), n = b.count.load(rlx);
	uint64_t w = slot(s).load(rlx);
	if (n > 1) {
		uint32_t rest = slot_next(w), t = b.tail.load(rlx);
		chain_write_batch(rest, t, n - 1);
		push_free(rest, t);
	}
	p_->transit.fetch_sub(1, sc);
	uint32_t g = (slot_gen(w) + 1) & kGenMask;
	int32_t me = my_proc(p_);
	uint32_t holder = me >= 0 ? static_cast<uint32_t>(me) : kNoHolder;
	slot(s).store(slot_make(kNil, holder | flags, kInUse, g), rlx);
	*qpn = slot_to_qpn(s, nullptr);
	if (gen != nullptr)
		*gen = g;
	p_->bypass_allocs.fetch_add(1, rlx);
	return 0;
}

/*
 * Our cache is held by a thief (design_pool.md §5; this wait: §3): a remote freer that found its queue full
 * while we were away, or a refill emptying what it took for an idle cache. Such a hold lasts a
 * membarrier(2) and a few slot writes, so the owner waits for it, outside the pool, rather than
 * working cacheless meanwhile: what it takes cacheless comes back through the quarantine one
 * QPN at a time, for good. qpn-perf's cross-lcore run (the allocator waits on a full ring, away
 * from the pool, so the freer holds its cache) made 3 000-8 000 cacheless allocations per
 * repetition, and the quarantine pool's batches were runs of 1-10 QPNs from all over the range
 * ever after (results.md). Bounded (kThiefWaitNs), and not again
 * for kThiefBackoffNs after a wait that timed out, so a thief that was preempted or died costs
 * the cacheless path once, not a wait per call.
 */
namespace {
constexpr uint64_t kThiefWaitNs = 50 * 1000;
constexpr uint64_t kThiefBackoffNs = 1000 * 1000;
thread_local uint64_t t_thief_timeout_at;
} /* namespace */

bool
wait_thief(const Cache *c)
{
	uint64_t now = now_ns();
	if (t_thief_timeout_at != 0 && now - t_thief_timeout_at < kThiefBackoffNs)
		return false;
	QPN_TEST_HOOK_HOT(thief_wait);
	const uint64_t until = now + kThiefWaitNs;
	for (unsigned spins = 1;; spins++) {
		if ((c->gate.load(acq) & kGateThief) == 0)
			return true;
		rte_pause();
		if ((spins & 63) == 0 && now_ns() >= until) {
			t_thief_timeout_at = now_ns();
			return false;
		}
	}
}

/* ---- thread binding ------------------------------------------------------------------------- */

/* t_caches and the binding structs: qpn_pool_ops.h (enter() reads them inline). */
constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadCaches t_caches{};

/* What an unbound thread's fast path looks at: its owner word never equals a binding's (0), so
 * the inline calls take the slow path, which binds; nothing ever writes it. */
static mlx5_qpn_pool_cache_line g_closed_cache = {~0ull, 0, 0, {}, {}, 0, 0};

void
fast_bind(mlx5_qpn_pool *p, const Cache *c)
{
	Pool pool(p);
	mlx5_qpn_pool_binding &b = mlx5_qpn_pool_tls;
	const uint64_t owner = c->owner.load(rlx);
	const uint32_t hint = c->range_hint.load(rlx);
	b.pool = p;
	/* The same memory as line 0 of *c (layout asserted in qpn_pool_internal.h). */
	b.cache = reinterpret_cast<mlx5_qpn_pool_cache_line *>(const_cast<Cache *>(c));
	b.slots = reinterpret_cast<uint64_t *>(&pool.slot(0));
	/* The range of the last hit, count first (acquire): a removed range copies as count 0, an
	 * entry reused after its grace period as its new values. */
	const Range &r = p->ranges[hint < MLX5_QPN_MAX_RANGES ? hint : 0];
	b.count = r.count.load(acq);
	b.first = r.first.load(rlx);
	b.base = r.base.load(rlx);
	const bool quar = p->quarantine_ns != 0;
	b.into = quar ? &b.cache->open : &b.cache->ready;
	b.owner = owner; /* the slow path's; the inline calls trust `pool` (bind_note_clear()) */
	const Pool::OwnRelease own = pool.own_release(*c);
	b.owned = own.owned;
	b.released = own.released;
	b.into_max = own.into_max;
	/* Last, atomic: a destroy in another thread may clear it (bind_clear()). */
	std::atomic_ref<mlx5_qpn_pool *>(b.pool).store(p, rlx);
}

void
fast_unbind()
{
	mlx5_qpn_pool_binding &b = mlx5_qpn_pool_tls;
	std::atomic_ref<mlx5_qpn_pool *>(b.pool).store(nullptr, rlx);
	b.cache = &g_closed_cache;
	b.slots = nullptr;
	b.into = nullptr;
	b.owner = b.owned = b.released = 0;
	b.into_max = b.first = b.count = b.base = 0;
}
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

static void
release_cache(mlx5_qpn_pool *p, uint32_t idx)
{
	Pool pool(p);
	Cache &c = p->caches[idx];
	/* We are the owner and inside no call: flush, then give the cache up. */
	c.busy.store(1, rlx);
	std::atomic_signal_fence(std::memory_order_seq_cst);
	if ((c.gate.load(acq) & kGateThief) == 0) {
		pool.drain_remote(c, true);
		pool.flush_cache(c);
	}
	c.busy.store(0, rel);
	/*
	 * Wait out a thief that is still inside (it saw busy == 0 before we set it). A thief that
	 * died inside (a process killed in steal()) never lets go: then our chains cannot be trusted
	 * (part of them may be in the free stack already), so they are dropped and the next reclaim
	 * sweeps every QPN they held back (free, or quarantine stamped then). No reclaim from here:
	 * the caller holds g_reg_mutex, which a reclaim takes.
	 */
	for (uint32_t spins = 1;; spins++) {
		uint32_t g = c.gate.load(acq), e = g & kGateThief;
		if (e == 0)
			break;
		if ((spins & 0x3FF) == 0 && e != kAnyThief && pool.holder_dead(e) &&
		    c.gate.compare_exchange_strong(g, (g & kGateRemote) | kAnyThief, acq_rel,
						   acq)) {
			drop_chains(c);
			p->need_audit.store(1, rel);
			release_gate(c);
			POOL_LOG(
				NOTICE,
				"pool %s: cache %u: its thief died inside it; the next reclaim sweeps its QPNs back",
				p->name, idx);
			break;
		}
		rte_pause();
		if ((spins & 0x3FF) == 0)
			sched_yield(); /* the thief may be waiting for our CPU */
	}
	/* Sequentially consistent with a remote freer's queue CAS and its load of `owner`: either
	 * it sees the cache unclaimed and applies its entry itself, or we see the entry here. */
	c.owner.store(0, sc);
	if (!pool.remote_empty(c))
		pool.rescue(c);
}

static void
on_thread_exit(void *arg)
{
	auto *tc = static_cast<ThreadCaches *>(arg);
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	for (uint32_t i = 0; i < tc->n; i++)
		for (auto &e : g_registry)
			if (e.pool == tc->b[i].pool && e.uid == tc->b[i].uid)
				release_cache(tc->b[i].pool, tc->b[i].cache);
	tc->n = 0;
	fast_unbind();
	bind_unlink();
}

static void
make_exit_key()
{
	pthread_key_create(&g_exit_key, on_thread_exit);
}

__attribute__((noinline)) Cache *
bind_cache(mlx5_qpn_pool *p)
{
	ThreadCaches &tc = t_caches;
	for (uint32_t i = 0; i < tc.n; i++)
		if (tc.b[i].pool == p) {
			if (tc.b[i].uid == p->uid) {
				/* Most recently used first: enter() checks only b[0]. */
				Binding hit = tc.b[i];
				tc.b[i] = tc.b[0];
				tc.b[0] = hit;
				return &p->caches[hit.cache];
			}
			/* A pool freed and recreated at the same address: rebind. (Freed by another
			 * process, which could not clear our inline binding: clear it here.) */
			tc.b[i] = tc.b[--tc.n];
			if (std::atomic_ref<mlx5_qpn_pool *>(mlx5_qpn_pool_tls.pool).load(rlx) == p)
				fast_unbind();
			break;
		}
	if (tc.n == RTE_DIM(tc.b)) {
		/* Full: drop the bindings of pools freed since (their cache went with the pool). Without
		 * this, a thread that had used 8 pools never got a cache again. */
		std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
		for (uint32_t i = 0; i < tc.n;)
			if (!registry_alive(tc.b[i].pool, tc.b[i].uid))
				tc.b[i] = tc.b[--tc.n];
			else
				i++;
		if (tc.n == RTE_DIM(tc.b))
			return nullptr;
	}
	int32_t proc = my_proc(p);
	uint64_t me = self_token(proc >= 0 ? static_cast<uint32_t>(proc) + 1 : 0);
	unsigned start = rte_lcore_id() < p->nb_caches ? rte_lcore_id() : (gettid() % p->nb_caches);
	for (uint32_t k = 0; k < p->nb_caches; k++) {
		uint32_t i = (start + k) % p->nb_caches;
		uint64_t expect = 0;
		if (p->caches[i].owner.load(rlx) == 0 &&
		    p->caches[i].owner.compare_exchange_strong(expect, me, sc, rlx)) {
			/* Read after the claim, sequentially consistent: a remote freer that holds the
			 * cache because it saw it unclaimed (RemoteQueue::try_hold) is seen here or in enter(),
			 * which then bypasses it until it lets go. */
			(void)p->caches[i].gate.load(sc);
			tc.b[tc.n++] = tc.b[0];
			tc.b[0] = {p, p->uid, i};
			pthread_once(&g_exit_once, make_exit_key);
			pthread_setspecific(g_exit_key, &tc);
			bind_link(); /* until the exit key's destructor unlinks it */
			return &p->caches[i];
		}
	}
	return nullptr; /* every cache is claimed: this thread works on the shared pool */
}

} /* namespace qpn::detail */

/* The inline fast path's binding (mlx5_qpn_pool_core.h); starts unbound. */
__thread mlx5_qpn_pool_binding mlx5_qpn_pool_tls __attribute__((tls_model("initial-exec"))) =
	{nullptr, &qpn::detail::g_closed_cache, nullptr, nullptr, 0, 0, 0, 0, 0, 0, 0};
