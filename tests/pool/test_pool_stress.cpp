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

#include "common/test_helpers.h"
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

/* Invariant 4: once all is released and the quarantine passed, everything is free; then the
 * checker's verdict. */
void
expect_everything_back(struct mlx5_qpn_pool *p, PoolChecker &checker, uint64_t quarantine_ns,
		       bool exchange)
{
	uint64_t until = mlx5_qpn_clock_ns() + quarantine_ns + quarantine_ns / 4 + 1000000;
	while (mlx5_qpn_clock_ns() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	std::vector<uint32_t> all;
	uint32_t q;
	int rc;
	for (int round = 0;; round++) {
		while ((rc = mlx5_qpn_pool_alloc(p, &q)) == 0) {
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
		EXPECT_EQ(mlx5_qpn_pool_free(p, x), 0);
	}
	checker.check_frees();
	for (auto &m : checker.messages())
		ADD_FAILURE() << m;
	EXPECT_EQ(checker.violations(), 0u);
}

void
run_stress(uint32_t capacity, uint32_t cache, uint64_t quarantine_ns, uint64_t ops,
	   bool exchange = false)
{
	/* Under ThreadSanitizer a third (still 67k-100k operations a thread, every branch of the
	 * cache, steal and remote-free paths taken thousands of times): test_helpers.h says why. */
	ops = test_helpers::sanitizer_scaled(static_cast<unsigned>(ops), 3);
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

	expect_everything_back(tp.get(), checker, quarantine_ns, exchange);
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

/* ---- double frees: refused at the call --------------------------------------------------- */

namespace {

/* A hand-out as its holder knows it: QPN, generation, the checker's number. Packed in one word
 * (never 0: the QPNs start at 0x100) to cross threads through an atomic cell. */
struct HandOut {
	uint32_t qpn, gen;
	uint64_t n;
	uint64_t pack() const { return qpn | uint64_t{gen} << 24 | n << 38; }
	static HandOut unpack(uint64_t v)
	{
		return {static_cast<uint32_t>(v & 0xFFFFFF),
			static_cast<uint32_t>(v >> 24) & 0x3FFF, v >> 38};
	}
};

struct DoubleFreeCtx {
	struct mlx5_qpn_pool *pool;
	PoolChecker *checker;
	uint64_t ops;
	std::atomic<uint64_t> errors{0}, repeats{0};
	/* Held QPNs passed between threads (their frees are remote) and freed ones (to be freed
	 * again, by any thread); 0: empty. */
	std::atomic<uint64_t> xchg[8] = {};
	std::atomic<uint64_t> freed[16] = {};
};

/* A free the checker logs; free_gen() (a repeated free must name its hand-out: a plain free of a
 * QPN handed out again since is a late free the pool cannot tell, design_pool.md §9) or free(). */
int
logged_free(DoubleFreeCtx *ctx, const HandOut &h, bool gen)
{
	const uint64_t t0 = PoolChecker::free_begin();
	int rc = gen ? mlx5_qpn_pool_free_gen(ctx->pool, h.qpn, h.gen) :
		       mlx5_qpn_pool_free(ctx->pool, h.qpn);
	ctx->checker->on_free_end(h.qpn, h.n, t0, rc);
	return rc;
}

/* Release a held QPN (counted an error if refused: nothing else frees it), publish it as freed,
 * and sometimes free it again at once, from this thread. */
void
release(DoubleFreeCtx *ctx, const HandOut &h, std::mt19937 &rng)
{
	ctx->checker->on_release(h.qpn);
	if (logged_free(ctx, h, rng() % 2 == 0) != 0) {
		ctx->errors.fetch_add(1);
		return;
	}
	ctx->freed[rng() % 16].store(h.pack());
	if (rng() % 2 == 0) {
		logged_free(ctx, h, true);
		ctx->repeats.fetch_add(1);
	}
}

void
double_free_body(DoubleFreeCtx *ctx, uint32_t seed)
{
	std::mt19937 rng(seed);
	std::vector<HandOut> held;
	for (uint64_t i = 0; i < ctx->ops; i++) {
		const unsigned r = rng() % 100;
		if (held.empty() || (r < 45 && held.size() < 8)) { /* the rest cycles */
			HandOut h{};
			int rc = mlx5_qpn_pool_alloc_gen(ctx->pool, &h.qpn, &h.gen);
			if (rc == 0) {
				h.n = ctx->checker->on_acquire(h.qpn);
				held.push_back(h);
			} else if (rc != -EAGAIN && rc != -ENOSPC) {
				ctx->errors.fetch_add(1);
			}
		} else if (r < 85) {
			const size_t j = rng() % held.size();
			HandOut h = held[j];
			held[j] = held.back();
			held.pop_back();
			if (rng() % 2 == 0) { /* pass it on, free one another thread allocated */
				const uint64_t o = ctx->xchg[rng() % 8].exchange(h.pack());
				if (o == 0)
					continue;
				h = HandOut::unpack(o);
				ctx->checker->on_handover(h.qpn);
			}
			release(ctx, h, rng);
		} else { /* free again what some thread freed, now or a while ago */
			const uint64_t o = ctx->freed[rng() % 16].load();
			if (o != 0) {
				logged_free(ctx, HandOut::unpack(o), true);
				ctx->repeats.fetch_add(1);
			}
		}
	}
	for (const HandOut &h : held)
		release(ctx, h, rng);
	mlx5_qpn_pool_cache_flush(ctx->pool);
}

} // namespace

/*
 * Three threads allocate, pass QPNs to each other, free them (a third of the frees remote:
 * queued for the allocating cache) and free them again, at once or later, from any thread; a
 * small pool, so that threads also steal each other's idle caches. The checker logs every free
 * call with its hand-out and its result: a free accepted after another accepted free of the same
 * hand-out had returned is a double free accepted (two frees in flight at once are the contract's
 * exception). A quarantine of 2 ms keeps the 14-bit generations from wrapping within the run.
 */
TEST(PoolStress, DoubleFreesAreRefusedAtTheCall)
{
	constexpr uint32_t kCap = 256;
	constexpr uint64_t kQuarantine = 2 * 1000 * 1000;
	const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0x100, kCap / 2},
								   {0x8000, kCap / 2}};
	TestPool tp(kCap, 4, kQuarantine);
	ASSERT_NE(tp.get(), nullptr);
	for (auto &r : ranges)
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), r.first, r.second), 0);
	PoolChecker checker(ranges, kQuarantine);
	DoubleFreeCtx ctx;
	ctx.pool = tp.get();
	ctx.checker = &checker;
	ctx.ops = 40000;
	std::vector<std::thread> threads;
	for (uint32_t t = 0; t < 3; t++)
		threads.emplace_back(double_free_body, &ctx, 11 + t);
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(ctx.errors.load(), 0u) << "a free of a held QPN refused, or an alloc failed";
	for (auto &x : ctx.xchg) {
		const uint64_t o = x.exchange(0);
		if (o == 0)
			continue;
		const HandOut h = HandOut::unpack(o);
		checker.on_handover(h.qpn);
		checker.on_release(h.qpn);
		EXPECT_EQ(logged_free(&ctx, h, true), 0);
	}
	EXPECT_GT(ctx.repeats.load(), ctx.ops / 10) << "the double frees were made";
	expect_everything_back(tp.get(), checker, kQuarantine, true);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
}

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

