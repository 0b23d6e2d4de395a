/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver when memory runs out: NtVec::push_back() says false and leaves the array as it was,
 * every caller returns -ENOMEM with nothing lost (the device's QPNs given back, the pool and the
 * counts of held QPNs as before, the device usable at once), and devargs, which are parsed in
 * bounded buffers and never allocate, refuse a text longer than MLX5_QPN_DEVARGS_MAX. Failures
 * are injected through the NtVec test seam (mlx5_qpn_vec.h); under ASan a leak fails the run.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <string>
#include <unistd.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_vec.h"

using mlx5_qpn_dev_impl::g_test_fail_push_backs;
using mlx5_qpn_dev_impl::g_test_pass_push_backs;
using mlx5_qpn_dev_impl::NtVec;

namespace {

/* After `pass` successful push_back() calls of any NtVec, the next n fail; back to none at the
 * end of the scope. */
class FailPushBacks {
public:
	explicit FailPushBacks(int n, int pass = 0)
	{
		g_test_pass_push_backs.store(pass);
		g_test_fail_push_backs.store(n);
	}
	~FailPushBacks()
	{
		g_test_fail_push_backs.store(0);
		g_test_pass_push_backs.store(0);
	}
	int left() const { return g_test_fail_push_backs.load(); }
};

/* An emulated device of its own (its shared memory is machine-wide), removed at the end. */
class NomemDev {
public:
	explicit NomemDev(const char *extra)
	{
		static std::atomic<int> seq{0};
		name_ = "simnomem" + std::to_string(getpid()) + "x" +
			std::to_string(seq.fetch_add(1));
		/* cache=8: low water 16, under the 64 QPNs of the first range, so that the control
		 * thread does not grow (nor take an injected failure) behind the test's back. */
		std::string args = name_ + ",quarantine_us=0,cache=8,log_max_alloc=6,max_qpns=256" +
				   extra;
		rc_ = mlx5_qpn_dev_probe(args.c_str(), &dev_);
	}
	~NomemDev()
	{
		mlx5_qpn_dev_close(dev_);
		mlx5_qpn_dev_purge(name_.c_str());
	}
	int rc() const { return rc_; }
	mlx5_qpn_dev *dev() const { return dev_; }
	mlx5_qpn_dev_stats stats() const
	{
		mlx5_qpn_dev_stats st = {};
		EXPECT_EQ(mlx5_qpn_dev_stats_get(dev_, &st), 0);
		return st;
	}

private:
	std::string name_;
	mlx5_qpn_dev *dev_ = nullptr;
	int rc_ = -1;
};

/*
 * A growth whose bookkeeping push_back() fails returns -ENOMEM and loses nothing: the QPNs it
 * got went back to the device (ranges_released counts them), the pool and the QPNs held are as
 * before, and the next growth and every QPN up to the limit work as if nothing had happened.
 */
void
grow_fails_cleanly(const char *extra, mlx5_qpn_source source, int pass = 0)
{
	NomemDev d(extra);
	ASSERT_EQ(d.rc(), 0) << extra;
	mlx5_qpn_dev_info in;
	ASSERT_EQ(mlx5_qpn_dev_info_get(d.dev(), &in), 0);
	EXPECT_EQ(in.source, source) << extra;
	mlx5_qpn_dev_stats before = d.stats();
	ASSERT_GT(before.pool.capacity, 0u);
	{
		FailPushBacks fail(1, pass);
		EXPECT_EQ(mlx5_qpn_dev_grow(d.dev()), -ENOMEM) << extra;
		EXPECT_EQ(fail.left(), 0) << "the growth reached a push_back";
	}
	mlx5_qpn_dev_stats after = d.stats();
	EXPECT_EQ(after.pool.capacity, before.pool.capacity) << extra;
	EXPECT_EQ(after.pool.nb_ranges, before.pool.nb_ranges) << extra;
	EXPECT_EQ(after.qpns_reserved, before.qpns_reserved) << extra;
	EXPECT_EQ(after.ranges_reserved, before.ranges_reserved) << extra;
	EXPECT_EQ(after.ranges_released, before.ranges_released + 1) << "given back";
	EXPECT_EQ(after.reserve_failures, before.reserve_failures + 1) << extra;
	EXPECT_EQ(after.last_error, -ENOMEM) << extra;

	/* Usable as it was: it grows again, and hands out every QPN up to its limit, once each. */
	EXPECT_EQ(mlx5_qpn_dev_grow(d.dev()), 0) << extra;
	EXPECT_GT(d.stats().pool.capacity, before.pool.capacity) << extra;
	std::set<uint32_t> got;
	uint32_t q;
	int rc;
	while ((rc = mlx5_qpn_reserved_alloc(d.dev(), &q)) == 0)
		EXPECT_TRUE(got.insert(q).second);
	EXPECT_EQ(rc, -ENOSPC) << extra;
	EXPECT_EQ(got.size(), 256u) << extra;
	for (uint32_t x : got)
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(d.dev(), x), 0);
}

} // namespace

