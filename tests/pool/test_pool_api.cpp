/* SPDX-License-Identifier: BSD-3-Clause */
/* The pool's API contracts: creation, alloc/free, bulk, generations, refusals, counters. */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include <rte_errno.h>
#include <rte_memory.h>

#include "pool_test_util.h"

TEST(PoolApi, CreateRejectsBadParameters)
{
	struct mlx5_qpn_pool_params prm = {};
	prm.name = "bad";
	prm.cache_size = 0;
	prm.capacity = 16;
	prm.socket_id = SOCKET_ID_ANY;
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	EXPECT_EQ(rte_errno, EINVAL);
	prm.cache_size = 8;
	prm.capacity = 0;
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	EXPECT_EQ(rte_errno, EINVAL);
	prm.capacity = 1u << 24; /* one more than 24-bit slot indices allow */
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	prm.capacity = 16;
	prm.name = "a-name-that-is-much-too-long-for-a-pool";
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	prm.name = "";
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	EXPECT_EQ(mlx5_qpn_pool_create(nullptr), nullptr);
}

TEST(PoolApi, NameIsUniqueAndLookupFindsIt)
{
	TestPool tp(64, 8, 0);
	ASSERT_NE(tp.get(), nullptr);
	struct mlx5_qpn_pool_params prm = {};
	prm.name = tp.name().c_str();
	prm.cache_size = 8;
	prm.capacity = 64;
	prm.socket_id = SOCKET_ID_ANY;
	EXPECT_EQ(mlx5_qpn_pool_create(&prm), nullptr);
	EXPECT_EQ(rte_errno, EEXIST);
	EXPECT_EQ(mlx5_qpn_pool_lookup(tp.name().c_str()), tp.get());
	EXPECT_STREQ(mlx5_qpn_pool_name(tp.get()), tp.name().c_str());
	EXPECT_EQ(mlx5_qpn_pool_lookup("no-such-pool"), nullptr);
	EXPECT_EQ(rte_errno, ENOENT);
}

TEST(PoolApi, AllocHandsOutEveryQpnOnceThenEnospc)
{
	TestPool tp(100, 8, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x1000, 100), 0);
	std::set<uint32_t> got;
	uint32_t q;
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		EXPECT_GE(q, 0x1000u);
		EXPECT_LT(q, 0x1000u + 100);
		EXPECT_TRUE(got.insert(q).second) << "QPN handed out twice: " << q;
	}
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), -ENOSPC);
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.capacity, 100u);
	EXPECT_EQ(st.in_use, 100u);
	EXPECT_EQ(st.free, 0u);
	EXPECT_EQ(st.enospc, 1u);
	for (uint32_t x : got)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0);
	st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.free, 100u);
}

TEST(PoolApi, EmptyPoolIsEnospcNotEagain)
{
	TestPool tp(10, 4, 1000000);
	uint32_t q;
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), -ENOSPC);
	uint64_t when;
	EXPECT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), -ENOENT);
}

TEST(PoolApi, FreeOfUnallocatedQpnIsRefusedAndChangesNothing)
{
	TestPool tp(32, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 500, 32), 0);
	uint32_t q;
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
	auto before = pool_stats(tp.get());
	/* never allocated, in range */
	uint32_t other = q == 500 ? 501 : 500;
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), other), -EINVAL);
	/* outside every range, and past 24 bits */
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 499), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 532), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x1000000), -EINVAL);
	auto after = pool_stats(tp.get());
	EXPECT_EQ(after.in_use, before.in_use);
	EXPECT_EQ(after.free, before.free);
	EXPECT_EQ(after.refused_frees, before.refused_frees + 4);
	/* double free */
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), -EINVAL);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
	EXPECT_EQ(pool_stats(tp.get()).refused_frees, before.refused_frees + 5);
	/* the refused QPN is still handed out exactly once afterwards */
	std::set<uint32_t> all;
	for (int i = 0; i < 32; i++) {
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		EXPECT_TRUE(all.insert(q).second);
	}
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), -ENOSPC);
}

