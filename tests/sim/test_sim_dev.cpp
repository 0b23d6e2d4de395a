/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated mlx5 device through its ops table: caps, RESERVED_QPN objects, ordinary QPs from
 * the same table, the single-QPN fallback, every injected fault, UAR doorbells and the service.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>
#include <vector>

#include <rte_service.h>

#include "common/mlx5_qpn_prm_status.h"
#include "sim_test_util.h"

using namespace sim_test;

namespace {

const mlx5_qpn_dev_ops &ops = mlx5_qpn_sim_ops;

/* An open handle closed at the end of the scope. */
struct Dev {
	mlx5_qpn_backend *be = nullptr;
	int rc;
	explicit Dev(const mlx5_qpn_devargs &da) { rc = ops.open(&da, &be); }
	~Dev()
	{
		if (be)
			ops.close(be);
	}
	mlx5_qpn_sim_stats stats()
	{
		mlx5_qpn_sim_stats st;
		EXPECT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
		return st;
	}
};

using Range = std::pair<uint32_t, uint32_t>; /* [first, first + count) */

bool
disjoint(std::vector<Range> v)
{
	std::sort(v.begin(), v.end());
	for (size_t i = 1; i < v.size(); i++)
		if (v[i - 1].first + v[i - 1].second > v[i].first)
			return false;
	return true;
}

TEST(SimDev, CapsFromDevargs)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_gran = 2;
	sim_args(da).log_max_alloc = 8;
	sim_args(da).log_max_num = 12;
	sim_args(da).log_max_qp = 17;
	sim_args(da).ports = 2;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_caps caps;
	ASSERT_EQ(ops.query_caps(d.be, &caps), 0);
	EXPECT_EQ(caps.general_obj_types, uint64_t(1) << 44);
	EXPECT_EQ(caps.reserved_qpn_obj, 1);
	EXPECT_EQ(caps.log_reserved_qpn_granularity, 2);
	EXPECT_EQ(caps.log_reserved_qpn_max_alloc, 8);
	EXPECT_EQ(caps.log_max_num_reserved_qpn, 12);
	EXPECT_EQ(caps.log_max_qp, 17);
	EXPECT_EQ(caps.nb_ports, 2);
	EXPECT_EQ(caps.devx, 1);
	/* GUID derived from the name: stable, Mellanox OUI, equal to the extra getter. */
	uint64_t guid = 0;
	ASSERT_EQ(mlx5_qpn_sim_node_guid(d.be, &guid), 0);
	EXPECT_EQ(caps.node_guid, guid);
	EXPECT_EQ(guid >> 40, 0x0002c9u);
	EXPECT_EQ(ops.query_caps(nullptr, &caps), -EINVAL);
}

TEST(SimDev, GuidFromDevargsAndSharedByHandles)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).guid = 0x1122334455667788ULL;
	Dev a(da), b(default_devargs(n.name)); /* b's devargs differ: the device keeps a's */
	ASSERT_EQ(a.rc, 0);
	ASSERT_EQ(b.rc, 0);
	uint64_t ga = 0, gb = 0;
	mlx5_qpn_sim_node_guid(a.be, &ga);
	mlx5_qpn_sim_node_guid(b.be, &gb);
	EXPECT_EQ(ga, 0x1122334455667788ULL);
	EXPECT_EQ(gb, ga);
	EXPECT_EQ(a.stats().owners_live, 2u);
}

TEST(SimDev, InvalidDevargs)
{
	ScopedName n;
	mlx5_qpn_backend *be = nullptr;
	auto da = default_devargs(n.name);
	sim_args(da).ports = 0;
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	da = default_devargs(n.name);
	sim_args(da).log_gran = 11; /* > log_max_alloc */
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	da = default_devargs("bad/name");
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	da = default_devargs(n.name);
	sim_args(da).qpn_inc = 0;
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	da = default_devargs(n.name);
	da.backend = mlx5_qpn_backend_find("hw"); /* not the emulated device's devargs */
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	EXPECT_EQ(ops.open(nullptr, &be), -EINVAL);
	EXPECT_EQ(be, nullptr);
	EXPECT_EQ(mlx5_qpn_sim_destroy("no_such_sim_device_x"), -ENOENT);
	EXPECT_EQ(mlx5_qpn_sim_destroy("../x"), -EINVAL);
}

