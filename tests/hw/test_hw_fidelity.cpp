/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fidelity against the real definitions, not bytes written out by hand:
 *  - the WQE, AV and CQE offsets of the DC path against the structs and constants of the
 *    installed <infiniband/mlx5dv.h>, and a WQE built by our builder against one built with
 *    rdma-core's own mlx5dv_set_ctrl_seg()/mlx5dv_set_dgram_seg();
 *  - every PRM command box we build or parse against the same box written or read with
 *    rdma-core's DEVX_SET/DEVX_GET. Those macros need the mlx5_ifc_*_bits layouts, which
 *    rdma-core does not install: the few needed are written below, their facts taken from
 *    rdma-core's providers/mlx5/mlx5_ifc.h (linux-rdma/rdma-core at 691953d8d502, Aug 2026);
 *  - the two caps-2 fields rdma-core lacks (log_max_num_reserved_qpn,
 *    log_reserved_qpn_max_alloc) against one table taken from DPDK's
 *    drivers/common/mlx5/mlx5_prm.h (struct mlx5_ifc_cmd_hca_cap_2_bits).
 */
#include <gtest/gtest.h>

#include <endian.h>
#include <stddef.h>

#include <cstring>
#include <vector>

#include <infiniband/mlx5dv.h>

#include "hw/mlx5_qpn_hw_sizing.h"
#include "common/mlx5_qpn_prm.h"
#include "common/mlx5_qpn_prm_wqe.h"

/* ---- mlx5_ifc_*_bits, as in rdma-core's providers/mlx5/mlx5_ifc.h (one byte per bit). ---- */

typedef uint8_t u8;

struct mlx5_ifc_general_obj_in_cmd_hdr_bits {
	u8 opcode[0x10];
	u8 uid[0x10];

	u8 reserved_at_20[0x10];
	u8 obj_type[0x10];

	u8 obj_id[0x20];

	u8 reserved_at_60[0x3];
	u8 log_obj_range[0x5];
	u8 reserved_at_68[0x18];
};

struct mlx5_ifc_general_obj_out_cmd_hdr_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];

	u8 syndrome[0x20];

	u8 obj_id[0x20];

	u8 reserved_at_60[0x20];
};

struct mlx5_ifc_reserved_qpn_bits {
	u8 reserved_at_0[0x80];
};

struct mlx5_ifc_create_reserved_qpn_in_bits {
	struct mlx5_ifc_general_obj_in_cmd_hdr_bits hdr;
	struct mlx5_ifc_reserved_qpn_bits rqpns;
};

struct mlx5_ifc_query_hca_cap_in_bits {
	u8 opcode[0x10];
	u8 reserved_at_10[0x10];

	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];

	u8 other_function[0x1];
	u8 reserved_at_41[0xf];
	u8 function_id[0x10];

	u8 reserved_at_60[0x20];
};

/* cmd_hca_cap up to general_obj_types; the fields between are folded into reserved runs. */
struct mlx5_ifc_cmd_hca_cap_bits {
	u8 access_other_hca_roce[0x1];
	u8 reserved_at_1[0x1e];
	u8 vhca_resource_manager[0x1];

	u8 hca_cap_2[0x1];
	u8 reserved_at_21[0xf];
	u8 vhca_id[0x10];

	u8 reserved_at_40[0x59]; /* reserved_at_40 .. prio_tag_required */
	u8 reserved_at_99[0x2];
	u8 log_max_qp[0x5];

	u8 reserved_at_a0[0x360]; /* log_max_srq .. log_max_current_uc_list */

	u8 general_obj_types[0x40];

	u8 reserved_at_440[0x3c0]; /* the rest of the 0x800-bit structure */
};

/* rdma-core knows one reserved-QPN field of caps 2: the granularity. */
struct mlx5_ifc_cmd_hca_cap_2_bits {
	u8 reserved_at_0[0x80];

	u8 reserved_at_80[0x13];
	u8 log_reserved_qpn_granularity[0x5];
	u8 reserved_at_98[0x8];

