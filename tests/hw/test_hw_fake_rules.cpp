/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The strict fake rdma-core (hw_fake_glue.h) refusing what a ConnectX and its kernel refuse,
 * one test per rule, driving the fake's glue table directly: the QP and DCT state machines
 * and their masks, RoCE ports (GID table, GRH, route), execution (doorbell record and UAR,
 * RTS only, drops and the transport timeout, ERR and flushes until RESET), objects in use,
 * locked memory, the firmware's DC WQE size, and a glue without reserved-QPN symbols.
 */
#include <gtest/gtest.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <atomic>
#include <vector>

#include "common/mlx5_qpn_prm.h"
#include "common/mlx5_qpn_prm_wqe.h"
#include "hw_fake_caps.h"
#include "hw_fake_glue.h"

#include "hw_fake_rig.h"

using hwfake::fake;
using hwrig::DCT_INIT_MASK;
using hwrig::DCT_RTR_MASK;
using hwrig::INIT_MASK;
using hwrig::KEY;
using hwrig::Rig;
using hwrig::roce_av;
using hwrig::RTS_MASK;

/* ---- A. State machines ---- */

TEST(HwFakeRules, DciRefusesATransitionOutOfOrderAndChangesNothing)
{
	Rig r;
	ibv_qp *q = r.dci();
	ASSERT_NE(q, nullptr);
	EXPECT_EQ(r.modify(q, Rig::rtr(false, 0, 1), IBV_QP_STATE | IBV_QP_PATH_MTU), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), RTS_MASK), EINVAL);
	EXPECT_EQ(q->state, IBV_QPS_RESET);
	ASSERT_EQ(fake().modifies.size(), 2u);
	EXPECT_EQ(fake().modifies[0].rc, EINVAL); /* refused calls are recorded */
	EXPECT_EQ(r.dci_up(q), 0);
	EXPECT_EQ(fake().modifies.back().rc, 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), EINVAL); /* RTS -> INIT */
	EXPECT_EQ(q->state, IBV_QPS_RTS);
}

TEST(HwFakeRules, DciRefusesAMaskWithoutARequiredAttribute)
{
	Rig r;
	ibv_qp *q = r.dci();
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), IBV_QP_STATE | IBV_QP_PORT), EINVAL);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	EXPECT_EQ(r.modify(q, Rig::rtr(false, 0, 1), IBV_QP_STATE | IBV_QP_AV), EINVAL);
	ASSERT_EQ(r.modify(q, Rig::rtr(false, 0, 1), IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), RTS_MASK & ~IBV_QP_SQ_PSN), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), RTS_MASK & ~IBV_QP_MAX_QP_RD_ATOMIC),
		  EINVAL);
	EXPECT_EQ(q->state, IBV_QPS_RTR);
}

TEST(HwFakeRules, DciRefusesAnAttributeTheTransitionDoesNotTake)
{
	Rig r;
	ibv_qp *q = r.dci();
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK | IBV_QP_ACCESS_FLAGS), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK | IBV_QP_QKEY), EINVAL);
	ASSERT_EQ(r.dci_up(q), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), IBV_QP_STATE | IBV_QP_TIMEOUT), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);
}

TEST(HwFakeRules, DciModifyWithoutTheStateBitIsRefused)
{
	Rig r;
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.dci_up(q), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), IBV_QP_MIN_RNR_TIMER), EINVAL);
}

TEST(HwFakeRules, DciErrAndResetTakeTheStateAlone)
{
	Rig r;
	ibv_qp *q = r.dci();
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_ERR), IBV_QP_STATE), EINVAL); /* from RESET */
	ASSERT_EQ(r.dci_up(q), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_ERR), IBV_QP_STATE | IBV_QP_PORT), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_ERR), IBV_QP_STATE), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), RTS_MASK), EINVAL); /* ERR -> RTS */
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE | IBV_QP_PORT), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), 0);
	EXPECT_EQ(r.dci_up(q), 0); /* and up again */
}

