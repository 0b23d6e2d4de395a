/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The inline fast path of mlx5_qpn_pool.h: a cache hit and an owner's free run in the
 * caller's code against the thread's binding (mlx5_qpn_pool_tls); everything else must reach the
 * out-of-line path, which decides exactly as before. These tests drive the cases where the
 * binding points at something that is no longer what it was: another pool, a pool recreated at
 * the same address with another thread in the cache the binding names, a refusal the inline code
 * must not decide, a flush or seal boundary.
 */
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "pool_test_util.h"
#include "qpn_pool_internal.h"

namespace {

/* A pool in caller memory, so that a second pool can be built at the same address. */
class PoolAt {
public:
	PoolAt(uint32_t capacity) : len_(qpn_pool_size(capacity))
	{
		mem_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			    0);
	}
	~PoolAt()
	{
		if (pool_ != nullptr)
			qpn_pool_fini_at(pool_);
		if (mem_ != MAP_FAILED)
			munmap(mem_, len_);
	}
	PoolAt(const PoolAt &) = delete;
	PoolAt &operator=(const PoolAt &) = delete;
	struct mlx5_qpn_pool *make(const char *name, uint32_t cache, uint64_t quarantine_ns,
				   uint32_t first, uint32_t count)
	{
		if (pool_ != nullptr)
			qpn_pool_fini_at(pool_);
		struct mlx5_qpn_pool_params prm = {};
		prm.name = name;
		prm.quarantine_ns = quarantine_ns;
		prm.cache_size = cache;
		prm.capacity = count;
		prm.socket_id = SOCKET_ID_ANY;
		pool_ = qpn_pool_init_at(mem_, len_, &prm);
		if (pool_ != nullptr && mlx5_qpn_pool_range_add(pool_, first, count) != 0)
			return nullptr;
		return pool_;
	}
	void fini()
	{
		qpn_pool_fini_at(pool_);
		pool_ = nullptr;
	}

private:
	size_t len_;
	void *mem_ = MAP_FAILED;
	struct mlx5_qpn_pool *pool_ = nullptr;
};

/* The cache a thread claimed in p: the one whose owner word names its tid. */
int
cache_of(const struct mlx5_qpn_pool *p, pid_t tid)
{
	for (uint32_t i = 0; i < p->nb_caches; i++) {
		uint64_t o = p->caches[i].owner.load();
		if (o != 0 && (o & 0x3FFFFF) == (static_cast<uint64_t>(tid) & 0x3FFFFF))
			return static_cast<int>(i);
	}
	return -1;
}

} // namespace

TEST(PoolInline, CountersAndStatesAreThoseOfTheFullCall)
{
	TestPool tp(1024, 16, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x4000, 1024), 0);
	std::set<uint32_t> seen;
	for (int i = 0; i < 5000; i++) {
		uint32_t q, g, g2;
		ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &q, &g), 0);
		ASSERT_TRUE(q >= 0x4000 && q < 0x4400) << q;
		ASSERT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, &g2), 1);
		ASSERT_EQ(g, g2);
		seen.insert(q);
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
		ASSERT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, &g2), 0);
		ASSERT_EQ(g, g2) << "a free keeps the generation; the next hand-out bumps it";
	}
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.allocs, 5000u);
	EXPECT_EQ(st.frees, 5000u);
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.free, 1024u);
	EXPECT_EQ(st.cache_hits + st.cache_misses, 5000u);
	EXPECT_LE(st.cache_misses, 1u) << "one refill, then every pair is a hit";
	EXPECT_EQ(seen.size(), 1u) << "LIFO: the QPN just freed comes back first";
}

