/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CM frame encoding, decoding and validation, plus the timewait formula.
 *
 * Frame layout (all integers in network byte order). The real IBA CM MADs are 256-byte MADs
 * with many path fields this model does not need; this encoding carries only what the CM state
 * machines and the stale-connection check use, and is exact in length so that a truncated or
 * padded frame is always detected.
 *
 *   off size field
 *     0    2 magic 0x4D51 ("MQ")
 *     2    1 version (1)
 *     3    1 type (IBA attribute id 0x10..0x16)
 *     4    2 total frame length, header included
 *     6    1 private data length
 *     7    1 reserved, 0
 *     8    8 sender's node GUID
 *    16    4 sender's (local) comm id
 *    20    4 receiver's (remote) comm id
 *    24      per-type body, then the private data:
 *   REQ  16: service id u64, QPN u32 (high byte 0), packet life time u8, ACK delay u8,
 *            CM response timeout u8, max CM retries u8
 *   REP   8: QPN u32 (high byte 0), ACK delay u8, 3 reserved bytes (0)
 *   REJ   4: reason u16, message rejected u8, reserved u8 (0)
 *   DREQ  4: receiver's QPN u32 (high byte 0)
 *   MRA   4: message MRAed u8, service timeout u8, reserved u16 (0)
 *   RTU, DREP: no body
 */
#include "mlx5_qpn_cm.h"
#include "cm_internal.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace {

constexpr uint16_t kMagic = 0x4D51;
constexpr uint8_t kVersion = 1;
constexpr size_t kHeader = 24;

struct TypeInfo {
	const char *name;
	uint8_t body;   /* fixed body size after the header */
	uint8_t pd_max; /* IBA private data size of this message */
};

/* Indexed by type - 0x10. */
constexpr TypeInfo kTypes[7] = {
	{"REQ", 16, 92}, {"MRA", 4, 222},  {"REJ", 4, 148},  {"REP", 8, 196},
	{"RTU", 0, 224}, {"DREQ", 4, 220}, {"DREP", 0, 224},
};

const TypeInfo *
type_info(uint8_t type)
{
	if (type < MLX5_QPN_CM_MSG_REQ || type > MLX5_QPN_CM_MSG_DREP)
		return nullptr;
	return &kTypes[type - MLX5_QPN_CM_MSG_REQ];
}

/* Byte-wise big-endian access: frames come from the wire, so no alignment is assumed. */
void
put16(uint8_t *p, uint16_t v)
{
	p[0] = uint8_t(v >> 8);
	p[1] = uint8_t(v);
}
void
put32(uint8_t *p, uint32_t v)
{
	put16(p, uint16_t(v >> 16));
	put16(p + 2, uint16_t(v));
}
void
put64(uint8_t *p, uint64_t v)
{
	put32(p, uint32_t(v >> 32));
	put32(p + 4, uint32_t(v));
}
uint16_t
get16(const uint8_t *p)
{
	return uint16_t((p[0] << 8) | p[1]);
}
uint32_t
get32(const uint8_t *p)
{
	return (uint32_t(get16(p)) << 16) | get16(p + 2);
}
uint64_t
get64(const uint8_t *p)
{
	return (uint64_t(get32(p)) << 32) | get32(p + 4);
}

/*
 * Field rules shared by the encoder and the decoder, so that whatever encodes also decodes.
 * Comm ids: 0 means "none"; only a REQ has no remote id. A REJ needs one of the two: a CM
 * rejecting a REQ it made no connection for has no local id, and a requester giving up on a
 * REQ (timeout) does not know the remote one yet.
 */
int
check_fields(const mlx5_qpn_cm_msg &m)
{
	const TypeInfo *ti = type_info(m.type);
	if (ti == nullptr)
		return -EPROTO;
	if (m.private_data_len > ti->pd_max || m.src_guid == 0)
		return -ERANGE;
	switch (m.type) {
	case MLX5_QPN_CM_MSG_REQ:
		if (m.local_comm_id == 0 || m.remote_comm_id != 0 || m.qpn > MLX5_QPN_CM_QPN_MAX ||
		    m.packet_life_time > 31 || m.ack_delay > 31 || m.cm_response_timeout > 31 ||
		    m.max_cm_retries > 15)
			return -ERANGE;
		return 0;
	case MLX5_QPN_CM_MSG_REP:
		if (m.qpn > MLX5_QPN_CM_QPN_MAX || m.ack_delay > 31)
			return -ERANGE;
		break;
	case MLX5_QPN_CM_MSG_REJ:
		if ((m.local_comm_id == 0 && m.remote_comm_id == 0) ||
		    !mlx5_qpn_cm_rej_reason_valid(m.reason) || m.msg_ref > MLX5_QPN_CM_REF_OTHER)
			return -ERANGE;
		return 0;
	case MLX5_QPN_CM_MSG_DREQ:
		if (m.qpn > MLX5_QPN_CM_QPN_MAX)
			return -ERANGE;
		break;
	case MLX5_QPN_CM_MSG_MRA:
		if (m.msg_ref > MLX5_QPN_CM_REF_OTHER || m.service_timeout > 31)
			return -ERANGE;
		break;
	default:
		break;
	}
	if (m.local_comm_id == 0 || m.remote_comm_id == 0)
		return -ERANGE;
	return 0;
}

} // namespace

