/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cache hysteresis: a cache must not exchange a batch with the shared pool on
 * every alloc/free pair. It once flushed cache_size + 1 QPNs down to cache_size, so a cache that
 * took that batch back refilled and flushed on every pair. Now a cache holds 0..2*cache_size:
 * between two exchanges with the free stack come at least cache_size net allocs or frees. The
 * counters `refills` (batches popped) and `flushes` (batches pushed) count the exchanges.
 */
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "pool_test_util.h"

namespace {

constexpr uint32_t kCache = 32;
constexpr int kPairs = 10000;

/* Alloc/free pairs at the current fill level of the calling thread's cache. */
void
pairs(struct mlx5_qpn_pool *p, int n, bool free_first, std::vector<uint32_t> &held)
{
	for (int i = 0; i < n; i++) {
		uint32_t q;
		if (free_first) {
			ASSERT_EQ(mlx5_qpn_pool_free(p, held.back()), 0);
			held.pop_back();
			ASSERT_EQ(mlx5_qpn_pool_alloc(p, &q), 0);
			held.push_back(q);
		} else {
			ASSERT_EQ(mlx5_qpn_pool_alloc(p, &q), 0);
			ASSERT_EQ(mlx5_qpn_pool_free(p, q), 0);
		}
	}
}

uint64_t
exchanges(struct mlx5_qpn_pool *p)
{
	struct mlx5_qpn_pool_stats st = pool_stats(p);
	return st.refills + st.flushes;
}

} /* namespace */

/* Every fill level a cache can have, and a few past it (a flush happened just before): pairs at
 * that level exchange at most one batch, not one per pair. */
TEST(PoolFlush, PairsAtEveryFillLevelDoNotPingPong)
{
	TestPool tp(16 * kCache, kCache, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x4000, 16 * kCache), 0);
	std::vector<uint32_t> held;
	uint64_t start = exchanges(tp.get());
	/* Take and give back: net allocs then net frees move the cache through all its levels. */
	for (uint32_t level = 0; level < 4 * kCache; level++) {
		uint32_t q;
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		held.push_back(q);
		uint64_t before = exchanges(tp.get());
		pairs(tp.get(), 1000, level % 2 == 0, held);
		EXPECT_LE(exchanges(tp.get()) - before, 1u) << "level " << level << " (allocating)";
	}
	while (!held.empty()) {
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), held.back()), 0);
		held.pop_back();
		uint64_t before = exchanges(tp.get());
		pairs(tp.get(), 1000, false, held);
		EXPECT_LE(exchanges(tp.get()) - before, 1u)
			<< "held " << held.size() << " (freeing)";
	}
	/* 8 * kCache net moves and ~256k pairs: one exchange per cache_size net moves, plus slack. */
	EXPECT_LE(exchanges(tp.get()) - start, 8u + 4u);
}

/* qpn-perf's second lcore: it starts on batches another cache flushed. A flush at cache_size + 1
 * would keep it in the ping-pong for the whole run. */
TEST(PoolFlush, CacheTakingBackAFlushedBatchDoesNotPingPong)
{
	TestPool tp(16 * kCache, kCache, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x4000, 16 * kCache), 0);
	/* This thread fills its cache past the top, so it flushes batches onto the free stack. */
	std::vector<uint32_t> held;
	for (uint32_t i = 0; i < 8 * kCache; i++) {
		uint32_t q;
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		held.push_back(q);
	}
	for (uint32_t q : held)
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	EXPECT_GE(pool_stats(tp.get()).flushes, 1u);
	/* A second thread takes a flushed batch back and runs pairs at every level of it. */
	std::thread other([&] {
		std::vector<uint32_t> mine;
		for (uint32_t k = 0; k <= 2 * kCache + 1; k++) {
			uint64_t before = exchanges(tp.get());
			pairs(tp.get(), kPairs / 10, false, mine);
			EXPECT_LE(exchanges(tp.get()) - before, 1u) << "k " << k;
			uint32_t q;
			ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
			ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
			if (k < kCache) {
				ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
				mine.push_back(q);
			}
		}
		for (uint32_t q : mine)
			ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	});
	other.join();
}