	u8 reserved_at_a0[0x760];
};

union mlx5_ifc_hca_cap_union_bits {
	struct mlx5_ifc_cmd_hca_cap_bits cmd_hca_cap;
	struct mlx5_ifc_cmd_hca_cap_2_bits cmd_hca_cap_2;
	u8 reserved_at_0[0x8000];
};

struct mlx5_ifc_query_hca_cap_out_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];

	u8 syndrome[0x20];

	u8 reserved_at_40[0x40];

	union mlx5_ifc_hca_cap_union_bits capability;
};

/* The layouts above against the sizes rdma-core's structures have. */
static_assert(sizeof(mlx5_ifc_cmd_hca_cap_bits) == 0x800);
static_assert(sizeof(mlx5_ifc_cmd_hca_cap_2_bits) == 0x800);
static_assert(offsetof(mlx5_ifc_cmd_hca_cap_bits, log_max_qp) == 0x9b);
static_assert(offsetof(mlx5_ifc_cmd_hca_cap_bits, general_obj_types) == 0x400);

namespace {

namespace prm = mlx5_qpn_prm;

/* The same command box written twice must be the same bytes. */
void
expect_same(const void *ours, const void *theirs, size_t len, const char *what)
{
	const uint8_t *a = static_cast<const uint8_t *>(ours);
	const uint8_t *b = static_cast<const uint8_t *>(theirs);
	for (size_t i = 0; i < len; i++)
		ASSERT_EQ(a[i], b[i]) << what << ": byte " << i;
}

/*
 * DPDK drivers/common/mlx5/mlx5_prm.h, struct mlx5_ifc_cmd_hca_cap_2_bits, DW 4: the three
 * reserved-QPN fields as (bit offset, width). rdma-core names the granularity only.
 */
struct cap2_row {
	const char *name;
	prm::field dpdk;
	prm::field ours;
};
const cap2_row dpdk_cap2[] = {
	{"log_max_num_reserved_qpn", {0x8b, 5}, prm::cap2_log_max_num_reserved_qpn},
	{"log_reserved_qpn_granularity", {0x93, 5}, prm::cap2_log_reserved_qpn_granularity},
	{"log_reserved_qpn_max_alloc", {0x9b, 5}, prm::cap2_log_reserved_qpn_max_alloc},
};

} // namespace

/* ---- Data path: WQE, AV, CQE against mlx5dv.h. ---- */

static_assert(sizeof(struct mlx5_wqe_ctrl_seg) == MLX5_QPN_CTRL_SEG_SIZE);
static_assert(offsetof(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode) == 0);
static_assert(offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds) == 4);
static_assert(offsetof(struct mlx5_wqe_ctrl_seg, signature) == 8);
static_assert(offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se) == 11);
static_assert(offsetof(struct mlx5_wqe_ctrl_seg, imm) == 12);

static_assert(sizeof(struct mlx5_wqe_datagram_seg) == MLX5_QPN_DC_AV_SIZE);
static_assert(offsetof(struct mlx5_wqe_datagram_seg, av) == 0);
static_assert(offsetof(struct mlx5_wqe_av, key.dc_key) == 0);
static_assert(offsetof(struct mlx5_wqe_av, dqp_dct) == 8);
static_assert(offsetof(struct mlx5_wqe_av, stat_rate_sl) == 12);
static_assert(offsetof(struct mlx5_wqe_av, fl_mlid) == 13);
static_assert(offsetof(struct mlx5_wqe_av, rlid) == 14);
static_assert(offsetof(struct mlx5_wqe_av, rmac) == 20);
static_assert(offsetof(struct mlx5_wqe_av, tclass) == 26);
static_assert(offsetof(struct mlx5_wqe_av, hop_limit) == 27);
static_assert(offsetof(struct mlx5_wqe_av, grh_gid_fl) == 28);
static_assert(offsetof(struct mlx5_wqe_av, rgid) == 32);
static_assert(sizeof(struct mlx5_wqe_inl_data_seg) == MLX5_QPN_INLINE_HDR_SIZE);