TEST(Checker, CatchesADoubleFreeAcceptedAfterTheFirstReturned)
{
	PoolChecker c({{7, 3}}, 0);
	const uint64_t n = c.on_acquire(8);
	c.on_release(8);
	c.on_free_end(8, n, PoolChecker::free_begin(), 0);
	c.on_free_end(8, n, PoolChecker::free_begin(), -EINVAL); /* refused: fine */
	c.check_frees();
	EXPECT_EQ(c.violations(), 0u);
	c.on_free_end(8, n, PoolChecker::free_begin(), 0); /* accepted after the first returned */
	c.check_frees();
	EXPECT_EQ(c.violations(), 1u);
	EXPECT_NE(c.messages().at(0).find("double free accepted"), std::string::npos);
}

TEST(Checker, TwoFreesInFlightAtOnceMayBothBeAccepted)
{
	PoolChecker c({{7, 3}}, 0);
	const uint64_t n1 = c.on_acquire(9);
	c.on_release(9);
	const uint64_t t1 = PoolChecker::free_begin(), t2 = PoolChecker::free_begin();
	c.on_free_end(9, n1, t1, 0);
	c.on_free_end(9, n1, t2, 0);         /* began before the first returned */
	const uint64_t n2 = c.on_acquire(9); /* the next hand-out: its own frees */
	EXPECT_EQ(n2, n1 + 1);
	c.on_free_end(9, n2, PoolChecker::free_begin(), 0);
	c.check_frees();
	EXPECT_EQ(c.violations(), 0u);
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