TEST(HwFakeRules, DctTakesExactlyTheKernelsMasks)
{
	Rig r;
	ibv_qp *t = r.dct(r.make_srq());
	ASSERT_NE(t, nullptr);
	EXPECT_EQ(r.modify(t, Rig::state(IBV_QPS_INIT), INIT_MASK), EINVAL); /* no ACCESS */
	ASSERT_EQ(r.modify(t, Rig::state(IBV_QPS_INIT), DCT_INIT_MASK), 0);
	EXPECT_EQ(r.modify(t, Rig::rtr(false, 0, 1), DCT_RTR_MASK & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
	EXPECT_EQ(r.modify(t, Rig::rtr(false, 0, 1), DCT_RTR_MASK | IBV_QP_PKEY_INDEX), EINVAL);
	EXPECT_EQ(t->qp_num, 0u); /* no DCT made by a refused RTR */
	ASSERT_EQ(r.modify(t, Rig::rtr(false, 0, 1), DCT_RTR_MASK), 0);
	EXPECT_NE(t->qp_num, 0u);
	EXPECT_EQ(r.modify(t, Rig::state(IBV_QPS_RTS), RTS_MASK), EINVAL);
	EXPECT_EQ(r.modify(t, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), EINVAL);
}

TEST(HwFakeRules, UdQpFollowsTheCoreStateTable)
{
	Rig r;
	ibv_qp_init_attr a{};
	a.qp_type = IBV_QPT_UD;
	a.send_cq = a.recv_cq = r.cq;
	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	ibv_qp *q = r.g->create_qp(r.pd, &a);
	ASSERT_NE(q, nullptr);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), EINVAL); /* UD needs QKEY */
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK | IBV_QP_QKEY), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTR), IBV_QP_STATE | IBV_QP_PATH_MTU), EINVAL);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RTR), IBV_QP_STATE), 0);
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), IBV_QP_STATE), EINVAL); /* no SQ_PSN */
	EXPECT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	EXPECT_EQ(r.g->destroy_qp(q), 0);
}

