/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lock-free QPN pool. See qpn_pool_internal.h for the layout and doc/guides/design_pool.md
 * for why the invariants hold.
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include <pthread.h>
#include <new>

#include <linux/membarrier.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_memzone.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "qpn_pool_internal.h"
#include "qpn_pool_proc.h"
#include "qpn_pool_test_hooks.h"

RTE_LOG_REGISTER(mlx5_qpn_pool_logtype, mlx5_qpn.pool, INFO);
#define POOL_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, mlx5_qpn_pool_logtype, "mlx5_qpn.pool: " fmt "\n", ##__VA_ARGS__)

static_assert(std::atomic<uint64_t>::is_always_lock_free, "64-bit atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "32-bit atomics must be lock-free");

using namespace qpn;

namespace {

constexpr auto rlx = std::memory_order_relaxed;
constexpr auto acq = std::memory_order_acquire;
constexpr auto rel = std::memory_order_release;
constexpr auto acq_rel = std::memory_order_acq_rel;
constexpr auto sc = std::memory_order_seq_cst;

constexpr const char *kZonePrefix = "QPNP_";

/*
 * Per-cache counters have one writer (the cache's owner, or a thief counting in its own cache),
 * so they are bumped with a load and a store: a locked read-modify-write here would cost more
 * than the whole allocation. Readers (stats) may see a value a moment old.
 */
inline void bump(std::atomic<uint64_t> &c, uint64_t n = 1)
{
	c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/* Forget a cache's chains without giving them back: for a cache whose chains cannot be trusted
 * (its owner or a thief died inside it); a reclaim's sweep finds their QPNs unreachable. */
inline void drop_chains(qpn::Cache &v)
{
	for (qpn::Chain *c : {&v.ready, &v.spare, &v.open}) {
		c->count.store(0, std::memory_order_relaxed);
		c->head.store(qpn::kNil, std::memory_order_relaxed);
		c->tail.store(qpn::kNil, std::memory_order_relaxed);
	}
	v.moving.store(0, std::memory_order_relaxed);
}

/* ---- clock ---------------------------------------------------------------------------------- */

/* Test seam (qpn_pool_test_hooks.h): 0 outside tests. */
std::atomic<int64_t> g_clock_offset{0};

uint64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) +
	       static_cast<uint64_t>(g_clock_offset.load(std::memory_order_relaxed));
}

/* CLOCK_MONOTONIC without the test offset: deadlines of bounded waits and rate limits. */
uint64_t real_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/* ---- asymmetric fence for cache stealing ---------------------------------------------------- */

/*
 * A thief must know that a cache's owner is outside the pool before it touches the cache, and
 * the owner must not pay for a full fence on every call. membarrier(2) moves the cost to the
 * thief: the owner only stores `busy` and loads `steal` (both relaxed), the thief stores `steal`,
 * runs membarrier (a full barrier on every CPU running a thread of ours), then loads `busy`.
 * Either the owner's load sees `steal`, or the thief's load sees `busy` (Dekker with the two
 * fences split unevenly). For caches owned by another process the global command is used.
 */
enum class Barrier { kUnknown, kPrivate, kGlobal, kNone };
std::atomic<int> g_barrier{static_cast<int>(Barrier::kUnknown)};

long sys_membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

Barrier barrier_kind()
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

/* Full barrier on all CPUs running threads of this process (or of all processes). */
bool heavy_barrier(bool other_process)
{
	Barrier b = barrier_kind();
	if (b == Barrier::kNone)
		return false;
	if (other_process) {
		if (b != Barrier::kGlobal)
			return false;
		return sys_membarrier(MEMBARRIER_CMD_GLOBAL) == 0;
	}
	return sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

uint64_t self_token(uint32_t proc_plus1)
{
	return owner_make(proc_plus1, static_cast<uint32_t>(getpid()), static_cast<uint32_t>(gettid()));
}

/* ---- process-local registry: which pools are alive (for thread-exit flushes) ----------------- */

std::mutex g_reg_mutex;
struct RegEntry {
	mlx5_qpn_pool *pool;
	uint64_t uid;
	int32_t proc; /* this process's index in the pool's process table; -1: not yet */
};
RegEntry g_registry[64];
/* Pools freed by this process, most recent last (a ring): tells a stale thread binding from a
 * live pool that did not fit in the registry. */
RegEntry g_freed[64];
uint32_t g_freed_next;
bool g_reg_overflow; /* some live pool is missing from g_registry */

void registry_add(mlx5_qpn_pool *p)
{
	std::lock_guard<std::mutex> g(g_reg_mutex);
	for (auto &e : g_registry)
		if (e.pool == nullptr || e.pool == p) {
			e = {p, p->uid, -1};
			return;
		}
	/* Full: the pool still works; only the automatic flush at thread exit is skipped. */
	g_reg_overflow = true;
}

void registry_del(mlx5_qpn_pool *p)
{
	std::lock_guard<std::mutex> g(g_reg_mutex);
	for (auto &e : g_registry)
		if (e.pool == p)
			e = {nullptr, 0, -1};
	g_freed[g_freed_next++ % RTE_DIM(g_freed)] = {p, p->uid, -1};
}

/* Find or claim this process's entry in the pool's process table; -1 if the table is full. */
int32_t proc_register(mlx5_qpn_pool *p)
{
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs; i++)
		if (p->procs[i].ident.load(acq) == me)
			return static_cast<int32_t>(i);
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		uint64_t expect = 0;
		if (p->procs[i].ident.compare_exchange_strong(expect, me, acq_rel, rlx))
			return static_cast<int32_t>(i);
	}
	return -1;
}

/* This process's index in the pool's table (process-local cache in the registry). */
int32_t my_proc(mlx5_qpn_pool *p)
{
	{
		std::lock_guard<std::mutex> g(g_reg_mutex);
		for (auto &e : g_registry)
			if (e.pool == p && e.uid == p->uid) {
				if (e.proc < 0)
					e.proc = proc_register(p);
				return e.proc;
			}
	}
	return proc_register(p);
}

/* Is the pool of a thread binding still alive in this process? (g_reg_mutex held) */
bool registry_alive(const mlx5_qpn_pool *p, uint64_t uid)
{
	for (const auto &e : g_registry)
		if (e.pool == p && e.uid == uid)
			return true;
	if (!g_reg_overflow)
		return false;
	for (const auto &e : g_freed)
		if (e.pool == p && e.uid == uid)
			return false;
	return true; /* unknown: keep it (a live binding dropped would strand its cache claim) */
}

} /* namespace */

/* ---- the algorithms, as members of a thin accessor ------------------------------------------ */

namespace {

/* Internal linkage on purpose: the fast path must inline these, not call them through the PLT. */
class Pool {
public:
	explicit Pool(mlx5_qpn_pool *p) : p_(p) {}

	std::atomic<uint64_t> &slot(uint32_t i) const
	{
		return reinterpret_cast<std::atomic<uint64_t> *>(p_ + 1)[i];
	}