static_assert(sizeof(struct mlx5_cqe64) == MLX5_QPN_CQE_SIZE);
static_assert(offsetof(struct mlx5_cqe64, flags_rqpn) == MLX5_QPN_CQE_OFF_FLAGS_RQPN);
static_assert(offsetof(struct mlx5_cqe64, byte_cnt) == MLX5_QPN_CQE_OFF_BYTE_CNT);
static_assert(offsetof(struct mlx5_cqe64, sop_drop_qpn) == MLX5_QPN_CQE_OFF_SOP_DROP_QPN);
static_assert(offsetof(struct mlx5_cqe64, wqe_counter) == MLX5_QPN_CQE_OFF_WQE_COUNTER);
static_assert(offsetof(struct mlx5_cqe64, signature) == MLX5_QPN_CQE_OFF_SIGNATURE);
static_assert(offsetof(struct mlx5_cqe64, op_own) == MLX5_QPN_CQE_OFF_OP_OWN);
static_assert(sizeof(struct mlx5_err_cqe) == MLX5_QPN_CQE_SIZE);
static_assert(offsetof(struct mlx5_err_cqe, vendor_err_synd) == MLX5_QPN_CQE_OFF_VENDOR_SYND);
static_assert(offsetof(struct mlx5_err_cqe, syndrome) == MLX5_QPN_CQE_OFF_SYNDROME);
static_assert(offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn) == MLX5_QPN_CQE_OFF_SOP_DROP_QPN);
static_assert(offsetof(struct mlx5_err_cqe, wqe_counter) == MLX5_QPN_CQE_OFF_WQE_COUNTER);
static_assert(offsetof(struct mlx5_err_cqe, op_own) == MLX5_QPN_CQE_OFF_OP_OWN);

