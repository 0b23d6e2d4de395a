/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mlx5 WQE and CQE layouts of the DC path, byte by byte: hand-assembled expected bytes, and
 * the offsets and constants cross-checked against rdma-core's own mlx5dv.h (an independent
 * statement of the same PRM facts).
 */
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include <infiniband/mlx5dv.h>

#include "common/mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_dc.h"

TEST(DcFormat, ConstantsMatchRdmaCore)
{
	EXPECT_EQ(MLX5_QPN_SEND_WQE_BB, MLX5_SEND_WQE_BB);
	EXPECT_EQ(MLX5_QPN_OPCODE_SEND, MLX5_OPCODE_SEND);
	EXPECT_EQ(MLX5_QPN_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_CQ_UPDATE);
	EXPECT_EQ(MLX5_QPN_EXTENDED_UD_AV, uint32_t(MLX5_EXTENDED_UD_AV));
	EXPECT_EQ(MLX5_QPN_INLINE_SEG, uint32_t(MLX5_INLINE_SEG));
	EXPECT_EQ(MLX5_QPN_SND_DBR, MLX5_SND_DBR);
	EXPECT_EQ(MLX5_QPN_CQE_REQ, MLX5_CQE_REQ);
	EXPECT_EQ(MLX5_QPN_CQE_RESP_SEND, MLX5_CQE_RESP_SEND);
	EXPECT_EQ(MLX5_QPN_CQE_REQ_ERR, MLX5_CQE_REQ_ERR);
	EXPECT_EQ(MLX5_QPN_CQE_RESP_ERR, MLX5_CQE_RESP_ERR);
	EXPECT_EQ(MLX5_QPN_CQE_OPCODE_INVALID, MLX5_CQE_INVALID);
	EXPECT_EQ(MLX5_QPN_SYND_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
	EXPECT_EQ(MLX5_QPN_SYND_LOCAL_QP_OP_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
	EXPECT_EQ(MLX5_QPN_SYND_WR_FLUSH_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	EXPECT_EQ(MLX5_QPN_SYND_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
	EXPECT_EQ(MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
}

TEST(DcFormat, OffsetsMatchRdmaCore)
{
	EXPECT_EQ(sizeof(struct mlx5_wqe_ctrl_seg), size_t(MLX5_QPN_CTRL_SEG_SIZE));
	EXPECT_EQ(offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds), 4u);
	EXPECT_EQ(offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se), 11u);
	EXPECT_EQ(sizeof(struct mlx5_wqe_av), size_t(MLX5_QPN_DC_AV_SIZE));
	EXPECT_EQ(offsetof(struct mlx5_wqe_av, dqp_dct), 8u);
	EXPECT_EQ(sizeof(struct mlx5_cqe64), size_t(MLX5_QPN_CQE_SIZE));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, flags_rqpn), size_t(MLX5_QPN_CQE_OFF_FLAGS_RQPN));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, byte_cnt), size_t(MLX5_QPN_CQE_OFF_BYTE_CNT));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, sop_drop_qpn), size_t(MLX5_QPN_CQE_OFF_SOP_DROP_QPN));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, wqe_counter), size_t(MLX5_QPN_CQE_OFF_WQE_COUNTER));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, signature), size_t(MLX5_QPN_CQE_OFF_SIGNATURE));
	EXPECT_EQ(offsetof(struct mlx5_cqe64, op_own), size_t(MLX5_QPN_CQE_OFF_OP_OWN));
	EXPECT_EQ(offsetof(struct mlx5_err_cqe, syndrome), size_t(MLX5_QPN_CQE_OFF_SYNDROME));
	EXPECT_EQ(offsetof(struct mlx5_err_cqe, vendor_err_synd),
		  size_t(MLX5_QPN_CQE_OFF_VENDOR_SYND));
	EXPECT_EQ(offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn),
		  size_t(MLX5_QPN_CQE_OFF_SOP_DROP_QPN));
}