	/* QPN <-> slot through the range table. The cache's hint makes the common case one compare. */
	bool qpn_to_slot(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const;
	bool qpn_to_slot_slow(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const;
	uint32_t slot_to_qpn(uint32_t s, std::atomic<uint32_t> *hint) const;
	uint32_t slot_to_qpn_slow(uint32_t s, std::atomic<uint32_t> *hint) const;

	/* Shared free stack of batches. */
	void push_free(uint32_t head, uint32_t last_tail);
	bool pop_free(Chain &into);

	/* Shared quarantine. */
	void push_quarantine(uint32_t head, uint32_t tail, uint64_t stamp);
	uint64_t bucket_expiry(uint64_t tag, uint64_t now) const;
	uint64_t drain(uint64_t now);
	bool quarantine_next(uint64_t *when) const;

	/* Caches. */
	Cache *my_cache();
	void seal(Chain &open, uint64_t stamp);
	void give_back(Chain &c);
	void flush_cache(Cache &c);
	unsigned steal(Cache *self);
	bool anything_held(const Cache *self) const;
	bool nothing_anywhere(const Cache *self) const;

	int alloc_one(Cache *c, uint32_t *qpn, uint32_t *gen, uint32_t flags = 0);
	int alloc_bypass(uint32_t *qpn, uint32_t *gen, uint32_t flags = 0);
	int free_one(Cache *c, uint32_t qpn, bool check_gen, uint32_t gen);
	int refill(Cache &c);
	bool wait_collector(Cache *self);

	/* Crash recovery. */
	bool holder_dead(uint32_t plus1) const;
	bool maybe_reclaim(Cache *self);
	int reclaim(Cache *self, bool block);
	int reclaim_locked(Cache *self);
	void wait_stw();

	mlx5_qpn_pool *p_;

private:
	void chain_write_batch(uint32_t head, uint32_t tail, uint32_t count);
};

#define QPN_HOT inline __attribute__((always_inline))
#define QPN_COLD __attribute__((noinline, cold))

QPN_HOT bool Pool::qpn_to_slot(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const
{
	if (hint != nullptr) {
		uint32_t h = hint->load(rlx);
		if (h < p_->nb_ranges.load(acq)) {
			const Range &r = p_->ranges[h];
			uint32_t f = r.first.load(rlx);
			if (qpn - f < r.count.load(rlx)) {
				*slot_out = r.base.load(rlx) + (qpn - f);
				return true;
			}
		}
	}
	return qpn_to_slot_slow(qpn, slot_out, hint);
}

QPN_COLD bool Pool::qpn_to_slot_slow(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const
{
	uint32_t n;
	/* Binary search of the sorted index under its seqlock (ranges are added rarely). */
	for (;;) {
		uint32_t s1 = p_->sorted_seq.load(acq);
		if (s1 & 1)
			continue;
		n = p_->nb_sorted.load(acq);
		uint32_t nr = p_->nb_ranges.load(acq);
		uint32_t lo = 0, hi = n, found = UINT32_MAX;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			/* acquire: keeps the closing seq load below after every index load */
			uint32_t ri = p_->sorted[mid].load(acq);
			if (ri >= nr) { /* torn read: the seqlock check below retries */
				break;
			}
			const Range &r = p_->ranges[ri];
			uint32_t f = r.first.load(acq);
			if (qpn < f)
				hi = mid;
			else if (qpn - f >= r.count.load(acq))
				lo = mid + 1;
			else {
				found = ri;
				break;
			}
		}
		if (p_->sorted_seq.load(rlx) != s1)
			continue;
		if (found == UINT32_MAX)
			return false;
		if (hint != nullptr)
			hint->store(found, rlx);
		const Range &r = p_->ranges[found];
		*slot_out = r.base.load(rlx) + (qpn - r.first.load(rlx));
		return true;
	}
}

QPN_HOT uint32_t Pool::slot_to_qpn(uint32_t s, std::atomic<uint32_t> *hint) const
{
	uint32_t h = hint != nullptr ? hint->load(rlx) : 0;
	if (h < p_->nb_ranges.load(acq)) {
		const Range &r = p_->ranges[h];
		uint32_t b = r.base.load(rlx);
		if (s - b < r.count.load(rlx))
			return r.first.load(rlx) + (s - b);
	}
	return slot_to_qpn_slow(s, hint);
}

QPN_COLD uint32_t Pool::slot_to_qpn_slow(uint32_t s, std::atomic<uint32_t> *hint) const
{
	/* The live range whose slot region holds s. A linear scan: regions of removed ranges are
	 * taken again by later ranges, so bases are not ordered by index (slow path only). */
	uint32_t n = p_->nb_ranges.load(acq);
	for (uint32_t i = 0; i < n; i++) {
		const Range &r = p_->ranges[i];
		uint32_t b = r.base.load(acq);
		if (s - b < r.count.load(acq)) {
			if (hint != nullptr)
				hint->store(i, rlx);
			return r.first.load(rlx) + (s - b);
		}
	}
	return kNil; /* not reached: an allocated slot belongs to a live range */
}

/* Mark [head..tail] (count long, linked by next) as a batch: head.aux = tail, tail.aux = count. */
void Pool::chain_write_batch(uint32_t head, uint32_t tail, uint32_t count)
{
	auto &hs = slot(head);
	hs.store(slot_with_aux(hs.load(rlx), tail), rlx);
	if (tail != head) {
		auto &ts = slot(tail);
		ts.store(slot_with_aux(ts.load(rlx), count), rlx);
	}
}

/*
 * Push a chain of whole batches [head .. last_tail] onto the free stack. The release CAS
 * publishes every slot word written before it.
 */
void Pool::push_free(uint32_t head, uint32_t last_tail)
{
	auto &ts = slot(last_tail);
	uint64_t top = p_->free_top.load(rlx);
	for (;;) {
		ts.store(slot_with_next(ts.load(rlx), head_idx(top)), rlx);
		uint64_t nt = head_make(head, (head_tag(top) + 1) & kTagMask);
		if (p_->free_top.compare_exchange_weak(top, nt, sc, rlx))
			return;
	}
}

/*
 * Pop one batch. Reading the head's and tail's words races with other poppers (the batch may be
 * taken and reused meanwhile): such reads give garbage that is bounds-checked, and the tagged CAS
 * then fails, so garbage is never acted upon.
 */
bool Pool::pop_free(Chain &into)
{
	uint64_t top = p_->free_top.load(acq);
	uint32_t cap = p_->capacity;
	for (;;) {
		uint32_t h = head_idx(top);
		if (h == kNil)
			return false;
		uint64_t hw = slot(h).load(rlx);
		uint32_t t = slot_aux(hw);
		if (t >= cap) {
			top = p_->free_top.load(acq);
			continue;
		}
		uint64_t tw = t == h ? hw : slot(t).load(rlx);
		uint32_t cnt = t == h ? 1 : slot_aux(tw);
		uint64_t nt = head_make(slot_next(tw), (head_tag(top) + 1) & kTagMask);
		if (p_->free_top.compare_exchange_weak(top, nt, sc, acq)) {
			into.head.store(h, rlx);
			into.tail.store(t, rlx);
			into.count.store(cnt, rlx);
			return true;
		}
	}
}

/*
 * Put a sealed batch (all members released before `stamp`) into the bucket of its epoch. The
 * bucket's epoch only grows, so a batch pushed into a bucket that still holds an older epoch
 * (or that was already recycled for a newer one) is released late, never early.
 */
void Pool::push_quarantine(uint32_t head, uint32_t tail, uint64_t stamp)
{
	uint64_t e = (stamp > p_->t0_ns ? (stamp - p_->t0_ns) / p_->epoch_ns : 0) & kTagMask;
	auto &b = p_->bucket[e % kBuckets];
	auto &ts = slot(tail);
	uint64_t h = b.load(rlx);
	for (;;) {
		/* Keep the newer of the two epochs (40-bit, compared modulo 2^40). */
		uint64_t be = head_tag(h);
		bool newer = ((e - be) & kTagMask) < (kTagMask >> 1);
		uint64_t ne = (head_idx(h) == kNil || newer) ? e : be;
		ts.store(slot_with_next(ts.load(rlx), head_idx(h)), rlx);
		if (b.compare_exchange_weak(h, head_make(head, ne), rel, rlx))
			return;
	}
}

/*
 * When a bucket tagged with (40-bit) epoch `tag` may be released, for a drainer whose clock read
 * gave `now`. The full epoch is rebuilt as the one with these 40 bits nearest to now's epoch
 * (within [-2^39, 2^39) epochs), so it is never earlier than the real one:
 * - a batch sealed *after* the drainer read its clock carries an epoch newer than now's. It must
 *   read as "not yet", never as 2^40 epochs old: that reading (the code before this one) released
 *   such a bucket at once, and its 64-bit product wrapped into an arbitrary time;
 * - a real epoch is never 2^39 epochs ahead of a clock read (centuries at the smallest epoch), so
 *   the largest value with these bits below now_e + 2^39 is at least the real epoch;
 * - a bucket left for more than 2^39 epochs (6 days at the 1 us minimum) reads too late, not early.
 * The result saturates at UINT64_MAX instead of wrapping.
 */
uint64_t Pool::bucket_expiry(uint64_t tag, uint64_t now) const
{
	const uint64_t now_e = now > p_->t0_ns ? (now - p_->t0_ns) / p_->epoch_ns : 0;
	const uint64_t ahead = (tag - now_e) & kTagMask;
	const uint64_t back = kTagMask + 1 - ahead;
	uint64_t full;
	if (ahead <= (kTagMask >> 1) || back > now_e)
		full = now_e + ahead; /* now or later (a negative epoch cannot be: later too) */
	else
		full = now_e - back;
	uint64_t t;
	if (__builtin_mul_overflow(full + 1, p_->epoch_ns, &t) ||
	    __builtin_add_overflow(t, p_->t0_ns, &t) || __builtin_add_overflow(t, p_->quarantine_ns, &t))
		return UINT64_MAX;
	return t;
}

/*
 * Move every expired bucket to the free stack. A bucket of epoch e holds only QPNs released
 * before (e + 1) * epoch_ns: it may go once now >= t0 + (e + 1) * epoch_ns + quarantine.
 * Returns the number of QPNs released.
 */
uint64_t Pool::drain(uint64_t now)
{
	uint64_t total = 0;
	for (auto &b : p_->bucket) {
		uint64_t h = b.load(acq);
		while (head_idx(h) != kNil) {
			if (now < bucket_expiry(head_tag(h), now))
				break;
			/* In transit from before the bucket looks empty until after the free stack
			 * has the chain (see nothing_anywhere()). */
			p_->transit.fetch_add(1, sc);
			if (!b.compare_exchange_weak(h, head_make(kNil, head_tag(h)), sc, acq)) {
				p_->transit.fetch_sub(1, sc);
				continue;
			}
			auto hook = g_test_hooks.drain_holding.load(acq);
			if (hook != nullptr)
				hook();
			/* Walk the batches of the chain to count them and find the last tail. */
			uint32_t head = head_idx(h), cur = head, last = head;
			uint64_t n = 0;
			while (cur != kNil) {
				uint64_t hw = slot(cur).load(rlx);
				uint32_t t = slot_aux(hw);
				uint64_t tw = t == cur ? hw : slot(t).load(rlx);
				n += t == cur ? 1 : slot_aux(tw);
				/* Quarantine -> free, batch by batch, keeping each word's links. */
				for (uint32_t s = cur;; ) {
					uint64_t w = slot(s).load(rlx);
					slot(s).store((w & ~(3ull << 48)) | (static_cast<uint64_t>(kFree) << 48), rlx);
					if (s == t)
						break;
					s = slot_next(w);
				}
				last = t;
				cur = slot_next(slot(t).load(rlx));
			}
			push_free(head, last);
			p_->transit.fetch_sub(1, sc);
			total += n;
			break;
		}
	}
	if (total != 0)
		p_->released.fetch_add(total, rlx);
	return total;
}

bool Pool::quarantine_next(uint64_t *when) const
{
	bool any = false;
	uint64_t best = UINT64_MAX;
	const uint64_t now = now_ns();
	for (const auto &b : p_->bucket) {
		uint64_t h = b.load(sc);
		if (head_idx(h) == kNil)
			continue;
		uint64_t exp = bucket_expiry(head_tag(h), now);
		best = exp < best ? exp : best;
		any = true;
	}
	/* Released QPNs not yet sealed into a bucket get their stamp no earlier than now. */
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		if (p_->caches[i].open.count.load(rlx) != 0) {
			uint64_t exp = now + p_->quarantine_ns;
			best = exp < best ? exp : best;
			any = true;
			break;
		}
	}
	if (any)
		*when = best;
	return any;
}

/* ---- caches ------------------------------------------------------------------------------- */

/* Seal a cache's open chain: stamp it now (after every release in it) and hand it to the
 * shared quarantine. */
void Pool::seal(Chain &open, uint64_t stamp)
{
	uint32_t n = open.count.load(rlx);
	if (n == 0)
		return;
	uint32_t h = open.head.load(rlx), t = open.tail.load(rlx);
	chain_write_batch(h, t, n);
	push_quarantine(h, t, stamp);
	open.count.store(0, rlx);
	open.head.store(kNil, rlx);
	open.tail.store(kNil, rlx);
}

/* Give a cache chain of free QPNs back to the free stack. */
void Pool::give_back(Chain &c)
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

void Pool::flush_cache(Cache &c)
{
	if (c.ready.count.load(rlx) != 0 || c.spare.count.load(rlx) != 0)
		bump(c.flushes);
	give_back(c.ready);
	give_back(c.spare);
	seal(c.open, now_ns());
}

/*
 * Empty the caches of threads that are outside the pool, so that no QPN is stranded in an idle
 * thread's cache. Returns the number of caches emptied.
 */
unsigned Pool::steal(Cache *self)
{
	unsigned n = 0;
	uint32_t mypid = static_cast<uint32_t>(getpid()) & 0x3FFFFF;
	int32_t me = my_proc(p_);
	const uint32_t thief = me >= 0 ? static_cast<uint32_t>(me) + 1 : kAnyThief;
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		Cache &v = p_->caches[i];
		if (&v == self)
			continue;
		uint64_t owner = v.owner.load(acq);
		if (owner == 0)
			continue;
		if (v.ready.count.load(rlx) + v.spare.count.load(rlx) + v.open.count.load(rlx) == 0)
			continue;
		uint32_t expect = 0;
		if (!v.steal.compare_exchange_strong(expect, thief, acq_rel, rlx))
			continue; /* another thief is at it */
		bool other = owner_pid(owner) != mypid;
		if (heavy_barrier(other) && v.busy.load(acq) == 0) {
			flush_cache(v);
			n++;
		}
		v.steal.store(0, rel);
	}
	if (self != nullptr && n != 0)
		bump(self->steals, n);
	return n;
}

/* Does any cache (other than self) hold QPNs? They exist but are not reachable right now. */
bool Pool::anything_held(const Cache *self) const
{
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		const Cache &v = p_->caches[i];
		if (&v == self)
			continue;
		if (v.moving.load(acq) != 0 ||
		    v.ready.count.load(acq) + v.spare.count.load(acq) + v.open.count.load(acq) != 0)
			return true;
	}
	return false;
}

/*
 * The -ENOSPC verdict: no QPN free anywhere, after the caller found the free stack and the
 * quarantine empty. A QPN can hide from a scan only while some thread moves it between two
 * homes, and every such move is announced before its source looks empty: `transit` (drain, the
 * cacheless pop), a cache's `moving` (refill pop), `collecting` (range_remove). Those are read
 * after the sources, and the free stack once more at the end, so a move that finished in the
 * meantime is seen at its destination. Any doubt is -EAGAIN: try again.
 */
bool Pool::nothing_anywhere(const Cache *self) const
{
	uint64_t when;
	if (p_->transit.load(sc) != 0 || p_->collecting.load(sc) != 0)
		return false;
	if (quarantine_next(&when) || anything_held(self))
		return false;
	return head_idx(p_->free_top.load(sc)) == kNil;
}

/*
 * The cache ran dry: take the spare batch, else a batch from the free stack, else drain expired
 * quarantine buckets, else steal idle caches. Fails with -ENOSPC when no QPN is anywhere, and
 * with -EAGAIN when some exist but are in quarantine (or in a cache whose owner is mid-call).
 */
/*
 * range_remove() holds the free stack for one pass over it: an allocation that found the pool
 * empty in that window waits for it (the only wait in the pool, and only while a range is being
 * removed). Returns true if it waited, so the caller looks again.
 */
QPN_COLD bool Pool::wait_collector(Cache *self)
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
		if (holder_dead(col))
			reclaim(self, false);
		if (real_ns() > deadline)
			break;
	}
	return true;
}