static_assert(MLX5_SEND_WQE_BB == MLX5_QPN_SEND_WQE_BB);
static_assert(MLX5_OPCODE_SEND == MLX5_QPN_OPCODE_SEND);
static_assert(MLX5_WQE_CTRL_CQ_UPDATE == MLX5_QPN_WQE_CTRL_CQ_UPDATE);
static_assert(MLX5_EXTENDED_UD_AV == MLX5_QPN_EXTENDED_UD_AV);
static_assert(MLX5_INLINE_SEG == MLX5_QPN_INLINE_SEG);
static_assert(MLX5_SND_DBR == MLX5_QPN_SND_DBR);
static_assert(MLX5_CQE_OWNER_MASK == MLX5_QPN_CQE_OWNER_MASK);
static_assert(MLX5_CQE_REQ == MLX5_QPN_PRM_CQE_REQ);
static_assert(MLX5_CQE_RESP_SEND == MLX5_QPN_PRM_CQE_RESP_SEND);
static_assert(MLX5_CQE_REQ_ERR == MLX5_QPN_PRM_CQE_REQ_ERR);
static_assert(MLX5_CQE_RESP_ERR == MLX5_QPN_PRM_CQE_RESP_ERR);
static_assert(MLX5_CQE_INVALID == MLX5_QPN_CQE_OPCODE_INVALID);
static_assert(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR == MLX5_QPN_SYND_LOCAL_LENGTH_ERR);
static_assert(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR == MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
static_assert(MLX5_CQE_SYNDROME_WR_FLUSH_ERR == MLX5_QPN_SYND_WR_FLUSH_ERR);
static_assert(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR == MLX5_QPN_SYND_REMOTE_ACCESS_ERR);
static_assert(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR == MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);

/* The SRQ receive WQE the DC layer writes (struct mlx5_wqe_srq_next_seg + mlx5_wqe_data_seg)
 * and the inline-scatter flag of a responder CQE. */
static_assert(offsetof(struct mlx5_wqe_srq_next_seg, next_wqe_index) == MLX5_QPN_SRQ_OFF_NEXT);
static_assert(sizeof(struct mlx5_wqe_srq_next_seg) == MLX5_QPN_SRQ_OFF_DSEG);
static_assert(sizeof(struct mlx5_wqe_srq_next_seg) + sizeof(struct mlx5_wqe_data_seg) ==
	      MLX5_QPN_SRQ_WQE_MIN_STRIDE);
static_assert(MLX5_INLINE_SCATTER_32 == MLX5_QPN_CQE_INLINE_SCATTER_32);

/* An SRQ WQE as our builder writes it, read through rdma-core's structs. */
TEST(HwFidelity, SrqWqeMatchesRdmaCoreStructs)
{
	alignas(16) uint8_t w[MLX5_QPN_SRQ_WQE_MIN_STRIDE];
	memset(w, 0xee, sizeof(w));
	mlx5_qpn_srq_wqe_build(w, 0x1234, 256, 0xabcdef01, 0x0102030405060708ull);
	const auto *next = reinterpret_cast<const mlx5_wqe_srq_next_seg *>(w);
	const auto *d = reinterpret_cast<const mlx5_wqe_data_seg *>(w + sizeof(*next));
	EXPECT_EQ(be16toh(next->next_wqe_index), 0x1234);
	EXPECT_EQ(next->signature, 0);
	EXPECT_EQ(be32toh(d->byte_count), 256u);
	EXPECT_EQ(be32toh(d->lkey), 0xabcdef01u);
	EXPECT_EQ(be64toh(d->addr), 0x0102030405060708ull);
}

/* Our DC SEND WQE against the one rdma-core's inline setters write. */
TEST(HwFidelity, DcSendWqeMatchesMlx5dvSetters)
{
	const uint8_t payload[5] = {1, 2, 3, 4, 5};
	const uint32_t qpn = 0x123456, dctn = 0x00abcd;
	const uint64_t key = 0x1122334455667788ull;
	alignas(64) uint8_t ours[128] = {};
	int ds = mlx5_qpn_wqe_build_dc_send(ours, 0x4321, qpn, dctn, key, payload, sizeof(payload),
					    MLX5_WQE_CTRL_CQ_UPDATE);
	ASSERT_GT(ds, 0);

	alignas(64) uint8_t theirs[128] = {};
	auto *ctrl = reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs);
	mlx5dv_set_ctrl_seg(ctrl, 0x4321, MLX5_OPCODE_SEND, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE,
			    static_cast<uint8_t>(ds), 0, 0);
	auto *dg = reinterpret_cast<struct mlx5_wqe_datagram_seg *>(theirs + sizeof(*ctrl));
	uint8_t zero_mac[6] = {}, zero_gid[16] = {};
	/* A zero route on both sides: this compares the segment's layout, not a route. */
	mlx5dv_set_dgram_seg(dg, key, dctn, 1, 0, 0, 0, zero_mac, 0, 0, 0, zero_gid);
	auto *inl = reinterpret_cast<struct mlx5_wqe_inl_data_seg *>(theirs + sizeof(*ctrl) +
								     sizeof(*dg));
	inl->byte_count = htobe32(sizeof(payload) | MLX5_INLINE_SEG);
	memcpy(inl + 1, payload, sizeof(payload));
	expect_same(ours, theirs, static_cast<size_t>(ds) * MLX5_QPN_SEND_WQE_DS, "DC SEND WQE");
}

