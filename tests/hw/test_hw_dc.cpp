/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's DC data path against a fake rdma-core (hw_fake_glue.h): the verbs and
 * mlx5dv calls and their attributes (DC types, key, the DCT's SRQ, the QP state changes, the AH),
 * the queues the DC layer uses coming from mlx5dv_init_obj, a post writing the AH's address
 * vector into the WQE (checked with the installed struct mlx5_wqe_av), no AH -> -EINVAL, and
 * the doorbell record written before the UAR register; and receiving on a DCT: the fake device
 * executes the DCI's WQEs into the DCT's SRQ (hw_fake_glue.h: dc_execute), and the DC layer's
 * SRQ WQEs, reposting and mlx5_qpn_dct_read() are checked against it.
 */
#include <gtest/gtest.h>

#include <endian.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "dc/mlx5_qpn_dc_be.h"
#include "hw/mlx5_qpn_hw.h"
#include "hw/mlx5_qpn_hw_dc.h"
#include "common/mlx5_qpn_prm_wqe.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dc.h"

using hwfake::fake;
using hwtest::LogCapture;

namespace {

constexpr uint64_t KEY = 0x1122334455667788ull;

/* A fake device opened through the hardware backend, with a CQ, a DCI and a DCT. */
struct HwDc {
	hwfake::Scope scope;
	LogCapture cap;
	mlx5_qpn_backend *be = nullptr;
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;

	HwDc()
	{
		mlx5_qpn_devargs da{};
		snprintf(da.name, sizeof(da.name), "mlx5_fake");
		da.reserved_qpn = MLX5_QPN_RSVD_NO;
		da.log_range = UINT32_MAX;
		da.max_qpns = 65536;
		EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), 0);
	}
	/* The CQ, DCI and DCT; false (and why) if any failed. */
	bool make()
	{
		EXPECT_NE(be, nullptr);
		return be != nullptr && mlx5_qpn_cq_create_be(be, 4, &cq) == 0 &&
		       mlx5_qpn_dci_create_cq(cq, 2, &dci) == 0 &&
		       mlx5_qpn_dct_create_cq(cq, KEY, &dct) == 0;
	}
	~HwDc()
	{
		mlx5_qpn_dct_destroy(dct);
		mlx5_qpn_dci_destroy(dci);
		mlx5_qpn_cq_destroy(cq);
		if (be != nullptr)
			mlx5_qpn_hw_ops.close(be);
		EXPECT_EQ(hwfake::live_objects(), 0);
	}
};

mlx5_qpn_dc_addr
ib_addr(void)
{
	mlx5_qpn_dc_addr a{};
	a.dlid = 0x1234;
	a.sl = 3;
	a.is_global = 1;
	a.sgid_index = 2;
	a.hop_limit = 64;
	a.traffic_class = 0x28;
	a.flow_label = 0xabcde;
	for (int i = 0; i < 16; i++)
		a.dgid[i] = uint8_t(0xf0 + i);
	return a;
}

} // namespace

