/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PRM command layouts, byte for byte. Expected buffers are written out by hand from the PRM
 * tables (mlx5_ifc.h offsets), not produced by the accessors under test.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/mlx5_qpn_prm.h"

namespace {

std::vector<uint8_t>
as_bytes(const uint32_t *p, size_t len)
{
	const auto *b = reinterpret_cast<const uint8_t *>(p);
	return std::vector<uint8_t>(b, b + len);
}

/* A QUERY_HCA_CAP outbox the size the device returns, filled with a recognisable value. */
std::vector<uint8_t>
hca_out(uint8_t fill = 0)
{
	return std::vector<uint8_t>(MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN, fill);
}

} // namespace

TEST(HwPrm, QueryHcaCapInGeneralCurrent)
{
	uint32_t in[4];
	std::memset(in, 0xa5, sizeof(in));
	ASSERT_EQ(
		mlx5_qpn_prm_query_hca_cap_in(in, sizeof(in),
					      MLX5_QPN_HCA_CAP_OP_MOD(MLX5_QPN_HCA_CAP_TYPE_GENERAL,
								      MLX5_QPN_HCA_CAP_OPMOD_CUR)),
		0);
	const std::vector<uint8_t> want = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
					   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	EXPECT_EQ(as_bytes(in, sizeof(in)), want);
}

TEST(HwPrm, QueryHcaCapInCaps2CurrentAndMax)
{
	uint32_t in[4];
	ASSERT_EQ(mlx5_qpn_prm_query_hca_cap_in(
			  in, sizeof(in),
			  MLX5_QPN_HCA_CAP_OP_MOD(MLX5_QPN_HCA_CAP_TYPE_GENERAL_2,
						  MLX5_QPN_HCA_CAP_OPMOD_CUR)),
		  0);
	std::vector<uint8_t> want = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x41,
				     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	EXPECT_EQ(as_bytes(in, sizeof(in)), want);

	ASSERT_EQ(mlx5_qpn_prm_query_hca_cap_in(
			  in, sizeof(in),
			  MLX5_QPN_HCA_CAP_OP_MOD(MLX5_QPN_HCA_CAP_TYPE_GENERAL_2,
						  MLX5_QPN_HCA_CAP_OPMOD_MAX)),
		  0);
	want[7] = 0x40;
	EXPECT_EQ(as_bytes(in, sizeof(in)), want);
}

TEST(HwPrm, QueryHcaCapInRejectsShortOrNull)
{
	uint32_t in[4];
	EXPECT_EQ(mlx5_qpn_prm_query_hca_cap_in(in, 15, 1), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_query_hca_cap_in(nullptr, 16, 1), -EINVAL);
}

TEST(HwPrm, CreateReservedQpnInSeveralRanges)
{
	/* opcode 0x0a00 | obj_type 0x002c | obj_id 0 | log_obj_range in bits 0x63..0x67. */
	for (uint8_t log : {0, 1, 8, 10, 17, 24}) {
		uint32_t in[8];
		std::memset(in, 0xff, sizeof(in));
		ASSERT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(in, sizeof(in), log), 0);
		std::vector<uint8_t> want = {0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c,
					     0x00, 0x00, 0x00, 0x00, log,  0x00, 0x00, 0x00,
					     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
		EXPECT_EQ(as_bytes(in, sizeof(in)), want) << "log_range " << int(log);
	}
}

TEST(HwPrm, CreateReservedQpnInRejectsBadInput)
{
	uint32_t in[8];
	EXPECT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(in, sizeof(in), 25), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(in, sizeof(in), 31), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(in, 16, 4), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_create_rsvd_qpn_in(nullptr, 32, 4), -EINVAL);
}

TEST(HwPrm, DestroyGeneralObjectIn)
{
	uint32_t in[4];
	std::memset(in, 0x5a, sizeof(in));
	ASSERT_EQ(mlx5_qpn_prm_destroy_obj_in(in, sizeof(in), MLX5_QPN_OBJ_TYPE_RESERVED_QPN,
					      0x00abcd00),
		  0);
	const std::vector<uint8_t> want = {0x0a, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c,
					   0x00, 0xab, 0xcd, 0x00, 0x00, 0x00, 0x00, 0x00};
	EXPECT_EQ(as_bytes(in, sizeof(in)), want);
	EXPECT_EQ(mlx5_qpn_prm_destroy_obj_in(in, 12, 0x2c, 1), -EINVAL);
}

