/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_bulk() is all or nothing: a free racing a bulk that fails part-way must
 * not be accepted for a QPN the bulk took and never handed out. The race is made deterministic
 * with the bulk_rollback test hook: another thread frees the bulk's QPNs just before the rollback.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
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

namespace {

/*
 * free_bulk() releases the caller's own QPNs without a call per QPN (free_bulk_run()), and hands
 * every other one to the single free: it must decide each QPN as mlx5_qpn_pool_free() does.
 * One bulk, over more QPNs than a batch (so the cache flushes, or seals its quarantine, in the
 * middle), mixes: QPNs of two ranges, one QPN twice, a QPN never handed out, a QPN outside every
 * range and a QPN another thread allocated. Each bad one is refused and counted, each good one is
 * released once: afterwards the pool hands out every QPN again, each once.
 */
void
mixed_bulk_case(uint64_t quarantine_ns)
{
	constexpr uint32_t kA = 1000, kB = 5000, kPer = 40, kCache = 8;
	TestPool tp(2 * kPer, kCache, quarantine_ns);
	ASSERT_NE(tp.get(), nullptr);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), kA, kPer), 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), kB, kPer), 0);

	std::vector<uint32_t> mine;
	uint32_t q;
	while (mine.size() < 2 * kPer - 2 && mlx5_qpn_pool_alloc(tp.get(), &q) == 0)
		mine.push_back(q);
	ASSERT_EQ(mine.size(), 2 * kPer - 2u);
	uint32_t theirs = 0;
	std::thread t([&] {
		EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &theirs), 0);
		mlx5_qpn_pool_cache_flush(tp.get()); /* keeps `theirs` in use */
	});
	t.join();
	std::set<uint32_t> held(mine.begin(), mine.end());
	held.insert(theirs);
	uint32_t never = 0; /* the one QPN nobody holds */
	for (uint32_t x = kA; x < kB + kPer && never == 0; x++)
		if ((x < kA + kPer || x >= kB) && held.count(x) == 0)
			never = x;
	ASSERT_NE(never, 0u);
	std::set<uint32_t> ranges_seen;
	for (uint32_t x : mine)
		ranges_seen.insert(x >= kB);
	ASSERT_EQ(ranges_seen.size(), 2u) << "the bulk must cross ranges";

	/* Interleave the two ranges, then the bad ones in the middle and at the end. */
	std::vector<uint32_t> bulk;
	for (size_t i = 0; i < mine.size(); i++)
		bulk.push_back(mine[(i % 2) ? mine.size() - 1 - i / 2 : i / 2]);
	const uint32_t bad_at_mid = bulk.size() / 2;
	bulk.insert(bulk.begin() + bad_at_mid, {bulk[3], never, 0xABCDEFu});
	bulk.push_back(bulk[bulk.size() - 1]); /* the last one twice, at once */
	bulk.push_back(theirs);

	const auto before = pool_stats(tp.get());
	EXPECT_EQ(mlx5_qpn_pool_free_bulk(tp.get(), bulk.data(), bulk.size()), -EINVAL);
	const auto after = pool_stats(tp.get());
	EXPECT_EQ(after.refused_frees - before.refused_frees, 4u)
		<< "refused: the repeat in the middle, the never-allocated, the outside, the last repeat";
	EXPECT_EQ(after.in_use, 0u) << "every good QPN released (theirs queued for its cache)";
	for (uint32_t x : mine)
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), x, nullptr), 0) << x;

	/* Everything comes back, once each (after the quarantine). */
	if (quarantine_ns != 0)
		std::this_thread::sleep_for(std::chrono::nanoseconds(2 * quarantine_ns));
	mlx5_qpn_pool_drain(tp.get());
	std::set<uint32_t> again;
	int rc;
	for (int tries = 0; again.size() < 2 * kPer && tries < 100000; tries++) {
		rc = mlx5_qpn_pool_alloc(tp.get(), &q);
		if (rc == -EAGAIN) {
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
			continue;
		}
		ASSERT_EQ(rc, 0);
		EXPECT_TRUE(again.insert(q).second) << "QPN " << q << " handed out twice";
	}
	EXPECT_EQ(again.size(), 2 * kPer);
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), -ENOSPC);
	for (uint32_t x : again)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0);
}

} // namespace

TEST(PoolBulk, FreeBulkDecidesEachQpnAsTheSingleFreeNoQuarantine) { mixed_bulk_case(0); }
TEST(PoolBulk, FreeBulkDecidesEachQpnAsTheSingleFreeWithQuarantine)
{
	mixed_bulk_case(20 * 1000 * 1000);
}
