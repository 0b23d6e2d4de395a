/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_RIG_H
#define QPN_TESTS_HW_FAKE_RIG_H

/*
 * The fake rdma-core's glue table driven directly (no driver): a context, a PD and a CQ of 16
 * CQEs, and helpers that do what the DC layer does (create, modify, post, ring, poll with the
 * consumer index published). Shared by the fake's rule tests (test_hw_fake_rules*.cpp).
 */
#include <gtest/gtest.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <vector>

#include "common/mlx5_qpn_prm.h"
#include "common/mlx5_qpn_prm_wqe.h"
#include "hw_fake_glue.h"

namespace hwrig {

using hwfake::fake;

inline constexpr uint64_t KEY = 0x1122334455667788ull;
inline constexpr int INIT_MASK = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
inline constexpr int RTS_MASK = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
inline constexpr int DCT_INIT_MASK = INIT_MASK | IBV_QP_ACCESS_FLAGS;
inline constexpr int DCT_RTR_MASK = IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
				    IBV_QP_PATH_MTU;

/* A context, a PD and a CQ of the fake device, and helpers that do what the DC layer does. */
struct Rig {
	hwfake::Scope scope;
	const mlx5_qpn_glue *g = hwfake::fake_glue();
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;
	uint8_t *ring = nullptr;
	uint32_t *cq_dbrec = nullptr;
	uint32_t ci = 0;
	std::vector<void *> bufs;

	explicit Rig(bool roce = false)
	{
		if (roce)
			hwfake::use_roce(fake());
		ctx = g->open_device(g->get_device_list(nullptr)[0]);
		pd = g->alloc_pd(ctx);
		cq = g->create_cq(ctx, 15, nullptr, nullptr, 0);
		ring = hwfake::last_cq_ring();
		cq_dbrec = hwfake::last_cq_dbrec();
	}
	~Rig()
	{
		for (void *b : bufs)
			free(b);
	}