TEST(HwPrm, InboxParsersDecodeWhatBuildersWrote)
{
	/* Hand-built CREATE inbox with a uid the kernel would stamp. */
	const uint8_t create[32] = {0x0a, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x2c,
				    0x00, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x00, 0x00};
	struct mlx5_qpn_prm_obj_hdr hdr;
	ASSERT_EQ(mlx5_qpn_prm_obj_hdr_parse(create, sizeof(create), &hdr), 0);
	EXPECT_EQ(hdr.opcode, MLX5_QPN_CMD_OP_CREATE_GENERAL_OBJECT);
	EXPECT_EQ(hdr.uid, 0x1234);
	EXPECT_EQ(hdr.obj_type, MLX5_QPN_OBJ_TYPE_RESERVED_QPN);
	EXPECT_EQ(hdr.obj_id, 0u);
	/* 0xe9: reserved bits 111 then log_obj_range 01001 = 9. */
	EXPECT_EQ(hdr.log_obj_range, 9);

	uint32_t destroy[4];
	ASSERT_EQ(mlx5_qpn_prm_destroy_obj_in(destroy, sizeof(destroy), 0x2c, 0x800400), 0);
	ASSERT_EQ(mlx5_qpn_prm_obj_hdr_parse(destroy, sizeof(destroy), &hdr), 0);
	EXPECT_EQ(hdr.opcode, MLX5_QPN_CMD_OP_DESTROY_GENERAL_OBJECT);
	EXPECT_EQ(hdr.obj_id, 0x800400u);

	const uint8_t query[16] = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x41};
	uint16_t opcode = 0, op_mod = 0;
	ASSERT_EQ(mlx5_qpn_prm_in_opcode(query, sizeof(query), &opcode, &op_mod), 0);
	EXPECT_EQ(opcode, MLX5_QPN_CMD_OP_QUERY_HCA_CAP);
	EXPECT_EQ(op_mod, 0x41);
	EXPECT_EQ(mlx5_qpn_prm_in_opcode(query, 7, &opcode, &op_mod), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_obj_hdr_parse(create, 15, &hdr), -EINVAL);
}

TEST(HwPrm, ParseHcaCapGeneral)
{
	auto out = hca_out(0);
	/* general_obj_types (cap bit 0x400 = outbox byte 16 + 128): bits 44 and 1 set. */
	const uint8_t got[8] = {0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x02};
	std::memcpy(&out[16 + 128], got, sizeof(got));
	/* log_max_qp (cap bits 0x9b..0x9f = low 5 bits of outbox byte 35), reserved bits set. */
	out[35] = 0xe0 | 18;
	out[34] = 0xff; /* neighbouring fields must not leak in */
	mlx5_qpn_caps caps{};
	caps.nb_ports = 2; /* untouched by the parser */
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap(out.data(), out.size(), &caps), 0);
	EXPECT_EQ(caps.general_obj_types, 0x0000100000000002ull);
	EXPECT_EQ(caps.general_obj_types & MLX5_QPN_HCA_CAP_GENERAL_OBJECT_TYPES_RESERVED_QPN,
		  1ull << 44);
	EXPECT_EQ(caps.reserved_qpn_obj, 1);
	EXPECT_EQ(caps.log_max_qp, 18);
	EXPECT_EQ(caps.nb_ports, 2);
}

TEST(HwPrm, ParseHcaCapBit44Clear)
{
	auto out = hca_out(0);
	/* Every general_obj_types bit but 44. */
	const uint8_t got[8] = {0xff, 0xff, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff};
	std::memcpy(&out[144], got, sizeof(got));
	mlx5_qpn_caps caps{};
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap(out.data(), out.size(), &caps), 0);
	EXPECT_EQ(caps.general_obj_types, 0xffffefffffffffffull);
	EXPECT_EQ(caps.reserved_qpn_obj, 0);
	EXPECT_EQ(MLX5_QPN_HCA_CAP_GENERAL_OBJECT_TYPES_RESERVED_QPN, 0x0000100000000000ull);
}

