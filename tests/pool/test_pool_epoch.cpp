/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quarantine's epoch tags over long uptimes. A bucket head keeps 40 bits of
 * the epoch; a drainer that read its clock just before a batch was sealed into a newer epoch must
 * not read that tag as 2^40 epochs old. Reproduced deterministically with the pool's test clock
 * (qpn_pool_test_hooks.h): the clock is moved hours ahead, and then one step back to play the
 * drainer that read it earlier.
 */
#include <gtest/gtest.h>

#include <cerrno>

#include "pool_test_util.h"
#include "qpn_pool_test_hooks.h"

namespace {

/* Restores the pool clock whatever the test does. */
struct ClockGuard {
	ClockGuard() : saved(qpn::test_clock_offset_get()) {}
	~ClockGuard() { qpn::test_clock_offset_set(saved); }
	int64_t saved;
};

constexpr int64_t kHours2 = 2ll * 3600 * 1000 * 1000 * 1000;

} // namespace

/*
 * Quarantine 8 * (2^24 + 1) ns (134 ms): epoch_ns = 2^24 + 1, so 2^40 epochs are 2^40 ns modulo
 * 2^64, and after 2^40 ns (18 min) of clock reading the tag as "the latest epoch not after now"
 * would put a mis-read bucket's expiry in the past. Here the clock is 2 h ahead.
 */
TEST(PoolEpoch, BatchSealedAfterTheDrainersClockReadIsNotReleased)
{
	ClockGuard guard;
	constexpr uint64_t kEpoch = (1ull << 24) + 1;
	constexpr uint64_t kQ = 8 * kEpoch;
	qpn::test_clock_offset_set(kHours2);
	TestPool tp(4, 1, kQ);
	ASSERT_NE(tp.get(), nullptr);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x400, 1), 0);
	/* The pool is some 1000 epochs (17 s) old when the QPN is released. */
	const int64_t at = kHours2 + static_cast<int64_t>(1000 * kEpoch);
	qpn::test_clock_offset_set(at);
	uint32_t x, y;
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &x), 0);
	const uint64_t released = mlx5_qpn_clock_ns();
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0); /* cache of 1: sealed at once */

	/* A drainer whose clock read is 100 epochs older than the seal (far more than any stall of
	 * this thread, so the real clock cannot catch up and hide the case). */
	qpn::test_clock_offset_set(at - static_cast<int64_t>(100 * kEpoch));
	EXPECT_EQ(mlx5_qpn_pool_drain(tp.get()), 0) << "a bucket of a later epoch was released";
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &y), -EAGAIN) << "QPN back before its quarantine";
	uint64_t when = 0;
	ASSERT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), 0);
	EXPECT_GE(when, released + kQ) << "next release before the quarantine has passed";
	EXPECT_LT(when, released + 4 * kQ) << "next release centuries away";

	/* Back on the real (shifted) clock, and past the quarantine: the QPN comes back. */
	qpn::test_clock_offset_set(at + static_cast<int64_t>(2 * kQ));
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &y), 0);
	EXPECT_EQ(y, x);
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), y), 0);
}

/* The same read from the other side: a tag older than now by a few epochs is due normally. */
TEST(PoolEpoch, ExpiredBucketAfterHoursOfUptimeIsReleased)
{
	ClockGuard guard;
	constexpr uint64_t kQ = 8 * ((1ull << 24) + 1);
	qpn::test_clock_offset_set(kHours2);
	TestPool tp(4, 1, kQ);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x500, 2), 0);
	uint32_t q[2], y;
	ASSERT_EQ(mlx5_qpn_pool_alloc_bulk(tp.get(), q, 2), 0);
	const uint64_t released = mlx5_qpn_clock_ns();
	ASSERT_EQ(mlx5_qpn_pool_free(tp.get(), q[0]), 0);
	EXPECT_EQ(mlx5_qpn_pool_alloc(tp.get(), &y), -EAGAIN);
	uint64_t when = 0;
	ASSERT_EQ(mlx5_qpn_pool_next_release(tp.get(), &when), 0);
	EXPECT_GE(when, released + kQ);
	EXPECT_LT(when, released + 4 * kQ);
	qpn::test_clock_offset_set(kHours2 + static_cast<int64_t>(2 * kQ));
	EXPECT_EQ(mlx5_qpn_pool_drain(tp.get()), 1);
	ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &y), 0);
	EXPECT_EQ(y, q[0]);
}
