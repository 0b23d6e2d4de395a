/* SPDX-License-Identifier: BSD-3-Clause */
/* CM frames: encoding round trips, validation of malformed and truncated frames, timewait. */
#include "cm_test_util.h"

#include <cerrno>

using namespace cmtest;

namespace {

/* A valid message of each type, with every field it carries set to a non-default value. */
mlx5_qpn_cm_msg
sample(uint8_t type)
{
	mlx5_qpn_cm_msg m = msg(type, 0x0002c90300a1b2c3ull, 0x00010001, 0x00020007);
	switch (type) {
	case MLX5_QPN_CM_MSG_REQ:
		m.remote_comm_id = 0;
		m.service_id = 0x0106000000004791ull;
		m.qpn = 0xABCDEF;
		m.packet_life_time = 16;
		m.ack_delay = 15;
		m.cm_response_timeout = 20;
		m.max_cm_retries = 15;
		break;
	case MLX5_QPN_CM_MSG_REP:
		m.qpn = 0x123456;
		m.ack_delay = 31;
		break;
	case MLX5_QPN_CM_MSG_REJ:
		m.reason = MLX5_QPN_CM_REJ_STALE_CONN;
		m.msg_ref = MLX5_QPN_CM_REF_REQ;
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		m.qpn = 0xFFFFFF;
		break;
	case MLX5_QPN_CM_MSG_MRA:
		m.msg_ref = MLX5_QPN_CM_REF_REP;
		m.service_timeout = 31;
		break;
	default:
		break;
	}
	m.private_data_len = 5;
	std::memcpy(m.private_data, "\x01\x02\x03\x04\x05", 5);
	return m;
}

const uint8_t kAllTypes[] = {MLX5_QPN_CM_MSG_REQ, MLX5_QPN_CM_MSG_MRA, MLX5_QPN_CM_MSG_REJ,
			     MLX5_QPN_CM_MSG_REP, MLX5_QPN_CM_MSG_RTU, MLX5_QPN_CM_MSG_DREQ,
			     MLX5_QPN_CM_MSG_DREP};

std::vector<uint8_t>
encode(const mlx5_qpn_cm_msg &m)
{
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	EXPECT_GT(len, 0);
	return std::vector<uint8_t>(buf, buf + (len > 0 ? len : 0));
}

int
decode(const std::vector<uint8_t> &f)
{
	mlx5_qpn_cm_msg out;
	return mlx5_qpn_cm_msg_decode(f.data(), f.size(), &out);
}

} // namespace

TEST(CmMsg, RoundTripEveryType)
{
	for (uint8_t t : kAllTypes) {
		SCOPED_TRACE(mlx5_qpn_cm_msg_name(t));
		mlx5_qpn_cm_msg in = sample(t);
		std::vector<uint8_t> f = encode(in);
		mlx5_qpn_cm_msg out;
		ASSERT_EQ(mlx5_qpn_cm_msg_decode(f.data(), f.size(), &out), 0);
		EXPECT_EQ(out.type, in.type);
		EXPECT_EQ(out.src_guid, in.src_guid);
		EXPECT_EQ(out.local_comm_id, in.local_comm_id);
		EXPECT_EQ(out.remote_comm_id, in.remote_comm_id);
		EXPECT_EQ(out.service_id, in.service_id);
		EXPECT_EQ(out.qpn, in.qpn);
		EXPECT_EQ(out.packet_life_time, in.packet_life_time);
		EXPECT_EQ(out.ack_delay, in.ack_delay);
		EXPECT_EQ(out.cm_response_timeout, in.cm_response_timeout);
		EXPECT_EQ(out.max_cm_retries, in.max_cm_retries);
		EXPECT_EQ(out.msg_ref, in.msg_ref);
		EXPECT_EQ(out.service_timeout, in.service_timeout);
		EXPECT_EQ(out.reason, in.reason);
		ASSERT_EQ(out.private_data_len, 5);
		EXPECT_EQ(std::memcmp(out.private_data, in.private_data, 5), 0);
		/* Network byte order: the GUID's first byte is its most significant one. */
		EXPECT_EQ(f[8], 0x00);
		EXPECT_EQ(f[9], 0x02);
		EXPECT_EQ(f[3], t);
	}
}

TEST(CmMsg, PrivateDataLimitsAreIbas)
{
	const std::pair<uint8_t, uint8_t> limits[] = {{MLX5_QPN_CM_MSG_REQ, 92},
						      {MLX5_QPN_CM_MSG_MRA, 222},
						      {MLX5_QPN_CM_MSG_REJ, 148},
						      {MLX5_QPN_CM_MSG_REP, 196},
						      {MLX5_QPN_CM_MSG_RTU, 224},
						      {MLX5_QPN_CM_MSG_DREQ, 220},
						      {MLX5_QPN_CM_MSG_DREP, 224}};
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	for (auto [t, max] : limits) {
		SCOPED_TRACE(mlx5_qpn_cm_msg_name(t));
		EXPECT_EQ(mlx5_qpn_cm_private_data_max(t), max);
		mlx5_qpn_cm_msg m = sample(t);
		m.private_data_len = max;
		int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
		ASSERT_GT(len, 0);
		EXPECT_LE(len, MLX5_QPN_CM_FRAME_MAX);
		mlx5_qpn_cm_msg out;
		EXPECT_EQ(mlx5_qpn_cm_msg_decode(buf, size_t(len), &out), 0);
		m.private_data_len = uint8_t(max + 1);
		EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	}
	EXPECT_EQ(mlx5_qpn_cm_private_data_max(0x17), 0);
}

