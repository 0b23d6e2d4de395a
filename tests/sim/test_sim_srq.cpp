/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DCT receives through an SRQ, as a ConnectX's does: receive WQEs in a
 * linked list that the poster writes and counts in a doorbell record, taken in list order, each
 * data segment checked against the DCT's registered buffers, the WQE's index in the responder
 * CQE, and a SEND that waits (RNR) while nothing is posted. The sender is a DCI of another
 * handle of the same device (as another process would open it); the DC layer posts the SRQ.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <rte_byteorder.h>

#include "common/mlx5_qpn_prm_wqe.h"
#include "dc/mlx5_qpn_dc_be.h"
#include "dc/mlx5_qpn_dc_priv.h"
#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "sim_test_util.h"

namespace {

constexpr uint64_t KEY = 0x5151aa55aa5515ULL;

/* A sender on its own handle: CQ, DCI and AH through the DC layer. */
struct Sender {
	mlx5_qpn_backend *be = nullptr;
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_ah *ah = nullptr;

	void open(const std::string &name)
	{
		auto da = sim_test::default_devargs(name);
		ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be), 0);
		ASSERT_EQ(mlx5_qpn_cq_create_be(be, 4, &cq), 0);
		ASSERT_EQ(mlx5_qpn_dci_create_cq(cq, 3, &dci), 0);
		mlx5_qpn_dc_addr a{};
		a.dlid = 1;
		ASSERT_EQ(mlx5_qpn_ah_create_be(be, &a, &ah), 0);
	}
	void send(uint32_t dctn, const char *s, uint64_t wr_id)
	{
		ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah, dctn, KEY, s, uint32_t(strlen(s)), wr_id),
			  0);
		mlx5_qpn_dci_ring(dci);
	}
	~Sender()
	{
		mlx5_qpn_dci_destroy(dci);
		mlx5_qpn_ah_destroy(ah);
		mlx5_qpn_cq_destroy(cq);
		if (be)
			mlx5_qpn_sim_ops.close(be);
	}
};

uint64_t
rnr_of(mlx5_qpn_backend *be)
{
	mlx5_qpn_sim_stats st;
	EXPECT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	return st.dc_rnr;
}

/* The CQE at ci of a CQ read without the DC layer, or false while the device has not written. */
bool
raw_cqe(const mlx5_qpn_dc_cq_info &cq, uint32_t ci, mlx5_qpn_cqe_fields *f)
{
	const uint8_t *cqe = static_cast<const uint8_t *>(cq.ring) +
			     size_t(ci & ((1u << cq.log_depth) - 1)) * MLX5_QPN_CQE_SIZE;
	uint8_t op_own = __atomic_load_n(&cqe[MLX5_QPN_CQE_OFF_OP_OWN], __ATOMIC_ACQUIRE);
	if (!mlx5_qpn_cqe_is_sw_owned(op_own, ci, cq.log_depth))
		return false;
	mlx5_qpn_cqe_parse(cqe, op_own, f);
	return true;
}

uint8_t *
wqe_at(const mlx5_qpn_dc_dct_info &t, uint32_t i)
{
	return static_cast<uint8_t *>(t.srq.wqes) + size_t(i) * t.srq.stride;
}

void
post(const mlx5_qpn_dc_dct_info &t, uint32_t count)
{
	__atomic_store_n(&t.srq.dbrec[MLX5_QPN_SRQ_DBR], rte_cpu_to_be_32(count), __ATOMIC_RELEASE);
}

} // namespace

/* The SRQ as the device hands it out and uses it, WQEs posted by hand: RNR while none is posted,
 * list order (not index order), the WQE index in the CQE, the payload in the buffer the WQE
 * names, and RESP_ERR for a data segment outside the DCT's registered region. */
