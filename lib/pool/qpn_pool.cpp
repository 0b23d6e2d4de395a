/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lock-free QPN pool: creation, lookup and release of pools, fork, and the public allocation
 * and release entry points. See qpn_pool_internal.h for the layout, qpn_pool_ops.h for the map of
 * the other files, and doc/guides/design_pool.md for why the invariants hold.
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>

#include <pthread.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_memzone.h>

#include "qpn_pool_ops.h"
#include "qpn_pool_proc.h"
#include "qpn_pool_test_hooks.h"

RTE_LOG_REGISTER(mlx5_qpn_pool_logtype, mlx5_qpn.pool, INFO);

static_assert(std::atomic<uint64_t>::is_always_lock_free, "64-bit atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "32-bit atomics must be lock-free");

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

/* ---- clock ---------------------------------------------------------------------------------- */

#ifdef QPN_POOL_TEST_HOOKS
/* Test seam (qpn_pool_test_hooks.h). */
std::atomic<int64_t> g_clock_offset{0};
#endif

} /* namespace qpn::detail */

namespace {

constexpr const char *kZonePrefix = "QPNP_";

size_t
pool_size(uint32_t capacity)
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
void
on_fork_child()
{
	t_caches.n = 0;
	fast_unbind();
	bind_forget_all();
	proc_forget_self();
	for (auto &e : g_registry)
		e.proc = -1;
	/* membarrier registrations are per mm */
	g_barrier.store(static_cast<int>(Barrier::kUnknown), rlx);
	g_fenced.store(-1, rlx);
}

pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
void
install_fork_handler()
{
	pthread_atfork(nullptr, nullptr, on_fork_child);
}

bool
params_ok(const mlx5_qpn_pool_params *prm)
{
	return prm != nullptr && prm->name != nullptr && prm->name[0] != '\0' &&
	       strlen(prm->name) <= MLX5_QPN_POOL_NAMESIZE && prm->cache_size != 0 &&
	       prm->cache_size <= 65536 && prm->capacity != 0 && prm->capacity <= kMaxSlots;
}

} // namespace

size_t
qpn_pool_size(uint32_t capacity)
{
	return pool_size(capacity);
}

struct mlx5_qpn_pool *
qpn_pool_init_at(void *mem, size_t len, const struct mlx5_qpn_pool_params *prm)
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

void
qpn_pool_fini_at(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	registry_del(p);
	for (uint32_t i = 0; i < t_caches.n; i++)
		if (t_caches.b[i].pool == p) {
			t_caches.b[i] = t_caches.b[--t_caches.n];
			break;
		}
	if (mlx5_qpn_pool_tls.pool == p)
		fast_unbind();
	p->magic = 0;
	pthread_mutex_destroy(&p->range_lock);
	p->~mlx5_qpn_pool();
}

/* ---- public API ----------------------------------------------------------------------------- */

extern "C" {

uint64_t
mlx5_qpn_clock_ns(void)
{
	return now_ns();
}

struct mlx5_qpn_pool *
mlx5_qpn_pool_create(const struct mlx5_qpn_pool_params *prm)
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
		POOL_LOG(ERR, "pool %s: no memory for %u QPNs (%zu bytes)", prm->name,
			 prm->capacity, pool_size(prm->capacity));
		rte_errno = ENOMEM;
		return nullptr;
	}
	const struct rte_memzone *mz = rte_memzone_reserve(zname, sizeof(void *), prm->socket_id,
							   0);
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

struct mlx5_qpn_pool *
mlx5_qpn_pool_lookup(const char *name)
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

void
mlx5_qpn_pool_destroy(struct mlx5_qpn_pool *p)
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

} /* extern "C" */

extern "C" {

/* The out-of-line part of the inline mlx5_qpn_pool_alloc_gen() (mlx5_qpn_pool.h): the whole
 * call, which also (re)binds the thread's fast path to its cache and its current range. */
int
mlx5_qpn_pool_alloc_slow(struct mlx5_qpn_pool *p, uint32_t *qpn, uint32_t *generation)
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
		count_own(c->alloc_seq);
	fast_bind(p, c);
	leave(c);
	return rc;
}