TEST(HwDc, ObjectsAreMadeWithRdmaCoreAttributes)
{
	HwDc t;
	ASSERT_TRUE(t.make());
	const auto &d = fake();
	/* CQ: 2^4 - 1 asked (libmlx5 adds one); depth and CQN from init_obj. */
	EXPECT_EQ(d.cq_depths.back(), 15);
	ASSERT_EQ(d.dv_qps.size(), 2u);
	const auto &dci = d.dv_qps[0], &dct = d.dv_qps[1];
	EXPECT_EQ(dci.qp_type, uint32_t(IBV_QPT_DRIVER));
	EXPECT_TRUE(dci.comp_mask & IBV_QP_INIT_ATTR_PD);
	EXPECT_EQ(dci.dv_comp_mask, uint64_t(MLX5DV_QP_INIT_ATTR_MASK_DC));
	EXPECT_EQ(dci.dc_type, uint32_t(MLX5DV_DCTYPE_DCI));
	EXPECT_EQ(dci.max_send_wr, 4u); /* 2^2 WQEs asked */
	EXPECT_EQ(dci.max_inline, uint32_t(MLX5_QPN_DC_MAX_INLINE));
	EXPECT_FALSE(dci.srq);
	EXPECT_TRUE(dci.one_cq);
	EXPECT_EQ(dct.dc_type, uint32_t(MLX5DV_DCTYPE_DCT));
	EXPECT_EQ(dct.key, KEY);
	EXPECT_TRUE(dct.srq); /* rdma-core: a DCT receives into an SRQ */
	EXPECT_TRUE(dct.one_cq);
	EXPECT_EQ(d.srqs_live, 1);
	EXPECT_EQ(d.srq_max_wr, MLX5_QPN_HW_DC_SRQ_WR);

	/* DCI: INIT -> RTR -> RTS; DCT: INIT -> RTR, each with the kernel's required mask. */
	ASSERT_EQ(d.modifies.size(), 5u);
	const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	EXPECT_EQ(d.modifies[0].state, int(IBV_QPS_INIT));
	EXPECT_EQ(d.modifies[0].mask, init);
	EXPECT_EQ(d.modifies[0].port, MLX5_QPN_HW_DC_PORT);
	EXPECT_EQ(d.modifies[1].state, int(IBV_QPS_RTR));
	EXPECT_EQ(d.modifies[1].mask, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV);
	EXPECT_EQ(d.modifies[1].mtu, int(IBV_MTU_4096)); /* the port's active MTU */
	EXPECT_EQ(d.modifies[2].state, int(IBV_QPS_RTS));
	EXPECT_EQ(d.modifies[2].mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					      IBV_QP_MAX_QP_RD_ATOMIC);
	EXPECT_EQ(d.modifies[3].state, int(IBV_QPS_INIT));
	EXPECT_EQ(d.modifies[3].mask, init | IBV_QP_ACCESS_FLAGS);
	EXPECT_EQ(d.modifies[3].qpn, 0u); /* no DCT number before RTR */
	EXPECT_EQ(d.modifies[4].state, int(IBV_QPS_RTR));
	EXPECT_EQ(d.modifies[4].mask,
		  IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU);
	EXPECT_EQ(d.modifies[4].min_rnr, 12);

	/* Numbers: the DCI's qp_num; the DCT's as rdma-core sets it at RTR. */
	EXPECT_EQ(mlx5_qpn_dci_qpn(t.dci), d.modifies[0].qpn);
	EXPECT_NE(mlx5_qpn_dct_qpn(t.dct), 0u);
	/* The DCT receives: its SRQ's list is posted but for the spare, nothing received yet. */
	char buf[8];
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, 0, buf, sizeof(buf)), -ESTALE);
	EXPECT_EQ(hwfake::srq_posted(mlx5_qpn_dct_qpn(t.dct)), MLX5_QPN_HW_DC_SRQ_WR);
	EXPECT_EQ(d.mrs_live, 1);
	EXPECT_EQ(d.mr_access, int(IBV_ACCESS_LOCAL_WRITE));
}