TEST(HwFakeRules, PortAndPathMtuAreChecked)
{
	Rig r;
	ibv_qp *q = r.dci();
	ibv_qp_attr a = Rig::state(IBV_QPS_INIT);
	a.port_num = 0;
	EXPECT_EQ(r.modify(q, a, INIT_MASK), EINVAL);
	a.port_num = 2; /* a one-port device */
	EXPECT_EQ(r.modify(q, a, INIT_MASK), EINVAL);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	ibv_qp_attr m = Rig::rtr(false, 0, 1);
	m.path_mtu = ibv_mtu(6);
	EXPECT_EQ(r.modify(q, m, IBV_QP_STATE | IBV_QP_PATH_MTU), EINVAL);
	fake().active_mtu = IBV_MTU_1024;
	m.path_mtu = IBV_MTU_4096; /* above the port's active MTU */
	EXPECT_EQ(r.modify(q, m, IBV_QP_STATE | IBV_QP_PATH_MTU), EINVAL);
	m.path_mtu = IBV_MTU_1024;
	EXPECT_EQ(r.modify(q, m, IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
}

/* ---- B. RoCE ports and the GID table ---- */

TEST(HwFakeRules, RoceGidTableIsMlx5sAndEmptyOrFarIndexesAreRefused)
{
	Rig r(true);
	ibv_port_attr pa{};
	ASSERT_EQ(r.g->query_port(r.ctx, 1, reinterpret_cast<_compat_ibv_port_attr *>(&pa)), 0);
	EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	ASSERT_GE(pa.gid_tbl_len, 4);
	ibv_gid_entry e{};
	ASSERT_EQ(r.g->query_gid_ex(r.ctx, 1, 3, &e, 0, sizeof(e)), 0);
	const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10};
	EXPECT_EQ(memcmp(e.gid.raw, v4, 16), 0);
	EXPECT_EQ(e.gid_type, uint32_t(IBV_GID_TYPE_ROCE_V2));
	ASSERT_EQ(r.g->query_gid_ex(r.ctx, 1, 0, &e, 0, sizeof(e)), 0);
	EXPECT_EQ(e.gid.raw[0], 0xfe); /* index 0 is link-local RoCE v1, not the IPv4 v2 */
	EXPECT_EQ(e.gid_type, uint32_t(IBV_GID_TYPE_ROCE_V1));
	EXPECT_EQ(r.g->query_gid_ex(r.ctx, 1, 4, &e, 0, sizeof(e)), ENODATA);
	EXPECT_EQ(r.g->query_gid_ex(r.ctx, 1, uint32_t(pa.gid_tbl_len), &e, 0, sizeof(e)), EINVAL);
	EXPECT_EQ(r.g->query_gid_ex(r.ctx, 2, 0, &e, 0, sizeof(e)), EINVAL);
}

TEST(HwFakeRules, InfinibandGidTableIsOneIbEntry)
{
	Rig r;
	ibv_port_attr pa{};
	ASSERT_EQ(r.g->query_port(r.ctx, 1, reinterpret_cast<_compat_ibv_port_attr *>(&pa)), 0);
	EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
	ibv_gid_entry e{};
	ASSERT_EQ(r.g->query_gid_ex(r.ctx, 1, 0, &e, 0, sizeof(e)), 0);
	EXPECT_EQ(e.gid_type, uint32_t(IBV_GID_TYPE_IB));
	EXPECT_EQ(e.gid.global.interface_id, htobe64(fake().guid));
	EXPECT_EQ(r.g->query_gid_ex(r.ctx, 1, 1, &e, 0, sizeof(e)), ENODATA);
}

TEST(HwFakeRules, RoceAhNeedsAGrhAndASourceGidOfTheTable)
{
	Rig r(true);
	ibv_ah_attr a{};
	a.port_num = 1;
	a.dlid = 0x12;
	errno = 0;
	EXPECT_EQ(r.g->create_ah(r.pd, &a), nullptr); /* no GRH */
	EXPECT_EQ(errno, EINVAL);
	a.is_global = 1;
	a.grh.sgid_index = 9;
	errno = 0;
	EXPECT_EQ(r.g->create_ah(r.pd, &a), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(fake().ahs_live, 0);
	/* What libmlx5 puts in a RoCE AV. */
	a.grh.sgid_index = 3;
	a.grh.hop_limit = 64;
	a.grh.traffic_class = 0x68;
	a.sl = 5;
	memcpy(a.grh.dgid.raw, fake().gids[3].raw, 16);
	ibv_ah *ah = r.g->create_ah(r.pd, &a);
	ASSERT_NE(ah, nullptr);
	const mlx5_wqe_av &av = hwfake::last_av();
	EXPECT_EQ(av.hop_limit, 64);
	EXPECT_EQ(av.tclass, 0x68);
	EXPECT_EQ(be32toh(av.grh_gid_fl), 3u << 20); /* sgid index; no GRH bit on RoCE */
	EXPECT_EQ(av.stat_rate_sl, 5 << 1);          /* sl as the priority */
	EXPECT_GE(be16toh(av.rlid), 0xc000);         /* RoCE v2: the UDP source port */
	EXPECT_EQ(memcmp(av.rgid, a.grh.dgid.raw, 16), 0);
	EXPECT_NE(av.rmac[0] | av.rmac[5], 0);
	EXPECT_EQ(r.g->destroy_ah(ah), 0);
}

TEST(HwFakeRules, RoceQpAvNeedsAGrhAndAKnownGidAndIsRecorded)
{
	Rig r(true);
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	const int mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV;
	EXPECT_EQ(r.modify(q, Rig::rtr(false, 0, 1), mask), EINVAL);
	EXPECT_EQ(r.modify(q, Rig::rtr(true, 7, 1), mask), EINVAL);
	EXPECT_EQ(q->state, IBV_QPS_INIT);
	ASSERT_EQ(r.modify(q, Rig::rtr(true, 3, 64), mask), 0);
	ibv_qp *t = r.dct(r.make_srq());
	EXPECT_EQ(r.dct_up(t, false, 0, 1), EINVAL); /* INIT done, RTR refused */
	EXPECT_EQ(t->state, IBV_QPS_INIT);
	ASSERT_EQ(r.modify(t, Rig::rtr(true, 1, 8), DCT_RTR_MASK), 0);
	ASSERT_EQ(fake().rtr_paths.size(), 2u);
	const auto &pi = fake().rtr_paths[0], &pt = fake().rtr_paths[1];
	EXPECT_FALSE(pi.dct);
	EXPECT_EQ(pi.qpn, q->qp_num);
	EXPECT_EQ(pi.sgid_index, 3);
	EXPECT_EQ(pi.hop_limit, 64);
	EXPECT_TRUE(pt.dct);
	EXPECT_EQ(pt.qpn, t->qp_num);
	EXPECT_EQ(pt.sgid_index, 1);
	EXPECT_EQ(pt.hop_limit, 8);
	EXPECT_EQ(pt.traffic_class, 0x60);
	EXPECT_EQ(pt.path_mtu, int(IBV_MTU_1024));
}

/* ---- C. Execution ---- */

TEST(HwFakeRules, DoorbellRecordWithoutTheUarWriteRunsNothing)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.post_recvs(s, 4);
	uint32_t nbb = r.post(q, 0, t->qp_num, KEY);
	Rig::dbrec(q, nbb);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	/* A register write naming another QP rings nothing for this one. */
	r.post(q, 0, t->qp_num, KEY, nullptr, q->qp_num + 1);
	Rig::uar(q, 0);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	r.post(q, 0, t->qp_num, KEY);
	Rig::uar(q, 0);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_REQ);
	/* The register names the WQE at 0: the one behind it waits for its own ring. */
	uint32_t pi = nbb + r.post(q, nbb, t->qp_num, KEY);
	Rig::dbrec(q, pi);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	Rig::uar(q, nbb);
	EXPECT_EQ(hwfake::dc_execute(), 1);
}