TEST(PoolInline, RefusalsAreDecidedOutOfLineAndChangeNothing)
{
	TestPool tp(64, 8, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	uint32_t q, g, other;
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &q, &g), 0);
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &other), 0);
	/* Never allocated, though in the binding's range: its slot is free, not ours in use. */
	uint32_t never = q == 0x13F || other == 0x13F ? 0x13E : 0x13F;
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), never), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x0FF), -EINVAL) << "below the range";
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), MLX5_QPN_MAX), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0xFFFFFFFFu), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q, g + 1), -EINVAL) << "stale generation";
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, nullptr), 1) << "still allocated";
	EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q, g), 0);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), -EINVAL) << "double free";
	EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q, g), -EINVAL)
		<< "double free, same generation";
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_alloc(nullptr, &q), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(nullptr, other), -EINVAL);
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.refused_frees, 7u);
	EXPECT_EQ(st.in_use, 1u);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), other), 0);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
}

/* The binding follows the pool used last: alternating pools rebinds on every switch, and a QPN
 * of one pool freed to the other is refused whichever pool the thread is bound to. */
TEST(PoolInline, TheBindingFollowsThePoolUsedLast)
{
	TestPool a(32, 4, 0), b(32, 4, 1000000);
	ASSERT_EQ(mlx5_qpn_pool_range_add(a.get(), 0x1000, 32), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(b.get(), 0x2000, 32), 0);
	std::vector<uint32_t> qa, qb;
	for (int i = 0; i < 20; i++) {
		uint32_t q;
		ASSERT_EQ(mlx5_qpn_pool_alloc(a.get(), &q), 0);
		ASSERT_TRUE(q >= 0x1000 && q < 0x1020);
		qa.push_back(q);
		ASSERT_EQ(mlx5_qpn_pool_alloc(b.get(), &q), 0);
		ASSERT_TRUE(q >= 0x2000 && q < 0x2020);
		qb.push_back(q);
	}
	for (size_t i = 0; i < qa.size(); i++) {
		EXPECT_EQ(mlx5_qpn_pool_free(b.get(), qa[i]), -EINVAL);
		EXPECT_EQ(mlx5_qpn_pool_free(a.get(), qa[i]), 0);
		EXPECT_EQ(mlx5_qpn_pool_free(a.get(), qb[i]), -EINVAL);
		EXPECT_EQ(mlx5_qpn_pool_free(b.get(), qb[i]), 0);
	}
	EXPECT_EQ(pool_stats(a.get()).in_use, 0u);
	EXPECT_EQ(pool_stats(b.get()).in_use, 0u);
	EXPECT_EQ(pool_stats(b.get()).in_quarantine, 20u) << "b's frees went to its quarantine";
	EXPECT_EQ(pool_stats(a.get()).in_quarantine, 0u);
}

/* Frees around the boundaries the inline code hands over: a full `ready` (rotation to the spare,
 * then a flush) and an `open` chain reaching a batch (sealed into the quarantine). */
TEST(PoolInline, FlushAndSealBoundariesGoOutOfLine)
{
	for (uint64_t quarantine : {0ull, 3600ull * 1000 * 1000 * 1000}) {
		TestPool tp(256, 8, quarantine);
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x500, 256), 0);
		std::vector<uint32_t> held;
		for (int i = 0; i < 100; i++) {
			uint32_t q;
			ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
			held.push_back(q);
		}
		for (uint32_t q : held)
			ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
		auto st = pool_stats(tp.get());
		EXPECT_EQ(st.in_use, 0u);
		EXPECT_EQ(st.frees, 100u);
		if (quarantine != 0) {
			EXPECT_EQ(st.in_quarantine, 100u);
			uint64_t when;
			/* 12 full batches of 8 were sealed (the last 4 wait in the open chain). */
			EXPECT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), 0);
		} else {
			EXPECT_EQ(st.flushes, 11u) << "100 frees into a 2 x 8 cache: a flush per 8";
			EXPECT_EQ(st.free, 256u);
		}
		for (uint32_t q : held)
			EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), -EINVAL);
	}
}

