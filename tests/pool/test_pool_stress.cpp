/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Concurrency: an EAL worker lcore, the main lcore and a non-EAL thread allocate and free at
 * random against one pool, and the independent checker (pool_checker.h) verifies BRIEF §4
 * invariants 1-4 from its own records. Also the checker's self-test: fed violations, it reports
 * them, so a passing stress run means something.
 *
 * Results cross threads only through std::atomic (ThreadSanitizer cannot see the hand-over
 * inside rte_eal_remote_launch/rte_eal_wait_lcore of an uninstrumented DPDK).
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <random>
#include <thread>
#include <vector>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "pool_checker.h"
#include "pool_test_util.h"

namespace {

struct StressCtx {
	struct mlx5_qpn_pool *pool;
	PoolChecker *checker;
	uint64_t ops;
	std::atomic<uint64_t> errors{0};
	std::atomic<uint64_t> done{0};
	std::atomic<uint64_t> allocated{0};
	/* Cross-thread frees: a thread leaves a QPN here (q + 1; 0: empty) and frees the one it
	 * takes out, which another thread allocated (a remote free, design_pool.md §4). */
	bool exchange = false;
	std::atomic<uint32_t> xchg[16] = {};
};

std::atomic<StressCtx *> g_ctx{nullptr};

void
stress_body(StressCtx *ctx, uint32_t seed)
{
	std::mt19937 rng(seed);
	std::vector<uint32_t> held;
	uint32_t buf[16];
	uint64_t local_allocs = 0;
	for (uint64_t i = 0; i < ctx->ops; i++) {
		unsigned r = rng() % 100;
		if (r < 45 || held.empty()) {
			unsigned n = (r % 5 == 0) ? 1 + rng() % 16 : 1;
			int rc = n == 1 ? mlx5_qpn_pool_alloc(ctx->pool, buf) :
					  mlx5_qpn_pool_alloc_bulk(ctx->pool, buf, n);
			if (rc == 0) {
				for (unsigned k = 0; k < n; k++) {
					ctx->checker->on_acquire(buf[k]);
					held.push_back(buf[k]);
				}
				local_allocs += n;
			} else if (rc != -EAGAIN && rc != -ENOSPC) {
				ctx->errors.fetch_add(1);
			}
		} else {
			unsigned n = 1 + rng() % (held.size() < 8 ? held.size() : 8);
			for (unsigned k = 0; k < n; k++) {
				size_t j = rng() % held.size();
				uint32_t q = held[j];
				held[j] = held.back();
				held.pop_back();
				if (ctx->exchange && rng() % 3 == 0) {
					uint32_t o = ctx->xchg[rng() % 16].exchange(q + 1);
					if (o == 0)
						continue;
					q = o - 1; /* someone else's: free it here */
					ctx->checker->on_handover(q);
				}
				ctx->checker->on_release(q);
				if (mlx5_qpn_pool_free(ctx->pool, q) != 0)
					ctx->errors.fetch_add(1);
			}
		}
		if (rng() % 1000 == 0) /* also hammer the refusal path */
			if (mlx5_qpn_pool_free(ctx->pool, 0xABCDEF) != -EINVAL)
				ctx->errors.fetch_add(1);
	}
	for (uint32_t q : held) {
		ctx->checker->on_release(q);
		if (mlx5_qpn_pool_free(ctx->pool, q) != 0)
			ctx->errors.fetch_add(1);
	}
	mlx5_qpn_pool_cache_flush(ctx->pool);
	ctx->allocated.fetch_add(local_allocs);
	ctx->done.fetch_add(1, std::memory_order_release);
}

int
lcore_stress(void *)
{
	StressCtx *ctx = g_ctx.load(std::memory_order_acquire);
	stress_body(ctx, 1000 + rte_lcore_id());
	return 0;
}

void
run_stress(uint32_t capacity, uint32_t cache, uint64_t quarantine_ns, uint64_t ops,
	   bool exchange = false)
{
	const std::vector<std::pair<uint32_t, uint32_t>> ranges =
		{{0x000002, capacity / 4},
		 {0x800000, capacity / 4},
		 {0xFFFFFE - capacity / 2 + 1, capacity / 2}}; /* up to the last valid QPN */
	TestPool tp(capacity, cache, quarantine_ns);
	ASSERT_NE(tp.get(), nullptr);
	for (auto &r : ranges)
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), r.first, r.second), 0);
	PoolChecker checker(ranges, quarantine_ns);
	StressCtx ctx;
	ctx.pool = tp.get();
	ctx.checker = &checker;
	ctx.ops = ops;
	ctx.exchange = exchange;
	g_ctx.store(&ctx, std::memory_order_release);

	unsigned workers = 1; /* main lcore + non-EAL thread */
	unsigned launched = RTE_MAX_LCORE;
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
	{
		if (rte_eal_remote_launch(lcore_stress, nullptr, lc) == 0) {
			launched = lc;
			workers++;
		}
		break;
	}
	std::thread non_eal([&] { stress_body(&ctx, 7); });
	workers++;
	stress_body(&ctx, 3);
	non_eal.join();
	while (ctx.done.load(std::memory_order_acquire) < workers)
		std::this_thread::yield();
	if (launched != RTE_MAX_LCORE)
		rte_eal_wait_lcore(launched);
	EXPECT_GE(workers, 3u) << "needs an EAL worker lcore (-l 0-1)";
	EXPECT_EQ(ctx.errors.load(), 0u);
	for (auto &x : ctx.xchg) {
		uint32_t o = x.exchange(0);
		if (o == 0)
			continue;
		checker.on_handover(o - 1);
		checker.on_release(o - 1);
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), o - 1), 0);
	}

	/* Invariant 4: once all is released and the quarantine passed, everything is free. */
	uint64_t until = mlx5_qpn_clock_ns() + quarantine_ns + quarantine_ns / 4 + 1000000;
	while (mlx5_qpn_clock_ns() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	std::vector<uint32_t> all;
	uint32_t q;
	int rc;
	for (int round = 0;; round++) {
		while ((rc = mlx5_qpn_pool_alloc(tp.get(), &q)) == 0) {
			checker.on_acquire(q);
			all.push_back(q);
		}
		/* A QPN freed by another thread after its allocating thread's last call (here: after
		 * the EAL worker's cache_flush) waits in that cache's remote queue until this alloc
		 * empties the idle cache; its quarantine starts only then (late, never early). */
		if (rc != -EAGAIN || !exchange || round == 2)
			break;
		until = mlx5_qpn_clock_ns() + quarantine_ns + quarantine_ns / 4 + 1000000;
		while (mlx5_qpn_clock_ns() < until)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	EXPECT_EQ(rc, -ENOSPC);
	checker.on_drain_complete(all.size());
	for (uint32_t x : all) {
		checker.on_release(x);
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0);
	}
	for (auto &m : checker.messages())
		ADD_FAILURE() << m;
	EXPECT_EQ(checker.violations(), 0u);
	EXPECT_GT(ctx.allocated.load(), ops / 4);
	struct mlx5_qpn_pool_stats st;
	mlx5_qpn_pool_stats_get(tp.get(), &st);
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_GT(st.refused_frees, 0u) << "the 0xABCDEF frees are counted as refused";
}

} // namespace

