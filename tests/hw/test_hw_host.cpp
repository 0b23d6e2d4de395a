/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend and the DC layer on hosts that differ, against the strict fake
 * (test_hw_fake_rules_host.cpp shows each rule): an InfiniBand port that requires a GRH, a
 * device without DC transport, a RoCE bond without lag_dct, the kernel's older DCI rules, a
 * responder's NAK, a CQ the device overran, and the DCI ring libmlx5 really allocates. Each
 * works where the host allows it and says in one line what stands in the way where it does not.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "hw_dc_fixture.h"

using hwdc::Dev;
using hwdc::KEY;
using hwfake::fake;

namespace {

bool
has(const std::string &text, const char *s)
{
	return text.find(s) != std::string::npos;
}

/* The peer on an InfiniBand port that requires a GRH: its LID and its GID (the default subnet
 * prefix and, here, the fake's port GUID). */
mlx5_qpn_dc_addr
ib_grh_addr()
{
	mlx5_qpn_dc_addr a = hwdc::peer_addr(false);
	a.is_global = 1;
	a.sgid_index = 0;
	a.hop_limit = 64;
	a.dgid[0] = 0xfe;
	a.dgid[1] = 0x80;
	for (int i = 0; i < 8; i++)
		a.dgid[8 + i] = uint8_t(fake().guid >> (56 - 8 * i));
	return a;
}

/* The modifies of one QP that the fake accepted, in order. */
std::vector<hwfake::FakeDevice::Modify>
accepted(uint32_t qpn)
{
	std::vector<hwfake::FakeDevice::Modify> v;
	for (const auto &m : fake().modifies)
		if (m.qpn == qpn && m.rc == 0)
			v.push_back(m);
	return v;
}

} // namespace

TEST(HwHost, GrhRequiredInfinibandPortGetsAGrhOnEveryPath)
{
	Dev d(false, 0, [](hwfake::FakeDevice &f) { f.grh_required = true; });
	ASSERT_NE(d.cq, nullptr);
	EXPECT_TRUE(has(d.cap.text(), "port 1 InfiniBand, grh_required yes")) << d.cap.text();
	hwtest::LogCapture cap; /* after the probe's lines */
	/* The port's default path and a path given without a GRH: both get the port's. */
	ASSERT_EQ(mlx5_qpn_dct_create_cq_path(d.cq, KEY, nullptr, &d.dct), 0) << d.cap.text();
	ASSERT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &d.dci), 0) << d.cap.text();
	mlx5_qpn_dc_path p{};
	p.sl = 2;
	mlx5_qpn_dci *dci2 = nullptr;
	ASSERT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 2, &p, &dci2), 0) << d.cap.text();
	ASSERT_EQ(fake().rtr_paths.size(), 3u);
	for (const auto &r : fake().rtr_paths) {
		EXPECT_TRUE(r.is_global) << r.qpn;
		EXPECT_EQ(r.sgid_index, 0) << r.qpn;
	}
	EXPECT_EQ(fake().rtr_paths[2].sl, 2);
	/* An address without a GRH: one line, nothing asked of the device. */
	mlx5_qpn_dc_addr a = hwdc::peer_addr(false);
	mlx5_qpn_ah *bad = nullptr;
	const size_t asked = fake().ah_attrs.size();
	EXPECT_EQ(mlx5_qpn_ah_create_be(d.be, &a, &bad), -EINVAL);
	EXPECT_EQ(fake().ah_attrs.size(), asked);
	const std::string log = cap.text();
	EXPECT_TRUE(has(log, "port 1 requires a GRH")) << log;
	/* With the peer's GID the SEND arrives, and a recovery keeps the GRH. */
	a = ib_grh_addr();
	ASSERT_EQ(mlx5_qpn_ah_create_be(d.be, &a, &d.ah), 0);
	d.dctn = mlx5_qpn_dct_qpn(d.dct);
	ASSERT_EQ(d.send(KEY + 1, 1), 0); /* a wrong key: the DCI goes to ERR */
	std::vector<mlx5_qpn_wc> wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	ASSERT_EQ(mlx5_qpn_dci_recover(d.dci), 0) << d.cap.text();
	EXPECT_TRUE(fake().rtr_paths.back().is_global);
	ASSERT_EQ(d.send(KEY, 2), 0);
	wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(wc[0].wr_id, 2u);
	mlx5_qpn_dci_destroy(dci2);
}

TEST(HwHost, WithoutDcTransportTheFirstDcObjectIsOneLine)
{
	Dev d(false, 0, [](hwfake::FakeDevice &f) { f.dct_cap = false; });
	ASSERT_NE(d.cq, nullptr);
	EXPECT_TRUE(has(d.cap.text(), "DC host: dct cap no")) << d.cap.text();
	hwtest::LogCapture cap;
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &d.dci), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dct_create_cq_path(d.cq, KEY, nullptr, &d.dct), -EOPNOTSUPP);
	EXPECT_TRUE(fake().dv_qps.empty()); /* refused before the kernel is asked */
	const std::string log = cap.text();
	EXPECT_TRUE(has(log, "DCI: the device has no DC transport (cmd_hca_cap.dct clear)")) << log;
	EXPECT_EQ(hwtest::count_lines(log), 2u) << log; /* one line each */
	EXPECT_EQ(fake().srqs_live, 0);
	EXPECT_EQ(fake().mrs_live, 0);
}