TEST(HwPrm, ParseHcaCap2)
{
	auto out = hca_out(0);
	/* Caps 2 DW 4 (outbox bytes 32..35): max_num_prog_sample_field, log_max_num_reserved_qpn,
	 * log_reserved_qpn_granularity, log_reserved_qpn_max_alloc, each in the low 5 bits. */
	out[32] = 0x1f;
	out[33] = 0xe0 | 16;
	out[34] = 0xe0 | 3;
	out[35] = 0xe0 | 10;
	mlx5_qpn_caps caps{};
	caps.log_max_qp = 17;
	ASSERT_EQ(mlx5_qpn_prm_parse_hca_cap_2(out.data(), out.size(), &caps), 0);
	EXPECT_EQ(caps.log_max_num_reserved_qpn, 16);
	EXPECT_EQ(caps.log_reserved_qpn_granularity, 3);
	EXPECT_EQ(caps.log_reserved_qpn_max_alloc, 10);
	EXPECT_EQ(caps.log_max_qp, 17);
}

TEST(HwPrm, ParseHcaCapRejectsShortAndFailedOutbox)
{
	auto out = hca_out(0);
	mlx5_qpn_caps caps{};
	EXPECT_EQ(mlx5_qpn_prm_parse_hca_cap(out.data(), out.size() - 1, &caps), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_parse_hca_cap_2(nullptr, out.size(), &caps), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_parse_hca_cap(out.data(), out.size(), nullptr), -EINVAL);
	out[0] = MLX5_QPN_CMD_STAT_BAD_PARAM_ERR;
	out[35] = 9;
	EXPECT_EQ(mlx5_qpn_prm_parse_hca_cap_2(out.data(), out.size(), &caps), -EINVAL);
	EXPECT_EQ(caps.log_reserved_qpn_max_alloc, 0) << "a failed command must not fill caps";
}

TEST(HwPrm, OutStatusAndSyndrome)
{
	const uint8_t out[16] = {0x08, 0x00, 0x00, 0x00, 0x12, 0x34,
				 0x56, 0x78, 0x00, 0x01, 0x23, 0x00};
	uint8_t status = 0;
	uint32_t syndrome = 0;
	ASSERT_EQ(mlx5_qpn_prm_out_status(out, sizeof(out), &status, &syndrome), 0);
	EXPECT_EQ(status, MLX5_QPN_CMD_STAT_LIM_ERR);
	EXPECT_EQ(syndrome, 0x12345678u);
	uint32_t id = 7;
	EXPECT_EQ(mlx5_qpn_prm_create_obj_out_id(out, sizeof(out), &id), -ENOMEM);
	EXPECT_EQ(id, 7u);
	EXPECT_EQ(mlx5_qpn_prm_out_status(out, 7, &status, &syndrome), -EINVAL);

	const uint8_t ok[16] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
				0x00, 0x00, 0x00, 0x01, 0x23, 0x00};
	ASSERT_EQ(mlx5_qpn_prm_create_obj_out_id(ok, sizeof(ok), &id), 0);
	EXPECT_EQ(id, 0x012300u);
	EXPECT_EQ(mlx5_qpn_prm_create_obj_out_id(ok, 12, &id), -EINVAL);
}

TEST(HwPrm, StatusToErrno)
{
	struct {
		uint8_t status;
		int err;
	} const table[] = {
		{MLX5_QPN_CMD_STAT_OK, 0},
		{MLX5_QPN_CMD_STAT_INT_ERR, -EIO},
		{MLX5_QPN_CMD_STAT_BAD_OP_ERR, -EINVAL},
		{MLX5_QPN_CMD_STAT_BAD_PARAM_ERR, -EINVAL},
		{MLX5_QPN_CMD_STAT_BAD_SYS_STATE_ERR, -EIO},
		{MLX5_QPN_CMD_STAT_BAD_RES_ERR, -EINVAL},
		{MLX5_QPN_CMD_STAT_RES_BUSY, -EBUSY},
		{MLX5_QPN_CMD_STAT_LIM_ERR, -ENOMEM},
		{MLX5_QPN_CMD_STAT_NOT_READY, -EAGAIN},
		{MLX5_QPN_CMD_STAT_IX_ERR, -EINVAL},
		{MLX5_QPN_CMD_STAT_NO_RES_ERR, -EAGAIN},
		{MLX5_QPN_CMD_STAT_BAD_INP_LEN_ERR, -EIO},
		{0x77, -EIO},
	};
	for (const auto &t : table) {
		EXPECT_EQ(mlx5_qpn_fw_status_to_errno(t.status), t.err)
			<< "status " << int(t.status);
		/* The same through an outbox. */
		uint8_t out[16] = {t.status};
		uint32_t id = 0;
		EXPECT_EQ(mlx5_qpn_prm_create_obj_out_id(out, sizeof(out), &id), t.err);
	}
}