/*
 * A pool destroyed and another one built at the same address: a thread that still has its
 * binding to the old pool must not touch the cache its binding names, which another thread now
 * holds in the new pool (with QPNs in it). Its next call rebinds through the slow path.
 */
TEST(PoolInline, AStaleBindingNeverTouchesAnotherThreadsCache)
{
	PoolAt mem(4096); /* room for a batch in every cache */
	struct mlx5_qpn_pool *p = mem.make("inl_old", 8, 0, 0x1000, 4096);
	ASSERT_NE(p, nullptr);
	std::atomic<int> step{0};
	std::atomic<pid_t> stale_tid{0};
	std::atomic<int> rc_after{1};
	std::atomic<uint32_t> qpn_after{0};
	std::thread stale([&] {
		uint32_t q;
		if (mlx5_qpn_pool_alloc(p, &q) == 0)
			mlx5_qpn_pool_free(p, q);
		stale_tid.store(gettid());
		step.store(1);
		while (step.load() != 2)
			std::this_thread::yield();
		/* The same address, another pool: through the binding of the old one. */
		rc_after.store(mlx5_qpn_pool_alloc(p, &q));
		qpn_after.store(q);
		step.store(3);
		while (step.load() != 4)
			std::this_thread::yield();
		mlx5_qpn_pool_free(p, q);
	});
	while (step.load() != 1)
		std::this_thread::yield();
	const int idx = cache_of(p, stale_tid.load());
	ASSERT_GE(idx, 0);
	mem.fini(); /* the stale thread keeps its binding: destroy is the last call on a pool */
	p = mem.make("inl_new", 8, 0, 0x1000, 4096);
	ASSERT_NE(p, nullptr);

	/* Threads claim caches of the new pool (each keeps QPNs in its cache) until one of them
	 * holds the cache the stale binding names. */
	struct Claimer {
		std::thread t;
		std::atomic<int> go{0};
	};
	std::vector<std::unique_ptr<Claimer>> claimers;
	std::atomic<int> claimed{0};
	const int most = static_cast<int>(p->nb_caches);
	for (int k = 0; k < most && p->caches[idx].owner.load() == 0; k++) {
		auto c = std::make_unique<Claimer>();
		Claimer *cp = c.get();
		c->t = std::thread([p, cp, &claimed] {
			uint32_t q;
			if (mlx5_qpn_pool_alloc(p, &q) == 0)
				mlx5_qpn_pool_free(p, q);
			claimed.fetch_add(1);
			while (cp->go.load() == 0)
				std::this_thread::yield();
			mlx5_qpn_pool_cache_flush(p);
		});
		while (claimed.load() != k + 1)
			std::this_thread::yield();
		claimers.push_back(std::move(c));
	}
	/* Threads end however the test ends. */
	struct Joiner {
		std::function<void()> f;
		~Joiner() { f(); }
	} joiner{[&] {
		if (step.load() < 2)
			step.store(2);
		while (step.load() < 3)
			std::this_thread::yield();
		step.store(4);
		stale.join();
		for (auto &c : claimers) {
			c->go.store(1);
			c->t.join();
		}
	}};
	int nclaimed = 0;
	for (uint32_t i = 0; i < p->nb_caches; i++)
		nclaimed += p->caches[i].owner.load() != 0;
	ASSERT_NE(p->caches[idx].owner.load(), 0u)
		<< "no thread got cache " << idx << " (" << claimers.size() << " threads, "
		<< nclaimed << " caches claimed)";
	const uint32_t ready = p->caches[idx].ready.count.load();
	const uint64_t allocs = p->caches[idx].alloc_seq.load();
	ASSERT_GT(ready, 0u);

	step.store(2);
	while (step.load() != 3)
		std::this_thread::yield();
	EXPECT_EQ(rc_after.load(), 0);
	EXPECT_TRUE(qpn_after.load() >= 0x1000 && qpn_after.load() < 0x2000);
	EXPECT_EQ(p->caches[idx].ready.count.load(), ready) << "the stale binding took from it";
	EXPECT_EQ(p->caches[idx].alloc_seq.load(), allocs);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(p, qpn_after.load(), nullptr), 1);
	EXPECT_EQ(pool_stats(p).in_use, 1u);

	joiner.f();
	joiner.f = [] {};
	auto st = pool_stats(p);
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.free, 4096u);
}

