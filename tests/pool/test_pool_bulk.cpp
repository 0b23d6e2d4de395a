/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_bulk() is all or nothing (issue 7, item 2): a free racing a bulk that fails part-way must
 * not be accepted for a QPN the bulk took and never handed out. The race is made deterministic
 * with the bulk_rollback test hook: another thread frees the bulk's QPNs just before the rollback.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>
#include <vector>

#include "pool_test_util.h"
#include "qpn_pool_test_hooks.h"

namespace {

struct mlx5_qpn_pool *g_pool;
std::atomic<int> g_accepted{0};
std::atomic<int> g_tried{0};

/* Runs inside the failing bulk, on the bulk's thread: frees from a thread of its own cache. */
void
free_from_another_thread(const uint32_t *qpns, unsigned int got)
{
	std::vector<uint32_t> v(qpns, qpns + got);
	std::thread t([&] {
		for (uint32_t q : v) {
			g_tried.fetch_add(1);
			if (mlx5_qpn_pool_free(g_pool, q) == 0)
				g_accepted.fetch_add(1);
		}
	});
	t.join();
}

struct HookGuard {
	HookGuard() { qpn::g_test_hooks.bulk_rollback.store(free_from_another_thread); }
	~HookGuard() { qpn::g_test_hooks.bulk_rollback.store(nullptr); }
};

void
racing_free_case(uint64_t quarantine_ns)
{
	constexpr uint32_t kN = 8;
	TestPool tp(kN, 4, quarantine_ns);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x900, kN), 0);
	g_pool = tp.get();
	g_accepted = 0;
	g_tried = 0;
	uint32_t q[kN + 1];
	{
		HookGuard h;
		EXPECT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, kN + 1), -ENOSPC);
	}
	EXPECT_EQ(g_tried.load(), static_cast<int>(kN));
	EXPECT_EQ(g_accepted.load(), 0) << "a QPN nobody was given was freed";
	auto st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.in_quarantine, 0u);
	/* Every QPN exactly once (bounded: a corrupted chain must not hang the test). */
	std::set<uint32_t> got;
	uint32_t x;
	for (uint32_t i = 0; i < kN + 2 && mlx5_qpn_pool_alloc(tp.get(), &x) == 0; i++)
		EXPECT_TRUE(got.insert(x).second) << "QPN " << x << " handed out twice";
	EXPECT_EQ(got.size(), kN);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), 0x900, nullptr), 1);
	for (uint32_t v : got)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), v), 0);
}

} // namespace

TEST(PoolBulk, FreeRacingAFailedBulkIsRefusedNoQuarantine) { racing_free_case(0); }
TEST(PoolBulk, FreeRacingAFailedBulkIsRefusedWithQuarantine)
{
	racing_free_case(1000 * 1000 * 1000);
}

/* Frees from another thread while a bulk that cannot fail (the cache holds all of it) has taken
 * its QPNs and not yet published them: refused, and the bulk then hands every QPN out. */
static void
free_taken_slots(const uint32_t *slots, unsigned int n)
{
	std::vector<uint32_t> v(slots, slots + n);
	std::thread t([&] {
		for (uint32_t s : v) {
			g_tried.fetch_add(1);
			/* one range, the pool's first: slot i is QPN 0xB00 + i */
			if (mlx5_qpn_pool_free(g_pool, 0xB00 + s) == 0)
				g_accepted.fetch_add(1);
		}
	});
	t.join();
}

TEST(PoolBulk, FreeRacingABulkServedByTheCacheIsRefused)
{
	TestPool tp(64, 32, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xB00, 64), 0);
	g_pool = tp.get();
	g_accepted = 0;
	g_tried = 0;
	uint32_t first;
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &first), 0); /* the cache now holds a batch */
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), first), 0);
	uint32_t q[8];
	qpn::g_test_hooks.bulk_taken.store(free_taken_slots);
	int rc = mlx5_qpn_pool_alloc_bulk(tp.get(), q, 8);
	qpn::g_test_hooks.bulk_taken.store(nullptr);
	ASSERT_EQ(rc, 0);
	EXPECT_EQ(g_tried.load(), 8) << "the bulk did not take the cache's path";
	EXPECT_EQ(g_accepted.load(), 0) << "a QPN the bulk had not handed out yet was freed";
	std::set<uint32_t> got(q, q + 8);
	EXPECT_EQ(got.size(), 8u);
	for (uint32_t v : q) {
		EXPECT_TRUE(v >= 0xB00 && v < 0xB00 + 64);
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), v, nullptr), 1);
	}
	EXPECT_EQ(pool_stats(tp.get()).allocs, 9u);
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 8), 0);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
}

/* Once the bulk has returned, its QPNs are ordinary allocated QPNs. */
TEST(PoolBulk, SuccessfulBulkPublishesEveryQpn)
{
	TestPool tp(16, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0xA00, 16), 0);
	uint32_t q[10];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 10), 0);
	for (uint32_t v : q)
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), v, nullptr), 1);
	std::thread t([&] { EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), q, 10), 0); });
	t.join();
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
}