QPN_COLD int Pool::refill(Cache &c)
{
	if (c.spare.count.load(rlx) != 0) {
		c.ready.head.store(c.spare.head.load(rlx), rlx);
		c.ready.tail.store(c.spare.tail.load(rlx), rlx);
		c.ready.count.store(c.spare.count.load(rlx), rlx);
		c.spare.count.store(0, rlx);
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
		c.moving.store(0, rel);
		if (got) {
			bump(c.refills);
			return 0;
		}
		uint64_t now = now_ns();
		/* Our own released QPNs start their quarantine clock now at the latest. */
		seal(c.open, now);
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

QPN_HOT int Pool::alloc_one(Cache *c, uint32_t *qpn, uint32_t *gen, uint32_t flags)
{
	if (c->ready.count.load(rlx) == 0) {
		if (c->spare.count.load(rlx) == 0)
			bump(c->misses);
		else
			bump(c->hits);
		int rc = refill(*c);
		if (rc != 0)
			return rc;
	} else {
		bump(c->hits);
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
	/* The slot is ours alone (it sat in our cache): a plain store suffices. It records the
	 * holder's process (from the owner word, on the cache line already loaded), so that a
	 * reclaim can recover it if the process dies. */
	uint32_t g = (slot_gen(w) + 1) & kGenMask;
	slot(s).store(slot_make(kNil, owner_holder(c->owner.load(rlx)) | flags, kInUse, g), rlx);
	*qpn = slot_to_qpn(s, &c->range_hint);
	if (gen != nullptr)
		*gen = g;
	return 0;
}

/* No cache for this thread (all claimed, or a thief holds ours): work on the shared pool. */
QPN_COLD int Pool::alloc_bypass(uint32_t *qpn, uint32_t *gen, uint32_t flags)
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

/* In use, handed out (not inside a bulk that may roll back), and of the given generation. */
QPN_HOT bool freeable(uint64_t w, bool check_gen, uint32_t gen)
{
	return slot_state(w) == kInUse && (slot_aux(w) & kUnpublished) == 0 &&
	       (!check_gen || slot_gen(w) == (gen & kGenMask));
}

/*
 * Release. The CAS out of kInUse is the linearisation point: of two racing frees of one QPN
 * exactly one wins, and the loser is refused like any other double free.
 */
QPN_HOT int Pool::free_one(Cache *c, uint32_t qpn, bool check_gen, uint32_t gen)
{
	uint32_t s;
	if (qpn > MLX5_QPN_MAX || !qpn_to_slot(qpn, &s, c != nullptr ? &c->range_hint : nullptr))
		return -EINVAL;
	const bool quar = p_->quarantine_ns != 0;
	auto &sw = slot(s);
	uint64_t w = sw.load(rlx);
	if (c == nullptr) {
		for (;;) {
			if (!freeable(w, check_gen, gen))
				return -EINVAL;
			uint64_t nw = slot_make(kNil, s, quar ? kQuarantine : kFree, slot_gen(w));
			if (sw.compare_exchange_weak(w, nw, acq_rel, rlx))
				break;
		}
		if (quar) {
			push_quarantine(s, s, now_ns());
			p_->bypass_quarantined.fetch_add(1, rlx);
		} else {
			push_free(s, s);
		}
		p_->bypass_frees.fetch_add(1, rlx);
		return 0;
	}
	Chain &into = quar ? c->open : c->ready;
	uint32_t n = into.count.load(rlx);
	uint32_t head = n != 0 ? into.head.load(rlx) : kNil;
	for (;;) {
		if (!freeable(w, check_gen, gen))
			return -EINVAL;
		uint64_t nw = slot_make(head, kNil, quar ? kQuarantine : kFree, slot_gen(w));
		if (sw.compare_exchange_weak(w, nw, acq_rel, rlx))
			break;
	}
	into.head.store(s, rlx);
	if (n == 0)
		into.tail.store(s, rlx);
	into.count.store(n + 1, rlx);
	bump(c->frees);
	if (quar) {
		bump(c->quarantined);
		if (n + 1 >= p_->batch)
			seal(c->open, now_ns());
	} else if (n + 1 > p_->batch) {
		/* Cache full: keep this batch as the spare, giving the old spare back. */
		give_back(c->spare);
		bump(c->flushes);
		c->spare.head.store(c->ready.head.load(rlx), rlx);
		c->spare.tail.store(c->ready.tail.load(rlx), rlx);
		c->spare.count.store(c->ready.count.load(rlx), rlx);
		c->ready.count.store(0, rlx);
	}
	return 0;
}

/* ---- crash recovery ------------------------------------------------------------------------- */

/*
 * A process that dies leaves behind whatever it held: QPNs in use (their slots name it as
 * holder), its caches (claimed, maybe marked busy mid-call), and any chain it was moving between
 * two homes at the instant of death (a popped batch, a drained bucket, the free stack held by
 * range_remove, a slot freed but not yet linked). Rather than repair each of those windows, a
 * reclaim stops the world and audits the pool:
 *
 * 1. it takes the range lock (a robust mutex: a holder that died hands it over with EOWNERDEAD),
 *    so no range is added or removed and no other reclaim runs;
 * 2. it sets `stw` and holds every cache like a thief (membarrier, then each live owner's `busy`
 *    must read 0), and waits until no live process is inside a cacheless call (`busy` of its
 *    process entry). Now no live thread is moving anything; the dead ones never will;
 * 3. it marks every slot reachable from a live home (free stack, buckets, live caches), walking
 *    defensively (indices bounded, nothing visited twice, at most nb_slots steps);
 * 4. every slot of a live range that is not marked and not in use by a live holder is stranded:
 *    in use by a dead holder, or in quarantine -> quarantine, stamped now (after the death was
 *    noticed, so nothing the dead let go comes back before the quarantine: invariant 5); free (it
 *    left quarantine before, or was never handed out) -> the free stack. A slot is collected
 *    once, so nothing is doubled (invariant 1) and nothing stays stranded (invariant 4).
 * 5. dead caches are emptied and unclaimed, dead process entries cleared, counters fixed, and the
 *    world released.
 * The fast paths pay nothing for this: alloc writes the holder into the slot word it writes
 * anyway, and a cache held by the reclaimer is bypassed exactly as one held by a thief.
 */

/* `plus1` is a process index + 1 from a `collecting` or `steal` word: is that process dead? */
bool Pool::holder_dead(uint32_t plus1) const
{
	if (plus1 == 0 || plus1 - 1 >= kMaxProcs)
		return false;
	uint64_t id = p_->procs[plus1 - 1].ident.load(acq);
	return id != 0 && proc_dead(id);
}

constexpr uint64_t kDeadCheckNs = 50 * 1000 * 1000; /* automatic death checks: 20 per second */
constexpr uint64_t kStwWaitNs = 500 * 1000 * 1000;  /* longest a reclaim waits for live threads */

/* Rate-limited, pool-wide: is some process of the table dead? Then reclaim (without blocking). */
QPN_COLD bool Pool::maybe_reclaim(Cache *self)
{
	const uint64_t now = real_ns();
	uint64_t next = p_->next_check_ns.load(rlx);
	if (now < next && p_->need_audit.load(acq) == 0)
		return false;
	if (!p_->next_check_ns.compare_exchange_strong(next, now + kDeadCheckNs, rlx, rlx))
		return false; /* another thread checks now */
	bool any = p_->need_audit.load(acq) != 0;
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs && !any; i++) {
		uint64_t id = p_->procs[i].ident.load(acq);
		any = id != 0 && id != me && proc_dead(id);
	}
	return any && reclaim(self, false) > 0;
}

/* A cacheless caller found a reclaim in progress: wait (bounded checks of the reclaimer). */
QPN_COLD void Pool::wait_stw()
{
	for (uint32_t i = 1;; i++) {
		uint64_t holder = p_->stw.load(acq);
		if (holder == 0)
			return;
		rte_pause();
		if ((i & 4095) == 0 && proc_dead(holder))
			reclaim(nullptr, true); /* its lock comes back EOWNERDEAD: we finish the job */
		if ((i & 4095) == 0)
			sched_yield();
	}
}

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
bool lock_ranges(mlx5_qpn_pool *p, bool block, bool *owner_died)
{
	int rc = block ? pthread_mutex_lock(&p->range_lock) : pthread_mutex_trylock(&p->range_lock);
	*owner_died = false;
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&p->range_lock);
		p->need_audit.store(1, rel);
		*owner_died = true;
		POOL_LOG(WARNING, "pool %s: a process died holding the range lock", p->name);
		return true;
	}
	return rc == 0;
}

