/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Thread bindings: a thread keeps its cache bindings of at most 8 pools. Those
 * of pools freed since must not occupy the table for good: a thread that used 8 pools, all freed
 * by another thread, still gets a cache in the next one.
 */
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pool_test_util.h"

TEST(PoolBind, FreedPoolsDoNotUseUpAThreadsBindings)
{
	constexpr int kOld = 12; /* more than the 8 bindings a thread keeps */
	std::vector<std::unique_ptr<TestPool>> old;
	for (int i = 0; i < kOld; i++) {
		old.push_back(std::make_unique<TestPool>(16, 4, 0));
		ASSERT_EQ(mlx5_qpn_pool_range_add(old.back()->get(), 0x100 + 16 * i, 16), 0);
	}
	TestPool fresh(16, 4, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(fresh.get(), 0xC00, 16), 0);
	std::mutex m;
	std::condition_variable cv;
	int step = 0; /* 1: worker used a pool; 2: main freed it */
	std::thread worker([&] {
		for (int i = 0; i < kOld; i++) {
			uint32_t x;
			EXPECT_EQ(mlx5_qpn_pool_alloc(old[i]->get(), &x), 0);
			EXPECT_EQ(mlx5_qpn_pool_free(old[i]->get(), x), 0);
			EXPECT_EQ(pool_stats(old[i]->get()).nb_caches, 1u) << "pool " << i;
			std::unique_lock<std::mutex> l(m);
			step = 1;
			cv.notify_all();
			cv.wait(l, [&] { return step == 2; });
		}
		uint32_t x;
		EXPECT_EQ(mlx5_qpn_pool_alloc(fresh.get(), &x), 0);
		EXPECT_EQ(pool_stats(fresh.get()).nb_caches, 1u) << "no cache after 8 freed pools";
		EXPECT_EQ(mlx5_qpn_pool_free(fresh.get(), x), 0);
	});
	for (int i = 0; i < kOld; i++) {
		std::unique_lock<std::mutex> l(m);
		cv.wait(l, [&] { return step == 1; });
		old[i].reset(); /* frees the pool from this thread: the worker's binding goes stale */
		step = 2;
		cv.notify_all();
	}
	worker.join();
}