TEST(HwFakeRules, DciNotInRtsExecutesNothing)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	r.post_recvs(s, 4);
	r.send(q, 0, t->qp_num); /* in RESET */
	EXPECT_EQ(hwfake::dc_execute(), 0);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	ASSERT_EQ(r.modify(q, Rig::rtr(false, 0, 1), IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
	EXPECT_EQ(hwfake::dc_execute(), 0); /* RTR */
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RTS), RTS_MASK), 0);
	EXPECT_EQ(hwfake::dc_execute(), 1);
}

TEST(HwFakeRules, WrongDcKeyIsDroppedAndTheSenderTimesOut)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	ASSERT_EQ(r.dci_up(q), 0); /* timeout 14, retry 7: 4.096 us * 2^14 * 8 = 536871 us */
	r.post_recvs(s, 4);
	r.send(q, 0, t->qp_num, KEY + 1);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	EXPECT_EQ(fake().key_violations, 1);
	EXPECT_EQ(fake().dropped, 1);
	hwfake::advance_us(536000);
	EXPECT_EQ(hwfake::dc_execute(), 0);  /* still retrying */
	EXPECT_EQ(fake().key_violations, 1); /* counted once per SEND */
	hwfake::advance_us(1000);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR));
	EXPECT_EQ(hwfake::srq_posted(t->qp_num), 4); /* nothing received */
	EXPECT_EQ(r.poll().opcode, 0xff);
}

TEST(HwFakeRules, UnknownDctIsDroppedAndTheSenderTimesOut)
{
	Rig r;
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.dci_up(q), 0);
	r.send(q, 0, 0xabcde);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	EXPECT_EQ(fake().dropped, 1);
	EXPECT_EQ(fake().key_violations, 0);
	hwfake::advance_us(537000);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR));
}