TEST(PoolStress, ThreeThreadsNoQuarantine) { run_stress(1024, 16, 0, 300000); }
TEST(PoolStress, ThreeThreadsWithQuarantine) { run_stress(4096, 32, 200 * 1000, 300000); }
TEST(PoolStress, ThreeThreadsTinyPoolContention) { run_stress(64, 4, 50 * 1000, 200000); }
/* A third of the frees are of QPNs another thread allocated: the remote queues under stress. */
TEST(PoolStress, CrossThreadFreesNoQuarantine) { run_stress(1024, 16, 0, 300000, true); }
TEST(PoolStress, CrossThreadFreesWithQuarantine) { run_stress(4096, 32, 200 * 1000, 300000, true); }
TEST(PoolStress, CrossThreadFreesTinyPool) { run_stress(64, 4, 50 * 1000, 200000, true); }

/* ---- the checker catches what it must ------------------------------------------------------ */

TEST(Checker, CatchesTwoLiveHolders)
{
	PoolChecker c({{100, 4}}, 0);
	c.on_acquire(101);
	c.on_acquire(101);
	EXPECT_EQ(c.violations(), 1u);
	EXPECT_NE(c.messages().at(0).find("invariant 1"), std::string::npos);
}

TEST(Checker, CatchesEarlyReuse)
{
	PoolChecker c({{100, 4}}, 10ull * 1000 * 1000 * 1000);
	c.on_acquire(102);
	c.on_release(102);
	c.on_acquire(102);
	EXPECT_EQ(c.violations(), 1u);
	EXPECT_NE(c.messages().at(0).find("invariant 2"), std::string::npos);
}

TEST(Checker, CatchesForeignQpnAndLostQpns)
{
	PoolChecker c({{100, 4}, {200, 2}}, 0);
	EXPECT_EQ(c.capacity(), 6u);
	c.on_acquire(150);
	EXPECT_EQ(c.violations(), 1u);
	c.on_drain_complete(5);
	EXPECT_EQ(c.violations(), 2u);
	EXPECT_NE(c.messages().at(1).find("invariant 4"), std::string::npos);
}

TEST(Checker, CatchesAPoolThatBreaksTheQuarantine)
{
	/* A pool with no quarantine, checked against a promised one: the checker must object. */
	TestPool tp(2, 1, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 40, 2), 0);
	PoolChecker c({{40, 2}}, 5ull * 1000 * 1000 * 1000);
	uint32_t q;
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		c.on_acquire(q);
		c.on_release(q);
		ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	}
	EXPECT_GE(c.violations(), 1u);
}

TEST(Checker, CleanSequenceHasNoViolation)
{
	PoolChecker c({{7, 3}}, 0);
	for (uint32_t q = 7; q < 10; q++)
		c.on_acquire(q);
	for (uint32_t q = 7; q < 10; q++)
		c.on_release(q);
	c.on_drain_complete(3);
	EXPECT_EQ(c.violations(), 0u);
}
