/* SPDX-License-Identifier: BSD-3-Clause */
/* Quarantine: -EAGAIN while everything is quarantined, the release time, no early reuse, and
 * no QPN stranded in another thread's cache. */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "pool_test_util.h"
#include "qpn_pool_test_hooks.h"

TEST(PoolQuarantine, ReleasedQpnComesBackOnlyAfterTheQuarantine)
{
	constexpr uint64_t kQ = 1000 * 1000 *
				1000; /* 1 s: longer than any stall of a sanitizer run */
	TestPool tp(4, 2, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x300, 4), 0);
	uint32_t q[4], x;
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 4), 0);
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), -ENOSPC);
	uint64_t released = mlx5_qpn_clock_ns();
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q[2]), 0);
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.in_quarantine, 1u);
	EXPECT_EQ(st.in_use, 3u);
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), -EAGAIN);
	uint64_t when = 0;
	ASSERT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), 0);
	EXPECT_GE(when, released + kQ);
	EXPECT_LE(when, mlx5_qpn_clock_ns() + kQ + kQ / 8 + 1000000);
	/* Poll: every success must come at least kQ after the release. */
	int rc;
	while ((rc = mlx5_qpn_pool_alloc(tp.get(), &x)) == -EAGAIN)
		std::this_thread::sleep_for(std::chrono::microseconds(500));
	ASSERT_EQ(rc, 0);
	EXPECT_GE(mlx5_qpn_clock_ns() - released, kQ);
	EXPECT_EQ(x, q[2]);
	st = pool_stats(tp.get());
	EXPECT_EQ(st.in_quarantine, 0u);
	EXPECT_GE(st.eagain, 1u);
	EXPECT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), -ENOENT);
}

TEST(PoolQuarantine, NoReuseOnAnotherThreadEither)
{
	constexpr uint64_t kQ = 100 * 1000 * 1000;
	TestPool tp(8, 4, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x10, 8), 0);
	uint32_t q[8];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 8), 0);
	uint64_t released = mlx5_qpn_clock_ns();
	ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 8), 0);
	std::atomic<int> got{0};
	std::atomic<uint64_t> first_ok{0};
	std::thread t([&] {
		uint32_t x;
		while (got.load() < 8) {
			int rc = mlx5_qpn_pool_alloc(tp.get(), &x);
			if (rc == 0) {
				uint64_t expect = 0;
				first_ok.compare_exchange_strong(expect, mlx5_qpn_clock_ns());
				got.fetch_add(1);
			} else {
				ASSERT_EQ(rc, -EAGAIN);
				std::this_thread::sleep_for(std::chrono::microseconds(300));
			}
		}
	});
	t.join();
	EXPECT_GE(first_ok.load() - released, kQ);
}

TEST(PoolQuarantine, ZeroQuarantineReusesAtOnce)
{
	TestPool tp(1, 1, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 9, 1), 0);
	uint32_t x;
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), 0);
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0);
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), 0);
	EXPECT_EQ(x, 9u);
}

/*
 * A thread fills its cache (allocs and frees leave free QPNs in it) and then idles without
 * exiting. Another thread must still get every QPN: idle caches are stolen, and QPNs an idle
 * thread released into quarantine are sealed and come back after the quarantine.
 */
static void
stranding_case(uint64_t quarantine_ns)
{
	constexpr uint32_t n = 256;
	TestPool tp(n, 32, quarantine_ns);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x5000, n), 0);
	std::mutex m;
	std::condition_variable cv;
	bool filled = false, release = false;
	std::thread idle([&] {
		uint32_t q[40];
		ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 40), 0);
		ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 40), 0);
		std::unique_lock<std::mutex> l(m);
		filled = true;
		cv.notify_all();
		cv.wait(l, [&] { return release; });
	});
	{
		std::unique_lock<std::mutex> l(m);
		cv.wait(l, [&] { return filled; });
	}
	std::set<uint32_t> got;
	uint32_t x;
	uint64_t deadline = mlx5_qpn_clock_ns() + quarantine_ns * 4 + 2000000000ull;
	while (got.size() < n && mlx5_qpn_clock_ns() < deadline) {
		int rc = mlx5_qpn_pool_alloc(tp.get(), &x);
		if (rc == 0)
			EXPECT_TRUE(got.insert(x).second);
		else if (rc == -EAGAIN)
			std::this_thread::sleep_for(std::chrono::microseconds(300));
		else
			break;
	}
	EXPECT_EQ(got.size(), n) << "QPNs stranded in an idle thread's cache";
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), -ENOSPC);
	EXPECT_GE(pool_stats(tp.get()).steals, 1u);
	{
		std::lock_guard<std::mutex> l(m);
		release = true;
	}
	cv.notify_all();
	idle.join();
}