int Pool::reclaim(Cache *self, bool block)
{
	bool died;
	if (!lock_ranges(p_, block, &died))
		return 0; /* another thread is at it (or a range call is running): it will do */
	int rc = reclaim_locked(self);
	pthread_mutex_unlock(&p_->range_lock);
	return rc;
}

namespace {

/* Visited-slot bitmap of an audit. */
struct Marks {
	uint64_t *bits;
	uint32_t n;
	bool mark(uint32_t s)
	{
		if (s >= n || (bits[s / 64] >> (s % 64)) & 1)
			return false;
		bits[s / 64] |= 1ull << (s % 64);
		return true;
	}
	bool marked(uint32_t s) const { return s < n && ((bits[s / 64] >> (s % 64)) & 1); }
};

} // namespace

/* Range lock held. Returns the number of QPNs recovered, or -EAGAIN / -ENOMEM. */
int Pool::reclaim_locked(Cache *self)
{
	bool dead[kMaxProcs];
	unsigned nd = 0;
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		uint64_t id = p_->procs[i].ident.load(acq);
		dead[i] = id != 0 && id != me && proc_dead(id);
		nd += dead[i];
	}
	if (nd == 0 && p_->need_audit.load(acq) == 0)
		return 0;

	/* 2. Stop the world. */
	const uint32_t mypid = static_cast<uint32_t>(getpid()) & 0x3FFFFF;
	int32_t mine = my_proc(p_);
	const uint32_t thief = mine >= 0 ? static_cast<uint32_t>(mine) + 1 : kAnyThief;
	const uint32_t nc = p_->nb_caches;
	/* A process killed just before this reclaim may die only while it runs (SIGKILL is delivered
	 * asynchronously): one found dead later joins the dead; it cannot come back. */
	auto now_dead = [&](uint32_t proc) {
		if (proc >= kMaxProcs)
			return false;
		if (dead[proc])
			return true;
		uint64_t id = p_->procs[proc].ident.load(acq);
		if (id == 0 || id == me || !proc_dead(id))
			return false;
		dead[proc] = true;
		nd++;
		return true;
	};
	bool held[MLX5_QPN_MAX_CACHES] = {};
	bool cdead[MLX5_QPN_MAX_CACHES] = {};
	/* A live owner's cache that a thief died inside: its chains may already be partly in the
	 * free stack, so they are not a home; the owner keeps the (emptied) cache. */
	bool tainted[MLX5_QPN_MAX_CACHES] = {};
	bool other = false;
	int rc = 0;
	const uint64_t deadline = real_ns() + kStwWaitNs;
	p_->stw.store(me, sc);
	for (uint32_t i = 0; i < nc && rc == 0; i++) {
		Cache &v = p_->caches[i];
		if (&v == self)
			continue;
		uint64_t owner = v.owner.load(acq);
		uint32_t op = static_cast<uint32_t>(owner >> 44);
		if (owner != 0 && op != 0 && op - 1 < kMaxProcs)
			cdead[i] = dead[op - 1];
		else if (owner != 0 && op == 0) /* no table entry: the pid alone */
			cdead[i] = kill(static_cast<pid_t>(owner_pid(owner)), 0) != 0 && errno == ESRCH;
		for (;;) {
			uint32_t e = 0;
			if (v.steal.compare_exchange_strong(e, thief, acq_rel, acq))
				break;
			/* A thief that died holding it hands it over; a live one finishes soon. */
			if (e != kAnyThief && e != 0 && now_dead(e - 1) &&
			    v.steal.compare_exchange_strong(e, thief, acq_rel, acq)) {
				tainted[i] = true;
				break;
			}
			if (real_ns() > deadline) {
				POOL_LOG(WARNING, "pool %s: reclaim: cache %u stays held by thief %u",
					 p_->name, i, e);
				rc = -EAGAIN;
				break;
			}
			sched_yield();
		}
		if (rc != 0)
			break;
		held[i] = true;
		other |= owner != 0 && !cdead[i] && owner_pid(owner) != mypid;
	}
	if (rc == 0 && !heavy_barrier(other)) {
		POOL_LOG(WARNING, "pool %s: reclaim: no membarrier", p_->name);
		rc = -EAGAIN; /* cannot prove the live owners are outside */
	}
	/* Wait for a live thread to leave the pool (or for its process to turn out dead). */
	auto wait_zero = [&](const std::atomic<uint32_t> &a, const char *what, uint32_t i,
			     uint32_t proc) {
		while (rc == 0 && a.load(sc) != 0) {
			if (now_dead(proc))
				return true;
			if (real_ns() > deadline) {
				POOL_LOG(WARNING, "pool %s: reclaim: %s %u stays busy", p_->name, what, i);
				rc = -EAGAIN;
			} else {
				sched_yield();
			}
		}
		return false;
	};
	for (uint32_t i = 0; i < nc && rc == 0; i++) {
		uint32_t op = static_cast<uint32_t>(p_->caches[i].owner.load(acq) >> 44);
		if (held[i] && !cdead[i] && wait_zero(p_->caches[i].busy, "cache", i, op - 1))
			cdead[i] = true;
	}
	for (uint32_t i = 0; i < kMaxProcs && rc == 0; i++)
		if (!dead[i])
			wait_zero(p_->procs[i].busy, "process", i, i);
	wait_zero(p_->anon_busy, "anonymous", 0, kMaxProcs);
	/* Caches of processes found dead while waiting (after their own cache was looked at). */
	for (uint32_t i = 0; i < nc && rc == 0; i++) {
		uint32_t op = static_cast<uint32_t>(p_->caches[i].owner.load(acq) >> 44);
		if (held[i] && op != 0 && op - 1 < kMaxProcs && dead[op - 1])
			cdead[i] = true;
	}

	/* 3. Mark what live homes hold. */
	const uint32_t ns = p_->nb_slots.load(acq);
	Marks m{nullptr, ns};
	if (rc == 0) {
		m.bits = static_cast<uint64_t *>(calloc(ns / 64 + 1, sizeof(uint64_t)));
		if (m.bits == nullptr)
			rc = -ENOMEM;
	}
	uint64_t recovered = 0, inuse = 0;
	if (rc == 0) {
		auto walk_batches = [&](uint32_t b) {
			for (uint32_t steps = 0; b != kNil && steps <= ns;) {
				if (b >= ns)
					return;
				uint32_t t = slot_aux(slot(b).load(acq));
				for (uint32_t s = b;; steps++) {
					if (!m.mark(s) || steps > ns)
						return; /* out of bounds or a loop: stop, the sweep decides */
					if (s == t)
						break;
					s = slot_next(slot(s).load(acq));
				}
				b = slot_next(slot(t).load(acq));
			}
		};
		auto walk_chain = [&](const Chain &c) {
			uint32_t s = c.head.load(acq);
			for (uint32_t k = c.count.load(acq); k != 0 && m.mark(s); k--)
				s = slot_next(slot(s).load(acq));
		};
		walk_batches(head_idx(p_->free_top.load(acq)));
		for (auto &b : p_->bucket)
			walk_batches(head_idx(b.load(acq)));
		for (uint32_t i = 0; i < nc; i++) {
			if (cdead[i] || tainted[i])
				continue;
			const Cache &v = p_->caches[i];
			walk_chain(v.ready);
			walk_chain(v.spare);
			walk_chain(v.open);
		}

		/* 4. Sweep the live ranges: collect what nobody alive holds or can reach. */
		uint32_t fh = kNil, ft = kNil, fn = 0, qh = kNil, qt = kNil, qn = 0;
		const uint64_t stamp = now_ns(); /* after the deaths were noticed */
		auto flush_free = [&]() {
			if (fn != 0) {
				chain_write_batch(fh, ft, fn);
				push_free(fh, ft);
			}
			fh = ft = kNil;
			fn = 0;
		};
		auto flush_quar = [&]() {
			if (qn != 0) {
				chain_write_batch(qh, qt, qn);
				push_quarantine(qh, qt, stamp);
			}
			qh = qt = kNil;
			qn = 0;
		};
		const bool quar_on = p_->quarantine_ns != 0;
		auto collect = [&](uint32_t s, uint64_t w, bool to_free) {
			to_free |= !quar_on;
			uint32_t &h = to_free ? fh : qh, &t = to_free ? ft : qt, &n = to_free ? fn : qn;
			slot(s).store(slot_make(h, kNil, to_free ? kFree : kQuarantine, slot_gen(w)), rlx);
			if (n == 0)
				t = s;
			h = s;
			recovered++;
			if (++n == p_->batch) {
				if (to_free)
					flush_free();
				else
					flush_quar();
			}
		};
		const uint32_t nr = p_->nb_ranges.load(acq);
		for (uint32_t ri = 0; ri < nr; ri++) {
			const Range &r = p_->ranges[ri];
			const uint32_t base = r.base.load(acq), cnt = r.count.load(acq);
			for (uint32_t s = base; cnt != 0 && s < base + cnt && s < ns; s++) {
				uint64_t w = slot(s).load(acq);
				uint64_t st = slot_state(w);
				if (st == kInUse) {
					uint32_t hd = slot_aux(w) & kHolderMask;
					if (hd >= kMaxProcs || !dead[hd])
						continue;
					bool unpublished = (slot_aux(w) & kUnpublished) != 0;
					inuse += !unpublished;
					collect(s, w, unpublished); /* a bulk's QPN was never handed out */
				} else if (!m.marked(s)) {
					collect(s, w, st != kQuarantine);
				}
			}
		}
		flush_free();
		flush_quar();
		free(m.bits);
	}

	/* 5. Release the world: dead caches emptied and unclaimed, live ones given back. */
	for (uint32_t i = 0; i < nc; i++) {
		if (!held[i])
			continue;
		Cache &v = p_->caches[i];
		if (rc == 0 && cdead[i]) {
			drop_chains(v);
			v.busy.store(0, rlx);
			v.owner.store(0, rel);
		} else if (rc == 0 && tainted[i]) {
			drop_chains(v); /* swept above like a dead cache's; the live owner finds it empty */
		}
		v.steal.store(0, rel);
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < kMaxProcs; i++)
			if (dead[i]) {
				p_->procs[i].busy.store(0, rlx);
				p_->procs[i].ident.store(0, rel);
			}
		/* No live thread is between two homes now; what these still count is the dead's. */
		p_->transit.store(0, sc);
		p_->collecting.store(0, rel);
		if (p_->need_audit.load(acq) != 0) {
			/* A range call died: its sorted-index update may be half done. Rebuild it. */
			uint32_t seq = p_->sorted_seq.load(rlx);
			p_->sorted_seq.store(seq | 1, sc);
			uint32_t k = 0;
			const uint32_t nr = p_->nb_ranges.load(acq);
			for (uint32_t ri = 0; ri < nr; ri++) {
				if (p_->ranges[ri].count.load(acq) == 0)
					continue;
				uint32_t f = p_->ranges[ri].first.load(rlx), pos = k++;
				while (pos > 0 && p_->ranges[p_->sorted[pos - 1].load(rlx)].first.load(rlx) > f) {
					p_->sorted[pos].store(p_->sorted[pos - 1].load(rlx), rel);
					pos--;
				}
				p_->sorted[pos].store(static_cast<uint16_t>(ri), rel);
			}
			p_->nb_sorted.store(k, rel);
			p_->sorted_seq.store((seq | 1) + 1, rel);
			p_->need_audit.store(0, rel);
		}
		/* The reclaimed in-use QPNs count as freed into quarantine (in_use stays exact). */
		p_->bypass_frees.fetch_add(inuse, rlx);
		p_->bypass_quarantined.fetch_add(inuse, rlx);
		p_->dead_processes.fetch_add(nd, rlx);
		p_->reclaimed.fetch_add(recovered, rlx);
	}
	p_->stw.store(0, sc);
	if (rc == 0 && (nd != 0 || recovered != 0))
		POOL_LOG(INFO, "pool %s: %u dead process(es), %" PRIu64 " QPNs recovered (%" PRIu64
			 " in use)", p_->name, nd, recovered, inuse);
	if (rc != 0)
		return rc;
	return recovered > INT32_MAX ? INT32_MAX : static_cast<int>(recovered);
}

} /* namespace */

