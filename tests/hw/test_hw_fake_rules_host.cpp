/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The strict fake rdma-core's rules of round three (hw_fake_glue.h), one test per rule, each
 * with the rule's switch flipped (or its trigger taken away) to show the fake accepting what it
 * refused: the settings of hosts that differ (a port that requires a GRH, no DC transport, a
 * RoCE bond without lag_dct, the kernel's older DCI rules), a CQ overrun, the responder's NAK,
 * libmlx5's WQE size of a DCI, and the smaller rules (signalled completions, the RTR's port,
 * the static rate and the PSN's width, the single-QPN API, the RoCE neighbour).
 */
#include <gtest/gtest.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/mlx5_qpn_prm.h"
#include "common/mlx5_qpn_prm_wqe.h"
#include "hw_fake_caps.h"
#include "hw_fake_glue.h"
#include "hw_fake_rig.h"

using hwfake::fake;
using hwrig::DCT_RTR_MASK;
using hwrig::INIT_MASK;
using hwrig::KEY;
using hwrig::Rig;

namespace {

constexpr int RTR_AV_MASK = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV;

/* A cap field of the fake firmware's QUERY_HCA_CAP(general). */
uint32_t
cap_of(Rig &r, mlx5_qpn_prm::field f)
{
	uint8_t out[MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN] = {};
	uint8_t in[16] = {};
	mlx5_qpn_prm::set(in, mlx5_qpn_prm::in_opcode, MLX5_QPN_CMD_OP_QUERY_HCA_CAP);
	mlx5_qpn_prm::set(in, mlx5_qpn_prm::in_op_mod, MLX5_QPN_HCA_CAP_TYPE_GENERAL << 1);
	EXPECT_EQ(r.g->devx_general_cmd(r.ctx, in, sizeof(in), out, sizeof(out)), 0);
	return uint32_t(mlx5_qpn_prm::get(out + MLX5_QPN_PRM_HCA_CAP_OFFSET, f));
}

} // namespace

/* ---- H. Hosts that differ ---- */

TEST(HwFakeRulesHost, GrhRequiredPortRefusesEveryAvWithoutAGrh)
{
	Rig r;
	fake().grh_required = true;
	ibv_port_attr pa{};
	ASSERT_EQ(r.g->query_port(r.ctx, 1, reinterpret_cast<_compat_ibv_port_attr *>(&pa)), 0);
	EXPECT_EQ(pa.flags & IBV_QPF_GRH_REQUIRED, IBV_QPF_GRH_REQUIRED);
	ibv_ah_attr a{};
	a.port_num = 1;
	a.dlid = 0x12;
	errno = 0;
	EXPECT_EQ(r.g->create_ah(r.pd, &a), nullptr); /* mlx5_create_ah */
	EXPECT_EQ(errno, EINVAL);
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	EXPECT_EQ(r.modify(q, Rig::rtr(false, 0, 1), RTR_AV_MASK), EINVAL);
	ibv_qp *t = r.dct(r.make_srq());
	EXPECT_EQ(r.dct_up(t, false), EINVAL);
	/* With a GRH every one passes. */
	EXPECT_EQ(r.modify(q, Rig::rtr(true, 0, 64), RTR_AV_MASK), 0);
	EXPECT_EQ(r.modify(t, Rig::rtr(true, 0, 64), DCT_RTR_MASK), 0);
	a.is_global = 1;
	ibv_ah *ah = r.g->create_ah(r.pd, &a);
	ASSERT_NE(ah, nullptr);
	EXPECT_EQ(r.g->destroy_ah(ah), 0);
	/* The switch off: an InfiniBand AV without a GRH is accepted again. */
	fake().grh_required = false;
	ASSERT_EQ(r.g->query_port(r.ctx, 1, reinterpret_cast<_compat_ibv_port_attr *>(&pa)), 0);
	EXPECT_EQ(pa.flags & IBV_QPF_GRH_REQUIRED, 0u);
	a.is_global = 0;
	ah = r.g->create_ah(r.pd, &a);
	ASSERT_NE(ah, nullptr);
	EXPECT_EQ(r.g->destroy_ah(ah), 0);
}

TEST(HwFakeRulesHost, WithoutTheDctCapNoDciOrDctIsMade)
{
	Rig r;
	fake().dct_cap = false;
	EXPECT_EQ(cap_of(r, hwfake::cap_dct), 0u);
	errno = 0;
	EXPECT_EQ(r.dci(), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	errno = 0;
	EXPECT_EQ(r.dct(r.make_srq()), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(fake().qps_live, 0);
	fake().dct_cap = true;
	EXPECT_EQ(cap_of(r, hwfake::cap_dct), 1u);
	EXPECT_NE(r.dci(), nullptr);
}

TEST(HwFakeRulesHost, ActiveLagWithoutLagDctRefusesOnlyTheDct)
{
	Rig r(true);
	fake().lag_active = true;
	uint8_t in[16] = {}, out[16] = {};
	mlx5_qpn_prm::set(in, mlx5_qpn_prm::in_opcode, hwfake::cmd_query_lag);
	ASSERT_EQ(r.g->devx_general_cmd(r.ctx, in, sizeof(in), out, sizeof(out)), 0);
	EXPECT_EQ(mlx5_qpn_prm::get(out, hwfake::query_lag_state), 1u);
	EXPECT_EQ(cap_of(r, hwfake::cap_lag_dct), 0u);
	ibv_srq *s = r.make_srq();
	errno = 0;
	EXPECT_EQ(r.dct(s), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_NE(r.dci(), nullptr); /* DCIs are not the kernel's concern under LAG */
	fake().lag_dct = 1;
	EXPECT_EQ(cap_of(r, hwfake::cap_lag_dct), 1u);
	EXPECT_NE(r.dct(s), nullptr);
	fake().lag_dct = 0;
	fake().lag_active = false;
	EXPECT_NE(r.dct(s), nullptr);
}

TEST(HwFakeRulesHost, OlderKernelDciRulesRefuseResetAndTheRtrAv)
{
	Rig r;
	fake().old_dci_rules = true;
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	EXPECT_EQ(r.modify(q, Rig::rtr(false, 0, 1), RTR_AV_MASK), EINVAL);
	EXPECT_EQ(q->state, IBV_QPS_INIT);
	ASSERT_EQ(r.modify(q, Rig::rtr(false, 0, 1), RTR_AV_MASK & ~IBV_QP_AV), 0);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), hwrig::RTS_MASK), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), EINVAL);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_ERR), IBV_QP_STATE), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), EINVAL);
	EXPECT_EQ(q->state, IBV_QPS_ERR);
	/* Kernel 5.2's rules: both accepted. */
	fake().old_dci_rules = false;
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), 0);
	EXPECT_EQ(r.dci_up(q), 0);
}