TEST(PoolQuarantine, IdleCacheIsStolenWithoutQuarantine) { stranding_case(0); }
TEST(PoolQuarantine, IdleCacheIsStolenWithQuarantine) { stranding_case(10 * 1000 * 1000); }

TEST(PoolQuarantine, ExplicitFlushAndThreadExitReturnTheCache)
{
	TestPool tp(64, 16, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x700, 64), 0);
	std::thread t([&] {
		uint32_t q[20];
		ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 20), 0);
		ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 20), 0);
	});
	t.join();
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.nb_caches, 0u) << "an exited thread gives its cache up";
	uint32_t q[64];
	EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 64), 0);
	EXPECT_EQ(pool_stats(tp.get()).steals, 0u) << "exit flushed; nothing to steal";
	ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 64), 0);
	mlx5_qpn_pool_cache_flush(tp.get());
	EXPECT_EQ(pool_stats(tp.get()).free, 64u);
}

/*
 * The drain leaves a slot's word in quarantine (alloc rewrites it): a drained QPN, on the free
 * stack or in a cache's ready chain, is refused like any free QPN, by every path, and comes back
 * exactly once, with the next generation; the counters stay exact.
 */
TEST(PoolQuarantine, DrainedQpnIsRefusedLikeAFreeOneAndComesBackOnce)
{
	constexpr uint32_t n = 16;
	constexpr uint64_t kQ = 1000 * 1000;
	TestPool tp(n, 4, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x900, n), 0);
	uint32_t q[n], g[n];
	for (uint32_t i = 0; i < n; i++)
		ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &q[i], &g[i]), 0);
	for (uint32_t i = 0; i < n; i++)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q[i]), 0);
	mlx5_qpn_pool_cache_flush(tp.get()); /* seals the open chain */
	EXPECT_EQ(pool_stats(tp.get()).in_quarantine, n);
	const int64_t saved = qpn::test_clock_offset_get();
	qpn::test_clock_offset_set(saved + static_cast<int64_t>(4 * kQ + 1000000));
	EXPECT_EQ(mlx5_qpn_pool_drain(tp.get()), static_cast<int>(n));
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.in_quarantine, 0u);
	EXPECT_EQ(st.free, n);
	const uint64_t refused = st.refused_frees;
	/* One alloc refills this thread's cache: drained QPNs in its ready chain, the rest on the
	 * free stack. */
	uint32_t x, gx;
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &x, &gx), 0);
	for (uint32_t i = 0; i < n; i++) {
		if (q[i] == x)
			continue;
		uint32_t gen = 0;
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q[i]), -EINVAL) << q[i];
		EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q[i], g[i]), -EINVAL) << q[i];
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q[i], &gen), 0);
		EXPECT_EQ(gen, g[i]);
	}
	std::thread other([&] {
		for (uint32_t i = 0; i < n; i++)
			if (q[i] != x) {
				EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q[i]), -EINVAL) << q[i];
			}
	});
	other.join();
	st = pool_stats(tp.get());
	EXPECT_EQ(st.refused_frees, refused + 3 * (n - 1));
	EXPECT_EQ(st.in_use, 1u);
	EXPECT_EQ(st.in_quarantine, 0u);
	EXPECT_EQ(st.free, n - 1);
	std::set<uint32_t> got{x};
	for (uint32_t k = 0; k + 1 < n; k++) {
		uint32_t y, gy;
		ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &y, &gy), 0);
		EXPECT_TRUE(got.insert(y).second) << "handed out twice: " << y;
		for (uint32_t i = 0; i < n; i++)
			if (q[i] == y) {
				EXPECT_EQ(gy, (g[i] + 1) & 0x3FFF);
			}
	}
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), -ENOSPC);
	qpn::test_clock_offset_set(saved);
}

/* One alloc/free pair; whenever everything is in quarantine, the clock moves on past it. */
static bool
pair_moving_clock(struct mlx5_qpn_pool *p, uint64_t quarantine_ns, uint32_t *q)
{
	int rc;
	while ((rc = mlx5_qpn_pool_alloc(p, q)) == -EAGAIN)
		qpn::test_clock_offset_set(qpn::test_clock_offset_get() +
					   static_cast<int64_t>(2 * quarantine_ns));
	return rc == 0 && mlx5_qpn_pool_free(p, *q) == 0;
}

/*
 * A batch keeps its QPNs through the quarantine: a cache seals what it released when it refills,
 * so alloc/free pairs that start out of step with the batches (a partial batch released first)
 * still hand out runs of consecutive QPNs many passes later, also when two threads take turns
 * (so that one thread's consecutive refills get batches from far apart). Sealed only when `open`
 * reached a batch, the end of one batch was spliced onto the start of another at every pass,
 * and the runs would shrink until the alloc met a new slot line every few QPNs (the
 * quarantine's cost growing with the run). The clock is moved on whenever everything is in
 * quarantine.
 */