TEST(HwDc, AhIsRdmaCoresAndItsAvGoesIntoTheWqe)
{
	HwDc t;
	ASSERT_TRUE(t.make());
	mlx5_qpn_dc_addr addr = ib_addr();
	mlx5_qpn_ah *ah = nullptr;
	ASSERT_EQ(mlx5_qpn_ah_create_be(t.be, &addr, &ah), 0);
	ASSERT_EQ(fake().ah_attrs.size(), 1u);
	const ibv_ah_attr &at = fake().ah_attrs[0];
	EXPECT_EQ(at.dlid, 0x1234);
	EXPECT_EQ(at.sl, 3);
	EXPECT_EQ(at.port_num, MLX5_QPN_HW_DC_PORT); /* port 0 means the default */
	EXPECT_EQ(at.is_global, 1);
	EXPECT_EQ(at.grh.sgid_index, 2);
	EXPECT_EQ(at.grh.hop_limit, 64);
	EXPECT_EQ(at.grh.traffic_class, 0x28);
	EXPECT_EQ(at.grh.flow_label, 0xabcdeu);
	EXPECT_EQ(memcmp(at.grh.dgid.raw, addr.dgid, 16), 0);

	/* No route: refused on hardware. */
	const uint32_t dctn = mlx5_qpn_dct_qpn(t.dct);
	EXPECT_EQ(mlx5_qpn_dci_post_send(t.dci, nullptr, dctn, KEY, "x", 1, 1), -EINVAL);

	ASSERT_EQ(mlx5_qpn_dci_post_send(t.dci, ah, dctn, KEY, "hello", 5, 99), 0);
	hwfake::DciPages pg;
	ASSERT_TRUE(hwfake::dci_pages(mlx5_qpn_dci_qpn(t.dci), &pg));
	/* The datagram segment is the AH's AV with the DC key and the target over it, as the
	 * provider writes it: compare with the installed struct. */
	mlx5_wqe_av want = hwfake::last_av();
	want.key.dc_key = htobe64(KEY);
	want.dqp_dct = htobe32(dctn | MLX5_EXTENDED_UD_AV);
	EXPECT_EQ(memcmp(pg.sq + sizeof(mlx5_wqe_ctrl_seg), &want, sizeof(want)), 0);
	const auto *av = reinterpret_cast<const mlx5_wqe_av *>(pg.sq + sizeof(mlx5_wqe_ctrl_seg));
	EXPECT_EQ(av->rlid, htobe16(0x1234));
	EXPECT_EQ(av->stat_rate_sl & 0xf, 3);
	EXPECT_EQ(av->hop_limit, 64);
	EXPECT_EQ(av->tclass, 0x28);
	EXPECT_EQ(be32toh(av->grh_gid_fl) & 0xfffff, 0xabcdeu);
	EXPECT_EQ(memcmp(av->rgid, addr.dgid, 16), 0);
	const auto *ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg *>(pg.sq);
	EXPECT_EQ(be32toh(ctrl->qpn_ds) >> 8, mlx5_qpn_dci_qpn(t.dci));

	/* Ring: the record, then the register (trapped first writes), with the right values. */
	std::string order = hwfake::doorbell_order(pg, [&] { mlx5_qpn_dci_ring(t.dci); });
	EXPECT_EQ(order, "DU");
	const uint32_t nbb = mlx5_qpn_wqe_bbs(mlx5_qpn_wqe_dc_send_ds(5));
	EXPECT_EQ(pg.dbrec[MLX5_QPN_SND_DBR], htobe32(nbb));
	EXPECT_EQ(memcmp(pg.reg, pg.sq, 8), 0);

	/* A requester CQE in the ring handed out by init_obj completes the wr_id. */
	uint8_t *ring = hwfake::last_cq_ring();
	ASSERT_NE(ring, nullptr);
	mlx5_qpn_cqe_fields f{};
	f.opcode = MLX5_QPN_PRM_CQE_REQ;
	f.qpn = mlx5_qpn_dci_qpn(t.dci);
	f.wqe_opcode = MLX5_QPN_OPCODE_SEND;
	ring[63] = mlx5_qpn_cqe_fill(ring, &f);
	mlx5_qpn_wc wc[2];
	ASSERT_EQ(mlx5_qpn_cq_poll(t.cq, wc, 2), 1);
	EXPECT_EQ(wc[0].wr_id, 99u);
	EXPECT_EQ(wc[0].qpn, mlx5_qpn_dci_qpn(t.dci));
	EXPECT_EQ(hwfake::last_cq_dbrec()[MLX5_QPN_CQ_SET_CI], htobe32(1));
	mlx5_qpn_ah_destroy(ah);
	EXPECT_EQ(fake().ahs_live, 0);
}

