/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RoCE addressing of DC objects against the strict fake rdma-core: the RTR of the DCT and of
 * the DCI carry the path (GID index, hop limit, traffic class, SL, path MTU) as UCX's DC
 * transport sets them; a NULL path on RoCE is the port's IPv4-mapped RoCE v2 GID (not index 0)
 * with hop limit 64; what the kernel refuses is refused here with one line; and on a routed
 * fabric a DCT at GID index 0 with hop limit 1 is never heard (the SEND times out with 0x15)
 * while the default path delivers.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "hw_dc_fixture.h"

using hwdc::Dev;
using hwdc::KEY;
using hwfake::fake;

namespace {

/* The RTR modify of QP number qpn (the DCT's number is set at its RTR), or nullptr. */
const hwfake::FakeDevice::Modify *
rtr_of(uint32_t qpn, bool dct)
{
	const hwfake::FakeDevice::Modify *m = nullptr;
	for (const auto &x : fake().modifies)
		if (x.state == int(IBV_QPS_RTR) && x.rc == 0 && (dct || x.qpn == qpn))
			m = &x;
	return m;
}

/* The RTR path the fake recorded for the DCI (dct false) or the DCT. */
const hwfake::FakeDevice::RtrPath *
path_of(uint32_t qpn, bool dct)
{
	for (const auto &p : fake().rtr_paths)
		if (p.qpn == qpn && p.dct == dct)
			return &p;
	return nullptr;
}

} // namespace

TEST(HwRoce, DefaultPathIsTheIpv4MappedRoceV2Gid)
{
	Dev t(true);
	ASSERT_EQ(t.make(nullptr, nullptr, true), 0);
	for (bool dct : {false, true}) {
		uint32_t qpn = dct ? t.dctn : mlx5_qpn_dci_qpn(t.dci);
		const auto *p = path_of(qpn, dct);
		ASSERT_NE(p, nullptr) << (dct ? "DCT" : "DCI");
		EXPECT_TRUE(p->is_global);
		EXPECT_EQ(p->sgid_index, 3); /* ::ffff:192.0.2.10, RoCE v2; index 0 is fe80 v1 */
		EXPECT_EQ(p->hop_limit, 64);
		EXPECT_EQ(p->traffic_class, 0);
		EXPECT_EQ(p->path_mtu, int(IBV_MTU_4096)); /* the port's active MTU */
	}
	/* The DCT's RTR asks the kernel for exactly that (the whole ibv_qp_attr). */
	const auto *m = rtr_of(t.dctn, true);
	ASSERT_NE(m, nullptr);
	EXPECT_EQ(m->attr.ah_attr.is_global, 1);
	EXPECT_EQ(m->attr.ah_attr.grh.sgid_index, 3);
	EXPECT_EQ(m->attr.ah_attr.grh.hop_limit, 64);
	EXPECT_EQ(m->mask & IBV_QP_AV, IBV_QP_AV);
}

TEST(HwRoce, GivenPathIsCarriedAtRtrOfBoth)
{
	Dev t(true);
	mlx5_qpn_dc_path p{};
	p.is_global = 1;
	p.sgid_index = 3;
	p.hop_limit = 9;
	p.traffic_class = 0x68;
	p.sl = 5;
	p.path_mtu = IBV_MTU_1024;
	p.flow_label = 0x12345;
	ASSERT_EQ(t.make(&p, &p, true), 0);
	for (bool dct : {false, true}) {
		uint32_t qpn = dct ? t.dctn : mlx5_qpn_dci_qpn(t.dci);
		const auto *rp = path_of(qpn, dct);
		ASSERT_NE(rp, nullptr);
		EXPECT_TRUE(rp->is_global);
		EXPECT_EQ(rp->sgid_index, 3);
		EXPECT_EQ(rp->hop_limit, 9);
		EXPECT_EQ(rp->traffic_class, 0x68);
		EXPECT_EQ(rp->sl, 5);
		EXPECT_EQ(rp->path_mtu, int(IBV_MTU_1024));
		const auto *m = rtr_of(qpn, dct);
		ASSERT_NE(m, nullptr);
		EXPECT_EQ(m->attr.path_mtu, IBV_MTU_1024);
		EXPECT_EQ(m->attr.ah_attr.grh.flow_label, 0x12345u);
		EXPECT_EQ(m->attr.ah_attr.port_num, MLX5_QPN_HW_DC_PORT);
	}
	/* And the pair works: hop limit 9 covers the route's hops. */
	fake().route_hops = 2;
	ASSERT_EQ(t.send(KEY, 1), 0);
	int rx = 0;
	auto s = t.run(1, &rx);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, 0);
	EXPECT_EQ(rx, 1);
}

/* The path's MTU, at most the port's active MTU (a larger one is lowered to it). */
TEST(HwRoce, PathMtuIsThePathsAtMostThePortsActiveMtu)
{
	Dev t(true);
	fake().active_mtu = IBV_MTU_2048;
	mlx5_qpn_dc_path big{}, small{};
	big.is_global = small.is_global = 1;
	big.sgid_index = small.sgid_index = 3;
	big.path_mtu = IBV_MTU_4096;
	small.path_mtu = IBV_MTU_512;
	ASSERT_EQ(t.make(&big, &small, true), 0);
	const auto *dci = path_of(mlx5_qpn_dci_qpn(t.dci), false);
	const auto *dct = path_of(t.dctn, true);
	ASSERT_NE(dci, nullptr);
	ASSERT_NE(dct, nullptr);
	EXPECT_EQ(dci->path_mtu, int(IBV_MTU_2048));
	EXPECT_EQ(dct->path_mtu, int(IBV_MTU_512));
}