TEST(DevNoMem, NtVecPushBackFailureChangesNothing)
{
	NtVec<uint64_t> v;
	{
		FailPushBacks fail(1);
		EXPECT_FALSE(v.push_back(1));
		EXPECT_TRUE(v.empty());
		EXPECT_EQ(fail.left(), 0);
		EXPECT_TRUE(v.push_back(1)); /* one failure asked for, one given */
	}
	/* A full array (the first allocation holds 8): the growth fails, the elements stay. */
	for (uint64_t i = 2; i <= 8; i++)
		ASSERT_TRUE(v.push_back(i));
	{
		FailPushBacks fail(2);
		EXPECT_FALSE(v.push_back(9));
		EXPECT_FALSE(v.push_back(9));
		EXPECT_TRUE(v.push_back(9));
	}
	ASSERT_EQ(v.size(), 9u);
	for (size_t i = 0; i < v.size(); i++)
		EXPECT_EQ(v[i], i + 1);
}

TEST(DevNoMem, RangeGrowthReturnsEnomemAndLosesNothing)
{
	grow_fails_cleanly("", MLX5_QPN_SRC_OBJECTS);
}

TEST(DevNoMem, SingleQpnGrowthReturnsEnomemAndLosesNothing)
{
	grow_fails_cleanly(",reserved_qpn=no,log_range=6", MLX5_QPN_SRC_ORDINARY);
}

/* The second bookkeeping step of a single-QPN growth (the device object's record, after the QPN
 * was noted) fails: the QPN is given back and its note dropped, as when the first step fails. */
TEST(DevNoMem, SingleQpnGrowthSecondStepReturnsEnomemAndLosesNothing)
{
	grow_fails_cleanly(",reserved_qpn=no,log_range=6", MLX5_QPN_SRC_ORDINARY, 1);
}

/*
 * Devargs are parsed in buffers of MLX5_QPN_DEVARGS_MAX characters, without an allocation: the
 * longest devargs parse, one character more is refused (-EINVAL, as any bad devargs) with one
 * readable line.
 */
TEST(DevNoMem, DevargsLongerThanTheMaximumAreRefused)
{
	/* "sim0,cache=0x000...040": a hex number may carry any number of zeros after 0x. */
	std::string longest = "sim0,cache=0x";
	longest.append(MLX5_QPN_DEVARGS_MAX - longest.size() - 2, '0');
	longest += "40";
	ASSERT_EQ(longest.size(), size_t(MLX5_QPN_DEVARGS_MAX));
	mlx5_qpn_devargs da;
	{
		FailPushBacks fail(1000); /* nor an NtVec */
		ASSERT_EQ(mlx5_qpn_devargs_parse(longest.c_str(), &da), 0);
		EXPECT_EQ(fail.left(), 1000);
	}
	EXPECT_EQ(da.cache, 64u);
	EXPECT_STREQ(da.name, "sim0");

	std::string too_long = longest.substr(0, 13) + "0" + longest.substr(13);
	char why[256];
	EXPECT_EQ(mlx5_qpn_devargs_check(too_long.c_str(), why, sizeof(why)), -EINVAL);
	EXPECT_STREQ(why, "bad devarg sim0,cache=0x0000000000000000000...: longer than 1023 "
			  "characters (MLX5_QPN_DEVARGS_MAX)");
	EXPECT_EQ(mlx5_qpn_devargs_parse(too_long.c_str(), &da), -EINVAL);
}