/* A CQE written through rdma-core's struct reads back through our parser. */
TEST(HwFidelity, CqeParsesWhatMlx5dvStructsHold)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.flags_rqpn = htobe32(0x00beef01);
	cqe.byte_cnt = htobe32(77);
	cqe.sop_drop_qpn = htobe32(uint32_t(MLX5_OPCODE_SEND) << 24 | 0x123456);
	cqe.wqe_counter = htobe16(0x9abc);
	cqe.op_own = uint8_t(MLX5_CQE_REQ << 4 | 1);
	mlx5_qpn_cqe_fields f{};
	mlx5_qpn_cqe_parse(reinterpret_cast<const uint8_t *>(&cqe), cqe.op_own, &f);
	EXPECT_EQ(f.opcode, mlx5dv_get_cqe_opcode(&cqe));
	EXPECT_EQ(f.owner, mlx5dv_get_cqe_owner(&cqe));
	EXPECT_EQ(f.src_qpn, 0xbeef01u);
	EXPECT_EQ(f.byte_cnt, 77u);
	EXPECT_EQ(f.wqe_opcode, MLX5_OPCODE_SEND);
	EXPECT_EQ(f.qpn, 0x123456u);
	EXPECT_EQ(f.wqe_counter, 0x9abc);

	struct mlx5_err_cqe err;
	memset(&err, 0, sizeof(err));
	err.syndrome = MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
	err.vendor_err_synd = 0x81;
	err.op_own = uint8_t(MLX5_CQE_REQ_ERR << 4);
	mlx5_qpn_cqe_parse(reinterpret_cast<const uint8_t *>(&err), err.op_own, &f);
	EXPECT_EQ(f.syndrome, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
	EXPECT_EQ(f.vendor_synd, 0x81);
}

/* ---- Command boxes against DEVX_SET / DEVX_GET. ---- */

TEST(HwFidelity, QueryHcaCapInboxMatchesDevxSet)
{
	for (uint16_t type : {MLX5_QPN_HCA_CAP_TYPE_GENERAL, MLX5_QPN_HCA_CAP_TYPE_GENERAL_2}) {
		uint32_t ours[DEVX_ST_SZ_DW(query_hca_cap_in)];
		uint32_t theirs[DEVX_ST_SZ_DW(query_hca_cap_in)] = {};
		static_assert(sizeof(ours) == MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN);
		const uint16_t op_mod = MLX5_QPN_HCA_CAP_OP_MOD(type, MLX5_QPN_HCA_CAP_OPMOD_CUR);
		ASSERT_EQ(mlx5_qpn_prm_query_hca_cap_in(ours, sizeof(ours), op_mod), 0);
		DEVX_SET(query_hca_cap_in, theirs, opcode, 0x100 /* MLX5_CMD_OP_QUERY_HCA_CAP */);
		/* rdma-core: MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE_CAP_2 = 0x20 << 1, cur = 1. */
		DEVX_SET(query_hca_cap_in, theirs, op_mod, (type << 1) | 1);
		expect_same(ours, theirs, sizeof(ours), "query_hca_cap_in");
	}
}

TEST(HwFidelity, ReservedQpnObjectInboxesMatchDevxSet)
{
	for (uint8_t log : {0, 7, 10, 24}) {
		uint32_t ours[DEVX_ST_SZ_DW(create_reserved_qpn_in)];
		uint32_t theirs[DEVX_ST_SZ_DW(create_reserved_qpn_in)] = {};
		static_assert(sizeof(ours) == MLX5_QPN_PRM_CREATE_RSVD_QPN_IN_LEN);
		ASSERT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(ours, sizeof(ours), log), 0);
		/* As rdma-core's reserved_qpn_blk_alloc() writes it. */
		void *hdr = DEVX_ADDR_OF(create_reserved_qpn_in, theirs, hdr);
		DEVX_SET(general_obj_in_cmd_hdr, hdr, opcode, 0xa00 /* CREATE_GENERAL_OBJECT */);
		DEVX_SET(general_obj_in_cmd_hdr, hdr, obj_type,
			 0x2c /* MLX5_OBJ_TYPE_RESERVED_QPN */);
		DEVX_SET(general_obj_in_cmd_hdr, hdr, log_obj_range, log);
		expect_same(ours, theirs, sizeof(ours), "create_reserved_qpn_in");
	}
	uint32_t ours[DEVX_ST_SZ_DW(general_obj_in_cmd_hdr)];
	uint32_t theirs[DEVX_ST_SZ_DW(general_obj_in_cmd_hdr)] = {};
	static_assert(sizeof(ours) == MLX5_QPN_PRM_DESTROY_OBJ_IN_LEN);
	ASSERT_EQ(mlx5_qpn_prm_destroy_obj_in(ours, sizeof(ours), MLX5_QPN_OBJ_TYPE_RESERVED_QPN,
					      0xabc400),
		  0);
	DEVX_SET(general_obj_in_cmd_hdr, theirs, opcode, 0xa03 /* DESTROY_GENERAL_OBJECT */);
	DEVX_SET(general_obj_in_cmd_hdr, theirs, obj_type, 0x2c);
	DEVX_SET(general_obj_in_cmd_hdr, theirs, obj_id, 0xabc400);
	expect_same(ours, theirs, sizeof(ours), "destroy general object");
}