/* ---- I. CQ overrun ---- */

TEST(HwFakeRulesHost, CqOverrunRaisesACqErrorAndCompletesNothingMore)
{
	Rig r;
	ibv_qp *q1 = r.dci(), *q2 = r.dci();
	ASSERT_EQ(r.dci_up(q1), 0);
	ASSERT_EQ(r.dci_up(q2), 0);
	/* q1: a SEND to no DCT times out (0x15), the 15 behind it flush: 16 CQEs, the CQ full. */
	uint32_t pi = 0;
	for (int i = 0; i < 16; i++)
		pi += r.post(q1, pi, 0xabcde, KEY);
	Rig::dbrec(q1, pi);
	Rig::uar(q1, pi - 2);
	hwfake::dc_execute();
	hwfake::advance_us(600000);
	EXPECT_EQ(hwfake::dc_execute(), 16);
	EXPECT_EQ(fake().cq_errors, 0);
	/* 8 consumed and published (the device reads the consumer index): q2's 8 fit. */
	for (int i = 0; i < 8; i++)
		ASSERT_NE(r.poll().opcode, 0xff);
	uint32_t pi2 = 0;
	for (int i = 0; i < 8; i++)
		pi2 += r.post(q2, pi2, 0xabcde, KEY);
	Rig::dbrec(q2, pi2);
	Rig::uar(q2, pi2 - 2);
	hwfake::dc_execute();
	hwfake::advance_us(600000);
	EXPECT_EQ(hwfake::dc_execute(), 8);
	EXPECT_EQ(fake().cq_errors, 0);
	ibv_async_event ev{};
	errno = 0;
	EXPECT_EQ(r.g->get_async_event(r.ctx, &ev), -1);
	EXPECT_EQ(errno, EAGAIN);
	/* One more CQE than the 16 unconsumed: the overrun. */
	pi2 = r.send(q2, pi2, 0xabcde);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(fake().cq_errors, 1);
	ASSERT_EQ(r.g->get_async_event(r.ctx, &ev), 0);
	EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
	EXPECT_EQ(ev.element.cq, r.cq);
	r.g->ack_async_event(&ev);
	/* The 16 written before it are there; then nothing, even once they are consumed. */
	for (int i = 0; i < 16; i++)
		ASSERT_NE(r.poll().opcode, 0xff) << i;
	EXPECT_EQ(r.poll().opcode, 0xff);
	r.send(q2, pi2, 0xabcde);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(r.poll().opcode, 0xff);
	EXPECT_EQ(fake().cq_errors, 1);
}