TEST(HwFakeRules, RoceRouteDropsAWrongGidTypeOrAShortHopLimit)
{
	struct Case {
		const char *what;
		uint8_t av_sgid, av_hops, dct_sgid, dct_hops;
		int route_hops;
		bool delivered;
	} const cases[] = {
		{"v2 to v2, one hop", 3, 1, 3, 1, 1, true},
		{"v2 to v2 across routers", 3, 64, 3, 64, 3, true},
		{"v1 source, v2 DCT", 2, 64, 3, 64, 1, false},
		{"v2 source, v1 DCT", 3, 64, 0, 64, 1, false},
		{"AV hop limit below the route", 3, 1, 3, 64, 2, false},
		{"DCT hop limit below the route", 3, 64, 3, 1, 2, false},
		{"v1 across a router", 0, 64, 0, 64, 2, false},
	};
	for (const Case &c : cases) {
		Rig r(true);
		fake().route_hops = c.route_hops;
		ibv_srq *s = r.make_srq();
		ibv_qp *t = r.dct(s), *q = r.dci();
		ASSERT_EQ(r.dct_up(t, true, c.dct_sgid, c.dct_hops), 0) << c.what;
		ASSERT_EQ(r.dci_up(q, true, 3, 64), 0) << c.what;
		r.post_recvs(s, 4);
		uint8_t av[48];
		ASSERT_TRUE(roce_av(r, c.av_sgid, c.av_hops, av)) << c.what;
		r.send(q, 0, t->qp_num, KEY, av);
		EXPECT_EQ(hwfake::dc_execute(), c.delivered ? 1 : 0) << c.what;
		EXPECT_EQ(fake().dropped, c.delivered ? 0 : 1) << c.what;
		if (c.delivered)
			continue;
		hwfake::advance_us(600000);
		EXPECT_EQ(hwfake::dc_execute(), 1) << c.what;
		EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR)) << c.what;
	}
}

TEST(HwFakeRules, AfterAnErrorEveryWqeIsFlushedUntilReset)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.post_recvs(s, 4);
	/* One lost SEND with a good one behind it: the good one waits for the timeout. */
	uint32_t pi = r.post(q, 0, 0xabcde, KEY);
	pi += r.post(q, pi, t->qp_num, KEY);
	Rig::dbrec(q, pi);
	Rig::uar(q, pi - 2);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	hwfake::advance_us(600000);
	EXPECT_EQ(hwfake::dc_execute(), 2);
	EXPECT_EQ(q->state, IBV_QPS_ERR);
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR));
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_WR_FLUSH_ERR)); /* not sent */
	pi = r.send(q, pi, t->qp_num);                       /* posted later: flushed too */
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_WR_FLUSH_ERR));
	EXPECT_EQ(hwfake::srq_posted(t->qp_num), 4);
	EXPECT_EQ(fake().flushed, 2);
	/* RESET: the record back to 0; the producer counter restarts at 0. */
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), 0);
	hwfake::DciPages p;
	ASSERT_TRUE(hwfake::dci_pages(q->qp_num, &p));
	EXPECT_EQ(p.dbrec[MLX5_QPN_SND_DBR], 0u);
	ASSERT_EQ(r.dci_up(q), 0);
	r.send(q, 0, t->qp_num);
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_REQ);
}

/* The device's counter restarts at 0 with RESET: a driver that goes on from its old producer
 * counter has the device execute what is left at BB 0 again (a duplicate SEND), and a WQE
 * there that is not this QP's is refused as malformed. */
TEST(HwFakeRules, ProducerCounterNotRestartedAfterResetReplaysBb0)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s), *q = r.dci();
	ASSERT_EQ(r.dct_up(t), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.post_recvs(s, 4);
	uint32_t pi = r.send(q, 0, t->qp_num);
	ASSERT_EQ(hwfake::dc_execute(), 1);
	ASSERT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND);
	ASSERT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_REQ);
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.send(q, pi, t->qp_num); /* at pi, not at 0 */
	EXPECT_EQ(hwfake::dc_execute(), 2);
	EXPECT_EQ(r.poll().opcode, MLX5_QPN_PRM_CQE_RESP_SEND); /* the old SEND, again */
	mlx5_qpn_cqe_fields f = r.poll();
	EXPECT_EQ(f.opcode, MLX5_QPN_PRM_CQE_REQ);
	EXPECT_EQ(f.wqe_counter, 0u);
	/* Another QP's WQE at the device's index: malformed. */
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_RESET), IBV_QP_STATE), 0);
	ASSERT_EQ(r.dci_up(q), 0);
	r.post(q, 0, t->qp_num, KEY, nullptr, q->qp_num + 1);
	Rig::dbrec(q, 2);
	hwfake::DciPages p;
	ASSERT_TRUE(hwfake::dci_pages(q->qp_num, &p));
	uint8_t ctrl[8];
	mlx5_qpn_put_be32(ctrl, MLX5_QPN_OPCODE_SEND);
	mlx5_qpn_put_be32(ctrl + 4, q->qp_num << 8 | 6);
	memcpy(p.reg, ctrl, 8);
	r.ci += 2; /* the two completions of the replay above */
	EXPECT_EQ(hwfake::dc_execute(), 1);
	EXPECT_TRUE(r.next_err(MLX5_QPN_SYND_LOCAL_QP_OP_ERR));
}