TEST(CmMsg, EncodeChecksArgumentsAndSpace)
{
	mlx5_qpn_cm_msg m = sample(MLX5_QPN_CM_MSG_REQ);
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(nullptr, buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, nullptr, sizeof(buf)), -EINVAL);
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	ASSERT_GT(len, 0);
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, buf, size_t(len - 1)), -ENOSPC);
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, buf, size_t(len)), len);
	mlx5_qpn_cm_msg out;
	EXPECT_EQ(mlx5_qpn_cm_msg_decode(nullptr, 10, &out), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_msg_decode(buf, size_t(len), nullptr), -EINVAL);
}

TEST(CmMsg, EveryTruncationAndPaddingIsRejected)
{
	for (uint8_t t : kAllTypes) {
		SCOPED_TRACE(mlx5_qpn_cm_msg_name(t));
		std::vector<uint8_t> f = encode(sample(t));
		mlx5_qpn_cm_msg out;
		for (size_t n = 0; n < f.size(); n++)
			EXPECT_EQ(mlx5_qpn_cm_msg_decode(f.data(), n, &out), -EBADMSG)
				<< "length " << n;
		std::vector<uint8_t> padded = f;
		padded.push_back(0);
		EXPECT_EQ(decode(padded), -EBADMSG);
		/* Length field disagreeing with the real length. */
		std::vector<uint8_t> lied = f;
		lied[5] ^= 1;
		EXPECT_EQ(decode(lied), -EBADMSG);
		/* Private data length disagreeing with the frame. */
		std::vector<uint8_t> pd = f;
		pd[6] = uint8_t(pd[6] + 1);
		EXPECT_EQ(decode(pd), -EBADMSG);
	}
}

TEST(CmMsg, HeaderErrors)
{
	std::vector<uint8_t> f = encode(sample(MLX5_QPN_CM_MSG_RTU));
	auto bad = f;
	bad[0] ^= 0xFF;
	EXPECT_EQ(decode(bad), -EPROTO) << "magic";
	bad = f;
	bad[2] = 2;
	EXPECT_EQ(decode(bad), -EPROTO) << "version";
	for (int t : {0x00, 0x0F, 0x17, 0x18, 0x19, 0xFF}) {
		bad = f;
		bad[3] = uint8_t(t);
		EXPECT_EQ(decode(bad), -EPROTO) << "type " << t;
	}
	bad = f;
	bad[7] = 1;
	EXPECT_EQ(decode(bad), -ERANGE) << "reserved header byte";
}

/* Table: type, byte offset in the frame, value written, expected error. */
struct FieldCase {
	uint8_t type;
	size_t off;
	uint8_t value;
	const char *what;
};

TEST(CmMsg, FieldRangesAreChecked)
{
	const FieldCase cases[] = {
		{MLX5_QPN_CM_MSG_REQ, 24 + 8, 0x01, "REQ QPN above 24 bits"},
		{MLX5_QPN_CM_MSG_REQ, 24 + 12, 32, "REQ packet life time > 31"},
		{MLX5_QPN_CM_MSG_REQ, 24 + 13, 32, "REQ ack delay > 31"},
		{MLX5_QPN_CM_MSG_REQ, 24 + 14, 32, "REQ response timeout > 31"},
		{MLX5_QPN_CM_MSG_REQ, 24 + 15, 16, "REQ retries > 15"},
		{MLX5_QPN_CM_MSG_REQ, 23, 1, "REQ with a remote comm id"},
		{MLX5_QPN_CM_MSG_REP, 24 + 0, 0x80, "REP QPN above 24 bits"},
		{MLX5_QPN_CM_MSG_REP, 24 + 4, 32, "REP ack delay > 31"},
		{MLX5_QPN_CM_MSG_REP, 24 + 6, 1, "REP reserved byte"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 1, 0, "REJ reason 0"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 1, 34, "REJ reason 34 (unassigned)"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 1, 36, "REJ reason 36"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 0, 1, "REJ reason 266"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 2, 3, "REJ message rejected 3"},
		{MLX5_QPN_CM_MSG_REJ, 24 + 3, 1, "REJ reserved byte"},
		{MLX5_QPN_CM_MSG_DREQ, 24 + 0, 0x01, "DREQ QPN above 24 bits"},
		{MLX5_QPN_CM_MSG_MRA, 24 + 0, 3, "MRA message MRAed 3"},
		{MLX5_QPN_CM_MSG_MRA, 24 + 1, 32, "MRA service timeout > 31"},
		{MLX5_QPN_CM_MSG_MRA, 24 + 3, 1, "MRA reserved bytes"},
		{MLX5_QPN_CM_MSG_RTU, 19, 0, "RTU with local comm id 0"},
		{MLX5_QPN_CM_MSG_DREP, 23, 0, "DREP with remote comm id 0"},
		{MLX5_QPN_CM_MSG_REP, 15, 0, "source GUID 0"},
	};
	for (const FieldCase &c : cases) {
		SCOPED_TRACE(c.what);
		mlx5_qpn_cm_msg m = sample(c.type);
		if (c.what == std::string("source GUID 0"))
			m.src_guid = 0xFF; /* then byte 15 = 0 makes it 0 */
		if (c.type == MLX5_QPN_CM_MSG_RTU)
			m.local_comm_id = 1;
		if (c.type == MLX5_QPN_CM_MSG_DREP)
			m.remote_comm_id = 1;
		std::vector<uint8_t> f = encode(m);
		ASSERT_EQ(decode(f), 0);
		f[c.off] = c.value;
		EXPECT_EQ(decode(f), -ERANGE);
	}
	/* The encoder refuses the same values. */
	mlx5_qpn_cm_msg m = sample(MLX5_QPN_CM_MSG_REQ);
	m.qpn = MLX5_QPN_CM_QPN_MAX + 1;
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = sample(MLX5_QPN_CM_MSG_REJ);
	m.local_comm_id = m.remote_comm_id = 0;
	EXPECT_EQ(mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.remote_comm_id = 7; /* a REJ needs one of the two ids */
	EXPECT_GT(mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf)), 0);
}