/* ---- J. The responder's NAK ---- */

TEST(HwFakeRulesHost, AFailedReceiveNaksTheSenderAndItsDciGoesToErr)
{
	struct Case {
		const char *what;
		uint8_t nak;
	};
	const Case cases[] = {
		{"length", MLX5_QPN_SYND_REMOTE_INV_REQ_ERR},
		{"lkey", MLX5_QPN_SYND_REMOTE_OP_ERR},
		{"no LOCAL_WRITE", MLX5_QPN_SYND_REMOTE_OP_ERR},
		{"another PD", MLX5_QPN_SYND_REMOTE_OP_ERR},
		{"injected", MLX5_QPN_SYND_REMOTE_OP_ERR},
		{"none (a good receive)", 0},
	};
	for (const Case &c : cases) {
		Rig r;
		ibv_srq *s = r.make_srq();
		ibv_qp *t = r.dct(s), *q = r.dci();
		ASSERT_EQ(r.dct_up(t), 0);
		ASSERT_EQ(r.dci_up(q), 0);
		void *buf = aligned_alloc(4096, 4096);
		r.bufs.push_back(buf);
		const bool other_pd = strcmp(c.what, "another PD") == 0;
		ibv_pd *pd = other_pd ? r.g->alloc_pd(r.ctx) : r.pd;
		const int access = strcmp(c.what, "no LOCAL_WRITE") == 0 ? 0 :
									   IBV_ACCESS_LOCAL_WRITE;
		ibv_mr *mr = r.g->reg_mr(pd, buf, 4096, access);
		ASSERT_NE(mr, nullptr);
		const uint32_t lkey = strcmp(c.what, "lkey") == 0 ? mr->lkey + 100 : mr->lkey;
		const uint32_t cap = strcmp(c.what, "length") == 0 ? 2 : 256; /* "ping" is 4 */
		mlx5dv_srq dv{};
		mlx5dv_obj o{};
		o.srq.in = s;
		o.srq.out = &dv;
		ASSERT_EQ(r.g->dv_init_obj(&o, MLX5DV_OBJ_SRQ), 0);
		mlx5_qpn_srq_wqe_build(static_cast<uint8_t *>(dv.buf), 1, cap, lkey,
				       uint64_t(uintptr_t(buf)));
		dv.dbrec[0] = htobe32(1);
		if (strcmp(c.what, "injected") == 0)
			fake().resp_err = MLX5_QPN_SYND_LOCAL_QP_OP_ERR;
		uint32_t pi = r.send(q, 0, t->qp_num);
		EXPECT_EQ(hwfake::dc_execute(), 1) << c.what;
		const mlx5_qpn_cqe_fields resp = r.poll(), req = r.poll();
		if (c.nak == 0) {
			EXPECT_EQ(resp.opcode, MLX5_QPN_PRM_CQE_RESP_SEND) << c.what;
			EXPECT_EQ(req.opcode, MLX5_QPN_PRM_CQE_REQ) << c.what;
			EXPECT_EQ(q->state, IBV_QPS_RTS) << c.what;
			continue;
		}
		EXPECT_EQ(resp.opcode, MLX5_QPN_PRM_CQE_RESP_ERR) << c.what;
		EXPECT_EQ(req.opcode, MLX5_QPN_PRM_CQE_REQ_ERR) << c.what;
		EXPECT_EQ(req.syndrome, c.nak) << c.what;
		EXPECT_EQ(q->state, IBV_QPS_ERR) << c.what;
		EXPECT_EQ(fake().naks, 1) << c.what;
		/* The next SEND on that DCI is flushed, not sent. */
		r.send(q, pi, t->qp_num);
		EXPECT_EQ(hwfake::dc_execute(), 1);
		EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_WR_FLUSH_ERR)) << c.what;
		EXPECT_EQ(r.g->dereg_mr(mr), 0);
		if (other_pd) {
			EXPECT_EQ(r.g->dealloc_pd(pd), 0);
		}
	}
}