TEST(DcFormat, SendWqeBytes)
{
	uint8_t wqe[6 * 64];
	memset(wqe, 0xee, sizeof(wqe));
	int ds = mlx5_qpn_wqe_build_dc_send(wqe, 0x1234, 0xabcdef, 0x123456, 0x0102030405060708ULL,
					    "ABCDE", 5, MLX5_QPN_WQE_CTRL_CQ_UPDATE);
	ASSERT_EQ(ds, 5); /* 16 + 48 + 4 + 5 = 73 -> 80 bytes */
	std::vector<uint8_t> want(80, 0);
	const uint8_t ctrl[16] = {0x00, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x05,
				  0,    0,    0,    0x08, 0,    0,    0,    0};
	memcpy(&want[0], ctrl, 16);
	const uint8_t av[12] = {1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0x12, 0x34, 0x56};
	memcpy(&want[16], av, 12);
	const uint8_t inl[9] = {0x80, 0, 0, 5, 'A', 'B', 'C', 'D', 'E'};
	memcpy(&want[64], inl, 9);
	EXPECT_EQ(std::vector<uint8_t>(wqe, wqe + 80), want);
	EXPECT_EQ(wqe[80], 0xee); /* nothing written past the WQE */

	mlx5_qpn_wqe_fields f;
	ASSERT_EQ(mlx5_qpn_wqe_parse_dc_send(wqe, 80, &f), 0);
	EXPECT_EQ(f.opcode, MLX5_QPN_OPCODE_SEND);
	EXPECT_EQ(f.wqe_index, 0x1234);
	EXPECT_EQ(f.qpn, 0xabcdefu);
	EXPECT_EQ(f.ds, 5);
	EXPECT_EQ(f.fm_ce_se, MLX5_QPN_WQE_CTRL_CQ_UPDATE);
	EXPECT_EQ(f.dc_key, 0x0102030405060708ULL);
	EXPECT_EQ(f.dqp_dct, 0x80123456u);
	EXPECT_EQ(f.inl_hdr, 0x80000005u);
	EXPECT_EQ(memcmp(f.data, "ABCDE", 5), 0);
}