/* The defect: a DCT whose RTR took GID index 0 (link-local RoCE v1) and hop limit 1 is never
 * heard across a router; the SEND times out with 0x15. With the route's path (the default,
 * or the route's GID and a hop limit that covers it) it is delivered. */
TEST(HwRoce, RoutedFabricNeedsTheRoutesPath)
{
	{
		Dev t(true);
		fake().route_hops = 2;
		/* GID index 0, hop limit 1: heard on the local link only. */
		mlx5_qpn_dc_path one_hop{};
		one_hop.is_global = 1;
		one_hop.sgid_index = 0;
		one_hop.hop_limit = 1;
		ASSERT_EQ(t.make(nullptr, &one_hop, true), 0);
		ASSERT_EQ(t.send(KEY, 1), 0);
		int rx = 0;
		auto s = t.run(1, &rx);
		ASSERT_EQ(s.size(), 1u);
		EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ_ERR);
		EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
		EXPECT_EQ(rx, 0);
		EXPECT_GE(fake().dropped, 1);
	}
	{
		Dev t(true);
		fake().route_hops = 2;
		ASSERT_EQ(t.make(nullptr, nullptr, true), 0);
		ASSERT_EQ(t.send(KEY, 2), 0);
		int rx = 0;
		auto s = t.run(1, &rx);
		ASSERT_EQ(s.size(), 1u);
		EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ);
		EXPECT_EQ(s[0].wr_id, 2u);
		EXPECT_EQ(rx, 1);
		EXPECT_EQ(fake().dropped, 0);
	}
}

/* Refused as the kernel refuses them, one line naming the field, nothing left behind. */
TEST(HwRoce, PathsThePortRefusesAreRefused)
{
	struct Case {
		const char *what;
		void (*set)(mlx5_qpn_dc_path &);
		const char *line;
	};
	const Case cases[] = {
		{"no GRH on RoCE", [](mlx5_qpn_dc_path &p) { p.is_global = 0; }, "needs a GRH"},
		{"empty GID entry", [](mlx5_qpn_dc_path &p) { p.sgid_index = 40; }, "GID index 40"},
		{"sl 16", [](mlx5_qpn_dc_path &p) { p.sl = 16; }, "sl 16"},
		{"path_mtu 6", [](mlx5_qpn_dc_path &p) { p.path_mtu = 6; }, "path_mtu 6"},
		{"port 3", [](mlx5_qpn_dc_path &p) { p.port = 3; }, "port 3"},
	};
	for (const Case &c : cases) {
		Dev t(true);
		mlx5_qpn_dc_path p{};
		p.is_global = 1;
		p.sgid_index = 3;
		c.set(p);
		mlx5_qpn_dci *dci = nullptr;
		mlx5_qpn_dct *dct = nullptr;
		EXPECT_EQ(mlx5_qpn_dci_create_cq_path(t.cq, 3, &p, &dci), -EINVAL) << c.what;
		EXPECT_EQ(mlx5_qpn_dct_create_cq_path(t.cq, KEY, &p, &dct), -EINVAL) << c.what;
		EXPECT_NE(t.cap.text().find(c.line), std::string::npos) << c.what;
		EXPECT_EQ(fake().qps_live, 0) << c.what;
	}
}

/* A RoCE port without an IPv4-mapped RoCE v2 GID: NULL has no default, said in one line. */
TEST(HwRoce, NoUsableRoceV2GidIsOneLine)
{
	Dev t(true);
	fake().gids.resize(2); /* fe80 v1 and v2 only */
	mlx5_qpn_dci *dci = nullptr;
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(t.cq, 3, nullptr, &dci), -EINVAL);
	EXPECT_NE(t.cap.text().find("no usable RoCE v2 GID"), std::string::npos);
	EXPECT_EQ(fake().qps_live, 0);
}

/* InfiniBand: NULL is no GRH, as before; a GRH path names its GID. */
TEST(HwRoce, InfinibandDefaultHasNoGrh)
{
	Dev t(false);
	mlx5_qpn_dc_path p{};
	p.is_global = 1;
	p.sgid_index = 0;
	p.hop_limit = 2;
	ASSERT_EQ(t.make(nullptr, &p, false), 0);
	const auto *dci = path_of(mlx5_qpn_dci_qpn(t.dci), false);
	const auto *dct = path_of(t.dctn, true);
	ASSERT_NE(dci, nullptr);
	ASSERT_NE(dct, nullptr);
	EXPECT_FALSE(dci->is_global);
	EXPECT_TRUE(dct->is_global);
	EXPECT_EQ(dct->hop_limit, 2);
	ASSERT_EQ(t.send(KEY, 5), 0);
	auto s = t.run(1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, 0);
}