TEST(HwDc, FailuresLeakNothingAndNameTheCall)
{
	HwDc t;
	ASSERT_NE(t.be, nullptr);
	ASSERT_EQ(mlx5_qpn_cq_create_be(t.be, 3, &t.cq), 0);
	fake().dv_create_qp_errno = ENOSPC;
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_dci_create_cq(t.cq, 2, &t.dci), -ENOSPC);
	EXPECT_EQ(mlx5_qpn_dct_create_cq(t.cq, KEY, &t.dct), -ENOSPC);
	EXPECT_NE(cap.text().find("mlx5dv_create_qp failed"), std::string::npos);
	EXPECT_EQ(fake().srqs_live, 0);
	EXPECT_EQ(fake().qps_live, 0);
	EXPECT_EQ(t.dci, nullptr);
	EXPECT_EQ(t.dct, nullptr);
	/* The device progresses by itself on hardware: the progress call is a no-op. */
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(t.be), 0);
}

TEST(HwDc, AvBuilderMatchesTheInstalledLayout)
{
	/* The software AV (emulated device) in rdma-core's struct, field by field. */
	mlx5_qpn_dc_addr a = ib_addr();
	alignas(8) uint8_t av[MLX5_QPN_DC_AV_SIZE];
	mlx5_qpn_av_build(av, a.dlid, a.sl, a.is_global, a.sgid_index, a.dgid, a.hop_limit,
			  a.traffic_class, a.flow_label);
	const auto *w = reinterpret_cast<const mlx5_wqe_av *>(av);
	EXPECT_EQ(w->rlid, htobe16(a.dlid));
	EXPECT_EQ(w->stat_rate_sl, a.sl);
	EXPECT_EQ(w->tclass, a.traffic_class);
	EXPECT_EQ(w->hop_limit, a.hop_limit);
	EXPECT_EQ(w->grh_gid_fl,
		  htobe32(a.flow_label | (1u << 30) | (uint32_t(a.sgid_index) << 20)));
	EXPECT_EQ(memcmp(w->rgid, a.dgid, 16), 0);
	EXPECT_EQ(w->dqp_dct, 0u);
}

/* A forked child that destroys DC objects destroys nothing of its parent's. */
TEST(HwDc, ForkedChildDestroysNothing)
{
	HwDc t;
	ASSERT_TRUE(t.make());
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		const int before = fake().qps_destroyed;
		mlx5_qpn_dct_destroy(t.dct);
		mlx5_qpn_dci_destroy(t.dci);
		mlx5_qpn_cq_destroy(t.cq);
		const bool ok = fake().qps_destroyed == before && fake().srqs_live == 1 &&
				fake().cqs_live >= 1;
		_exit(ok ? 0 : 1);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

namespace {

/* printf into a string (g++ 12 -O3 warns falsely on chained std::string +). */
std::string
fmt(const char *f, int v)
{
	char b[32];
	snprintf(b, sizeof(b), f, v);
	return b;
}

/* A HwDc with an AH, and a helper that sends one message and polls both completions. */
struct HwRx : HwDc {
	mlx5_qpn_ah *ah = nullptr;
	uint32_t dctn = 0;
	uint64_t next_wr = 1;

	bool ready()
	{
		mlx5_qpn_dc_addr a = ib_addr();
		if (!make() || mlx5_qpn_ah_create_be(be, &a, &ah) != 0)
			return false;
		dctn = mlx5_qpn_dct_qpn(dct);
		return true;
	}
	~HwRx() { mlx5_qpn_ah_destroy(ah); }

	/* Send msg and return the responder completion (opcode 0xff if none came); the sender's
	 * completion has syndrome req_synd (0: success). */
	mlx5_qpn_wc send(const std::string &msg, uint64_t key = KEY, uint8_t req_synd = 0)
	{
		mlx5_qpn_wc rx{};
		rx.opcode = 0xff;
		uint64_t wr = next_wr++;
		EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah, dctn, key, msg.data(),
						 uint32_t(msg.size()), wr),
			  0);
		mlx5_qpn_dci_ring(dci);
		EXPECT_EQ(hwfake::dc_execute(), 1);
		mlx5_qpn_wc wc[4];
		int n = mlx5_qpn_cq_poll(cq, wc, 4);
		for (int i = 0; i < n; i++) {
			if (wc[i].qpn == dctn) {
				rx = wc[i];
			} else {
				EXPECT_EQ(wc[i].wr_id, wr);
				EXPECT_EQ(wc[i].syndrome, req_synd);
			}
		}
		return rx;
	}

	std::string read(uint16_t msg)
	{
		char b[MLX5_QPN_DC_MAX_INLINE];
		int n = mlx5_qpn_dct_read(dct, msg, b, sizeof(b));
		return n < 0 ? fmt("<%d>", n) : std::string(b, size_t(n));
	}
};

} // namespace

