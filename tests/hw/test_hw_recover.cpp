/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DCI error recovery on the hardware backend against the strict fake rdma-core: a SEND nobody
 * answers completes with 0x15 after the transport timeout, the WQEs behind it flush, the DC
 * layer marks the DCI in ERR and refuses posts; mlx5_qpn_dci_recover() waits for outstanding
 * WQEs, then issues RESET (mask IBV_QP_STATE only) and the creation's INIT, RTR (same path)
 * and RTS with the kernel's masks (every ibv_modify_qp and its whole ibv_qp_attr recorded by
 * the fake), the send queue restarts at WQE index 0 and a SEND to the DCT is delivered again.
 */
#include <gtest/gtest.h>

#include <endian.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "hw_dc_fixture.h"

using hwdc::Dev;
using hwdc::KEY;
using hwfake::fake;

namespace {

constexpr int INIT_MASK = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
constexpr int RTR_MASK = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV;
constexpr int RTS_MASK = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

/* The DCI's modifies, in order. */
std::vector<hwfake::FakeDevice::Modify>
modifies_of(uint32_t qpn)
{
	std::vector<hwfake::FakeDevice::Modify> v;
	for (const auto &m : fake().modifies)
		if (m.qpn == qpn)
			v.push_back(m);
	return v;
}

/* A wrong key, then good SENDs behind it: the error CQE and the flushes polled. */
void
fail_dci(Dev &t, int behind)
{
	ASSERT_EQ(t.send(KEY ^ 1, 100), 0);
	for (int i = 0; i < behind; i++)
		ASSERT_EQ(t.send(KEY, 101 + uint64_t(i)), 0);
	auto s = t.run(size_t(1 + behind));
	ASSERT_EQ(s.size(), size_t(1 + behind));
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	for (int i = 0; i < behind; i++) {
		EXPECT_EQ(s[size_t(i + 1)].syndrome, MLX5_QPN_SYND_WR_FLUSH);
		EXPECT_EQ(s[size_t(i + 1)].wr_id, 101 + uint64_t(i));
	}
}

} // namespace

TEST(HwRecover, ResetThenInitRtrRtsWithTheKernelsMasks)
{
	Dev t(false);
	ASSERT_EQ(t.make(nullptr, nullptr, false), 0);
	const uint32_t qpn = mlx5_qpn_dci_qpn(t.dci);
	ASSERT_NO_FATAL_FAILURE(fail_dci(t, 2));
	EXPECT_EQ(fake().key_violations, 1);
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(mlx5_qpn_dci_post_send(t.dci, t.ah, t.dctn, KEY, "x", 1, 9), -EIO);

	const auto before = modifies_of(qpn);
	ASSERT_EQ(before.size(), 3u); /* creation: INIT, RTR, RTS */
	ASSERT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	const auto after = modifies_of(qpn);
	ASSERT_EQ(after.size(), 7u);
	EXPECT_EQ(after[3].state, int(IBV_QPS_RESET));
	EXPECT_EQ(after[3].mask, IBV_QP_STATE);
	EXPECT_EQ(after[4].state, int(IBV_QPS_INIT));
	EXPECT_EQ(after[4].mask, INIT_MASK);
	EXPECT_EQ(after[4].attr.port_num, MLX5_QPN_HW_DC_PORT);
	EXPECT_EQ(after[5].state, int(IBV_QPS_RTR));
	EXPECT_EQ(after[5].mask, RTR_MASK);
	/* The same path as at creation: the whole address vector and the MTU. */
	EXPECT_EQ(memcmp(&after[5].attr.ah_attr, &before[1].attr.ah_attr, sizeof(ibv_ah_attr)), 0);
	EXPECT_EQ(after[5].attr.path_mtu, before[1].attr.path_mtu);
	EXPECT_EQ(after[6].state, int(IBV_QPS_RTS));
	EXPECT_EQ(after[6].mask, RTS_MASK);
	EXPECT_EQ(after[6].attr.timeout, before[2].attr.timeout);
	for (size_t i = 3; i < after.size(); i++)
		EXPECT_EQ(after[i].rc, 0) << i;
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_READY);

	/* The queue starts over at WQE index 0, and the DCT hears the DCI again. */
	hwfake::DciPages pg;
	ASSERT_TRUE(hwfake::dci_pages(qpn, &pg));
	EXPECT_EQ(pg.dbrec[MLX5_QPN_SND_DBR], 0u);
	ASSERT_EQ(t.send(KEY, 7), 0);
	const auto *ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg *>(pg.sq);
	EXPECT_EQ((be32toh(ctrl->opmod_idx_opcode) >> 8) & 0xffff, 0u);
	int rx = 0;
	auto s = t.run(1, &rx);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(s[0].wr_id, 7u);
	EXPECT_EQ(s[0].wqe_counter, 0);
	EXPECT_EQ(rx, 1);
	char buf[8] = {};
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, 0, buf, sizeof(buf)), 2);
	EXPECT_EQ(memcmp(buf, "dc", 2), 0);
}