/* ---- K. libmlx5's WQE size ---- */

TEST(HwFakeRulesHost, DciRingIsLibmlx5sWqeSizeNotTheSendsSize)
{
	Rig r;
	ibv_qp_init_attr_ex a{};
	mlx5dv_qp_init_attr dv{};
	a.qp_type = IBV_QPT_DRIVER;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = r.pd;
	a.send_cq = a.recv_cq = r.cq;
	a.cap.max_send_wr = 64;
	a.cap.max_send_sge = 1;
	a.cap.max_inline_data = 188;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	const uint64_t before = fake().pinned;
	ibv_qp *q = r.g->dv_create_qp(r.ctx, &a, &dv);
	ASSERT_NE(q, nullptr);
	/* 240 + (4 + 188 -> 192) = 432 -> 448 bytes a WQE; 64 of them, to a power of two:
	 * 32 KiB (a SEND's own size, 64 + 192 = 256 bytes, would make 16 KiB). */
	EXPECT_EQ(fake().pinned - before, 32768u);
	mlx5dv_qp dq{};
	mlx5dv_obj o{};
	o.qp.in = q;
	o.qp.out = &dq;
	ASSERT_EQ(r.g->dv_init_obj(&o, MLX5DV_OBJ_QP), 0);
	EXPECT_EQ(dq.sq.wqe_cnt, 512u);
	/* 256 inline bytes: 240 + 272 = 512 bytes, 8 BBs a WQE. */
	a.cap.max_inline_data = 256;
	a.cap.max_send_wr = 4;
	ibv_qp *q2 = r.g->dv_create_qp(r.ctx, &a, &dv);
	ASSERT_NE(q2, nullptr);
	o.qp.in = q2;
	ASSERT_EQ(r.g->dv_init_obj(&o, MLX5DV_OBJ_QP), 0);
	EXPECT_EQ(dq.sq.wqe_cnt, 32u);
}

/* ---- L. Smaller rules ---- */