TEST(PoolQuarantine, BatchesStayWholeThroughTheQuarantine)
{
	constexpr uint64_t kQ = 1000 * 1000;
	constexpr uint32_t kN = 1024, kBatch = 16;
	TestPool tp(kN, kBatch, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x1000, kN), 0);
	const int64_t saved = qpn::test_clock_offset_get();
	std::atomic<int> turn{0};
	std::atomic<bool> failed{false};
	std::vector<uint32_t> seen[2];
	auto body = [&](int me) {
		/* Out of step: five QPNs of a batch released after the rest of it left the cache. */
		uint32_t part[5];
		while (turn.load() != me)
			std::this_thread::yield();
		if (mlx5_qpn_pool_alloc_bulk(tp.get(), part, 5) != 0)
			failed = true;
		mlx5_qpn_pool_cache_flush(tp.get());
		if (mlx5_qpn_pool_free_bulk(tp.get(), part, 5) != 0)
			failed = true;
		turn.store(1 - me);
		for (unsigned step = 0; step < 600; step++) {
			while (turn.load() != me)
				std::this_thread::yield();
			for (unsigned i = 0; i < 37 && !failed; i++) { /* 37: out of step with 16 */
				uint32_t q = 0;
				if (!pair_moving_clock(tp.get(), kQ, &q))
					failed = true;
				if (step >= 500)
					seen[me].push_back(q);
			}
			turn.store(1 - me);
		}
	};
	std::thread t0(body, 0), t1(body, 1);
	t0.join();
	t1.join();
	qpn::test_clock_offset_set(saved);
	ASSERT_FALSE(failed.load());
	size_t adjacent = 0, n = 0;
	for (const auto &v : seen)
		for (size_t i = 1; i < v.size(); i++, n++)
			adjacent += v[i] == v[i - 1] + 1 || v[i] + 1 == v[i - 1];
	/* Runs of a batch: 15 of every 16 neighbours adjacent, the partial batches aside. */
	EXPECT_GE(adjacent * 100 / n, 85u) << adjacent << " of " << n << " neighbours adjacent";
}

/*
 * Fragments join up again. Threads that exit after a few allocations leave batches shorter than
 * cache_size behind (the rest of their ready chain, flushed; their open chain, sealed). A refill
 * sealing only what the cache released would bring a fragment back through the quarantine as the
 * same fragment, for ever: every fragment would cost a refill per pass, and a pool whose threads
 * come and go would accumulate them (qpn-perf's quarantine pair: 7935 -> 8703 refills per 2 million pairs
 * over six repetitions that started and ended threads). A refill that pops a short batch joins the
 * next ones onto it, so that what it releases is sealed as whole batches and at most one short
 * one; the number of fragments never grows and falls when two meet.
 */
TEST(PoolQuarantine, FragmentsJoinUpThroughTheQuarantine)
{
	constexpr uint64_t kQ = 1000 * 1000;
	constexpr uint32_t kN = 4096, kBatch = 16, kThreads = 48;
	TestPool tp(kN, kBatch, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x1000, kN), 0);
	const int64_t saved = qpn::test_clock_offset_get();
	std::atomic<bool> failed{false};
	/* Each thread leaves two fragments: 13 free QPNs flushed at its exit, 3 sealed. */
	for (uint32_t t = 0; t < kThreads; t++) {
		std::thread th([&] {
			uint32_t q[3];
			if (mlx5_qpn_pool_alloc_bulk(tp.get(), q, 3) != 0 ||
			    mlx5_qpn_pool_free_bulk(tp.get(), q, 3) != 0)
				failed = true;
		});
		th.join();
	}
	ASSERT_FALSE(failed.load());
	auto pass = [&] {
		for (uint32_t i = 0; i < kN && !failed; i++) {
			uint32_t q = 0;
			if (!pair_moving_clock(tp.get(), kQ, &q))
				failed = true;
		}
	};
	for (int k = 0; k < 20; k++)
		pass();
	const uint64_t before = pool_stats(tp.get()).cache_misses;
	for (int k = 0; k < 10; k++)
		pass();
	const uint64_t misses = pool_stats(tp.get()).cache_misses - before;
	qpn::test_clock_offset_set(saved);
	ASSERT_FALSE(failed.load());
	/* Whole batches: one miss per kBatch pairs (a joined `ready` holds up to 2 * kBatch - 1).
	 * The fragments kept as they were cost 400 misses more over these passes (+16 %). */
	const uint64_t whole = 10 * kN / kBatch;
	EXPECT_LE(misses, whole + whole / 20)
		<< misses << " misses, " << whole << " for whole batches";
	EXPECT_GE(misses, whole / 2);
}