/* ---- thread binding ------------------------------------------------------------------------- */

namespace {

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
};

/* Plain thread_local (no C++ destructor): the flush at thread exit is a pthread key destructor,
 * which runs when a thread exits but not when the process does (after rte_eal_cleanup() the
 * pool memory may be gone). */
/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per pool call */
__attribute__((tls_model("initial-exec"))) thread_local ThreadCaches t_caches;
pthread_key_t g_exit_key;
pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

void release_cache(mlx5_qpn_pool *p, uint32_t idx)
{
	Pool pool(p);
	Cache &c = p->caches[idx];
	/* We are the owner and inside no call: flush, then give the cache up. */
	c.busy.store(1, rlx);
	std::atomic_signal_fence(std::memory_order_seq_cst);
	if (c.steal.load(acq) == 0)
		pool.flush_cache(c);
	c.busy.store(0, rel);
	/*
	 * Wait out a thief that is still inside (it saw busy == 0 before we set it). A thief that
	 * died inside (a process killed in steal()) never lets go: then our chains cannot be trusted
	 * (part of them may be in the free stack already), so they are dropped and the next reclaim
	 * sweeps every QPN they held back (free, or quarantine stamped then). No reclaim from here:
	 * the caller holds g_reg_mutex, which a reclaim takes.
	 */
	for (uint32_t spins = 1;; spins++) {
		uint32_t e = c.steal.load(acq);
		if (e == 0)
			break;
		if ((spins & 0x3FF) == 0 && e != kAnyThief && pool.holder_dead(e) &&
		    c.steal.compare_exchange_strong(e, kAnyThief, acq_rel, acq)) {
			drop_chains(c);
			p->need_audit.store(1, rel);
			c.steal.store(0, rel);
			POOL_LOG(NOTICE, "pool %s: cache %u: its thief died inside it; the next reclaim sweeps its QPNs back",
				 p->name, idx);
			break;
		}
		rte_pause();
	}
	c.owner.store(0, rel);
}

void on_thread_exit(void *arg)
{
	auto *tc = static_cast<ThreadCaches *>(arg);
	std::lock_guard<std::mutex> g(g_reg_mutex);
	for (uint32_t i = 0; i < tc->n; i++)
		for (auto &e : g_registry)
			if (e.pool == tc->b[i].pool && e.uid == tc->b[i].uid)
				release_cache(tc->b[i].pool, tc->b[i].cache);
	tc->n = 0;
}

void make_exit_key() { pthread_key_create(&g_exit_key, on_thread_exit); }

__attribute__((noinline)) Cache *bind_cache(mlx5_qpn_pool *p)
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
			/* A pool freed and recreated at the same address: rebind. */
			tc.b[i] = tc.b[--tc.n];
			break;
		}
	if (tc.n == RTE_DIM(tc.b)) {
		/* Full: drop the bindings of pools freed since (their cache went with the pool). Without
		 * this, a thread that had used 8 pools never got a cache again. */
		std::lock_guard<std::mutex> g(g_reg_mutex);
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
		    p->caches[i].owner.compare_exchange_strong(expect, me, acq_rel, rlx)) {
			tc.b[tc.n++] = tc.b[0];
			tc.b[0] = {p, p->uid, i};
			pthread_once(&g_exit_once, make_exit_key);
			pthread_setspecific(g_exit_key, &tc);
			return &p->caches[i];
		}
	}
	return nullptr; /* every cache is claimed: this thread works on the shared pool */
}

/* Enter the pool with our cache, or nullptr if we must bypass it. */
inline Cache *enter(mlx5_qpn_pool *p)
{
	ThreadCaches &tc = t_caches;
	Cache *c = nullptr;
	if (likely(tc.n != 0 && tc.b[0].pool == p && tc.b[0].uid == p->uid))
		c = &p->caches[tc.b[0].cache];
	else
		c = bind_cache(p);
	if (c == nullptr)
		return nullptr;
	c->busy.store(1, rlx);
	std::atomic_signal_fence(std::memory_order_seq_cst);
	if (unlikely(c->steal.load(acq) != 0)) {
		c->busy.store(0, rel);
		return nullptr;
	}
	return c;
}

inline void leave(Cache *c)
{
	if (c != nullptr)
		c->busy.store(0, rel);
}

bool valid_pool(const mlx5_qpn_pool *p) { return p != nullptr && p->magic == kPoolMagic; }

size_t pool_size(uint32_t capacity)
{
	return sizeof(mlx5_qpn_pool) + static_cast<size_t>(capacity) * sizeof(uint64_t);
}

std::atomic<uint64_t> g_uid_seq{1};

} /* namespace */

static int alloc_bulk_in(Pool &pool, Cache *c, uint32_t *qpns, unsigned int n);

/* ---- fork: a child is a new process of the pool ---------------------------------------------- */

namespace {

/* The child of fork() inherits the forking thread's bindings to its parent's caches and the
 * parent's process identity: forget both, so it claims its own cache and table entry. */
void on_fork_child()
{
	t_caches.n = 0;
	proc_forget_self();
	for (auto &e : g_registry)
		e.proc = -1;
	g_barrier.store(static_cast<int>(Barrier::kUnknown), rlx); /* membarrier registration is per mm */
}

pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
void install_fork_handler() { pthread_atfork(nullptr, nullptr, on_fork_child); }

bool params_ok(const mlx5_qpn_pool_params *prm)
{
	return prm != nullptr && prm->name != nullptr && prm->name[0] != '\0' &&
	       strlen(prm->name) <= MLX5_QPN_POOL_NAMESIZE && prm->cache_size != 0 &&
	       prm->cache_size <= 65536 && prm->capacity != 0 && prm->capacity <= kMaxSlots;
}

} // namespace