TEST(PoolApi, NullArgumentsAreEinval)
{
	TestPool tp(8, 4, 0);
	uint32_t q;
	EXPECT_EQ(mlx5_qpn_pool_alloc(nullptr, &q), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(nullptr, 1), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), nullptr, 3), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), nullptr, 3), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_stats_get(tp.get(), nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_range_add(nullptr, 1, 1), -EINVAL);
}

TEST(PoolApi, GenerationChangesAtEveryHandOut)
{
	TestPool tp(1, 1, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 77, 1), 0);
	uint32_t q, g1, g2, g;
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &q, &g1), 0);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, &g), 1);
	EXPECT_EQ(g, g1);
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, nullptr), 0);
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(tp.get(), &q, &g2), 0);
	EXPECT_EQ(q, 77u);
	EXPECT_NE(g1, g2);
	/* a late free by the previous owner (old generation) is refused */
	EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q, g1), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, nullptr), 1);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(tp.get(), q, g2), 0);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), 78, nullptr), -EINVAL);
}

TEST(PoolApi, BulkIsAllOrNothing)
{
	TestPool tp(10, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 100, 10), 0);
	uint32_t q[16];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 7), 0);
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 7u);
	EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q + 7, 4), -ENOSPC);
	st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 7u) << "a failed bulk alloc must take nothing";
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q + 7, 3), 0);
	std::set<uint32_t> s(q, q + 10);
	EXPECT_EQ(s.size(), 10u);
	/* bulk free: valid ones go back even when one is refused */
	uint32_t mixed[3] = {q[0], 9999, q[1]};
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), mixed, 3), -EINVAL);
	st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 8u);
	EXPECT_EQ(st.refused_frees, 1u);
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q + 2, 8), 0);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
}

TEST(PoolApi, CountersAndDump)
{
	TestPool tp(64, 8, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	uint32_t q;
	for (int i = 0; i < 20; i++) {
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	}
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.allocs, 20u);
	EXPECT_EQ(st.frees, 20u);
	EXPECT_EQ(st.cache_hits + st.cache_misses, 20u);
	EXPECT_GE(st.refills, 1u);
	EXPECT_EQ(st.nb_ranges, 1u);
	EXPECT_GE(st.nb_caches, 1u);
	mlx5_qpn_pool_stats_reset(tp.get());
	st = pool_stats(tp.get());
	EXPECT_EQ(st.cache_hits + st.cache_misses, 0u);
	EXPECT_EQ(st.allocs, 20u) << "reset keeps the QPN accounting";
	char *buf = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	mlx5_qpn_pool_dump(f, tp.get());
	fclose(f);
	std::string out(buf, len);
	free(buf);
	EXPECT_NE(out.find(tp.name()), std::string::npos);
	EXPECT_NE(out.find("0x000100"), std::string::npos);
}

/*
 * Two threads race to free the same QPNs (allocated by a third): every QPN is released exactly
 * once. Both threads free from outside the allocating cache, so a free may be refused only
 * when the allocator's cache applies it, after it returned 0: refused_async counts those.
 */
TEST(PoolApi, RacingDoubleFreeIsRefusedOnce)
{
	constexpr uint32_t n = 2000;
	TestPool tp(n, 16, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x2000, n), 0);
	std::vector<uint32_t> q(n);
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q.data(), n), 0);
	std::atomic<int> ok{0}, refused{0};
	std::atomic<bool> go{false};
	auto worker = [&] {
		while (!go.load())
			;
		for (uint32_t x : q)
			(mlx5_qpn_pool_free(tp.get(), x) == 0 ? ok : refused).fetch_add(1);
	};
	std::thread a(worker), b(worker);
	go.store(true);
	a.join();
	b.join();
	uint32_t x0;
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x0), 0); /* any call applies our queue */
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), x0), 0);
	struct mlx5_qpn_pool_stats st = pool_stats(tp.get());
	EXPECT_EQ(ok.load() + refused.load(), static_cast<int>(2 * n));
	EXPECT_EQ(static_cast<uint64_t>(ok.load()) - st.refused_async, n);
	EXPECT_EQ(st.in_use, 0u);
	std::set<uint32_t> again;
	uint32_t x;
	while (mlx5_qpn_pool_alloc(tp.get(), &x) == 0)
		EXPECT_TRUE(again.insert(x).second);
	EXPECT_EQ(again.size(), n);
}