TEST(HwHost, WithoutDevxTheKernelsRefusalOfDcIsNamed)
{
	Dev d(false, 0, [](hwfake::FakeDevice &f) {
		f.devx = false;
		f.dct_cap = false;
	});
	ASSERT_NE(d.cq, nullptr);
	EXPECT_TRUE(has(d.cap.text(), "DC host: dct cap unknown, RoCE LAG unknown"))
		<< d.cap.text();
	hwtest::LogCapture cap;
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &d.dci), -EOPNOTSUPP);
	const std::string log = cap.text();
	EXPECT_TRUE(has(log, "the kernel refused DC (EOPNOTSUPP): the device has no DC transport"))
		<< log;
}

TEST(HwHost, RoceBondWithoutLagDctRefusesTheDctInOneLine)
{
	{
		Dev d(true, 0, [](hwfake::FakeDevice &f) { f.lag_active = true; });
		ASSERT_NE(d.cq, nullptr);
		EXPECT_TRUE(has(d.cap.text(), "dct cap yes, RoCE LAG active (lag_dct no), port 1 "
					      "RoCE, grh_required no"))
			<< d.cap.text();
		hwtest::LogCapture cap;
		EXPECT_EQ(mlx5_qpn_dct_create_cq_path(d.cq, KEY, nullptr, &d.dct), -EOPNOTSUPP);
		EXPECT_TRUE(fake().dv_qps.empty());
		const std::string log = cap.text();
		EXPECT_TRUE(has(log, "DCT: RoCE LAG is active")) << log;
		EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &d.dci), 0);
	}
	Dev d(true, 0, [](hwfake::FakeDevice &f) {
		f.lag_active = true;
		f.lag_dct = 1;
	});
	ASSERT_EQ(d.make(nullptr, nullptr, true), 0) << d.cap.text();
	ASSERT_EQ(d.send(KEY, 3), 0);
	std::vector<mlx5_qpn_wc> wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ);
}

TEST(HwHost, OlderKernelDciRulesReachRtsWithoutTheAvAndNameTheKernelForReset)
{
	Dev d(false, 0, [](hwfake::FakeDevice &f) { f.old_dci_rules = true; });
	ASSERT_EQ(d.make(nullptr, nullptr, false), 0) << d.cap.text();
	EXPECT_TRUE(has(d.cap.text(), "older than 5.2")) << d.cap.text();
	const uint32_t qpn = mlx5_qpn_dci_qpn(d.dci);
	std::vector<hwfake::FakeDevice::Modify> ok = accepted(qpn);
	ASSERT_EQ(ok.size(), 3u);
	EXPECT_EQ(ok[1].state, IBV_QPS_RTR);
	EXPECT_EQ(ok[1].mask & IBV_QP_AV, 0);
	EXPECT_EQ(ok[2].state, IBV_QPS_RTS);
	/* The next DCI leaves the AV out at once: no refused call. */
	mlx5_qpn_dci *dci2 = nullptr;
	ASSERT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 2, nullptr, &dci2), 0);
	for (const auto &m : fake().modifies) {
		if (m.qpn == mlx5_qpn_dci_qpn(dci2)) {
			EXPECT_EQ(m.rc, 0);
		}
	}
	mlx5_qpn_dci_destroy(dci2);
	ASSERT_EQ(d.send(KEY, 4), 0);
	std::vector<mlx5_qpn_wc> wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ);
	/* A DCI in ERR: this kernel has no DCI->RESET; the line names the kernel it needs. */
	ASSERT_EQ(d.send(KEY + 1, 5), 0);
	wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(mlx5_qpn_dci_state(d.dci), MLX5_QPN_DCI_ERROR);
	hwtest::LogCapture cap;
	EXPECT_EQ(mlx5_qpn_dci_recover(d.dci), -EOPNOTSUPP);
	const std::string log = cap.text();
	EXPECT_TRUE(has(log, "kernel 5.2 or later")) << log;
	EXPECT_EQ(mlx5_qpn_dci_state(d.dci), MLX5_QPN_DCI_ERROR);
}