int
mlx5_qpn_pool_alloc_bulk(struct mlx5_qpn_pool *p, uint32_t *qpns, unsigned int n)
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

/*
 * The common bulk: the caller's cache holds all n, so it cannot fail. Still taken unpublished
 * and published only once all are out (the contract: a free of one of them is refused until the
 * call returns), but without a call, a range lookup and a rollback check per QPN: one pass pops
 * the chain, keeping slot indices in qpns[], one pass publishes them and turns them into QPNs.
 */
static void
alloc_bulk_hit(Pool &pool, Cache *c, uint32_t *qpns, unsigned int n)
{
	const uint32_t left = c->ready.count.load(rlx) - n;
	const uint32_t holder = owner_holder(c->owner.load(rlx));
	const uint32_t me = pool.cache_index(c);
	uint32_t s = c->ready.head.load(rlx);
	for (unsigned int i = 0; i < n; i++) {
		auto &sw = pool.slot(s);
		uint64_t w = sw.load(rlx);
		qpns[i] = s;
		s = slot_next(w);
		sw.store(slot_make(me, holder | kUnpublished, kInUse, (slot_gen(w) + 1) & kGenMask),
			 rlx);
	}
	c->ready.count.store(left, rlx);
	if (left != 0)
		c->ready.head.store(s, rlx);
	QPN_TEST_HOOK_HOT(bulk_taken, qpns, n);
	for (unsigned int i = 0; i < n; i++) {
		auto &sw = pool.slot(qpns[i]);
		sw.store(slot_with_aux(sw.load(rlx), holder), rlx);
		qpns[i] = pool.slot_to_qpn(qpns[i], &c->range_hint);
	}
	count_own(c->alloc_seq, n);
}

/* alloc_bulk() with the caller's cache, or cacheless inside a Bypass section. */
static int
alloc_bulk_in(Pool &pool, Cache *c, uint32_t *qpns, unsigned int n)
{
	mlx5_qpn_pool *p = pool.p_;
	if (c != nullptr && n != 0 && c->ready.count.load(rlx) >= n) {
		alloc_bulk_hit(pool, c, qpns, n);
		return 0;
	}
	unsigned int got = 0;
	int rc = 0;
	/* Taken unpublished: until the bulk has succeeded, no free can take one of them (a racing
	 * free of a guessed QPN was accepted here, and the rollback then linked the slot into two
	 * chains). */
	for (; got < n; got++) {
		rc = c != nullptr ? pool.alloc_one(c, &qpns[got], nullptr, kUnpublished) :
				    pool.alloc_bypass(&qpns[got], nullptr, kUnpublished);
		if (rc != 0)
			break;
	}
	if (rc != 0 && got != 0)
		QPN_TEST_HOOK(bulk_rollback, qpns, got);
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
			sw.store(slot_make(k ? c->ready.head.load(rlx) : kNil, kNil, kFree, g),
				 rlx);
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
		count_own(c->alloc_seq, n);
	return rc;
}