TEST(SimDev, RangesAlignedWithinCaps)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_gran = 2;
	sim_args(da).log_max_alloc = 10;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	std::vector<Range> got;
	for (uint32_t g : {2u, 10u, 5u, 2u, 10u}) {
		mlx5_qpn_range_obj o;
		ASSERT_EQ(ops.range_reserve(d.be, g, &o), 0) << "g " << g;
		EXPECT_EQ(o.log_size, g);
		EXPECT_EQ(o.first_qpn & ((1u << g) - 1), 0u);
		EXPECT_GE(o.first_qpn, 2u); /* never QP0/QP1 */
		EXPECT_LT(o.first_qpn + (1u << g), 1u << 24);
		got.push_back({o.first_qpn, 1u << g});
	}
	EXPECT_TRUE(disjoint(got));
	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(d.be, 1, &o), -EINVAL);  /* below granularity: BAD_PARAM */
	EXPECT_EQ(ops.range_reserve(d.be, 11, &o), -EINVAL); /* above max_alloc */
	auto st = d.stats();
	EXPECT_EQ(st.objs_live, 5u);
	EXPECT_EQ(st.qpns_reserved, 4u + 1024 + 32 + 4 + 1024);
	EXPECT_EQ(st.failed_by_status[MLX5_QPN_CMD_STAT_BAD_PARAM_ERR], 2u);
}

TEST(SimDev, ReleaseOnlyByOwnerAndOnce)
{
	ScopedName n;
	Dev a(default_devargs(n.name)), b(default_devargs(n.name));
	ASSERT_EQ(a.rc, 0);
	ASSERT_EQ(b.rc, 0);
	mlx5_qpn_range_obj o;
	ASSERT_EQ(ops.range_reserve(a.be, 4, &o), 0);
	EXPECT_EQ(ops.range_release(b.be, &o), -EINVAL); /* another context's object */
	mlx5_qpn_range_obj bogus = o;
	bogus.first_qpn += 16;
	EXPECT_EQ(ops.range_release(a.be, &bogus), -EINVAL); /* unknown id: BAD_RES */
	bogus = o;
	bogus.log_size = 3;
	EXPECT_EQ(ops.range_release(a.be, &bogus), -EINVAL);
	EXPECT_EQ(ops.range_release(a.be, &o), 0);
	EXPECT_EQ(ops.range_release(a.be, &o), -EINVAL); /* twice */
	EXPECT_EQ(a.stats().failed_by_status[MLX5_QPN_CMD_STAT_BAD_RES_ERR], 4u);
	EXPECT_EQ(a.stats().objs_live, 0u);
}

TEST(SimDev, QpsAndRangesShareOneTable)
{
	ScopedName n;
	Dev a(default_devargs(n.name)), b(default_devargs(n.name));
	ASSERT_EQ(a.rc, 0);
	ASSERT_EQ(b.rc, 0);
	std::vector<Range> all;
	for (int i = 0; i < 50; i++) {
		uint32_t q;
		ASSERT_EQ(ops.qp_create(i % 2 ? a.be : b.be, &q), 0);
		all.push_back({q, 1});
		mlx5_qpn_range_obj o;
		ASSERT_EQ(ops.range_reserve(i % 3 ? a.be : b.be, uint32_t(i % 7), &o), 0);
		all.push_back({o.first_qpn, 1u << o.log_size});
	}
	EXPECT_TRUE(disjoint(all));
	/* Ordinary QPs follow rdmavt: the first ones are 2, 3 on a fresh device. */
	EXPECT_EQ(all[0].first, 2u);
	uint32_t q = all[0].first;
	EXPECT_EQ(ops.qp_destroy(a.be, q), -EINVAL); /* created by b */
	EXPECT_EQ(ops.qp_destroy(b.be, q), 0);
	EXPECT_EQ(ops.qp_destroy(b.be, q), -EINVAL);
	EXPECT_EQ(ops.qp_destroy(b.be, 1u << 24), -EINVAL);
	auto st = a.stats();
	EXPECT_EQ(st.qps_live, 49u);
	EXPECT_EQ(st.objs_live, 50u);
}