size_t qpn_pool_size(uint32_t capacity) { return pool_size(capacity); }

struct mlx5_qpn_pool *qpn_pool_init_at(void *mem, size_t len, const struct mlx5_qpn_pool_params *prm)
{
	if (mem == nullptr || !params_ok(prm) || len < pool_size(prm->capacity) ||
	    reinterpret_cast<uintptr_t>(mem) % alignof(mlx5_qpn_pool) != 0) {
		rte_errno = EINVAL;
		return nullptr;
	}
	memset(mem, 0, pool_size(prm->capacity));
	auto *p = new (mem) mlx5_qpn_pool();
	p->uid = (static_cast<uint64_t>(getpid()) << 32) ^ now_ns() ^ g_uid_seq.fetch_add(1);
	snprintf(p->name, sizeof(p->name), "%s", prm->name);
	p->quarantine_ns = prm->quarantine_ns;
	/* Eight buckets per quarantine time: a batch waits at most one bucket width too long. */
	p->epoch_ns = prm->quarantine_ns / 8 > 1000 ? prm->quarantine_ns / 8 : 1000;
	p->t0_ns = now_ns();
	p->batch = prm->cache_size;
	p->capacity = prm->capacity;
	p->socket_id = prm->socket_id;
	p->nb_caches = MLX5_QPN_MAX_CACHES;
	p->free_top.store(head_make(kNil, 0), rlx);
	for (auto &b : p->bucket)
		b.store(head_make(kNil, 0), rlx);
	/* Process-shared and robust: a process that dies holding it (inside add_range or
	 * range_remove) hands it to the next locker with EOWNERDEAD, which audits the pool. */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&p->range_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	for (auto &c : p->caches) {
		c.ready.head.store(kNil, rlx);
		c.spare.head.store(kNil, rlx);
		c.open.head.store(kNil, rlx);
	}
	p->magic = kPoolMagic;
	pthread_once(&g_fork_once, install_fork_handler);
	registry_add(p);
	barrier_kind();
	POOL_LOG(DEBUG, "pool %s: capacity %u, cache %u, quarantine %" PRIu64 " ns, socket %d",
		 p->name, p->capacity, p->batch, p->quarantine_ns, p->socket_id);
	return p;
}

void qpn_pool_fini_at(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	registry_del(p);
	for (uint32_t i = 0; i < t_caches.n; i++)
		if (t_caches.b[i].pool == p) {
			t_caches.b[i] = t_caches.b[--t_caches.n];
			break;
		}
	p->magic = 0;
	pthread_mutex_destroy(&p->range_lock);
	p->~mlx5_qpn_pool();
}

/* ---- public API ----------------------------------------------------------------------------- */

extern "C" {

uint64_t mlx5_qpn_clock_ns(void) { return now_ns(); }

struct mlx5_qpn_pool *mlx5_qpn_pool_create(const struct mlx5_qpn_pool_params *prm)
{
	if (!params_ok(prm)) {
		rte_errno = EINVAL;
		return nullptr;
	}
	if (rte_eal_process_type() != RTE_PROC_PRIMARY) {
		rte_errno = E_RTE_SECONDARY;
		return nullptr;
	}
	char zname[RTE_MEMZONE_NAMESIZE];
	snprintf(zname, sizeof(zname), "%s%s", kZonePrefix, prm->name);
	if (rte_memzone_lookup(zname) != nullptr) {
		rte_errno = EEXIST;
		return nullptr;
	}
	/* The pool body comes from rte_malloc on the requested socket; a small named memzone holds
	 * its address so that any process of this DPDK instance can find it. */
	void *mem = rte_zmalloc_socket(zname, pool_size(prm->capacity), RTE_CACHE_LINE_SIZE,
				       prm->socket_id);
	if (mem == nullptr) {
		POOL_LOG(ERR, "pool %s: no memory for %u QPNs (%zu bytes)", prm->name, prm->capacity,
			 pool_size(prm->capacity));
		rte_errno = ENOMEM;
		return nullptr;
	}
	const struct rte_memzone *mz = rte_memzone_reserve(zname, sizeof(void *), prm->socket_id, 0);
	if (mz == nullptr) {
		int err = rte_errno;
		rte_free(mem);
		rte_errno = err == EEXIST ? EEXIST : ENOMEM;
		return nullptr;
	}
	auto *p = qpn_pool_init_at(mem, pool_size(prm->capacity), prm);
	*static_cast<mlx5_qpn_pool **>(mz->addr) = p;
	return p;
}

struct mlx5_qpn_pool *mlx5_qpn_pool_lookup(const char *name)
{
	char zname[RTE_MEMZONE_NAMESIZE];
	if (name == nullptr || strlen(name) > MLX5_QPN_POOL_NAMESIZE) {
		rte_errno = ENOENT;
		return nullptr;
	}
	snprintf(zname, sizeof(zname), "%s%s", kZonePrefix, name);
	const struct rte_memzone *mz = rte_memzone_lookup(zname);
	if (mz == nullptr) {
		rte_errno = ENOENT;
		return nullptr;
	}
	auto *p = *static_cast<mlx5_qpn_pool *const *>(mz->addr);
	if (!valid_pool(p)) {
		rte_errno = ENOENT;
		return nullptr;
	}
	pthread_once(&g_fork_once, install_fork_handler);
	registry_add(p);
	barrier_kind();
	return p;
}

void mlx5_qpn_pool_free_pool(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	char zname[RTE_MEMZONE_NAMESIZE];
	snprintf(zname, sizeof(zname), "%s%s", kZonePrefix, p->name);
	/* Also forgets our own binding, so that a pool created later at this address is bound
	 * afresh. */
	qpn_pool_fini_at(p);
	const struct rte_memzone *mz = rte_memzone_lookup(zname);
	if (mz != nullptr)
		rte_memzone_free(mz);
	rte_free(p);
}

/* Insert entry ri into the sorted index (range_lock held), under the seqlock. */
static void sorted_insert(mlx5_qpn_pool *p, uint32_t ri, uint32_t first)
{
	uint32_t n = p->nb_sorted.load(rlx);
	/* acq_rel: the index stores below cannot move above the odd sequence number; release
	 * stores: a reader that sees a new index entry also sees the odd number, and retries. */
	p->sorted_seq.fetch_add(1, acq_rel);
	uint32_t pos = n;
	while (pos > 0 && p->ranges[p->sorted[pos - 1].load(rlx)].first.load(rlx) > first) {
		p->sorted[pos].store(p->sorted[pos - 1].load(rlx), rel);
		pos--;
	}
	p->sorted[pos].store(static_cast<uint16_t>(ri), rel);
	p->nb_sorted.store(n + 1, rel);
	p->sorted_seq.fetch_add(1, rel);
}

/* Take entry ri out of the sorted index (range_lock held), under the seqlock. */
static void sorted_remove(mlx5_qpn_pool *p, uint32_t ri)
{
	uint32_t n = p->nb_sorted.load(rlx);
	p->sorted_seq.fetch_add(1, acq_rel);
	uint32_t pos = 0;
	while (pos < n && p->sorted[pos].load(rlx) != ri)
		pos++;
	for (; pos + 1 < n; pos++)
		p->sorted[pos].store(p->sorted[pos + 1].load(rlx), rel);
	p->nb_sorted.store(n - 1, rel);
	p->sorted_seq.fetch_add(1, rel);
}

int mlx5_qpn_pool_add_range(struct mlx5_qpn_pool *p, uint32_t first, uint32_t count)
{
	/* The last QPN must be below 0xFFFFFF: that one is the multicast QPN, never a connection's. */
	if (!valid_pool(p) || count == 0 || first >= MLX5_QPN_MAX || count > MLX5_QPN_MAX - first)
		return -EINVAL;
	Pool pool(p);
	bool died;
	lock_ranges(p, true, &died);
	if (died)
		pool.reclaim_locked(nullptr);
	uint32_t n = p->nb_ranges.load(rlx);
	const uint64_t now = now_ns();
	const uint64_t grace = p->quarantine_ns > kRegionGraceNs ? p->quarantine_ns : kRegionGraceNs;
	uint32_t reuse = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		const Range &r = p->ranges[i];
		uint32_t rf = r.first.load(rlx), rc = r.count.load(rlx);
		if (rc != 0 && first < rf + rc && rf < first + count) {
			pthread_mutex_unlock(&p->range_lock);
			POOL_LOG(ERR, "pool %s: range [0x%x, +%u) overlaps [0x%x, +%u)", p->name,
				 first, count, rf, rc);
			return -EINVAL;
		}
		/* A removed entry of the same size, past its grace period: take it and its slots. */
		uint64_t rem = r.removed_ns.load(rlx);
		if (rc == 0 && rem != 0 && reuse == UINT32_MAX && r.size.load(rlx) == count &&
		    now - rem >= grace)
			reuse = i;
	}
	uint32_t ri, base;
	if (reuse != UINT32_MAX) {
		ri = reuse;
		base = p->ranges[ri].base.load(rlx);
	} else {
		ri = n;
		base = p->nb_slots.load(rlx);
		if (n == MLX5_QPN_MAX_RANGES || count > p->capacity - base) {
			pthread_mutex_unlock(&p->range_lock);
			POOL_LOG(ERR, "pool %s: no room for %u more QPNs (%u of %u slots used, %u ranges)",
				 p->name, count, base, p->capacity, n);
			return -ENOSPC;
		}
	}
	/* Lay the new slots out as batches of the cache size, linked into one chain. */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t s = base + i;
		uint32_t bstart = i - i % p->batch;
		uint32_t bend = bstart + p->batch < count ? bstart + p->batch : count; /* exclusive */
		uint32_t next = i + 1 < count ? s + 1 : kNil;
		uint32_t aux = kNil;
		if (i == bstart)
			aux = base + bend - 1;         /* head: its tail */
		else if (i == bend - 1)
			aux = bend - bstart;           /* tail: the length */
		pool.slot(s).store(slot_make(next, aux, kFree, 0), rlx);
	}
	Range &r = p->ranges[ri];
	r.first.store(first, rlx);
	r.base.store(base, rlx);
	r.size.store(count, rlx);
	r.removed_ns.store(0, rlx);
	r.count.store(count, rel); /* last: the entry matches nothing until now */
	if (ri == n) {
		p->nb_slots.store(base + count, rel);
		p->nb_ranges.store(n + 1, rel);
	}
	p->live_slots.fetch_add(count, rel);
	sorted_insert(p, ri, first);
	pthread_mutex_unlock(&p->range_lock);
	pool.push_free(base, base + count - 1);
	return 0;
}

} /* extern "C" */