	ibv_qp *dci(uint32_t max_inline = 256)
	{
		ibv_qp_init_attr_ex a{};
		mlx5dv_qp_init_attr dv{};
		a.qp_type = IBV_QPT_DRIVER;
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = pd;
		a.send_cq = a.recv_cq = cq;
		a.cap.max_send_wr = 4;
		a.cap.max_send_sge = 1;
		a.cap.max_inline_data = max_inline;
		dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
		dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
		return g->dv_create_qp(ctx, &a, &dv);
	}
	ibv_srq *make_srq()
	{
		ibv_srq_init_attr sa{};
		sa.attr.max_wr = 7;
		sa.attr.max_sge = 1;
		return g->create_srq(pd, &sa);
	}
	ibv_qp *dct(ibv_srq *srq, uint64_t key = KEY)
	{
		ibv_qp_init_attr_ex a{};
		mlx5dv_qp_init_attr dv{};
		a.qp_type = IBV_QPT_DRIVER;
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = pd;
		a.send_cq = a.recv_cq = cq;
		a.srq = srq;
		dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
		dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
		dv.dc_init_attr.dct_access_key = key;
		return g->dv_create_qp(ctx, &a, &dv);
	}
	int modify(ibv_qp *qp, ibv_qp_attr a, int mask) { return g->modify_qp(qp, &a, mask); }
	static ibv_qp_attr state(ibv_qp_state s)
	{
		ibv_qp_attr a{};
		a.qp_state = s;
		a.port_num = 1;
		a.path_mtu = IBV_MTU_1024;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.port_num = 1;
		return a;
	}
	/* The route of a QP at RTR: global on RoCE with this source GID and hop limit. */
	static ibv_qp_attr rtr(bool global, uint8_t sgid, uint8_t hops)
	{
		ibv_qp_attr a = state(IBV_QPS_RTR);
		a.ah_attr.is_global = global;
		a.ah_attr.grh.sgid_index = sgid;
		a.ah_attr.grh.hop_limit = hops;
		a.ah_attr.grh.traffic_class = 0x60;
		return a;
	}
	/* RESET -> INIT -> RTR -> RTS with the kernel's masks. */
	int dci_up(ibv_qp *q, bool global = false, uint8_t sgid = 0, uint8_t hops = 1)
	{
		int rc = modify(q, state(IBV_QPS_INIT), INIT_MASK);
		if (rc == 0)
			rc = modify(q, rtr(global, sgid, hops),
				    IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV);
		if (rc == 0)
			rc = modify(q, state(IBV_QPS_RTS), RTS_MASK);
		return rc;
	}
	int dct_up(ibv_qp *q, bool global = false, uint8_t sgid = 0, uint8_t hops = 1)
	{
		int rc = modify(q, state(IBV_QPS_INIT), DCT_INIT_MASK);
		return rc != 0 ? rc : modify(q, rtr(global, sgid, hops), DCT_RTR_MASK);
	}
	/* Post `n` receives on srq (buffers in one MR), as the DC layer does. */
	void post_recvs(ibv_srq *srq, uint32_t n)
	{
		mlx5dv_srq dv{};
		mlx5dv_obj o{};
		o.srq.in = srq;
		o.srq.out = &dv;
		ASSERT_EQ(g->dv_init_obj(&o, MLX5DV_OBJ_SRQ), 0);
		void *buf = aligned_alloc(4096, 4096);
		bufs.push_back(buf);
		ibv_mr *mr = g->reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NE(mr, nullptr);
		auto *w = static_cast<uint8_t *>(dv.buf);
		for (uint32_t i = 0; i < n; i++)
			mlx5_qpn_srq_wqe_build(w + i * 32, uint16_t(i + 1), 256, mr->lkey,
					       uint64_t(uintptr_t(buf)) + i * 256);
		dv.dbrec[0] = htobe32(n);
	}
	/* Write a SEND WQE at BB pi of q's SQ with the route av (48 bytes; NULL: zero route). */
	uint32_t post(ibv_qp *q, uint32_t pi, uint32_t dctn, uint64_t key,
		      const uint8_t *av = nullptr, uint32_t qpn = 0)
	{
		hwfake::DciPages p;
		EXPECT_TRUE(hwfake::dci_pages(q->qp_num, &p));
		uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * 64];
		int ds = mlx5_qpn_wqe_build_dc_send_av(wqe, uint16_t(pi), qpn ? qpn : q->qp_num, av,
						       dctn, key, "ping", 4,
						       MLX5_QPN_WQE_CTRL_CQ_UPDATE);
		uint32_t nbb = mlx5_qpn_wqe_bbs(uint32_t(ds));
		memcpy(p.sq + pi * 64, wqe, size_t(ds) * 16);
		return nbb;
	}
	static void dbrec(ibv_qp *q, uint32_t pi)
	{
		hwfake::DciPages p;
		ASSERT_TRUE(hwfake::dci_pages(q->qp_num, &p));
		p.dbrec[MLX5_QPN_SND_DBR] = htobe32(pi);
	}
	/* The UAR write: the first 8 bytes of the control segment of the WQE at BB pi. */
	static void uar(ibv_qp *q, uint32_t pi)
	{
		hwfake::DciPages p;
		ASSERT_TRUE(hwfake::dci_pages(q->qp_num, &p));
		uint64_t v;
		memcpy(&v, p.sq + pi * 64, 8);
		std::atomic_ref<uint64_t>(*p.reg).store(v, std::memory_order_release);
	}
	/* Post, record, register: one SEND rung as the DC layer rings it; the next pi. */
	uint32_t send(ibv_qp *q, uint32_t pi, uint32_t dctn, uint64_t key = KEY,
		      const uint8_t *av = nullptr)
	{
		uint32_t next = pi + post(q, pi, dctn, key, av);
		dbrec(q, next);
		uar(q, pi);
		return next;
	}
	/* The next CQE (opcode 0xff when none). */
	mlx5_qpn_cqe_fields poll()
	{
		mlx5_qpn_cqe_fields f{};
		f.opcode = 0xff;
		const uint8_t *cqe = ring + (ci % 16) * 64;
		uint8_t op_own = std::atomic_ref<uint8_t>(const_cast<uint8_t &>(cqe[63]))
					 .load(std::memory_order_acquire);
		if (!mlx5_qpn_cqe_is_sw_owned(op_own, ci, 4))
			return f;
		mlx5_qpn_cqe_parse(cqe, op_own, &f);
		ci++;
		/* The consumer index, as the DC layer publishes it: the device reads it. */
		std::atomic_ref<uint32_t>(cq_dbrec[MLX5_QPN_CQ_SET_CI])
			.store(htobe32(ci & 0xffffff), std::memory_order_release);
		return f;
	}
	/* A requester error CQE with this syndrome is next. */
	::testing::AssertionResult next_err(uint8_t synd)
	{
		mlx5_qpn_cqe_fields f = poll();
		if (f.opcode == MLX5_QPN_PRM_CQE_REQ_ERR && f.syndrome == synd)
			return ::testing::AssertionSuccess();
		return ::testing::AssertionFailure() << "opcode 0x" << std::hex << int(f.opcode)
						     << " syndrome 0x" << int(f.syndrome);
	}
};

/* The AV libmlx5 builds for attributes (through the fake's ibv_create_ah). */
inline bool
roce_av(Rig &r, uint8_t sgid, uint8_t hops, uint8_t av[48])
{
	ibv_ah_attr a{};
	a.port_num = 1;
	a.is_global = 1;
	a.grh.sgid_index = sgid;
	a.grh.hop_limit = hops;
	memcpy(a.grh.dgid.raw, fake().gids[3].raw, 16);
	ibv_ah *ah = r.g->create_ah(r.pd, &a);
	if (ah == nullptr)
		return false;
	memcpy(av, &hwfake::last_av(), 48);
	return r.g->destroy_ah(ah) == 0;
}

} // namespace hwrig

#endif /* QPN_TESTS_HW_FAKE_RIG_H */