TEST(SimDev, CloseReleasesEverythingAndReopenResets)
{
	ScopedName n;
	{
		Dev keep(default_devargs(n.name));
		ASSERT_EQ(keep.rc, 0);
		{
			Dev d(default_devargs(n.name));
			ASSERT_EQ(d.rc, 0);
			mlx5_qpn_range_obj o;
			uint32_t q;
			mlx5_qpn_uar u;
			ASSERT_EQ(ops.range_reserve(d.be, 6, &o), 0);
			ASSERT_EQ(ops.qp_create(d.be, &q), 0);
			ASSERT_EQ(ops.uar_map(d.be, &u), 0);
			ASSERT_EQ(ops.qpn_reserve_one(d.be, &q), 0);
			auto st = keep.stats();
			EXPECT_EQ(st.objs_live, 2u);
			EXPECT_EQ(st.qps_live, 1u);
			EXPECT_EQ(st.uars_live, 1u);
		}
		auto st = keep.stats();
		EXPECT_EQ(st.objs_live, 0u);
		EXPECT_EQ(st.qps_live, 0u);
		EXPECT_EQ(st.uars_live, 0u);
		EXPECT_EQ(st.qpns_reserved, 0u);
		EXPECT_EQ(st.qpns_used, 2u); /* only QP0/QP1 */
		EXPECT_EQ(st.owners_live, 1u);
	}
	/* Nobody holds it: the next open brings it up with its own parameters. */
	auto da = default_devargs(n.name);
	sim_args(da).cap_reserved_qpn = 0;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_caps caps;
	ASSERT_EQ(ops.query_caps(d.be, &caps), 0);
	EXPECT_EQ(caps.reserved_qpn_obj, 0);
	EXPECT_EQ(d.stats().commands, 1u);
}

TEST(SimDev, ReserveOneFollowsRdmaCoreBlocks)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_gran = 2;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	std::vector<uint32_t> q(6);
	for (auto &x : q)
		ASSERT_EQ(ops.qpn_reserve_one(d.be, &x), 0);
	/* Forward-only cursor inside a block of 2^granularity, a new object when it is used up. */
	for (int i = 1; i < 4; i++)
		EXPECT_EQ(q[i], q[0] + uint32_t(i));
	EXPECT_EQ(q[4] & 3u, 0u);
	EXPECT_EQ(q[5], q[4] + 1);
	EXPECT_EQ(d.stats().objs_live, 2u);
	EXPECT_EQ(ops.qpn_release_one(d.be, q[4] + 2), -EINVAL); /* not handed out yet */
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(ops.qpn_release_one(d.be, q[i]), 0);
	EXPECT_EQ(ops.qpn_release_one(d.be, q[0]), -EINVAL); /* double free */
	EXPECT_EQ(d.stats().objs_live, 2u);
	EXPECT_EQ(ops.qpn_release_one(d.be, q[3]), 0); /* the block's last one: destroyed */
	EXPECT_EQ(d.stats().objs_live, 1u);
	EXPECT_EQ(ops.qpn_release_one(d.be, 12345678), -EINVAL);
}

/* A block destroyed in the middle of the list leaves the others in their order: the newest block
 * stays the one handed out from, so its remaining QPNs are handed out and it is destroyed once
 * they all come back (rdma-core keeps a list and allocates from its tail). */