TEST(HwFidelity, OutboxesParseWhatDevxSetWrites)
{
	/* CREATE_GENERAL_OBJECT: the object id; and a failing status. */
	uint32_t out[DEVX_ST_SZ_DW(general_obj_out_cmd_hdr)] = {};
	static_assert(sizeof(out) == MLX5_QPN_PRM_GENERAL_OBJ_OUT_LEN);
	DEVX_SET(general_obj_out_cmd_hdr, out, obj_id, 0x5400);
	uint32_t id = 0;
	ASSERT_EQ(mlx5_qpn_prm_create_obj_out_id(out, sizeof(out), &id), 0);
	EXPECT_EQ(id, 0x5400u);
	DEVX_SET(general_obj_out_cmd_hdr, out, status, MLX5_QPN_CMD_STAT_BAD_PARAM_ERR);
	DEVX_SET(general_obj_out_cmd_hdr, out, syndrome, 0xdeadbeef);
	uint8_t st = 0;
	uint32_t synd = 0;
	ASSERT_EQ(mlx5_qpn_prm_out_status(out, sizeof(out), &st, &synd), 0);
	EXPECT_EQ(st, MLX5_QPN_CMD_STAT_BAD_PARAM_ERR);
	EXPECT_EQ(synd, 0xdeadbeefu);

	/* QUERY_HCA_CAP(general): bit 44, log_max_qp and the hca_cap_2 gate. */
	std::vector<uint32_t> cap(DEVX_ST_SZ_DW(query_hca_cap_out), 0);
	ASSERT_EQ(cap.size() * 4, size_t(MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN));
	DEVX_SET64(query_hca_cap_out, cap.data(), capability.cmd_hca_cap.general_obj_types,
		   1ull << 0x2c | 1ull << 3);
	DEVX_SET(query_hca_cap_out, cap.data(), capability.cmd_hca_cap.log_max_qp, 18);
	DEVX_SET(query_hca_cap_out, cap.data(), capability.cmd_hca_cap.hca_cap_2, 1);
	mlx5_qpn_caps c{};
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap(cap.data(), cap.size() * 4, &c), 0);
	EXPECT_EQ(c.general_obj_types, 1ull << 0x2c | 1ull << 3);
	EXPECT_EQ(c.reserved_qpn_obj, 1);
	EXPECT_EQ(c.log_max_qp, 18);
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(cap.data(), cap.size() * 4), 1);
	DEVX_SET(query_hca_cap_out, cap.data(), capability.cmd_hca_cap.hca_cap_2, 0);
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(cap.data(), cap.size() * 4), 0);

	/* QUERY_HCA_CAP(caps 2): the granularity rdma-core reads. */
	std::fill(cap.begin(), cap.end(), 0);
	DEVX_SET(query_hca_cap_out, cap.data(),
		 capability.cmd_hca_cap_2.log_reserved_qpn_granularity, 9);
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap_2(cap.data(), cap.size() * 4, &c), 0);
	EXPECT_EQ(c.log_reserved_qpn_granularity, 9);
}