TEST(CmMsg, RejectReasonsAreIbas)
{
	int valid = 0;
	for (unsigned r = 0; r < 300; r++) {
		bool expect = (r >= 1 && r <= 33) || r == 35;
		EXPECT_EQ(mlx5_qpn_cm_rej_reason_valid(uint16_t(r)) != 0, expect) << r;
		valid += expect;
		if (expect) {
			EXPECT_STRNE(mlx5_qpn_cm_rej_reason_name(uint16_t(r)), "?") << r;
		} else {
			EXPECT_STREQ(mlx5_qpn_cm_rej_reason_name(uint16_t(r)), "?") << r;
		}
	}
	EXPECT_EQ(valid, 34);
	EXPECT_STREQ(mlx5_qpn_cm_rej_reason_name(10), "STALE_CONN");
	EXPECT_STREQ(mlx5_qpn_cm_rej_reason_name(28), "CONSUMER_DEFINED");
	EXPECT_STREQ(mlx5_qpn_cm_msg_name(MLX5_QPN_CM_MSG_DREQ), "DREQ");
	EXPECT_STREQ(mlx5_qpn_cm_state_name(MLX5_QPN_CM_STATE_TIMEWAIT), "TIMEWAIT");
	EXPECT_STREQ(mlx5_qpn_cm_state_name(99), "?");
}

/* Worked values of Linux's cm_ack_timeout() and cm_convert_to_ms(), computed by hand. */
struct TwCase {
	uint8_t plt, delay, t;
	uint32_t ms;
};

TEST(CmTimewait, WorkedValues)
{
	const TwCase cases[] = {
		{16, 16, 18, 1024}, /* the brief's example: 17 vs 16 are within one -> 18 */
		{0, 0, 2, 1},       /* 1 vs 0 -> 2; below 8 rounds up to 1 ms */
		{14, 14, 16, 256},
		{8, 0, 9, 2}, /* delay far below the round trip: t = plt + 1 */
		{18, 10, 19, 2048},
		{10, 20, 20, 4096},       /* delay dominates: t = delay */
		{18, 20, 21, 8192},       /* 19 vs 20 within one -> 21 */
		{17, 16, 18, 1024},       /* 18 vs 16: two apart -> 18 */
		{15, 16, 17, 512},        /* 16 vs 16 -> 17 */
		{31, 31, 31, 1u << 23},   /* capped at 31 */
		{200, 200, 31, 1u << 23}, /* out-of-range inputs clamp */
	};
	for (const TwCase &c : cases) {
		SCOPED_TRACE(testing::Message()
			     << "plt " << int(c.plt) << " delay " << int(c.delay));
		EXPECT_EQ(mlx5_qpn_cm_ack_timeout(c.plt, c.delay), c.t);
		EXPECT_EQ(mlx5_qpn_cm_timewait_ms(c.plt, c.delay), c.ms);
	}
}

TEST(CmTimewait, MonotoneInBothArguments)
{
	for (unsigned p = 0; p < 32; p++)
		for (unsigned d = 0; d < 32; d++) {
			uint32_t ms = mlx5_qpn_cm_timewait_ms(uint8_t(p), uint8_t(d));
			EXPECT_GE(ms, 1u);
			if (p < 31) {
				EXPECT_LE(ms, mlx5_qpn_cm_timewait_ms(uint8_t(p + 1), uint8_t(d)));
			}
			if (d < 31) {
				EXPECT_LE(ms, mlx5_qpn_cm_timewait_ms(uint8_t(p), uint8_t(d + 1)));
			}
		}
}