TEST(SimDev, ReserveOneKeepsBlockOrderOnDestroy)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_gran = 2;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	std::vector<uint32_t> q(10); /* blocks A (4), B (4), C (2 of 4 handed out) */
	for (auto &x : q)
		ASSERT_EQ(ops.qpn_reserve_one(d.be, &x), 0);
	ASSERT_EQ(d.stats().objs_live, 3u);
	for (int i = 0; i < 4; i++) /* A comes back whole: destroyed */
		ASSERT_EQ(ops.qpn_release_one(d.be, q[i]), 0);
	ASSERT_EQ(d.stats().objs_live, 2u);
	uint32_t x, y;
	ASSERT_EQ(ops.qpn_reserve_one(d.be, &x), 0);
	ASSERT_EQ(ops.qpn_reserve_one(d.be, &y), 0);
	EXPECT_EQ(x, q[9] + 1); /* C's cursor goes on */
	EXPECT_EQ(y, q[9] + 2);
	EXPECT_EQ(d.stats().objs_live, 2u); /* no new block while C has room */
	for (int i = 4; i < 10; i++)
		ASSERT_EQ(ops.qpn_release_one(d.be, q[i]), 0);
	ASSERT_EQ(ops.qpn_release_one(d.be, x), 0);
	ASSERT_EQ(ops.qpn_release_one(d.be, y), 0);
	/* B and C were handed out whole and came back: both destroyed, nothing leaks. */
	EXPECT_EQ(d.stats().objs_live, 0u);
	EXPECT_EQ(d.stats().qpns_reserved, 0u);
}

TEST(SimDev, TotalLimitLogMaxNum)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_max_alloc = 2;
	sim_args(da).log_max_num = 4;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_range_obj o[5];
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(ops.range_reserve(d.be, 2, &o[i]), 0);
	EXPECT_EQ(ops.range_reserve(d.be, 0, &o[4]), -ENOMEM); /* LIM_ERR */
	EXPECT_EQ(d.stats().failed_by_status[MLX5_QPN_CMD_STAT_LIM_ERR], 1u);
	ASSERT_EQ(ops.range_release(d.be, &o[1]), 0);
	EXPECT_EQ(ops.range_reserve(d.be, 2, &o[4]), 0);
}

TEST(SimDev, SpecialQpsOncePerPort)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).ports = 2;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	uint32_t q = 99;
	EXPECT_EQ(mlx5_qpn_sim_special_qp(d.be, 0, 1, &q), 0);
	EXPECT_EQ(q, 0u);
	EXPECT_EQ(mlx5_qpn_sim_special_qp(d.be, 1, 1, &q), 0);
	EXPECT_EQ(q, 1u);
	EXPECT_EQ(mlx5_qpn_sim_special_qp(d.be, 1, 1, &q), -EINVAL);
	EXPECT_EQ(mlx5_qpn_sim_special_qp(d.be, 1, 2, &q), 0);
	EXPECT_EQ(mlx5_qpn_sim_special_qp(d.be, 0, 3, &q), -EINVAL);
}

TEST(SimDev, AipDevicePrefixesEverything)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).aip = 1;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	uint32_t q;
	ASSERT_EQ(ops.qp_create(d.be, &q), 0);
	EXPECT_EQ(q, 0x810002u);
	mlx5_qpn_range_obj o;
	ASSERT_EQ(ops.range_reserve(d.be, 4, &o), 0);
	EXPECT_EQ(o.first_qpn >> 16, 0x81u);
	EXPECT_EQ(ops.range_release(d.be, &o), 0);
	EXPECT_EQ(ops.qp_destroy(d.be, q), 0);
	EXPECT_EQ(d.stats().qpns_used, 2u);
}

/* ---- faults ---- */