/* The outboxes the emulated device writes read back through DEVX_GET. */
TEST(HwFidelity, EmulatedOutboxesReadByDevxGet)
{
	mlx5_qpn_caps c{};
	c.general_obj_types = 1ull << 0x2c;
	c.log_max_qp = 17;
	c.log_reserved_qpn_granularity = 6;
	std::vector<uint32_t> out(DEVX_ST_SZ_DW(query_hca_cap_out), 0);
	ASSERT_EQ(mlx5_qpn_prm_hca_cap_out(out.data(), out.size() * 4,
					   MLX5_QPN_HCA_CAP_OP_MOD(MLX5_QPN_HCA_CAP_TYPE_GENERAL,
								   1),
					   &c),
		  0);
	EXPECT_EQ(DEVX_GET64(query_hca_cap_out, out.data(),
			     capability.cmd_hca_cap.general_obj_types),
		  1ull << 0x2c);
	EXPECT_EQ(DEVX_GET(query_hca_cap_out, out.data(), capability.cmd_hca_cap.log_max_qp), 17u);
	ASSERT_EQ(mlx5_qpn_prm_hca_cap_out(out.data(), out.size() * 4,
					   MLX5_QPN_HCA_CAP_OP_MOD(MLX5_QPN_HCA_CAP_TYPE_GENERAL_2,
								   1),
					   &c),
		  0);
	EXPECT_EQ(DEVX_GET(query_hca_cap_out, out.data(),
			   capability.cmd_hca_cap_2.log_reserved_qpn_granularity),
		  6u);
	uint32_t obj[DEVX_ST_SZ_DW(general_obj_out_cmd_hdr)];
	ASSERT_EQ(mlx5_qpn_prm_create_obj_out(obj, sizeof(obj), 0x7700), 0);
	EXPECT_EQ(DEVX_GET(general_obj_out_cmd_hdr, obj, obj_id), 0x7700u);
	EXPECT_EQ(DEVX_GET(general_obj_out_cmd_hdr, obj, status), 0u);
}

/* hca_cap_2's offset as rdma-core's layout has it. */
TEST(HwFidelity, HcaCap2BitOffset)
{
	EXPECT_EQ(offsetof(mlx5_ifc_cmd_hca_cap_bits, hca_cap_2),
		  size_t(MLX5_QPN_HW_CAP_HCA_CAP_2_BIT));
	EXPECT_EQ(sizeof(mlx5_ifc_cmd_hca_cap_bits::hca_cap_2), 1u);
}

/* The caps-2 fields rdma-core lacks, against DPDK's table (and the granularity both have). */
TEST(HwFidelity, Caps2FieldsAgainstDpdkTable)
{
	for (const cap2_row &r : dpdk_cap2) {
		EXPECT_EQ(r.ours.bit_off, r.dpdk.bit_off) << r.name;
		EXPECT_EQ(r.ours.width, r.dpdk.width) << r.name;
	}
	/* Where DPDK and rdma-core both name a field, they agree. */
	EXPECT_EQ(dpdk_cap2[1].dpdk.bit_off,
		  offsetof(mlx5_ifc_cmd_hca_cap_2_bits, log_reserved_qpn_granularity));
	EXPECT_EQ(dpdk_cap2[1].dpdk.width,
		  sizeof(mlx5_ifc_cmd_hca_cap_2_bits::log_reserved_qpn_granularity));
	/* Values written by our accessors land where DPDK's layout puts them. */
	std::vector<uint8_t> out(MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN, 0);
	uint8_t *cap2 = out.data() + MLX5_QPN_PRM_HCA_CAP_OFFSET;
	prm::set(cap2, dpdk_cap2[0].dpdk, 17);
	prm::set(cap2, dpdk_cap2[1].dpdk, 8);
	prm::set(cap2, dpdk_cap2[2].dpdk, 12);
	mlx5_qpn_caps c{};
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap_2(out.data(), out.size(), &c), 0);
	EXPECT_EQ(c.log_max_num_reserved_qpn, 17);
	EXPECT_EQ(c.log_reserved_qpn_granularity, 8);
	EXPECT_EQ(c.log_reserved_qpn_max_alloc, 12);
}