TEST(HwHost, NakedSendCompletesWithItsSyndromeAndTheDciRecovers)
{
	Dev d(false);
	ASSERT_EQ(d.make(nullptr, nullptr, false), 0) << d.cap.text();
	fake().resp_err = MLX5_QPN_SYND_LOCAL_QP_OP_ERR; /* the responder fails the receive */
	ASSERT_EQ(d.send(KEY, 6), 0);
	int rx = 0;
	std::vector<mlx5_qpn_wc> wc = d.run(1, &rx);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(rx, 1); /* the DCT's own error completion */
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(wc[0].syndrome, MLX5_QPN_SYND_REMOTE_OP);
	EXPECT_EQ(wc[0].wr_id, 6u);
	EXPECT_TRUE(has(mlx5_qpn_wc_syndrome_str(wc[0].syndrome), "remote operational"));
	EXPECT_TRUE(has(mlx5_qpn_wc_syndrome_str(MLX5_QPN_SYND_REMOTE_INV_REQ),
			"remote invalid request"));
	EXPECT_EQ(mlx5_qpn_dci_state(d.dci), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(d.send(KEY, 7), -EIO);
	ASSERT_EQ(mlx5_qpn_dci_recover(d.dci), 0) << d.cap.text();
	ASSERT_EQ(d.send(KEY, 8), 0);
	wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(wc[0].wr_id, 8u);
}

TEST(HwHost, CqTakesNoMoreDcisThanItCompletes)
{
	Dev d(false); /* a CQ of 32 */
	ASSERT_NE(d.cq, nullptr);
	mlx5_qpn_dci *dci[5] = {};
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &dci[i]), 0) << i;
	const int dv_qps = int(fake().dv_qps.size());
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &dci[4]), -ENOSPC);
	EXPECT_EQ(int(fake().dv_qps.size()), dv_qps); /* nothing asked of the device */
	EXPECT_TRUE(has(d.cap.text(), "of 32 CQEs cannot take a DCI of 8 WQEs")) << d.cap.text();
	mlx5_qpn_dci_destroy(dci[0]);
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &dci[4]), 0);
	for (int i = 1; i < 5; i++)
		mlx5_qpn_dci_destroy(dci[i]);
}

/* A DCT's receives complete on the CQ of the DCT: when nobody polls it, senders on other CQs
 * overrun it. The device raises a CQ error; the DCIs on that CQ then fail with -EIO and say
 * why, rather than stopping with a full send queue (-ENOBUFS for ever). */
TEST(HwHost, CqErrorFailsTheDcisOnItNotASilentStop)
{
	Dev d(false);
	ASSERT_EQ(d.make(nullptr, nullptr, false), 0) << d.cap.text();
	mlx5_qpn_cq *cq2 = nullptr;
	mlx5_qpn_dci *sender = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create_be(d.be, 5, &cq2), 0);
	ASSERT_EQ(mlx5_qpn_dci_create_cq_path(cq2, 3, nullptr, &sender), 0);
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 8; i++)
			ASSERT_EQ(mlx5_qpn_dci_post_send(sender, d.ah, d.dctn, KEY, "x", 1, 0), 0);
		mlx5_qpn_dci_ring(sender);
		hwfake::dc_execute();
		mlx5_qpn_wc wc[8];
		ASSERT_EQ(mlx5_qpn_cq_poll(cq2, wc, 8), 8);
	}
	EXPECT_EQ(fake().cq_errors, 1); /* 40 receive completions on the 32 of d.cq */
	/* The DCI on the failed CQ: its completions never come; the post that finds its queue
	 * full learns the CQ is in error. */
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(d.send(KEY, uint64_t(i)), 0);
	hwfake::dc_execute();
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(d.cq, wc, 4), 4); /* what was written before the overrun */
	EXPECT_EQ(d.send(KEY, 9), -EIO);
	EXPECT_EQ(mlx5_qpn_dci_state(d.dci), MLX5_QPN_DCI_ERROR);
	EXPECT_TRUE(has(d.cap.text(), "is in error (the device overran it")) << d.cap.text();
	EXPECT_EQ(mlx5_qpn_dci_recover(d.dci), -EIO);
	/* The sender's own CQ is fine. */
	EXPECT_EQ(mlx5_qpn_dci_state(sender), MLX5_QPN_DCI_READY);
	mlx5_qpn_dci_destroy(sender);
	mlx5_qpn_cq_destroy(cq2);
}

TEST(HwHost, DciRingAndItsPinAreWhatLibmlx5Allocates)
{
	/* max_wqe_sz_sq_dc 256: SENDs of at most 188 inline bytes, which libmlx5 counts 448
	 * bytes a WQE (240 of overhead): the driver asks for WRs that make the ring the 64 BBs
	 * the DC layer wants, not twice that. */
	Dev d(false, 256);
	ASSERT_NE(d.cq, nullptr);
	const uint64_t before = fake().pinned;
	ASSERT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &d.dci), 0) << d.cap.text();
	EXPECT_EQ(fake().pinned - before, 4096u);
	EXPECT_EQ(mlx5_qpn_dci_max_inline(d.dci), 188u);
	ASSERT_FALSE(fake().dv_qps.empty());
	EXPECT_EQ(fake().dv_qps.back().max_send_wr, 8u);
}
