/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fork safety at open (mlx5_qpn_hw_priv.h, fork_setup()): ibv_fork_init() is called when
 * ibv_is_fork_initialized() says DISABLED (the kernel does not copy pinned pages on fork) or
 * cannot be asked (an rdma-core without it), before the context is opened; nothing is done
 * when it says UNNEEDED or ENABLED. The fake's table is wrapped with counted entries.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "hw/mlx5_qpn_hw.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"

using hwfake::fake;
using hwtest::count_lines;
using hwtest::LogCapture;

namespace {

/* A model of libibverbs' fork state: fork_init() turns DISABLED into ENABLED. */
struct ForkModel {
	int status = IBV_FORK_DISABLED;
	int init_rc = 0; /* what fork_init() answers */
	int inits = 0, queries = 0;
	std::vector<std::string> calls; /* "fork_init", "open", "pd" in order */
};
ForkModel g_fork;

int
fork_init_counted(void)
{
	g_fork.inits++;
	g_fork.calls.push_back("fork_init");
	if (g_fork.init_rc == 0 && g_fork.status == IBV_FORK_DISABLED)
		g_fork.status = IBV_FORK_ENABLED;
	return g_fork.init_rc;
}

enum ibv_fork_status
is_fork_initialized_counted(void)
{
	g_fork.queries++;
	return static_cast<enum ibv_fork_status>(g_fork.status);
}

ibv_context *
dv_open_watched(ibv_device *d, mlx5dv_context_attr *a)
{
	g_fork.calls.push_back("open");
	return hwfake::fake_glue()->dv_open_device(d, a);
}

ibv_pd *
alloc_pd_watched(ibv_context *c)
{
	g_fork.calls.push_back("pd");
	return hwfake::fake_glue()->alloc_pd(c);
}

/* The fake's table with the fork entries (and the watched calls) swapped in. */
class ForkTable {
public:
	explicit ForkTable(bool with_query) : table_(*hwfake::fake_glue())
	{
		table_.fork_init = fork_init_counted;
		table_.is_fork_initialized = with_query ? is_fork_initialized_counted : nullptr;
		table_.dv_open_device = dv_open_watched;
		table_.alloc_pd = alloc_pd_watched;
		mlx5_qpn_glue_set_override(&table_);
	}
	~ForkTable() { mlx5_qpn_glue_set_override(hwfake::fake_glue()); }
	ForkTable(const ForkTable &) = delete;
	ForkTable &operator=(const ForkTable &) = delete;

private:
	mlx5_qpn_glue table_;
};

/* Open with reserved_qpn=no (UD QPs), take one QPN (the first PD), close; the log of open. */
std::string
open_take_close(int *rc)
{
	mlx5_qpn_devargs da{};
	snprintf(da.name, sizeof(da.name), "mlx5_fake");
	da.reserved_qpn = MLX5_QPN_RSVD_NO;
	da.log_range = UINT32_MAX;
	da.max_qpns = 64;
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	*rc = mlx5_qpn_hw_ops.open(&da, &be);
	std::string log = cap.text();
	if (*rc == 0) {
		uint32_t q = 0;
		EXPECT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), 0);
		mlx5_qpn_hw_ops.close(be);
	}
	return log;
}

using hwtest::count;

} // namespace

/* DISABLED: ibv_fork_init() once, before the context and the first PD, in one line; a second
 * open finds it ENABLED and does nothing. */
TEST(HwFork, DisabledCallsForkInitBeforeAnythingIsPinned)
{
	hwfake::Scope scope;
	ForkTable t(true);
	g_fork = ForkModel{};
	int rc = -1;
	std::string log = open_take_close(&rc);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(g_fork.inits, 1);
	EXPECT_EQ(g_fork.calls, (std::vector<std::string>{"fork_init", "open", "pd"}));
	EXPECT_EQ(count(log, "fork support enabled (ibv_fork_init): the kernel does not copy "
			     "pinned pages on fork"),
		  1u)
		<< log;
	EXPECT_EQ(count_lines(log), 3u)
		<< "the fork line, the probe line and the DC host line: " << log;

	log = open_take_close(&rc);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(g_fork.inits, 1) << "already enabled";
	EXPECT_EQ(g_fork.queries, 2);
	EXPECT_EQ(count(log, "fork"), 0u) << log;
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* UNNEEDED (the kernel copies pinned pages on fork) and ENABLED (RDMAV_FORK_SAFE, or the
 * application's own call): nothing to do, nothing said. */
TEST(HwFork, UnneededOrEnabledDoesNothing)
{
	for (int st : {IBV_FORK_UNNEEDED, IBV_FORK_ENABLED}) {
		hwfake::Scope scope;
		ForkTable t(true);
		g_fork = ForkModel{};
		g_fork.status = st;
		int rc = -1;
		std::string log = open_take_close(&rc);
		ASSERT_EQ(rc, 0) << log;
		EXPECT_EQ(g_fork.queries, 1) << st;
		EXPECT_EQ(g_fork.inits, 0) << st;
		EXPECT_EQ(count(log, "fork"), 0u) << log;
	}
}

/* An rdma-core without ibv_is_fork_initialized(): it cannot say, so fork_init is called. */
TEST(HwFork, WithoutTheQueryForkInitIsCalled)
{
	hwfake::Scope scope;
	ForkTable t(false);
	g_fork = ForkModel{};
	int rc = -1;
	std::string log = open_take_close(&rc);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(g_fork.inits, 1);
	EXPECT_EQ(g_fork.calls.front(), "fork_init");
	EXPECT_EQ(count(log, "this rdma-core cannot tell whether the kernel copies pinned pages"),
		  1u)
		<< log;
}

/* ibv_fork_init() refused (memory pinned before this open): the open goes on, in one line. */
TEST(HwFork, RefusedForkInitIsOneWarningNotAFailure)
{
	hwfake::Scope scope;
	ForkTable t(true);
	g_fork = ForkModel{};
	g_fork.init_rc = EINVAL;
	int rc = -1;
	std::string log = open_take_close(&rc);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(g_fork.inits, 1);
	EXPECT_EQ(count(log, "ibv_fork_init failed (Invalid argument)"), 1u) << log;
	EXPECT_EQ(count_lines(log), 3u)
		<< "the fork line, the probe line and the DC host line: " << log;
}

/* A failed open says nothing about fork: its one line is the reason it failed. */
TEST(HwFork, FailedOpenKeepsItsOneLine)
{
	hwfake::Scope scope;
	ForkTable t(true);
	g_fork = ForkModel{};
	fake().bit44 = false;
	mlx5_qpn_devargs da{};
	snprintf(da.name, sizeof(da.name), "mlx5_fake");
	da.reserved_qpn = MLX5_QPN_RSVD_YES;
	da.log_range = UINT32_MAX;
	da.max_qpns = 64;
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), -EOPNOTSUPP);
	const std::string log = cap.text();
	EXPECT_EQ(count_lines(log), 1u) << log;
	EXPECT_EQ(g_fork.inits, 1) << "called before the context all the same";
}