TEST(SimFault, CapBitOff)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).cap_reserved_qpn = 0;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_caps caps;
	ASSERT_EQ(ops.query_caps(d.be, &caps), 0);
	EXPECT_EQ(caps.reserved_qpn_obj, 0);
	EXPECT_EQ(caps.general_obj_types & (uint64_t(1) << 44), 0u);
	mlx5_qpn_range_obj o;
	/* The firmware does not know the object type: BAD_OP, mapped as mlx5_core maps it. */
	EXPECT_EQ(ops.range_reserve(d.be, 0, &o), -EINVAL);
	EXPECT_EQ(d.stats().failed_by_status[MLX5_QPN_CMD_STAT_BAD_OP_ERR], 1u);
	uint32_t q;
	EXPECT_EQ(ops.qpn_reserve_one(d.be, &q), -EOPNOTSUPP);
	EXPECT_EQ(ops.qp_create(d.be, &q), 0); /* ordinary QPs still work */
}

TEST(SimFault, NoDevx)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).fault_nodevx = 1;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_caps caps;
	ASSERT_EQ(ops.query_caps(d.be, &caps), 0);
	EXPECT_EQ(caps.reserved_qpn_obj, 1); /* the bit says yes ... */
	EXPECT_EQ(caps.devx, 0);
	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(d.be, 0, &o), -EOPNOTSUPP); /* ... the trial says no */
	uint32_t q;
	EXPECT_EQ(ops.qpn_reserve_one(d.be, &q), -EOPNOTSUPP);
	EXPECT_EQ(d.stats().objs_live, 0u);
}

struct FwFaultCase {
	uint32_t rate, after, status;
	std::vector<int> expect; /* results of successive creation commands */
};

class SimFaultFw : public ::testing::TestWithParam<FwFaultCase> {};

TEST_P(SimFaultFw, InjectedStatusMapsToErrno)
{
	const auto &c = GetParam();
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).fault_fw_rate = c.rate;
	sim_args(da).fault_fw_after = c.after;
	sim_args(da).fault_fw_status = c.status;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	uint64_t failed = 0;
	for (size_t i = 0; i < c.expect.size(); i++) {
		/* Alternate the two creation commands: both count. */
		int rc;
		if (i % 2) {
			uint32_t q;
			rc = ops.qp_create(d.be, &q);
		} else {
			mlx5_qpn_range_obj o;
			rc = ops.range_reserve(d.be, 1, &o);
		}
		EXPECT_EQ(rc, c.expect[i]) << "command #" << i + 1;
		failed += rc != 0;
	}
	auto st = d.stats();
	EXPECT_EQ(st.faults_injected, failed);
	uint8_t status = uint8_t(c.status ? c.status : uint32_t(MLX5_QPN_CMD_STAT_NO_RES_ERR));
	EXPECT_EQ(st.failed_by_status[status], failed);
	/* Destroy and query never fail by injection. */
	mlx5_qpn_caps caps;
	EXPECT_EQ(ops.query_caps(d.be, &caps), 0);
}

INSTANTIATE_TEST_SUITE_P(
	SimFaults, SimFaultFw,
	::testing::Values(
		FwFaultCase{0, 3, 0, {0, 0, 0, -EAGAIN, -EAGAIN}},       /* default NO_RES_ERR */
		FwFaultCase{3, 0, 0, {0, 0, -EAGAIN, 0, 0, -EAGAIN, 0}}, /* every 3rd */
		FwFaultCase{2, 0, MLX5_QPN_CMD_STAT_RES_BUSY, {0, -EBUSY, 0, -EBUSY}},
		FwFaultCase{0, 1, MLX5_QPN_CMD_STAT_INT_ERR, {0, -EIO, -EIO}},
		FwFaultCase{0, 1, MLX5_QPN_CMD_STAT_LIM_ERR, {0, -ENOMEM}},
		FwFaultCase{0, 0, 0, {0, 0, 0, 0}}));

TEST(SimFault, SlowCommandsStillCorrect)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).slow_cmd_us = 2000;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	mlx5_qpn_range_obj o;
	ASSERT_EQ(ops.range_reserve(d.be, 3, &o), 0);
	ASSERT_EQ(ops.range_release(d.be, &o), 0);
	EXPECT_EQ(d.stats().commands, 2u);
}