TEST(HwFakeRulesHost, OnlySignalledWqesCompleteWithSuccess)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.post_recvs(s, 4);
	hwfake::DciPages p;
	ASSERT_TRUE(hwfake::dci_pages(q->qp_num, &p));
	uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * 64];
	int ds = mlx5_qpn_wqe_build_dc_send(wqe, 0, q->qp_num, t->qp_num, KEY, "ping", 4, 0);
	ASSERT_GT(ds, 0);
	memcpy(p.sq, wqe, size_t(ds) * 16);
	const uint32_t nbb = mlx5_qpn_wqe_bbs(uint32_t(ds));
	Rig::dbrec(q, nbb);
	Rig::uar(q, 0);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND); /* delivered */
	EXPECT_EQ(r.poll().opcode, 0xff);                       /* no requester CQE */
	/* Signalled: it completes. */
	r.send(q, nbb, t->qp_num);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_REQ);
}

TEST(HwFakeRulesHost, RtrPortRateAndPsnAreTheKernels)
{
	Rig r;
	fake().ports = 2;
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	ibv_qp_attr a = Rig::rtr(false, 0, 1);
	a.ah_attr.port_num = 2; /* INIT said port 1 */
	EXPECT_EQ(r.modify(q, a, RTR_AV_MASK), EINVAL);
	a.ah_attr.port_num = 1;
	a.ah_attr.static_rate = 1; /* between IBV_RATE_MAX and IBV_RATE_2_5_GBPS */
	EXPECT_EQ(r.modify(q, a, RTR_AV_MASK), EINVAL);
	a.ah_attr.static_rate = IBV_RATE_2_5_GBPS;
	ASSERT_EQ(r.modify(q, a, RTR_AV_MASK), 0);
	ibv_qp_attr s = Rig::state(IBV_QPS_RTS);
	s.sq_psn = 0x1000000; /* 25 bits */
	EXPECT_EQ(r.modify(q, s, hwrig::RTS_MASK), EINVAL);
	s.sq_psn = 0xffffff;
	EXPECT_EQ(r.modify(q, s, hwrig::RTS_MASK), 0);
}

TEST(HwFakeRulesHost, SingleQpnApiNeedsDevxAndTheObjectTypeAndFreesOnlyItsOwn)
{
	Rig r; /* a context opened without DEVX */
	uint32_t qpn = 0;
	EXPECT_EQ(r.g->reserved_qpn_alloc(r.ctx, &qpn), EOPNOTSUPP);
	mlx5dv_context_attr da{};
	ibv_context *devx = r.g->dv_open_device(r.g->get_device_list(nullptr)[0], &da);
	ASSERT_NE(devx, nullptr);
	fake().bit44 = false;
	EXPECT_EQ(r.g->reserved_qpn_alloc(devx, &qpn), EOPNOTSUPP);
	fake().bit44 = true;
	ASSERT_EQ(r.g->reserved_qpn_alloc(devx, &qpn), 0);
	EXPECT_EQ(r.g->reserved_qpn_dealloc(devx, qpn + 1), EINVAL); /* not handed out */
	EXPECT_EQ(r.g->reserved_qpn_dealloc(devx, qpn), 0);
	EXPECT_EQ(r.g->reserved_qpn_dealloc(devx, qpn), EINVAL); /* twice */
	EXPECT_EQ(r.g->close_device(devx), 0);
}

TEST(HwFakeRulesHost, RoceNeighbourLookupFailureFailsTheAh)
{
	Rig r(true);
	ibv_ah_attr a{};
	a.port_num = 1;
	a.is_global = 1;
	a.grh.sgid_index = 3;
	a.grh.hop_limit = 64;
	memcpy(a.grh.dgid.raw, fake().gids[3].raw, 16);
	fake().neigh_fail = true;
	errno = 0;
	EXPECT_EQ(r.g->create_ah(r.pd, &a), nullptr);
	EXPECT_EQ(errno, EHOSTUNREACH);
	fake().neigh_fail = false;
	ibv_ah *ah = r.g->create_ah(r.pd, &a);
	ASSERT_NE(ah, nullptr);
	EXPECT_EQ(r.g->destroy_ah(ah), 0);
}
