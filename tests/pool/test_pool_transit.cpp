/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * -ENOSPC means no QPN exists anywhere (issue 7, item 3): while a drain holds an expired batch
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