TEST(DcFormat, SizesAndArgumentErrors)
{
	EXPECT_EQ(mlx5_qpn_wqe_dc_send_ds(0), 5u);
	EXPECT_EQ(mlx5_qpn_wqe_dc_send_ds(12), 5u);
	EXPECT_EQ(mlx5_qpn_wqe_dc_send_ds(13), 6u);
	EXPECT_EQ(mlx5_qpn_wqe_dc_send_ds(256), 21u);
	EXPECT_EQ(mlx5_qpn_wqe_bbs(5), 2u);
	EXPECT_EQ(mlx5_qpn_wqe_bbs(4), 1u);
	EXPECT_EQ(mlx5_qpn_wqe_bbs(21), uint32_t(MLX5_QPN_WQE_MAX_BBS));
	uint8_t wqe[6 * 64];
	EXPECT_EQ(mlx5_qpn_wqe_build_dc_send(wqe, 0, 1, 1, 0, wqe, 257, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_wqe_build_dc_send(wqe, 0, 1, 1, 0, nullptr, 1, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_wqe_build_dc_send(wqe, 0, 1u << 24, 1, 0, nullptr, 0, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_wqe_build_dc_send(wqe, 0, 1, 1u << 24, 0, nullptr, 0, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_wqe_build_dc_send(nullptr, 0, 1, 1, 0, nullptr, 0, 0), -EINVAL);
}

TEST(DcFormat, MalformedWqesGiveTheirSyndromes)
{
	uint8_t wqe[6 * 64];
	mlx5_qpn_wqe_fields f;
	ASSERT_EQ(mlx5_qpn_wqe_build_dc_send(wqe, 0, 7, 9, 0, "xyz", 3, 0), 5);
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(wqe, 8, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(wqe, 64, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);

	uint8_t bad[6 * 64];
	memcpy(bad, wqe, sizeof(bad));
	bad[3] = 0x08; /* RDMA write: not a SEND */
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(bad, 128, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	memcpy(bad, wqe, sizeof(bad));
	bad[24] &= 0x7f; /* no extended AV */
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(bad, 128, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	memcpy(bad, wqe, sizeof(bad));
	bad[64] &= 0x7f; /* a pointer (data) segment instead of inline */
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(bad, 128, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	memcpy(bad, wqe, sizeof(bad));
	bad[67] = 13; /* 13 bytes announced, the WQE holds 12 */
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(bad, 128, &f), MLX5_QPN_SYND_LOCAL_LENGTH_ERR);
	memcpy(bad, wqe, sizeof(bad));
	bad[7] = 3; /* ds too small for ctrl + AV + inline header */
	EXPECT_EQ(mlx5_qpn_wqe_parse_dc_send(bad, 128, &f), MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
}

TEST(DcFormat, CqeBytesAndOwnership)
{
	uint8_t cqe[64];
	memset(cqe, 0xee, sizeof(cqe));
	mlx5_qpn_cqe_fields in = {};
	in.opcode = MLX5_QPN_CQE_REQ_ERR;
	in.owner = 1;
	in.syndrome = MLX5_QPN_SYND_REMOTE_ACCESS_ERR;
	in.vendor_synd = 0x22;
	in.wqe_opcode = MLX5_QPN_OPCODE_SEND;
	in.qpn = 0x00abcd;
	in.wqe_counter = 0x0102;
	uint8_t op_own = mlx5_qpn_cqe_fill(cqe, &in);
	EXPECT_EQ(op_own, 0xd1);
	EXPECT_EQ(cqe[63], 0xee); /* op_own is the caller's to publish */
	std::vector<uint8_t> want(63, 0);
	want[54] = 0x22;
	want[55] = 0x13;
	want[56] = 0x0a;
	want[57] = 0x00;
	want[58] = 0xab;
	want[59] = 0xcd;
	want[60] = 0x01;
	want[61] = 0x02;
	EXPECT_EQ(std::vector<uint8_t>(cqe, cqe + 63), want);

	mlx5_qpn_cqe_fields out;
	mlx5_qpn_cqe_parse(cqe, op_own, &out);
	EXPECT_EQ(out.opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(out.owner, 1);
	EXPECT_EQ(out.syndrome, 0x13);
	EXPECT_EQ(out.vendor_synd, 0x22);
	EXPECT_EQ(out.wqe_opcode, 0x0a);
	EXPECT_EQ(out.qpn, 0xabcdu);
	EXPECT_EQ(out.wqe_counter, 0x0102);

	/* A responder CQE: source QP in flags_rqpn (offset 24), byte count at 44. */
	mlx5_qpn_cqe_fields r = {};
	r.opcode = MLX5_QPN_CQE_RESP_SEND;
	r.qpn = 0x123456;
	r.src_qpn = 0x654321;
	r.byte_cnt = 300;
	r.wqe_counter = 7;
	op_own = mlx5_qpn_cqe_fill(cqe, &r);
	EXPECT_EQ(op_own, 0x20);
	const uint8_t rq[4] = {0x00, 0x65, 0x43, 0x21}, bc[4] = {0, 0, 0x01, 0x2c};
	EXPECT_EQ(memcmp(cqe + 24, rq, 4), 0);
	EXPECT_EQ(memcmp(cqe + 44, bc, 4), 0);
	EXPECT_EQ(cqe[55], 0); /* no syndrome in a good CQE */
	mlx5_qpn_cqe_parse(cqe, op_own, &out);
	EXPECT_EQ(out.syndrome, 0);
	EXPECT_EQ(out.src_qpn, 0x654321u);
	EXPECT_EQ(out.byte_cnt, 300u);

	/* Owner bit against the consumer index's pass over a ring of 4. */
	EXPECT_FALSE(mlx5_qpn_cqe_is_sw_owned(0xf0, 0, 2)); /* initial: invalid opcode */
	EXPECT_TRUE(mlx5_qpn_cqe_is_sw_owned(0x00, 0, 2));
	EXPECT_TRUE(mlx5_qpn_cqe_is_sw_owned(0x00, 3, 2));
	EXPECT_FALSE(mlx5_qpn_cqe_is_sw_owned(0x00, 4, 2)); /* last pass's CQE */
	EXPECT_TRUE(mlx5_qpn_cqe_is_sw_owned(0x01, 4, 2));
	EXPECT_FALSE(mlx5_qpn_cqe_is_sw_owned(0x01, 8, 2));
}