TEST(SimFault, SmallTotalLimit)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).limit = 8;
	Dev d(da);
	ASSERT_EQ(d.rc, 0);
	std::vector<uint32_t> q(8);
	for (auto &x : q)
		ASSERT_EQ(ops.qpn_reserve_one(d.be, &x), 0);
	uint32_t extra;
	EXPECT_EQ(ops.qpn_reserve_one(d.be, &extra), -ENOMEM);
	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(d.be, 0, &o), -ENOMEM);
	EXPECT_EQ(ops.qpn_release_one(d.be, q[0]), 0);
	EXPECT_EQ(ops.qpn_reserve_one(d.be, &extra), 0);
}

/* ---- UAR and doorbells ---- */

void
ring(const mlx5_qpn_uar &u, uint64_t v)
{
	__atomic_store_n(static_cast<uint64_t *>(u.reg_addr), v, __ATOMIC_RELEASE);
}

TEST(SimUar, MapRingPollUnmap)
{
	ScopedName n;
	Dev d(default_devargs(n.name)), other(default_devargs(n.name));
	ASSERT_EQ(d.rc, 0);
	ASSERT_EQ(other.rc, 0);
	mlx5_qpn_uar u, v;
	ASSERT_EQ(ops.uar_map(d.be, &u), 0);
	ASSERT_EQ(ops.uar_map(d.be, &v), 0);
	EXPECT_EQ(static_cast<char *>(u.reg_addr) - static_cast<char *>(u.base_addr), 0x800);
	EXPECT_EQ(reinterpret_cast<uintptr_t>(u.base_addr) % 4096, 0u);
	EXPECT_NE(u.page_id, v.page_id);
	EXPECT_EQ(u.mmap_off % 4096, 0u);
	EXPECT_EQ(mlx5_qpn_sim_poll(d.be), 0);
	ring(u, 1);
	ring(v, 7);
	EXPECT_EQ(mlx5_qpn_sim_poll(d.be), 2);
	EXPECT_EQ(mlx5_qpn_sim_poll(d.be), 0); /* nothing new */
	ring(u, 2);
	EXPECT_EQ(mlx5_qpn_sim_poll(other.be), 1); /* the device is shared: any poller consumes */
	EXPECT_EQ(d.stats().doorbells, 3u);

	/* The service registered at the first map runs the same body. */
	uint32_t id;
	ASSERT_EQ(mlx5_qpn_sim_service_id(d.be, &id), 0);
	EXPECT_EQ(mlx5_qpn_sim_service_id(other.be, &id), -ENOENT);
	ASSERT_EQ(mlx5_qpn_sim_service_id(d.be, &id), 0);
	ring(v, 8);
	EXPECT_EQ(rte_service_run_iter_on_app_lcore(id, 1), 0);
	EXPECT_EQ(d.stats().doorbells, 4u);

	EXPECT_EQ(ops.uar_unmap(other.be, &u), -EINVAL); /* not its page */
	mlx5_qpn_uar copy = u;
	EXPECT_EQ(ops.uar_unmap(d.be, &u), 0);
	EXPECT_EQ(ops.uar_unmap(d.be, &copy), -EINVAL); /* twice */
	EXPECT_EQ(d.stats().uars_live, 1u);
}

TEST(SimUar, PagesRunOut)
{
	ScopedName n;
	Dev d(default_devargs(n.name));
	ASSERT_EQ(d.rc, 0);
	std::vector<mlx5_qpn_uar> v;
	mlx5_qpn_uar u;
	int rc;
	while ((rc = ops.uar_map(d.be, &u)) == 0) {
		v.push_back(u);
		ASSERT_LE(v.size(), 4096u);
	}
	EXPECT_EQ(rc, -ENOMEM);
	EXPECT_EQ(v.size(), 64u);
	ASSERT_EQ(ops.uar_unmap(d.be, &v.back()), 0);
	EXPECT_EQ(ops.uar_map(d.be, &u), 0);
}

} // namespace
