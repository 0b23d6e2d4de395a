/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranges at the edges of the 24-bit QPN space, adjacency, overlap, capacity, growth at run time. */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>
#include <vector>

#include "pool_test_util.h"

static std::set<uint32_t>
drain_all(struct mlx5_qpn_pool *p)
{
	std::set<uint32_t> s;
	uint32_t q;
	while (mlx5_qpn_pool_alloc(p, &q) == 0)
		s.insert(q);
	return s;
}

TEST(PoolRanges, EdgesOfTheQpnSpace)
{
	TestPool tp(16, 4, 0);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x000002, 1), 0);
	/* 0xFFFFFF is the multicast QPN: no range may hold it, alone or as its last QPN. */
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xFFFFFF, 1), -EINVAL) << "the multicast QPN";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xFFFFFE, 2), -EINVAL) << "ends at 0xFFFFFF";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xFFFFF0, 0x10), -EINVAL) << "ends at 0xFFFFFF";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xFFFFF0, 0x11), -EINVAL) << "passes 0xFFFFFF";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xFFFFFE, 1), 0) << "the last valid QPN";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x1000000, 1), -EINVAL) << "not 24 bits";
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 5, 0), -EINVAL) << "empty";
	auto s = drain_all(tp.get());
	EXPECT_EQ(s, (std::set<uint32_t>{0x000002, 0xFFFFFE}));
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0xFFFFFF), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0xFFFFFE), 0);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x000002), 0);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x000003), -EINVAL);
}

TEST(PoolRanges, AdjacentRangesAreFineOverlapIsRefused)
{
	TestPool tp(64, 4, 0);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 100, 10), 0);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 110, 10), 0); /* right after */
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 90, 10), 0);  /* right before */
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 119, 2), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 85, 6), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 95, 1), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 50, 100), -EINVAL) << "covers all three";
	auto s = drain_all(tp.get());
	EXPECT_EQ(s.size(), 30u);
	EXPECT_EQ(*s.begin(), 90u);
	EXPECT_EQ(*s.rbegin(), 119u);
	struct mlx5_qpn_pool_stats st;
	ASSERT_EQ(mlx5_qpn_pool_stats_get(tp.get(), &st), 0);
	EXPECT_EQ(st.nb_ranges, 3u);
	EXPECT_EQ(st.capacity, 30u);
}

TEST(PoolRanges, CapacityIsEnforced)
{
	TestPool tp(10, 4, 0);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 1000, 8), 0);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 2000, 3), -ENOSPC);
	EXPECT_EQ(mlx5_qpn_pool_range_add(tp.get(), 2000, 2), 0);
	EXPECT_EQ(drain_all(tp.get()).size(), 10u);
}

TEST(PoolRanges, ManySmallRangesMapBothWays)
{
	/* Ranges added out of order: QPN -> slot goes through the sorted index. */
	TestPool tp(200, 3, 0);
	for (int i = 99; i >= 0; i--)
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x10000 + i * 7, 2), 0);
	auto s = drain_all(tp.get());
	ASSERT_EQ(s.size(), 200u);
	for (uint32_t q : s) {
		EXPECT_LT((q - 0x10000) % 7, 2u);
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	}
	for (int i = 0; i < 100; i++)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x10000 + i * 7 + 2), -EINVAL);
}

TEST(PoolRanges, RangesGrowWhileOthersAllocate)
{
	constexpr int kRanges = 40, kEach = 50;
	TestPool tp(kRanges * kEach, 8, 0);
	std::atomic<bool> done{false};
	std::atomic<long> cycles{0}, errors{0};
	std::thread user([&] {
		uint32_t q;
		while (!done.load()) {
			int rc = mlx5_qpn_pool_alloc(tp.get(), &q);
			if (rc == 0) {
				if (mlx5_qpn_pool_free(tp.get(), q) != 0)
					errors.fetch_add(1);
				cycles.fetch_add(1);
			} else if (rc != -ENOSPC && rc != -EAGAIN) {
				errors.fetch_add(1);
			}
		}
	});
	for (int i = 0; i < kRanges; i++)
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x400000 + i * 1000, kEach), 0);
	done.store(true);
	user.join();
	EXPECT_EQ(errors.load(), 0);
	EXPECT_EQ(drain_all(tp.get()).size(), static_cast<size_t>(kRanges * kEach));
}