namespace {

/* Points of range_remove() where a test can stop it (test hook remove_stage). */
enum RemoveStage { kStageHolding = 1, kStageRetiring = 2 };

void remove_stage(int stage)
{
	auto hook = g_test_hooks.remove_stage.load(acq);
	if (hook != nullptr)
		hook(stage);
}

} // namespace

extern "C" {

int mlx5_qpn_pool_range_remove(struct mlx5_qpn_pool *p, uint32_t first)
{
	if (!valid_pool(p) || first > MLX5_QPN_MAX)
		return -EINVAL;
	Pool pool(p);
	bool died;
	lock_ranges(p, true, &died);
	if (died)
		pool.reclaim_locked(nullptr);
	uint32_t n = p->nb_ranges.load(rlx), ri = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++)
		if (p->ranges[i].count.load(rlx) != 0 && p->ranges[i].first.load(rlx) == first)
			ri = i;
	if (ri == UINT32_MAX) {
		pthread_mutex_unlock(&p->range_lock);
		return -ENOENT;
	}
	Range &r = p->ranges[ri];
	const uint32_t base = r.base.load(rlx), cnt = r.count.load(rlx);
	auto in_range = [&](uint32_t s) { return s - base < cnt; };
	/* QPNs of the range left in idle caches go to the free stack first. */
	pool.steal(nullptr);
	/*
	 * Hold the whole free stack privately while it is examined: allocations that find the
	 * shared pool empty meanwhile wait for `collecting` to clear (see refill()), so none fails
	 * for want of QPNs that are only being looked at.
	 */
	int32_t me = my_proc(p);
	p->collecting.store(me >= 0 ? static_cast<uint32_t>(me) + 1 : kAnyThief, rel);
	uint64_t top = p->free_top.load(acq);
	while (!p->free_top.compare_exchange_weak(top,
			head_make(kNil, (head_tag(top) + 1) & kTagMask), acq_rel, acq))
		;
	uint32_t head = head_idx(top);
	remove_stage(kStageHolding);
	/* Pass 1: are all the range's QPNs here? */
	uint32_t found = 0;
	for (uint32_t b = head; b != kNil;) {
		uint64_t hw = pool.slot(b).load(rlx);
		uint32_t t = slot_aux(hw);
		for (uint32_t s = b;;) {
			uint64_t w = pool.slot(s).load(rlx);
			found += in_range(s);
			if (s == t)
				break;
			s = slot_next(w);
		}
		b = slot_next(pool.slot(t).load(rlx));
	}
	int rc = -EBUSY;
	uint32_t new_head = head, new_tail = kNil;
	if (found == cnt) {
		/* Pass 2: relink everything else into batches, retire the range's slots. */
		new_head = kNil;
		uint32_t bh = kNil, bt = kNil, bn = 0;
		auto close_batch = [&]() {
			if (bn == 0)
				return;
			auto &hs = pool.slot(bh);
			hs.store(slot_with_aux(hs.load(rlx), bt), rlx);
			if (bt != bh) {
				auto &ts = pool.slot(bt);
				ts.store(slot_with_aux(ts.load(rlx), bn), rlx);
			}
			if (new_head == kNil)
				new_head = bh;
			else {
				auto &ps = pool.slot(new_tail);
				ps.store(slot_with_next(ps.load(rlx), bh), rlx);
			}
			new_tail = bt;
			bh = bt = kNil;
			bn = 0;
		};
		for (uint32_t b = head; b != kNil;) {
			uint64_t hw = pool.slot(b).load(rlx);
			uint32_t t = slot_aux(hw);
			uint32_t next_batch = slot_next(pool.slot(t).load(rlx));
			for (uint32_t s = b;;) {
				uint64_t w = pool.slot(s).load(rlx);
				uint32_t nx = slot_next(w);
				if (in_range(s)) {
					pool.slot(s).store(slot_make(kNil, kNil, kRetired, slot_gen(w)), rlx);
					if (s == base)
						remove_stage(kStageRetiring);
				} else {
					if (bn == 0)
						bh = s;
					else {
						auto &ps = pool.slot(bt);
						ps.store(slot_with_next(ps.load(rlx), s), rlx);
					}
					bt = s;
					if (++bn == p->batch)
						close_batch();
				}
				if (s == t)
					break;
				s = nx;
			}
			b = next_batch;
		}
		close_batch();
		r.removed_ns.store(now_ns(), rlx);
		r.count.store(0, rel);
		p->live_slots.fetch_sub(cnt, rel);
		sorted_remove(p, ri);
		rc = 0;
	} else if (head != kNil) {
		/* Not all here: put the stack back as it was. Find its last tail. */
		for (uint32_t b = head; b != kNil;) {
			uint32_t t = slot_aux(pool.slot(b).load(rlx));
			new_tail = t;
			b = slot_next(pool.slot(t).load(rlx));
		}
	}
	if (new_head != kNil)
		pool.push_free(new_head, new_tail);
	p->collecting.store(0, rel);
	pthread_mutex_unlock(&p->range_lock);
	if (rc == 0)
		POOL_LOG(DEBUG, "pool %s: range [0x%x, +%u) removed", p->name, first, cnt);
	return rc;
}

int mlx5_qpn_pool_alloc_gen(struct mlx5_qpn_pool *p, uint32_t *qpn, uint32_t *generation)
{
	if (unlikely(!valid_pool(p) || qpn == nullptr))
		return -EINVAL;
	Pool pool(p);
	Cache *c = enter(p);
	if (unlikely(c == nullptr)) {
		Bypass b(pool);
		return pool.alloc_bypass(qpn, generation);
	}
	int rc = pool.alloc_one(c, qpn, generation);
	if (likely(rc == 0))
		bump(c->allocs);
	leave(c);
	return rc;
}

int mlx5_qpn_pool_alloc(struct mlx5_qpn_pool *p, uint32_t *qpn)
{
	return mlx5_qpn_pool_alloc_gen(p, qpn, nullptr);
}

int mlx5_qpn_pool_alloc_bulk(struct mlx5_qpn_pool *p, uint32_t *qpns, unsigned int n)
{
	if (!valid_pool(p) || (qpns == nullptr && n != 0))
		return -EINVAL;
	Pool pool(p);
	Cache *c = enter(p);
	if (c == nullptr) {
		Bypass b(pool);
		return alloc_bulk_in(pool, nullptr, qpns, n);
	}
	int rc = alloc_bulk_in(pool, c, qpns, n);
	leave(c);
	return rc;
}

} /* extern "C" */

/* alloc_bulk() with the caller's cache, or cacheless inside a Bypass section. */
static int alloc_bulk_in(Pool &pool, Cache *c, uint32_t *qpns, unsigned int n)
{
	mlx5_qpn_pool *p = pool.p_;
	unsigned int got = 0;
	int rc = 0;
	/* Taken unpublished: until the bulk has succeeded, no free can take one of them (a racing
	 * free of a guessed QPN was accepted here, and the rollback then linked the slot into two
	 * chains). */
	for (; got < n; got++) {
		rc = c != nullptr ? pool.alloc_one(c, &qpns[got], nullptr, kUnpublished)
				  : pool.alloc_bypass(&qpns[got], nullptr, kUnpublished);
		if (rc != 0)
			break;
	}
	if (rc != 0 && got != 0) {
		auto hook = g_test_hooks.bulk_rollback.load(acq);
		if (hook != nullptr)
			hook(qpns, got);
	}
	std::atomic<uint32_t> *hint = c != nullptr ? &c->range_hint : nullptr;
	for (unsigned int i = 0; i < got; i++) {
		uint32_t s;
		if (!pool.qpn_to_slot(qpns[i], &s, hint))
			continue; /* not reached: a range with allocated QPNs is never removed */
		auto &sw = pool.slot(s);
		uint64_t w = sw.load(rlx);
		if (rc == 0) {
			/* Publish. Nobody else writes an unpublished slot: a plain store. */
			sw.store(slot_with_aux(w, slot_aux(w) & ~kUnpublished), rlx);
			continue;
		}
		/* All or nothing: the ones we took were never handed out, so they skip quarantine. */
		uint32_t g = slot_gen(w);
		if (c != nullptr) {
			uint32_t k = c->ready.count.load(rlx);
			sw.store(slot_make(k ? c->ready.head.load(rlx) : kNil, kNil, kFree, g), rlx);
			c->ready.head.store(s, rlx);
			if (k == 0)
				c->ready.tail.store(s, rlx);
			c->ready.count.store(k + 1, rlx);
		} else {
			sw.store(slot_make(kNil, s, kFree, g), rlx);
			pool.push_free(s, s);
			p->bypass_allocs.fetch_sub(1, rlx);
		}
	}
	if (rc == 0 && c != nullptr)
		bump(c->allocs, n);
	return rc;
}

extern "C" {

} /* extern "C" */