TEST(HwPrm, OutboxBuildersByteForByte)
{
	uint8_t out[16];
	std::memset(out, 0xcc, sizeof(out));
	ASSERT_EQ(mlx5_qpn_prm_out_set_status(out, sizeof(out), 0x0f, 0xdeadbeef), 0);
	const uint8_t want_status[16] = {0x0f, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef};
	EXPECT_EQ(0, std::memcmp(out, want_status, sizeof(out)));

	ASSERT_EQ(mlx5_qpn_prm_create_obj_out(out, sizeof(out), 0x00fedc00), 0);
	const uint8_t want_id[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xfe, 0xdc, 0x00};
	EXPECT_EQ(0, std::memcmp(out, want_id, sizeof(out)));

	mlx5_qpn_caps caps{};
	caps.general_obj_types = 1ull << 44;
	caps.log_max_qp = 18;
	caps.log_reserved_qpn_granularity = 2;
	caps.log_reserved_qpn_max_alloc = 12;
	caps.log_max_num_reserved_qpn = 20;
	auto gen = hca_out(0xcc);
	ASSERT_EQ(mlx5_qpn_prm_hca_cap_out(gen.data(), gen.size(), 0x1, &caps), 0);
	auto want = hca_out(0);
	want[146] = 0x10;
	want[35] = 18;
	EXPECT_EQ(gen, want);

	auto two = hca_out(0xcc);
	ASSERT_EQ(mlx5_qpn_prm_hca_cap_out(two.data(), two.size(), 0x41, &caps), 0);
	want = hca_out(0);
	want[33] = 20;
	want[34] = 2;
	want[35] = 12;
	EXPECT_EQ(two, want);

	EXPECT_EQ(mlx5_qpn_prm_hca_cap_out(two.data(), two.size(), 0x3, &caps), -EINVAL);
	EXPECT_EQ(mlx5_qpn_prm_hca_cap_out(two.data(), 100, 0x1, &caps), -EINVAL);
}

TEST(HwPrm, ClampLogRange)
{
	mlx5_qpn_caps caps{};
	caps.log_reserved_qpn_granularity = 3;
	caps.log_reserved_qpn_max_alloc = 10;
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 0), 3);
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 3), 3);
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 7), 7);
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 10), 10);
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 30), 10);
	/* Old firmware: max_alloc 0 means "only the granularity". */
	caps.log_reserved_qpn_max_alloc = 0;
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 8), 3);
	/* Never beyond the 24-bit QPN space. */
	caps.log_reserved_qpn_granularity = 0;
	caps.log_reserved_qpn_max_alloc = 31;
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(&caps, 31), MLX5_QPN_PRM_MAX_LOG_RANGE);
	EXPECT_EQ(mlx5_qpn_prm_clamp_log_range(nullptr, 5), 0);
}

TEST(HwPrm, ConstexprAccessors)
{
	/* The C++ accessors are usable at compile time (the emulated device builds on them). */
	constexpr auto roundtrip = [] {
		uint8_t b[16] = {};
		mlx5_qpn_prm::set(b, mlx5_qpn_prm::obj_in_log_range,
				  0xff); /* truncated to 5 bits */
		return mlx5_qpn_prm::get(b, mlx5_qpn_prm::obj_in_log_range) == 0x1f &&
		       b[12] == 0x1f && b[11] == 0 && b[13] == 0;
	};
	static_assert(roundtrip());
	static_assert(mlx5_qpn_prm::field_ok(mlx5_qpn_prm::cap_general_obj_types));
	static_assert(!mlx5_qpn_prm::field_ok(mlx5_qpn_prm::field{0x1e, 4}));
	EXPECT_TRUE(roundtrip());
}
