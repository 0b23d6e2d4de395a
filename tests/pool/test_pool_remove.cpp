/* SPDX-License-Identifier: BSD-3-Clause */
/* Taking a range out of a running pool (so that the driver can give it back to its device). */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "pool_checker.h"
#include "pool_test_util.h"

static std::set<uint32_t>
take_all(struct mlx5_qpn_pool *p)
{
	std::set<uint32_t> s;
	uint32_t q;
	while (mlx5_qpn_pool_alloc(p, &q) == 0)
		s.insert(q);
	return s;
}

TEST(PoolRemove, FreeRangeGoesAndNeverComesBack)
{
	TestPool tp(64, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 16), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x200, 16), 0);
	/* Touch both ranges so that their QPNs sit in the cache and the free stack, mixed. */
	auto all = take_all(tp.get());
	ASSERT_EQ(all.size(), 32u);
	for (uint32_t q : all)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	mlx5_qpn_pool_cache_flush(tp.get());
	EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x200), 0);
	EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x200), -ENOENT);
	EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x201), -ENOENT);
	struct mlx5_qpn_pool_stats st;
	ASSERT_EQ(mlx5_qpn_pool_stats_get(tp.get(), &st), 0);
	EXPECT_EQ(st.capacity, 16u);
	EXPECT_EQ(st.free, 16u);
	auto left = take_all(tp.get());
	ASSERT_EQ(left.size(), 16u);
	for (uint32_t q : left)
		EXPECT_LT(q, 0x200u) << "a QPN of the removed range was handed out";
	/* QPNs of the removed range are foreign now. */
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x205), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), 0x205, nullptr), -EINVAL);
	for (uint32_t q : left)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
}

TEST(PoolRemove, BusyWhileAnyQpnIsHeldOrQuarantined)
{
	TestPool tp(64, 4, 50ull * 1000 * 1000 * 1000); /* 50 s: stays in quarantine */
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 8), 0);
	uint32_t q[8];
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 8), 0);
	EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x100), -EBUSY) << "held";
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q[0]), 0);
	EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x100), -EBUSY) << "in quarantine";
	/* A refused removal changes nothing: the held ones can still be freed. */
	for (int i = 1; i < 8; i++)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q[i]), 0);
	EXPECT_EQ(pool_stats(tp.get()).in_quarantine, 8u);
}

TEST(PoolRemove, ReAddingTheSameQpnsWorks)
{
	/* A 50 s quarantine makes the slots' grace period 50 s: no reuse within this test. */
	TestPool tp(32, 4, 50ull * 1000 * 1000 * 1000);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 16), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x300, 16), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x300), 0);
	/* The same QPNs again (a new entry; the old slots are still in their grace period). */
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x300, 16), -ENOSPC) << "slots still in grace";
	ASSERT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x100), 0);
	EXPECT_EQ(take_all(tp.get()).size(), 0u);
	EXPECT_EQ(pool_stats(tp.get()).capacity, 0u);
}

TEST(PoolRemove, SlotRegionIsReusedAfterTheGracePeriod)
{
	TestPool tp(16, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 16), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x100), 0);
	/* (That it is refused before the grace period ends: ReAddingTheSameQpnsWorks.) */
	std::this_thread::sleep_for(std::chrono::milliseconds(1100));
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x900, 16), 0);
	auto s = take_all(tp.get());
	ASSERT_EQ(s.size(), 16u);
	EXPECT_EQ(*s.begin(), 0x900u);
	EXPECT_EQ(*s.rbegin(), 0x90Fu);
	for (uint32_t q : s)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x100), -EINVAL);
}

/*
 * Two threads allocate and free from ranges A and B while a third keeps trying to remove B and
 * add it back. The checker's invariants must hold throughout: a removal that took a QPN still
 * in use would let it be handed out twice after B comes back. Removal attempts during use mostly
 * meet -EBUSY; in a quiet phase (the users release everything and idle) one must succeed, so the
 * test does not depend on the timing of the busy phase.
 */
TEST(PoolRemove, RemoveAndReAddUnderConcurrentUse)
{
	const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0x1000, 64}, {0x2000, 64}};
	/* Every removal leaves 64 slots in their grace period: room for 2 + 2 x 4 ranges. */
	TestPool tp(1024, 8, 0);
	for (auto &r : ranges)
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), r.first, r.second), 0);
	PoolChecker checker(ranges, 0);
	std::atomic<bool> stop{false};
	std::atomic<int> pause_req{0}, paused{0};
	std::atomic<uint64_t> errors{0}, removals{0}, busy_refusals{0};
	auto release = [&](std::vector<uint32_t> &held) {
		for (uint32_t x : held) {
			checker.on_release(x);
			if (mlx5_qpn_pool_free(tp.get(), x) != 0)
				errors.fetch_add(1);
		}
		held.clear();
	};
	auto user = [&](unsigned seed) {
		std::mt19937 rng(seed);
		std::vector<uint32_t> held;
		while (!stop.load()) {
			if (pause_req.load()) {
				release(held);
				mlx5_qpn_pool_cache_flush(tp.get());
				paused.fetch_add(1);
				while (pause_req.load() && !stop.load())
					std::this_thread::yield();
				paused.fetch_sub(1);
				continue;
			}
			if (rng() % 2 == 0 || held.empty()) {
				uint32_t q;
				int rc = mlx5_qpn_pool_alloc(tp.get(), &q);
				if (rc == 0) {
					checker.on_acquire(q);
					held.push_back(q);
				} else if (rc != -ENOSPC && rc != -EAGAIN) {
					errors.fetch_add(1);
				}
			} else {
				uint32_t x = held.back();
				held.pop_back();
				checker.on_release(x);
				if (mlx5_qpn_pool_free(tp.get(), x) != 0)
					errors.fetch_add(1);
			}
			if (held.size() > 24) {
				std::vector<uint32_t> some(held.begin(), held.begin() + 8);
				held.erase(held.begin(), held.begin() + 8);
				release(some);
			}
		}
		release(held);
	};
	std::thread a(user, 1), b(user, 2);
	for (int round = 0; round < 4; round++) {
		/* Busy phase: removal races with use (at most one success per round). */
		for (int i = 0; i < 50; i++) {
			int rc = mlx5_qpn_pool_range_remove(tp.get(), 0x2000);
			if (rc == 0) {
				removals.fetch_add(1);
				if (mlx5_qpn_pool_range_add(tp.get(), 0x2000, 64) != 0)
					errors.fetch_add(1);
				break;
			} else if (rc == -EBUSY) {
				busy_refusals.fetch_add(1);
			} else {
				errors.fetch_add(1);
			}
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		}
		/* Quiet phase: everything released, so the removal must succeed. */
		pause_req.store(1);
		while (paused.load() < 2)
			std::this_thread::yield();
		EXPECT_EQ(mlx5_qpn_pool_range_remove(tp.get(), 0x2000), 0) << "round " << round;
		removals.fetch_add(1);
		/* Back with the same QPNs: a fresh entry and slot region (the old one is in its grace
		 * period). */
		if (mlx5_qpn_pool_range_add(tp.get(), 0x2000, 64) != 0)
			errors.fetch_add(1);
		pause_req.store(0);
	}
	stop.store(true);
	a.join();
	b.join();
	EXPECT_EQ(errors.load(), 0u);
	for (auto &m : checker.messages())
		ADD_FAILURE() << m;
	EXPECT_EQ(checker.violations(), 0u);
	EXPECT_GE(removals.load(), 4u);
}