namespace {

/* A refusal is counted in the caller's cache, or pool-wide for a cacheless caller. */
inline void count_refused(mlx5_qpn_pool *p, Cache *c)
{
	if (c != nullptr)
		bump(c->refused);
	else
		p->bypass_refused.fetch_add(1, rlx);
}

QPN_COLD int free_cacheless(Pool &pool, uint32_t qpn, bool check_gen, uint32_t generation)
{
	Bypass b(pool);
	int rc = pool.free_one(nullptr, qpn, check_gen, generation);
	if (rc != 0)
		count_refused(pool.p_, nullptr);
	return rc;
}

inline int free_checked(mlx5_qpn_pool *p, uint32_t qpn, bool check_gen, uint32_t generation)
{
	if (unlikely(!valid_pool(p)))
		return -EINVAL;
	Pool pool(p);
	Cache *c = enter(p);
	if (unlikely(c == nullptr))
		return free_cacheless(pool, qpn, check_gen, generation);
	int rc = pool.free_one(c, qpn, check_gen, generation);
	if (unlikely(rc != 0))
		count_refused(p, c);
	leave(c);
	return rc;
}

} /* namespace */

extern "C" {

int mlx5_qpn_pool_free(struct mlx5_qpn_pool *p, uint32_t qpn)
{
	return free_checked(p, qpn, false, 0);
}

int mlx5_qpn_pool_free_gen(struct mlx5_qpn_pool *p, uint32_t qpn, uint32_t generation)
{
	return free_checked(p, qpn, true, generation);
}

int mlx5_qpn_pool_free_bulk(struct mlx5_qpn_pool *p, const uint32_t *qpns, unsigned int n)
{
	if (!valid_pool(p) || (qpns == nullptr && n != 0))
		return -EINVAL;
	Pool pool(p);
	Cache *c = enter(p);
	int rc = 0;
	if (c == nullptr) {
		for (unsigned int i = 0; i < n; i++)
			if (free_cacheless(pool, qpns[i], false, 0) != 0)
				rc = -EINVAL;
		return rc;
	}
	for (unsigned int i = 0; i < n; i++)
		if (pool.free_one(c, qpns[i], false, 0) != 0) {
			count_refused(p, c);
			rc = -EINVAL;
		}
	leave(c);
	return rc;
}

int mlx5_qpn_pool_qpn_state(struct mlx5_qpn_pool *p, uint32_t qpn, uint32_t *generation)
{
	if (!valid_pool(p) || qpn > MLX5_QPN_MAX)
		return -EINVAL;
	Pool pool(p);
	uint32_t s;
	if (!pool.qpn_to_slot(qpn, &s, nullptr))
		return -EINVAL;
	uint64_t w = pool.slot(s).load(acq);
	if (generation != nullptr)
		*generation = slot_gen(w);
	return slot_state(w) == kInUse && (slot_aux(w) & kUnpublished) == 0 ? 1 : 0;
}

int mlx5_qpn_pool_reclaim_dead(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return -EINVAL;
	return Pool(p).reclaim(nullptr, true);
}

int mlx5_qpn_pool_next_release(struct mlx5_qpn_pool *p, uint64_t *when_ns)
{
	if (!valid_pool(p) || when_ns == nullptr)
		return -EINVAL;
	return Pool(p).quarantine_next(when_ns) ? 0 : -ENOENT;
}

int mlx5_qpn_pool_drain(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return -EINVAL;
	if (p->quarantine_ns == 0)
		return 0;
	Pool pool(p);
	Bypass b(pool);
	uint64_t n = pool.drain(now_ns());
	return n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
}

void mlx5_qpn_pool_cache_flush(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	Cache *c = enter(p);
	if (c != nullptr)
		Pool(p).flush_cache(*c);
	leave(c);
}

uint64_t mlx5_qpn_pool_quarantine_ns(const struct mlx5_qpn_pool *p)
{
	return valid_pool(p) ? p->quarantine_ns : 0;
}

const char *mlx5_qpn_pool_name(const struct mlx5_qpn_pool *p)
{
	return valid_pool(p) ? p->name : nullptr;
}

static EventCounters sum_events(const mlx5_qpn_pool *p, uint64_t *allocs, uint64_t *frees,
				uint64_t *quarantined, uint32_t *claimed)
{
	EventCounters e{};
	uint64_t a = p->bypass_allocs.load(rlx), f = p->bypass_frees.load(rlx);
	uint64_t q = p->bypass_quarantined.load(rlx);
	uint32_t cl = 0;
	e.refused = p->bypass_refused.load(rlx);
	for (uint32_t i = 0; i < p->nb_caches; i++) {
		const Cache &c = p->caches[i];
		a += c.allocs.load(rlx);
		f += c.frees.load(rlx);
		q += c.quarantined.load(rlx);
		e.hits += c.hits.load(rlx);
		e.misses += c.misses.load(rlx);
		e.refills += c.refills.load(rlx);
		e.flushes += c.flushes.load(rlx);
		e.steals += c.steals.load(rlx);
		e.refused += c.refused.load(rlx);
		e.enospc += c.enospc.load(rlx);
		e.eagain += c.eagain.load(rlx);
		cl += c.owner.load(rlx) != 0;
	}
	*allocs = a;
	*frees = f;
	*quarantined = q;
	*claimed = cl;
	return e;
}

int mlx5_qpn_pool_stats_get(struct mlx5_qpn_pool *p, struct mlx5_qpn_pool_stats *st)
{
	if (!valid_pool(p) || st == nullptr)
		return -EINVAL;
	uint64_t a, f, q;
	uint32_t cl;
	EventCounters e = sum_events(p, &a, &f, &q, &cl);
	const EventBase &bb = p->stats_base;
	const EventCounters b = {bb.hits.load(rlx), bb.misses.load(rlx), bb.refills.load(rlx),
				 bb.flushes.load(rlx), bb.steals.load(rlx), bb.refused.load(rlx),
				 bb.enospc.load(rlx), bb.eagain.load(rlx)};
	memset(st, 0, sizeof(*st));
	st->capacity = p->live_slots.load(acq);
	/* A process killed between a slot update and its counter bump skews these by one call:
	 * never below zero. */
	st->in_use = a > f ? a - f : 0;
	uint64_t rel_q = p->released.load(rlx);
	st->in_quarantine = q > rel_q ? q - rel_q : 0;
	uint64_t busy = st->in_use + st->in_quarantine;
	st->free = st->capacity > busy ? st->capacity - busy : 0;
	st->allocs = a;
	st->frees = f;
	st->cache_hits = e.hits - b.hits;
	st->cache_misses = e.misses - b.misses;
	st->refills = e.refills - b.refills;
	st->flushes = e.flushes - b.flushes;
	st->steals = e.steals - b.steals;
	st->refused_frees = e.refused - b.refused;
	st->enospc = e.enospc - b.enospc;
	st->eagain = e.eagain - b.eagain;
	st->nb_ranges = p->nb_ranges.load(acq);
	st->nb_caches = cl;
	st->dead_processes = p->dead_processes.load(rlx);
	st->reclaimed = p->reclaimed.load(rlx);
	return 0;
}

void mlx5_qpn_pool_stats_reset(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	uint64_t a, f, q;
	uint32_t cl;
	EventCounters e = sum_events(p, &a, &f, &q, &cl);
	EventBase &b = p->stats_base;
	b.hits.store(e.hits, rlx);
	b.misses.store(e.misses, rlx);
	b.refills.store(e.refills, rlx);
	b.flushes.store(e.flushes, rlx);
	b.steals.store(e.steals, rlx);
	b.refused.store(e.refused, rlx);
	b.enospc.store(e.enospc, rlx);
	b.eagain.store(e.eagain, rlx);
}

void mlx5_qpn_pool_dump(FILE *f, struct mlx5_qpn_pool *p)
{
	if (f == nullptr)
		return;
	if (!valid_pool(p)) {
		fprintf(f, "qpn pool <invalid>\n");
		return;
	}
	struct mlx5_qpn_pool_stats st;
	mlx5_qpn_pool_stats_get(p, &st);
	fprintf(f, "qpn pool %s: capacity %" PRIu64 " of %u, cache %u, quarantine %" PRIu64
		   " us, socket %d\n", p->name, st.capacity, p->capacity, p->batch,
		p->quarantine_ns / 1000, p->socket_id);
	uint32_t n = p->nb_ranges.load(acq);
	for (uint32_t i = 0; i < n; i++) {
		if (n > 8 && i == 4) { /* keep the dump short: first four and last three */
			fprintf(f, "  ... %u more ranges ...\n", n - 7);
			i = n - 4;
			continue;
		}
		const Range &r = p->ranges[i];
		uint32_t c = r.count.load(rlx), rf = r.first.load(rlx);
		if (c == 0)
			fprintf(f, "  range %u: removed (was [0x%06x, +%u])\n", i, rf, r.size.load(rlx));
		else
			fprintf(f, "  range %u: [0x%06x, 0x%06x] (%u QPNs)\n", i, rf, rf + c - 1, c);
	}
	fprintf(f, "  in_use %" PRIu64 " in_quarantine %" PRIu64 " free %" PRIu64 "\n", st.in_use,
		st.in_quarantine, st.free);
	fprintf(f, "  allocs %" PRIu64 " frees %" PRIu64 " hits %" PRIu64 " misses %" PRIu64
		   " refills %" PRIu64 " flushes %" PRIu64 " steals %" PRIu64 "\n",
		st.allocs, st.frees, st.cache_hits, st.cache_misses, st.refills, st.flushes,
		st.steals);
	fprintf(f, "  refused_frees %" PRIu64 " enospc %" PRIu64 " eagain %" PRIu64
		   " caches %u\n", st.refused_frees, st.enospc, st.eagain, st.nb_caches);
}

} /* extern "C" */

/* ---- test seams ----------------------------------------------------------------------------- */

namespace qpn {

TestHooks g_test_hooks;

void test_clock_offset_set(int64_t offset_ns) { g_clock_offset.store(offset_ns, rlx); }
int64_t test_clock_offset_get() { return g_clock_offset.load(rlx); }

} /* namespace qpn */