/* The inline calls compare the pool pointer only: a destroy must clear the binding of every
 * thread of the process that used the pool, also of threads that sit idle meanwhile. */
TEST(PoolInline, DestroyClearsEveryThreadsBinding)
{
	auto *tp = new TestPool(256, 8, 0);
	struct mlx5_qpn_pool *p = tp->get();
	ASSERT_NE(p, nullptr);
	ASSERT_EQ(mlx5_qpn_pool_range_add(p, 0x4000, 256), 0);
	std::atomic<int> step{0};
	std::atomic<struct mlx5_qpn_pool *> before{nullptr}, after{p};
	std::thread t([&] {
		uint32_t q;
		if (mlx5_qpn_pool_alloc(p, &q) == 0)
			mlx5_qpn_pool_free(p, q);
		before.store(__atomic_load_n(&mlx5_qpn_pool_tls.pool, __ATOMIC_RELAXED));
		step.store(1);
		while (step.load() != 2)
			std::this_thread::yield();
		after.store(__atomic_load_n(&mlx5_qpn_pool_tls.pool, __ATOMIC_RELAXED));
	});
	while (step.load() != 1)
		std::this_thread::yield();
	delete tp; /* mlx5_qpn_pool_destroy() while the thread is bound to it */
	step.store(2);
	t.join();
	EXPECT_EQ(before.load(), p);
	EXPECT_EQ(after.load(), nullptr) << "a binding outlived its pool";
}

/* A pool built again at the same address without this process's destroy (as another process
 * sharing it would): the next out-of-line call of a thread bound to the old one drops the
 * binding, and the thread then claims a cache of the new pool like any new thread. */
TEST(PoolInline, ARecreationElsewhereIsCaughtByTheNextOutOfLineCall)
{
	PoolAt mem(1024);
	struct mlx5_qpn_pool *p = mem.make("inl_a", 8, 0, 0x1000, 1024);
	ASSERT_NE(p, nullptr);
	std::atomic<int> step{0};
	std::atomic<int> rc{1};
	std::atomic<struct mlx5_qpn_pool *> after_flush{p};
	std::thread t([&] {
		uint32_t q;
		if (mlx5_qpn_pool_alloc(p, &q) == 0)
			mlx5_qpn_pool_free(p, q);
		step.store(1);
		while (step.load() != 2)
			std::this_thread::yield();
		mlx5_qpn_pool_cache_flush(p);
		after_flush.store(__atomic_load_n(&mlx5_qpn_pool_tls.pool, __ATOMIC_RELAXED));
		rc.store(mlx5_qpn_pool_alloc(p, &q));
		if (rc.load() == 0)
			mlx5_qpn_pool_free(p, q);
	});
	while (step.load() != 1)
		std::this_thread::yield();
	/* The memory is built again in place, without qpn_pool_fini_at() (registry_del()). */
	struct mlx5_qpn_pool_params prm = {};
	prm.name = "inl_b";
	prm.cache_size = 8;
	prm.capacity = 1024;
	prm.socket_id = SOCKET_ID_ANY;
	ASSERT_EQ(qpn_pool_init_at(p, qpn_pool_size(1024), &prm), p);
	ASSERT_EQ(mlx5_qpn_pool_range_add(p, 0x1000, 1024), 0);
	step.store(2);
	t.join();
	EXPECT_NE(after_flush.load(), p) << "the stale inline binding survived an out-of-line call";
	EXPECT_EQ(rc.load(), 0);
	EXPECT_EQ(pool_stats(p).in_use, 0u);
}