TEST(HwDcRx, SendLandsAsReceiveCompletionAndReadReturnsTheBytes)
{
	HwRx t;
	ASSERT_TRUE(t.ready());
	mlx5_qpn_wc rx = t.send("hello, DCT");
	ASSERT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(rx.syndrome, 0);
	EXPECT_EQ(rx.byte_len, 10u);
	EXPECT_EQ(rx.src_qpn, mlx5_qpn_dci_qpn(t.dci));
	EXPECT_EQ(rx.wqe_counter, 0u); /* the first message */
	EXPECT_EQ(t.read(rx.wqe_counter), "hello, DCT");

	/* Truncation: the length of the message, len bytes copied, nothing beyond. */
	char small[5];
	memset(small, '#', sizeof(small));
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, rx.wqe_counter, small, 3), 10);
	EXPECT_EQ(std::string(small, 5), "hel##");
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, rx.wqe_counter, nullptr, 0), 10);
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, rx.wqe_counter, nullptr, 4), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dct_read(nullptr, rx.wqe_counter, small, 4), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dct_read(t.dct, 1, small, 4), -ESTALE); /* not received yet */

	/* A full-size SEND fits the receive buffer. */
	std::string big(MLX5_QPN_DC_MAX_INLINE, 'z');
	big[0] = 'A';
	rx = t.send(big);
	ASSERT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(t.read(rx.wqe_counter), big);
	EXPECT_EQ(t.read(0), "hello, DCT"); /* still held */
}

/* Past the SRQ's size: WQEs come back to the device once 64 later messages arrived, the list
 * wraps, and an old message is -ESTALE, never another message's bytes. */
TEST(HwDcRx, HeldMessagesAreRepostedAcrossTheRing)
{
	HwRx t;
	ASSERT_TRUE(t.ready());
	const int posted0 = hwfake::srq_posted(t.dctn);
	constexpr int N = 700; /* more than twice the 256 WQEs */
	for (int m = 0; m < N; m++) {
		std::string msg = fmt("m%d", m);
		mlx5_qpn_wc rx = t.send(msg);
		ASSERT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_SEND) << m;
		ASSERT_EQ(rx.wqe_counter, uint16_t(m));
		ASSERT_EQ(t.read(rx.wqe_counter), msg);
		/* The first 64 are all held; from then on each message gives one WQE back. */
		ASSERT_EQ(hwfake::srq_posted(t.dctn),
			  posted0 + (m + 1 > MLX5_QPN_HW_DC_RX_HOLD ?
					     m + 1 - MLX5_QPN_HW_DC_RX_HOLD :
					     0));
		if (m >= MLX5_QPN_HW_DC_RX_HOLD) {
			EXPECT_EQ(t.read(uint16_t(m - MLX5_QPN_HW_DC_RX_HOLD)),
				  fmt("<%d>", -ESTALE));
			EXPECT_EQ(t.read(uint16_t(m - MLX5_QPN_HW_DC_RX_HOLD + 1)),
				  fmt("m%d", m - MLX5_QPN_HW_DC_RX_HOLD + 1));
		}
	}
	EXPECT_EQ(fake().rnr, 0); /* the device never ran out of receives */
}