extern "C" {

uint8_t
mlx5_qpn_cm_private_data_max(uint8_t type)
{
	const TypeInfo *ti = type_info(type);
	return ti != nullptr ? ti->pd_max : 0;
}

const char *
mlx5_qpn_cm_msg_name(uint8_t type)
{
	const TypeInfo *ti = type_info(type);
	return ti != nullptr ? ti->name : "?";
}

int
mlx5_qpn_cm_rej_reason_valid(uint16_t reason)
{
	return static_cast<int>((reason >= MLX5_QPN_CM_REJ_NO_QP &&
				 reason <= MLX5_QPN_CM_REJ_INVALID_ALT_FLOW_LABEL) ||
				reason == MLX5_QPN_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

const char *
mlx5_qpn_cm_rej_reason_name(uint16_t reason)
{
	static const char *const names[MLX5_QPN_CM_REJ_REASON_SLOTS] = {
		nullptr,
		"NO_QP",
		"NO_EEC",
		"NO_RESOURCES",
		"TIMEOUT",
		"UNSUPPORTED",
		"INVALID_COMM_ID",
		"INVALID_COMM_INSTANCE",
		"INVALID_SERVICE_ID",
		"INVALID_TRANSPORT_TYPE",
		"STALE_CONN",
		"RDC_NOT_EXIST",
		"INVALID_GID",
		"INVALID_LID",
		"INVALID_SL",
		"INVALID_TRAFFIC_CLASS",
		"INVALID_HOP_LIMIT",
		"INVALID_PACKET_RATE",
		"INVALID_ALT_GID",
		"INVALID_ALT_LID",
		"INVALID_ALT_SL",
		"INVALID_ALT_TRAFFIC_CLASS",
		"INVALID_ALT_HOP_LIMIT",
		"INVALID_ALT_PACKET_RATE",
		"PORT_CM_REDIRECT",
		"PORT_REDIRECT",
		"INVALID_MTU",
		"INSUFFICIENT_RESP_RESOURCES",
		"CONSUMER_DEFINED",
		"INVALID_RNR_RETRY",
		"DUPLICATE_LOCAL_COMM_ID",
		"INVALID_CLASS_VERSION",
		"INVALID_FLOW_LABEL",
		"INVALID_ALT_FLOW_LABEL",
		nullptr,
		"VENDOR_OPTION_NOT_SUPPORTED",
	};
	if (reason >= MLX5_QPN_CM_REJ_REASON_SLOTS || names[reason] == nullptr)
		return "?";
	return names[reason];
}

/*
 * Linux's cm_ack_timeout(): the ACK timeout covers the round trip of a packet (the path's
 * packet life time doubled, i.e. exponent + 1) plus the responder's ACK delay. Two durations
 * 2^a and 2^b add up to at most 2^(max(a,b)+1), and to about 2^max(a,b) when they differ by two
 * or more, which is what the comparisons below encode. IBA caps the exponent at 31.
 */
uint8_t
mlx5_qpn_cm_ack_timeout(uint8_t packet_life_time, uint8_t ack_delay)
{
	int plt = std::min<int>(packet_life_time, 31);
	int delay = std::min<int>(ack_delay, 31);
	int t = plt + 1;
	if (t >= delay)
		t += (delay >= t - 1) ? 1 : 0;
	else
		t = delay + ((t >= delay - 1) ? 1 : 0);
	return uint8_t(std::min(t, 31));
}

/*
 * Linux's cm_convert_to_ms(): an IBA time exponent t stands for 4.096 us * 2^t; 2^8 * 4.096 us
 * is about 1 ms, hence 1 << (t - 8) ms, and at least 1 ms.
 */
uint32_t
mlx5_qpn_cm_timewait_ms(uint8_t packet_life_time, uint8_t ack_delay)
{
	int t = mlx5_qpn_cm_ack_timeout(packet_life_time, ack_delay);
	return 1u << std::max(t - 8, 0);
}

int
mlx5_qpn_cm_msg_encode(const struct mlx5_qpn_cm_msg *msg, void *buf, size_t size)
{
	if (msg == nullptr || buf == nullptr)
		return -EINVAL;
	if (check_fields(*msg) != 0)
		return -EINVAL;
	const TypeInfo *ti = type_info(msg->type);
	size_t len = kHeader + ti->body + msg->private_data_len;
	if (size < len)
		return -ENOSPC;
	auto *p = static_cast<uint8_t *>(buf);
	std::memset(p, 0, kHeader + ti->body);
	put16(p, kMagic);
	p[2] = kVersion;
	p[3] = msg->type;
	put16(p + 4, uint16_t(len));
	p[6] = msg->private_data_len;
	put64(p + 8, msg->src_guid);
	put32(p + 16, msg->local_comm_id);
	put32(p + 20, msg->remote_comm_id);
	uint8_t *b = p + kHeader;
	switch (msg->type) {
	case MLX5_QPN_CM_MSG_REQ:
		put64(b, msg->service_id);
		put32(b + 8, msg->qpn);
		b[12] = msg->packet_life_time;
		b[13] = msg->ack_delay;
		b[14] = msg->cm_response_timeout;
		b[15] = msg->max_cm_retries;
		break;
	case MLX5_QPN_CM_MSG_REP:
		put32(b, msg->qpn);
		b[4] = msg->ack_delay;
		break;
	case MLX5_QPN_CM_MSG_REJ:
		put16(b, msg->reason);
		b[2] = msg->msg_ref;
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		put32(b, msg->qpn);
		break;
	case MLX5_QPN_CM_MSG_MRA:
		b[0] = msg->msg_ref;
		b[1] = msg->service_timeout;
		break;
	default:
		break;
	}
	if (msg->private_data_len != 0)
		std::memcpy(b + ti->body, msg->private_data, msg->private_data_len);
	return int(len);
}

int
mlx5_qpn_cm_msg_decode(const void *frame, size_t len, struct mlx5_qpn_cm_msg *msg)
{
	if (frame == nullptr || msg == nullptr)
		return -EINVAL;
	const auto *p = static_cast<const uint8_t *>(frame);
	if (len < kHeader)
		return -EBADMSG;
	if (get16(p) != kMagic || p[2] != kVersion)
		return -EPROTO;
	const TypeInfo *ti = type_info(p[3]);
	if (ti == nullptr)
		return -EPROTO;
	size_t want = kHeader + ti->body + p[6];
	/* The length field, the real length and the type's size must all agree. */
	if (get16(p + 4) != len || len != want || len > MLX5_QPN_CM_FRAME_MAX)
		return -EBADMSG;
	if (p[7] != 0)
		return -ERANGE;

	std::memset(msg, 0, offsetof(mlx5_qpn_cm_msg, private_data));
	msg->type = p[3];
	msg->private_data_len = p[6];
	msg->src_guid = get64(p + 8);
	msg->local_comm_id = get32(p + 16);
	msg->remote_comm_id = get32(p + 20);
	const uint8_t *b = p + kHeader;
	bool reserved_set = false;
	switch (msg->type) {
	case MLX5_QPN_CM_MSG_REQ:
		msg->service_id = get64(b);
		msg->qpn = get32(b + 8);
		msg->packet_life_time = b[12];
		msg->ack_delay = b[13];
		msg->cm_response_timeout = b[14];
		msg->max_cm_retries = b[15];
		break;
	case MLX5_QPN_CM_MSG_REP:
		msg->qpn = get32(b);
		msg->ack_delay = b[4];
		reserved_set = (b[5] | b[6] | b[7]) != 0;
		break;
	case MLX5_QPN_CM_MSG_REJ:
		msg->reason = get16(b);
		msg->msg_ref = b[2];
		reserved_set = b[3] != 0;
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		msg->qpn = get32(b);
		break;
	case MLX5_QPN_CM_MSG_MRA:
		msg->msg_ref = b[0];
		msg->service_timeout = b[1];
		reserved_set = (b[2] | b[3]) != 0;
		break;
	default:
		break;
	}
	if (reserved_set)
		return -ERANGE;
	int rc = check_fields(*msg);
	if (rc != 0)
		return rc;
	if (msg->private_data_len != 0)
		std::memcpy(msg->private_data, b + ti->body, msg->private_data_len);
	return 0;
}

const char *
mlx5_qpn_cm_state_name(int state)
{
	static const char *const names[] = {"IDLE",        "REQ_SENT",  "REQ_RCVD", "REP_SENT",
					    "ESTABLISHED", "DREQ_SENT", "TIMEWAIT"};
	if (state < 0 || state > MLX5_QPN_CM_STATE_TIMEWAIT)
		return "?";
	return names[state];
}

} // extern "C"