TEST(SimSrq, DctReceivesThroughPostedWqesInListOrder)
{
	sim_test::ScopedName n;
	auto da = sim_test::default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be), 0);
	const mlx5_qpn_dc_ops &ops = mlx5_qpn_sim_dc_ops;
	mlx5_qpn_dc_cq_info rcq{};
	mlx5_qpn_dc_dct_info t{};
	ASSERT_EQ(ops.cq_create(be, 4, &rcq), 0);
	ASSERT_EQ(ops.dct_create(be, &rcq, KEY, nullptr, &t), 0);
	/* Handed out as the hardware backend hands out an mlx5dv SRQ: nothing posted. */
	ASSERT_NE(t.srq.wqes, nullptr);
	ASSERT_NE(t.srq.dbrec, nullptr);
	ASSERT_NE(t.srq.buf, nullptr);
	EXPECT_EQ(t.srq.stride, uint32_t(MLX5_QPN_SRQ_WQE_MIN_STRIDE));
	EXPECT_EQ(t.srq.log_wqes, 8u);
	EXPECT_EQ(t.rx_slots, 64u);
	EXPECT_GE(t.rx_stride, uint32_t(MLX5_QPN_DC_MAX_INLINE));
	EXPECT_EQ(t.srq.dbrec[MLX5_QPN_SRQ_DBR], 0u);

	Sender s;
	ASSERT_NO_FATAL_FAILURE(s.open(n.name));
	s.send(t.dctn, "first", 1);
	/* Nothing posted: receiver not ready, the SEND waits (no CQE on either side). */
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(s.be), 0);
	EXPECT_GE(rnr_of(be), 1u);
	mlx5_qpn_cqe_fields f{};
	EXPECT_FALSE(raw_cqe(rcq, 0, &f));
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(s.cq, wc, 4), 0);

	/* The list 0 -> 5 -> 7 -> 9: a good WQE, one with a foreign key, one past the region. */
	uint8_t *buf = t.srq.buf;
	uint64_t va = uint64_t(uintptr_t(buf));
	mlx5_qpn_srq_wqe_build(wqe_at(t, 0), 5, t.rx_stride, t.srq.lkey, va + 3 * t.rx_stride);
	mlx5_qpn_srq_wqe_build(wqe_at(t, 5), 7, t.rx_stride, t.srq.lkey + 1, va);
	mlx5_qpn_srq_wqe_build(wqe_at(t, 7), 9, t.rx_stride, t.srq.lkey,
			       va + (uint64_t(1) << t.srq.log_wqes) * t.rx_stride);
	post(t, 1);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(s.be), 1);
	ASSERT_TRUE(raw_cqe(rcq, 0, &f));
	EXPECT_EQ(f.opcode, MLX5_QPN_PRM_CQE_RESP_SEND);
	EXPECT_EQ(f.wqe_counter, 0u); /* the SRQ WQE's index */
	EXPECT_EQ(f.qpn, t.dctn);
	EXPECT_EQ(f.src_qpn, mlx5_qpn_dci_qpn(s.dci));
	EXPECT_EQ(f.byte_cnt, 5u);
	EXPECT_EQ(std::string(reinterpret_cast<char *>(buf + 3 * t.rx_stride), 5), "first");
	ASSERT_EQ(mlx5_qpn_cq_poll(s.cq, wc, 4), 1);
	EXPECT_EQ(wc[0].wr_id, 1u);
	EXPECT_EQ(wc[0].syndrome, 0u);

	/* Everything posted is used: the next SEND waits again. */
	uint64_t rnr = rnr_of(be);
	s.send(t.dctn, "second", 2);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(s.be), 0);
	EXPECT_GT(rnr_of(be), rnr);
	post(t, 3);
	/* WQE 5 next along the list: its key is not the DCT's (local protection). */
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(s.be), 1);
	ASSERT_TRUE(raw_cqe(rcq, 1, &f));
	EXPECT_EQ(f.opcode, MLX5_QPN_PRM_CQE_RESP_ERR);
	EXPECT_EQ(f.wqe_counter, 5u);
	EXPECT_EQ(f.syndrome, 0x04);
	/* WQE 7: the right key, an address past the registered buffers. */
	s.send(t.dctn, "third", 3);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(s.be), 1);
	ASSERT_TRUE(raw_cqe(rcq, 2, &f));
	EXPECT_EQ(f.opcode, MLX5_QPN_PRM_CQE_RESP_ERR);
	EXPECT_EQ(f.wqe_counter, 7u);
	EXPECT_FALSE(raw_cqe(rcq, 3, &f));

	__atomic_store_n(&rcq.dbrec[MLX5_QPN_CQ_SET_CI], rte_cpu_to_be_32(3), __ATOMIC_RELEASE);
	EXPECT_EQ(ops.dct_destroy(be, &t), 0);
	EXPECT_EQ(ops.cq_destroy(be, &rcq), 0);
	mlx5_qpn_sim_ops.close(be);
}

/* Through the DC layer: it posts the SRQ at create (all but the spare), the completion's
 * wqe_counter becomes its message counter, the last 64 messages stay readable, and each later
 * message gives one held WQE back to the device. A DCI of another handle delivers; the CQ polls
 * drive the device (no other call). */
TEST(SimSrq, DcLayerPostsTheSrqAndKeepsTheReadContract)
{
	sim_test::ScopedName n;
	auto da = sim_test::default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be), 0);
	mlx5_qpn_cq *rcq = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create_be(be, 8, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create_cq(rcq, KEY, &dct), 0);
	const uint32_t *dbrec = dct->info.srq.dbrec;
	const uint32_t nwqe = 1u << dct->info.srq.log_wqes;
	EXPECT_EQ(rte_be_to_cpu_32(dbrec[MLX5_QPN_SRQ_DBR]), nwqe - 1);

	Sender s;
	ASSERT_NO_FATAL_FAILURE(s.open(n.name));
	const int N = 70;
	int got = 0, sent = 0;
	mlx5_qpn_wc wc[8];
	for (int pass = 0; pass < 10000 && got < N; pass++) {
		if (sent < N && sent - got < 4) {
			std::string m = "m" + std::to_string(sent);
			s.send(mlx5_qpn_dct_qpn(dct), m.c_str(), uint64_t(sent));
			sent++;
		}
		mlx5_qpn_cq_poll(s.cq, wc, 8);
		int k = mlx5_qpn_cq_poll(rcq, wc, 8);
		ASSERT_GE(k, 0);
		for (int i = 0; i < k; i++) {
			EXPECT_EQ(wc[i].opcode, MLX5_QPN_CQE_RESP_SEND);
			EXPECT_EQ(wc[i].wqe_counter, uint16_t(got + i)); /* the message counter */
		}
		got += k;
	}
	ASSERT_EQ(got, N);
	char b[16];
	for (int m = 0; m < N; m++) {
		int r = mlx5_qpn_dct_read(dct, uint16_t(m), b, sizeof(b));
		if (m < N - 64) {
			EXPECT_EQ(r, -ESTALE) << m;
			continue;
		}
		std::string want = "m" + std::to_string(m);
		ASSERT_EQ(r, int(want.size())) << m;
		EXPECT_EQ(std::string(b, size_t(r)), want);
	}
	EXPECT_EQ(mlx5_qpn_dct_read(dct, uint16_t(N - 1), b, 1), 3); /* truncated copy */
	/* Each message past the 64th gave one held WQE back: posted again. */
	EXPECT_EQ(rte_be_to_cpu_32(dbrec[MLX5_QPN_SRQ_DBR]), nwqe - 1 + uint32_t(N - 64));
	EXPECT_EQ(rnr_of(be), 0u);

	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(rcq);
	mlx5_qpn_sim_ops.close(be);
}
