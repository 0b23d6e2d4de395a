/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * -ENOSPC means no QPN exists anywhere: while a drain holds an expired batch
 * privately, between taking its bucket and pushing it onto the free stack, an allocation that
 * finds nothing must get -EAGAIN. Made deterministic with the drain_holding test hook and the
 * pool's test clock.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "pool_test_util.h"
#include "qpn_pool_test_hooks.h"

namespace {

struct mlx5_qpn_pool *g_pool;
std::atomic<int> g_rc{1};

void
alloc_while_drain_holds()
{
	std::thread t([] {
		uint32_t x;
		g_rc = mlx5_qpn_pool_alloc(g_pool, &x);
	});
	t.join();
	qpn::g_test_hooks.drain_holding.store(nullptr); /* once */
}

/* The second test: a drain that starts in the middle of the -ENOSPC verdict's scan. */
constexpr uint64_t kQ2 = 50 * 1000 * 1000;
std::atomic<bool> g_parked{false}, g_go{false};
std::thread g_drainer;

void
drain_parks()
{
	qpn::g_test_hooks.drain_holding.store(nullptr); /* once */
	g_parked = true;
	while (!g_go)
		std::this_thread::yield();
}

void
drain_during_the_verdict()
{
	qpn::g_test_hooks.verdict_scan.store(nullptr); /* once */
	/* The quarantine ends now; another thread's drain takes the bucket and holds it. */
	qpn::test_clock_offset_set(qpn::test_clock_offset_get() + static_cast<int64_t>(4 * kQ2));
	qpn::g_test_hooks.drain_holding.store(drain_parks);
	g_drainer = std::thread([] { mlx5_qpn_pool_drain(g_pool); });
	while (!g_parked)
		std::this_thread::yield();
}

} // namespace

TEST(PoolTransit, AllocDuringADrainsHandOverIsEagainNotEnospc)
{
	const int64_t saved = qpn::test_clock_offset_get();
	constexpr uint64_t kQ = 50 * 1000 * 1000;
	TestPool tp(4, 4, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xB00, 4), 0);
	g_pool = tp.get();
	uint32_t q[4];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 4), 0);
	ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 4), 0); /* a full open chain: sealed */
	mlx5_qpn_pool_cache_flush(tp.get());
	qpn::test_clock_offset_set(saved + static_cast<int64_t>(4 * kQ)); /* quarantine over */
	g_rc = 1;
	qpn::g_test_hooks.drain_holding.store(alloc_while_drain_holds);
	EXPECT_EQ(mlx5_qpn_pool_drain(tp.get()), 4);
	qpn::g_test_hooks.drain_holding.store(nullptr);
	qpn::test_clock_offset_set(saved);
	EXPECT_EQ(g_rc.load(), -EAGAIN)
		<< "-ENOSPC while 4 QPNs were on their way to the free stack";
	uint32_t x;
	EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 4), 0)
		<< "all four are free after the drain";
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), -ENOSPC);
	EXPECT_EQ(pool_stats(tp.get()).enospc, 1u);
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 4), 0);
}

/*
 * The same move, started while the allocation's verdict scan is under way: after its first read
 * (which read `transit` when the scan began with the announcements: it then read the bucket
 * after the drain took it and the free stack before the drain pushed it, and said -ENOSPC),
 * before the rest. The scan reads the quarantine first now: the bucket is still there, -EAGAIN.
 */
TEST(PoolTransit, ADrainStartingDuringTheVerdictIsEagainNotEnospc)
{
	const int64_t saved = qpn::test_clock_offset_get();
	TestPool tp(4, 4, kQ2);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xB00, 4), 0);
	g_pool = tp.get();
	uint32_t q[4];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 4), 0);
	ASSERT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 4), 0); /* sealed into a bucket */
	mlx5_qpn_pool_cache_flush(tp.get());
	g_parked = false;
	g_go = false;
	qpn::g_test_hooks.verdict_scan.store(drain_during_the_verdict);
	uint32_t x;
	const int rc = mlx5_qpn_pool_alloc(tp.get(), &x);
	qpn::g_test_hooks.verdict_scan.store(nullptr);
	g_go = true;
	if (g_drainer.joinable())
		g_drainer.join();
	EXPECT_EQ(rc, -EAGAIN) << "-ENOSPC while 4 QPNs were on their way to the free stack";
	EXPECT_EQ(pool_stats(tp.get()).enospc, 0u);
	qpn::test_clock_offset_set(saved + static_cast<int64_t>(4 * kQ2));
	EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 4), 0) << "all four are free after it";
	qpn::test_clock_offset_set(saved);
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 4), 0);
}