TEST(HwDcRx, PayloadScatteredIntoTheCqeIsRead)
{
	HwRx t;
	ASSERT_TRUE(t.ready());
	fake().scatter32 = true; /* as a ConnectX with scatter-to-CQE for <= 32 bytes */
	mlx5_qpn_wc rx = t.send("in the CQE");
	ASSERT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(t.read(rx.wqe_counter), "in the CQE");
	std::string longer(40, 'q'); /* above 32: through the buffer */
	rx = t.send(longer);
	EXPECT_EQ(t.read(rx.wqe_counter), longer);
}

TEST(HwDcRx, ErrorsRepostAtOnceAndReadNothing)
{
	HwRx t;
	ASSERT_TRUE(t.ready());
	const int posted0 = hwfake::srq_posted(t.dctn);
	/* A responder error (here a flush) consumed a WQE: it goes straight back. The responder
	 * NAKs the sender, whose DCI goes to ERR: it is recovered before it sends again. */
	fake().resp_err = MLX5_QPN_SYND_WR_FLUSH_ERR;
	mlx5_qpn_wc rx = t.send("lost", KEY, MLX5_QPN_SYND_REMOTE_OP);
	EXPECT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_ERR);
	EXPECT_EQ(rx.syndrome, MLX5_QPN_SYND_WR_FLUSH_ERR);
	EXPECT_EQ(hwfake::srq_posted(t.dctn), posted0 + 1);
	EXPECT_EQ(mlx5_qpn_dci_state(t.dci), MLX5_QPN_DCI_ERROR);
	ASSERT_EQ(mlx5_qpn_dci_recover(t.dci), 0);
	/* Messages are counted from the next good one. */
	rx = t.send("after");
	ASSERT_EQ(rx.opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(rx.wqe_counter, 0u);
	EXPECT_EQ(t.read(0), "after");

	/* Wrong DC key: the DCT drops it, the requester times out (retry exceeded), nothing on
	 * the DCT. */
	EXPECT_EQ(mlx5_qpn_dci_post_send(t.dci, t.ah, t.dctn, KEY + 1, "bad", 3, 77), 0);
	mlx5_qpn_dci_ring(t.dci);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	EXPECT_EQ(fake().key_violations, 1);
	hwfake::advance_us(600 * 1000); /* past 4.096 us * 2^14 * 8 */
	EXPECT_EQ(hwfake::dc_execute(), 1);
	mlx5_qpn_wc wc[4];
	ASSERT_EQ(mlx5_qpn_cq_poll(t.cq, wc, 4), 1);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(wc[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
	EXPECT_EQ(wc[0].wr_id, 77u);
	EXPECT_EQ(hwfake::srq_posted(t.dctn), posted0 + 1);
}

/* port=N: the handle serves that port; its DC objects, port queries and AHs use it,
 * dev_info says it, and a port the device lacks is refused at open in one line. */
TEST(HwDc, PortDevargIsTheHandlesPort)
{
	{
		hwfake::Scope scope;
		LogCapture cap;
		mlx5_qpn_dev *dev = nullptr;
		EXPECT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=no,port=2", &dev), -EINVAL);
		std::string text = cap.text();
		EXPECT_NE(text.find("port=2 but the device has 1 port"), std::string::npos) << text;
		EXPECT_EQ(hwfake::live_objects(), 0);
	}
	hwfake::Scope scope;
	fake().ports = 2;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=no,port=2,quarantine_us=0", &dev),
		  0);
	mlx5_qpn_dev_info info{};
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.port, 2);
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_ah *ah = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev, 4, &cq), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev, cq, 2, &dci), 0);
	mlx5_qpn_dc_addr a = ib_addr(); /* port 0: the handle's */
	ASSERT_EQ(mlx5_qpn_ah_create(dev, &a, &ah), 0);
	EXPECT_EQ(fake().ah_attrs.back().port_num, 2);
	ASSERT_FALSE(fake().modifies.empty());
	EXPECT_EQ(fake().modifies[0].port, 2); /* INIT */
	for (int p : fake().ports_queried)
		EXPECT_EQ(p, 2);
	mlx5_qpn_ah_destroy(ah);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_cq_destroy(cq);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(hwfake::live_objects(), 0);
}