/* -EBUSY while WQEs posted before the error are outstanding; no modify issued meanwhile. */
TEST(HwRecover, BusyUntilEveryWqeCompleted)
{
	Dev t(false);
	ASSERT_EQ(t.make(nullptr, nullptr, false), 0);
	const uint32_t qpn = mlx5_qpn_dci_qpn(t.dci);
	ASSERT_EQ(t.send(KEY ^ 1, 1), 0);
	ASSERT_EQ(t.send(KEY, 2), 0);
	auto s = t.run(1, nullptr, 1); /* the error CQE alone */
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_ERROR);
	size_t n = modifies_of(qpn).size();
	EXPECT_EQ(mlx5_qpn_dci_recover(t.dci), -EBUSY);
	EXPECT_EQ(modifies_of(qpn).size(), n);
	s = t.run(1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_WR_FLUSH);
	EXPECT_EQ(s[0].wr_id, 2u);
	EXPECT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	EXPECT_EQ(modifies_of(qpn).size(), n + 4);
	/* Several rounds: error, recover, good sends, across the send queue's wrap. */
	for (int round = 0; round < 3; round++) {
		ASSERT_NO_FATAL_FAILURE(fail_dci(t, 1));
		ASSERT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
		for (uint64_t i = 0; i < 10; i++) {
			ASSERT_EQ(t.send(KEY, 1000 + i), 0);
			s = t.run(1);
			ASSERT_EQ(s.size(), 1u);
			EXPECT_EQ(s[0].syndrome, 0) << round << ":" << i;
			EXPECT_EQ(s[0].wr_id, 1000 + i);
		}
	}
}

/* The device refuses the recovery half way (RESET done, the modify to INIT refused, as firmware
 * out of resources would): recover gives the error, the DCI stays in ERR (posts -EIO), and a
 * later recovery starts again from RESET and brings it back. */
TEST(HwRecover, RefusedHalfWayStaysInErrAndRecoversLater)
{
	Dev t(false);
	ASSERT_EQ(t.make(nullptr, nullptr, false), 0);
	const uint32_t qpn = mlx5_qpn_dci_qpn(t.dci);
	ASSERT_NO_FATAL_FAILURE(fail_dci(t, 0));
	fake().refuse_modify_errno = ENOMEM;
	fake().refuse_modify_to = IBV_QPS_INIT;
	size_t n = modifies_of(qpn).size();
	EXPECT_EQ(mlx5_qpn_dci_recover(t.dci), -ENOMEM);
	auto m = modifies_of(qpn);
	ASSERT_EQ(m.size(), n + 2); /* RESET done, INIT refused, nothing after it */
	EXPECT_EQ(m[n].state, IBV_QPS_RESET);
	EXPECT_EQ(m[n].rc, 0);
	EXPECT_EQ(m[n + 1].state, IBV_QPS_INIT);
	EXPECT_EQ(m[n + 1].rc, ENOMEM);
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(t.send(KEY, 5), -EIO);
	fake().refuse_modify_errno = 0;
	fake().refuse_modify_to = -1;
	ASSERT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	EXPECT_EQ(modifies_of(qpn).size(), n + 2 + 4);
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_READY);
	ASSERT_EQ(t.send(KEY, 6), 0);
	auto s = t.run(1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, 0);
	EXPECT_EQ(s[0].wr_id, 6u);
}

/* A DCI made with a RoCE path comes back with that path, not the port's default. */
TEST(HwRecover, RocePathIsKeptForRecovery)
{
	Dev t(true);
	mlx5_qpn_dc_path p{};
	p.is_global = 1;
	p.sgid_index = 3;
	p.hop_limit = 17;
	p.traffic_class = 0x20;
	p.path_mtu = IBV_MTU_2048;
	ASSERT_EQ(t.make(&p, nullptr, true), 0);
	const uint32_t qpn = mlx5_qpn_dci_qpn(t.dci);
	ASSERT_NO_FATAL_FAILURE(fail_dci(t, 0));
	ASSERT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	const auto m = modifies_of(qpn);
	ASSERT_EQ(m.size(), 7u);
	EXPECT_EQ(m[5].state, int(IBV_QPS_RTR));
	EXPECT_EQ(m[5].attr.ah_attr.is_global, 1);
	EXPECT_EQ(m[5].attr.ah_attr.grh.sgid_index, 3);
	EXPECT_EQ(m[5].attr.ah_attr.grh.hop_limit, 17);
	EXPECT_EQ(m[5].attr.ah_attr.grh.traffic_class, 0x20);
	EXPECT_EQ(m[5].attr.path_mtu, IBV_MTU_2048);
	ASSERT_EQ(t.send(KEY, 3), 0);
	auto s = t.run(1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, 0);
}

/* Recovery of a READY DCI issues nothing. */
TEST(HwRecover, ReadyDciIsLeftAlone)
{
	Dev t(false);
	ASSERT_EQ(t.make(nullptr, nullptr, false), 0);
	size_t n = fake().modifies.size();
	EXPECT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	EXPECT_EQ(fake().modifies.size(), n);
}