TEST(HwFakeRules, TimeoutZeroRetriesForEver)
{
	Rig r;
	ibv_qp *q = r.dci();
	ASSERT_EQ(r.modify(q, Rig::state(IBV_QPS_INIT), INIT_MASK), 0);
	ASSERT_EQ(r.modify(q, Rig::rtr(false, 0, 1), IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
	ibv_qp_attr a = Rig::state(IBV_QPS_RTS);
	a.timeout = 0;
	ASSERT_EQ(r.modify(q, a, RTS_MASK), 0);
	r.send(q, 0, 0xabcde);
	hwfake::advance_us(3600ull * 1000 * 1000);
	EXPECT_EQ(hwfake::dc_execute(), 0);
	EXPECT_EQ(r.poll().opcode, 0xff);
}

/* ---- D. Objects in use ---- */

TEST(HwFakeRules, CqUsedByAQpIsBusy)
{
	Rig r;
	ibv_qp *q = r.dci();
	EXPECT_EQ(r.g->destroy_cq(r.cq), EBUSY);
	EXPECT_EQ(fake().cqs_live, 1);
	ASSERT_EQ(r.g->destroy_qp(q), 0);
	EXPECT_EQ(r.g->destroy_cq(r.cq), 0);
}

TEST(HwFakeRules, SrqUsedByADctIsBusy)
{
	Rig r;
	ibv_srq *s = r.make_srq();
	ibv_qp *t = r.dct(s);
	EXPECT_EQ(r.g->destroy_srq(s), EBUSY);
	EXPECT_EQ(fake().srqs_live, 1);
	ASSERT_EQ(r.g->destroy_qp(t), 0);
	EXPECT_EQ(r.g->destroy_srq(s), 0);
}

TEST(HwFakeRules, PdHeldByAnyObjectIsBusy)
{
	Rig r;
	char buf[64];
	ibv_mr *mr = r.g->reg_mr(r.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ibv_ah_attr aa{};
	aa.port_num = 1;
	ibv_ah *ah = r.g->create_ah(r.pd, &aa);
	ibv_srq *s = r.make_srq();
	ibv_qp *q = r.dci();
	ASSERT_TRUE(mr && ah && s && q);
	EXPECT_EQ(r.g->dealloc_pd(r.pd), EBUSY);
	ASSERT_EQ(r.g->destroy_qp(q), 0);
	EXPECT_EQ(r.g->dealloc_pd(r.pd), EBUSY);
	ASSERT_EQ(r.g->destroy_srq(s), 0);
	EXPECT_EQ(r.g->dealloc_pd(r.pd), EBUSY);
	ASSERT_EQ(r.g->destroy_ah(ah), 0);
	EXPECT_EQ(r.g->dealloc_pd(r.pd), EBUSY);
	EXPECT_EQ(fake().pds_live, 1);
	ASSERT_EQ(r.g->dereg_mr(mr), 0);
	EXPECT_EQ(r.g->dealloc_pd(r.pd), 0);
}

/* ---- E. Locked memory ---- */

TEST(HwFakeRules, PinsBeyondRlimitMemlockFailWithEnomem)
{
	Rig r; /* its CQ pins one page */
	EXPECT_EQ(fake().pinned, 4096u);
	void *buf = aligned_alloc(4096, 1 << 16);
	{
		hwfake::MemlockLimit guard(4096); /* reached already */
		ASSERT_TRUE(guard.ok());
		errno = 0;
		EXPECT_EQ(r.g->reg_mr(r.pd, buf, 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
		EXPECT_EQ(errno, ENOMEM);
		errno = 0;
		EXPECT_EQ(r.g->create_cq(r.ctx, 1, nullptr, nullptr, 0), nullptr);
		EXPECT_EQ(errno, ENOMEM);
		errno = 0;
		EXPECT_EQ(r.make_srq(), nullptr);
		EXPECT_EQ(errno, ENOMEM);
		errno = 0;
		EXPECT_EQ(r.dci(), nullptr);
		EXPECT_EQ(errno, ENOMEM);
		EXPECT_EQ(fake().pinned, 4096u);
		EXPECT_EQ(fake().mrs_live + fake().srqs_live + fake().qps_live, 0);
	}
	{
		hwfake::MemlockLimit guard(3 * 4096);
		ASSERT_TRUE(guard.ok());
		/* 8 KiB from the middle of a page span 3 pages: one too many. */
		errno = 0;
		EXPECT_EQ(r.g->reg_mr(r.pd, static_cast<char *>(buf) + 100, 8192,
				      IBV_ACCESS_LOCAL_WRITE),
			  nullptr);
		EXPECT_EQ(errno, ENOMEM);
		ibv_mr *mr = r.g->reg_mr(r.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
		EXPECT_NE(mr, nullptr); /* up to the limit */
		EXPECT_EQ(r.g->dereg_mr(mr), 0);
	}
	/* CAP_IPC_LOCK back in the effective set (root): the limit no longer applies. */
	{
		struct rlimit lim, old;
		ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &old), 0);
		lim = old;
		lim.rlim_cur = 4096;
		ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
		ibv_mr *mr = r.g->reg_mr(r.pd, buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE);
		EXPECT_NE(mr, nullptr);
		EXPECT_EQ(fake().pinned, 4096u + (1u << 16));
		EXPECT_EQ(r.g->dereg_mr(mr), 0);
		setrlimit(RLIMIT_MEMLOCK, &old);
	}
	EXPECT_EQ(fake().pinned, 4096u);
	free(buf);
}

/* ---- F. Firmware limits ---- */

TEST(HwFakeRules, DciWqeAboveMaxWqeSzSqDcIsRefused)
{
	Rig r;
	fake().max_wqe_sz_sq_dc = 256;
	uint8_t out[MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN] = {};
	uint8_t in[16] = {};
	mlx5_qpn_prm::set(in, mlx5_qpn_prm::in_opcode, MLX5_QPN_CMD_OP_QUERY_HCA_CAP);
	mlx5_qpn_prm::set(in, mlx5_qpn_prm::in_op_mod, MLX5_QPN_HCA_CAP_TYPE_GENERAL << 1);
	ASSERT_EQ(r.g->devx_general_cmd(r.ctx, in, sizeof(in), out, sizeof(out)), 0);
	EXPECT_EQ(mlx5_qpn_prm::get(out + MLX5_QPN_PRM_HCA_CAP_OFFSET,
				    hwfake::cap_max_wqe_sz_sq_dc),
		  256u);
	errno = 0;
	EXPECT_EQ(r.dci(256), nullptr); /* 16 + 48 + 4 + 256 -> 336 -> 384 bytes */
	EXPECT_EQ(errno, EINVAL);
	EXPECT_NE(r.dci(188), nullptr); /* 16 + 48 + 4 + 188 = 256 */
	/* The size is counted in whole 64-byte BBs: 64 + (4 + 260 -> 272) = 336 -> 384 > 336. */
	fake().max_wqe_sz_sq_dc = 336;
	errno = 0;
	EXPECT_EQ(r.dci(260), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_NE(r.dci(252), nullptr); /* 64 + 256 = 320 */
}

/* ---- G. Older rdma-core ---- */

TEST(HwFakeRules, GlueWithoutReservedQpnSymbolsLacksOnlyThem)
{
	const mlx5_qpn_glue *g = hwfake::fake_glue_without_reserved_qpn();
	EXPECT_EQ(g->reserved_qpn_alloc, nullptr);
	EXPECT_EQ(g->reserved_qpn_dealloc, nullptr);
	EXPECT_NE(g->devx_obj_create, nullptr);
	EXPECT_NE(hwfake::fake_glue()->reserved_qpn_alloc, nullptr);
	hwfake::Scope scope(g);
	EXPECT_EQ(mlx5_qpn_glue_get_quiet(), g);
}