namespace {

/* A refusal is counted in the caller's cache, or pool-wide for a cacheless caller. */
inline void
count_refused(mlx5_qpn_pool *p, Cache *c)
{
	if (c != nullptr)
		bump(c->refused);
	else
		p->bypass_refused.fetch_add(1, rlx);
}

/*
 * free_bulk's common case, as the inline free releases one QPN (mlx5_qpn_pool_free_inline()):
 * QPNs of the range of the cache's hint, handed out by this cache (the slot word xor `owned`
 * leaves only the generation), linked into its chain while no flush or seal is due. Inside one
 * out-of-line call (`busy` announces it to thieves): no sequence word step per QPN, one count at
 * the end. @return how many of qpns[0..n) it released, from the first; free_one() decides the
 * next one (another range, another cache's QPN, a refusal, a flush or seal due).
 */
unsigned int
free_bulk_run(Pool &pool, Cache &c, const uint32_t *qpns, unsigned int n)
{
	mlx5_qpn_pool *p = pool.p_;
	const uint32_t h = c.range_hint.load(rlx);
	if (h >= p->nb_ranges.load(acq))
		return 0;
	const Range &r = p->ranges[h];
	const uint32_t first = r.first.load(rlx), count = r.count.load(rlx),
		       base = r.base.load(rlx);
	Chain &into = p->quarantine_ns != 0 ? c.open : c.ready;
	const Pool::OwnRelease own = pool.own_release(c);
	uint32_t k = into.count.load(rlx), head = into.head.load(rlx);
	unsigned int i = 0;
	for (; i < n && k < own.into_max; i++) {
		const uint32_t off = qpns[i] - first;
		if (off >= count)
			break;
		const uint32_t s = base + off;
		auto &sw = pool.slot(s);
		const uint64_t w = sw.load(rlx) ^ own.owned;
		if ((w & MLX5_QPN_POOL_SLOT_OWNED_MASK) != 0)
			break;
		if (k == 0) {
			head = kNil;
			into.tail.store(s, rlx);
		}
		sw.store(head ^ own.released ^ w, rlx); /* next = head, the generation kept */
		head = s;
		k++;
	}
	if (i != 0) {
		into.head.store(head, rlx);
		into.count.store(k, rlx);
		count_own(c.free_seq, i);
	}
	return i;
}

QPN_COLD int
free_cacheless(Pool &pool, uint32_t qpn, bool check_gen, uint32_t generation)
{
	Bypass b(pool);
	int rc = pool.free_one(nullptr, qpn, check_gen, generation);
	if (rc != 0)
		count_refused(pool.p_, nullptr);
	return rc;
}

inline int
free_checked(mlx5_qpn_pool *p, uint32_t qpn, bool check_gen, uint32_t generation)
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
	fast_bind(p, c);
	leave(c);
	return rc;
}

} /* namespace */

extern "C" {

/* The out-of-line part of the inline mlx5_qpn_pool_free() and mlx5_qpn_pool_free_gen(). */
int
mlx5_qpn_pool_free_slow(struct mlx5_qpn_pool *p, uint32_t qpn, int check_gen, uint32_t generation)
{
	return free_checked(p, qpn, check_gen != 0, generation);
}

int
mlx5_qpn_pool_free_bulk(struct mlx5_qpn_pool *p, const uint32_t *qpns, unsigned int n)
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
	for (unsigned int i = 0; i < n; i++) {
		i += free_bulk_run(pool, *c, qpns + i, n - i);
		if (i == n)
			break;
		if (pool.free_one(c, qpns[i], false, 0) != 0) {
			count_refused(p, c);
			rc = -EINVAL;
		}
	}
	leave(c);
	return rc;
}

int
mlx5_qpn_pool_qpn_state(struct mlx5_qpn_pool *p, uint32_t qpn, uint32_t *generation)
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

void
mlx5_qpn_pool_cache_flush(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	Cache *c = enter(p);
	if (c != nullptr)
		Pool(p).flush_cache(*c);
	leave(c);
}

uint64_t
mlx5_qpn_pool_quarantine_ns(const struct mlx5_qpn_pool *p)
{
	return valid_pool(p) ? p->quarantine_ns : 0;
}

const char *
mlx5_qpn_pool_name(const struct mlx5_qpn_pool *p)
{
	return valid_pool(p) ? p->name : nullptr;
}

} /* extern "C" */

/* ---- test seams ----------------------------------------------------------------------------- */

#ifdef QPN_POOL_TEST_HOOKS
namespace qpn {

TestHooks g_test_hooks;

void
test_clock_offset_set(int64_t offset_ns)
{
	g_clock_offset.store(offset_ns, rlx);
}
int64_t
test_clock_offset_get()
{
	return g_clock_offset.load(rlx);
}

} /* namespace qpn */
#endif /* QPN_POOL_TEST_HOOKS */