/*
 * A probe whose first range must cool (this process closed the device, with a QPN in use, less
 * than a quarantine ago, and the emulated firmware hands the same block out again) fails at each
 * of its allocations in turn: each probe either fails with -ENOMEM or works with the source it
 * would have chosen anyway (an allocation failure says nothing about the device's support), and
 * nothing is lost: the lease keeps no entry of a failed probe, so the next probe gets the whole
 * range back, none of it before the quarantine since the one QPN ever handed out was let go
 * (invariant 5). The quarantine is long enough for the probes to run inside it under the
 * sanitizers too (with 1 s, three probes under TSan outlasted it: the last one found the range
 * cool and took it fresh, as it should).
 */
TEST(DevNoMem, ProbeBesideACoolingRangeFailsCleanlyAtEachAllocation)
{
	constexpr uint64_t kQuarNs = 4000000000ull;
	static std::atomic<int> seq{0};
	const std::string name = "simnomemc" + std::to_string(getpid()) + "x" +
				 std::to_string(seq.fetch_add(1));
	const std::string args = name + ",quarantine_us=4000000,log_max_alloc=6,log_range=6," +
				 "fw_first_fit=1,cache=8,low_water=0,max_qpns=64";
	struct Cleanup {
		const std::string &n;
		~Cleanup() { mlx5_qpn_dev_purge(n.c_str()); }
	} cleanup{name};

	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &d), 0);
	uint32_t q;
	ASSERT_EQ(mlx5_qpn_reserved_alloc(d, &q), 0);
	const uint64_t t_letgo = mlx5_qpn_clock_ns();
	mlx5_qpn_dev_close(d);

	int failed = 0, pass = 0;
	for (;; pass++) {
		ASSERT_LT(pass, 100) << "a probe that never stops allocating";
		FailPushBacks fail(1, pass);
		d = nullptr;
		int rc = mlx5_qpn_dev_probe(args.c_str(), &d);
		const bool reached = fail.left() == 0;
		if (rc == 0) {
			mlx5_qpn_dev_info in;
			ASSERT_EQ(mlx5_qpn_dev_info_get(d, &in), 0);
			EXPECT_EQ(in.source, MLX5_QPN_SRC_OBJECTS)
				<< "pass " << pass << ": a failed allocation changed the source";
			mlx5_qpn_dev_stats st = {};
			/* Cooling for certain only inside the quarantine (it started at the close,
			 * after t_letgo): a pass slowed past it (TSan on a loaded machine) finds the
			 * range cool, as it should, and checks nothing here. */
			const bool inside = mlx5_qpn_clock_ns() < t_letgo + kQuarNs;
			ASSERT_EQ(mlx5_qpn_dev_stats_get(d, &st), 0);
			if (inside) {
				EXPECT_EQ(st.cooling_qpns, 64u)
					<< "pass " << pass
					<< ": the range is not cooling, as the test needs";
			}
			mlx5_qpn_dev_close(d);
		} else {
			EXPECT_EQ(rc, -ENOMEM) << "pass " << pass;
			EXPECT_TRUE(reached)
				<< "pass " << pass << ": failed with no failure injected";
			failed++;
		}
		if (!reached)
			break; /* the probe made fewer than `pass + 1` allocations: all were tried */
	}
	EXPECT_GT(failed, 0) << "no injected failure made the probe fail";

	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &d), 0);
	std::set<uint32_t> got;
	const uint64_t deadline = t_letgo + kQuarNs + 20 * kQuarNs;
	unsigned early = 0;
	while (got.size() < 64 && mlx5_qpn_clock_ns() < deadline) {
		int rc = mlx5_qpn_reserved_alloc(d, &q);
		const uint64_t t_after = mlx5_qpn_clock_ns();
		if (rc == -EAGAIN) {
			usleep(1000);
			continue;
		}
		ASSERT_EQ(rc, 0);
		EXPECT_TRUE(got.insert(q).second) << "QPN 0x" << std::hex << q << " twice";
		early += t_after < t_letgo + kQuarNs;
	}
	EXPECT_EQ(got.size(), 64u) << "QPNs lost after " << pass << " probes";
	EXPECT_EQ(early, 0u) << "QPNs handed out inside the quarantine";
	for (uint32_t x : got)
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(d, x), 0);
	mlx5_qpn_dev_close(d);
}
