/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PRM command builders and parsers. Pure functions over caller buffers: no device, no log,
 * so both the hardware backend and the emulated device use them.
 */
#include "mlx5_qpn_prm.h"

#include <cerrno>
#include <cstring>

namespace prm = mlx5_qpn_prm;

namespace {

/* Bytes as the accessors want them; the C API takes uint32_t* / void* buffers. */
inline uint8_t *
bytes(void *p)
{
	return static_cast<uint8_t *>(p);
}

inline const uint8_t *
bytes(const void *p)
{
	return static_cast<const uint8_t *>(p);
}

/* Status of an outbox already known to be long enough: 0 or its negative errno. */
inline int
status_errno(const uint8_t *out)
{
	return mlx5_qpn_fw_status_to_errno(static_cast<uint8_t>(prm::get(out, prm::out_status)));
}

/* The capability union of a QUERY_HCA_CAP outbox, or NULL when it cannot hold one. */
inline const uint8_t *
hca_cap_of(const void *out, size_t outlen)
{
	if (out == nullptr || outlen < MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN)
		return nullptr;
	return bytes(out) + MLX5_QPN_PRM_HCA_CAP_OFFSET;
}

} /* namespace */

extern "C" {

int
mlx5_qpn_prm_query_hca_cap_in(uint32_t *in, size_t inlen, uint16_t op_mod)
{
	if (in == nullptr || inlen < MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN)
		return -EINVAL;
	memset(in, 0, inlen);
	prm::set(bytes(in), prm::in_opcode, MLX5_QPN_CMD_OP_QUERY_HCA_CAP);
	prm::set(bytes(in), prm::in_op_mod, op_mod);
	return 0;
}

int
mlx5_qpn_prm_create_rsvd_qpn_in(uint32_t *in, size_t inlen, uint8_t log_range)
{
	if (in == nullptr || inlen < MLX5_QPN_PRM_CREATE_RSVD_QPN_IN_LEN ||
	    log_range > MLX5_QPN_PRM_MAX_LOG_RANGE)
		return -EINVAL;
	memset(in, 0, inlen);
	/* uid stays 0: the kernel stamps the context's DEVX uid into every command. */
	prm::set(bytes(in), prm::in_opcode, MLX5_QPN_CMD_OP_CREATE_GENERAL_OBJECT);
	prm::set(bytes(in), prm::obj_in_type, MLX5_QPN_OBJ_TYPE_RESERVED_QPN);
	prm::set(bytes(in), prm::obj_in_log_range, log_range);
	/* The reserved_qpn object context after the header has no fields: all reserved. */
	return 0;
}

int
mlx5_qpn_prm_destroy_obj_in(uint32_t *in, size_t inlen, uint16_t obj_type, uint32_t obj_id)
{
	if (in == nullptr || inlen < MLX5_QPN_PRM_DESTROY_OBJ_IN_LEN)
		return -EINVAL;
	memset(in, 0, inlen);
	prm::set(bytes(in), prm::in_opcode, MLX5_QPN_CMD_OP_DESTROY_GENERAL_OBJECT);
	prm::set(bytes(in), prm::obj_in_type, obj_type);
	prm::set(bytes(in), prm::obj_in_id, obj_id);
	return 0;
}

int
mlx5_qpn_prm_in_opcode(const void *in, size_t inlen, uint16_t *opcode, uint16_t *op_mod)
{
	if (in == nullptr || inlen < prm::field_end(prm::in_op_mod))
		return -EINVAL;
	if (opcode != nullptr)
		*opcode = static_cast<uint16_t>(prm::get(bytes(in), prm::in_opcode));
	if (op_mod != nullptr)
		*op_mod = static_cast<uint16_t>(prm::get(bytes(in), prm::in_op_mod));
	return 0;
}

int
mlx5_qpn_prm_obj_hdr_parse(const void *in, size_t inlen, struct mlx5_qpn_prm_obj_hdr *hdr)
{
	if (in == nullptr || hdr == nullptr || inlen < MLX5_QPN_PRM_DESTROY_OBJ_IN_LEN)
		return -EINVAL;
	const uint8_t *b = bytes(in);
	memset(hdr, 0, sizeof(*hdr));
	hdr->opcode = static_cast<uint16_t>(prm::get(b, prm::in_opcode));
	hdr->uid = static_cast<uint16_t>(prm::get(b, prm::in_uid));
	hdr->obj_type = static_cast<uint16_t>(prm::get(b, prm::obj_in_type));
	hdr->obj_id = static_cast<uint32_t>(prm::get(b, prm::obj_in_id));
	hdr->log_obj_range = static_cast<uint8_t>(prm::get(b, prm::obj_in_log_range));
	return 0;
}

int
mlx5_qpn_prm_out_status(const void *out, size_t outlen, uint8_t *status, uint32_t *syndrome)
{
	if (out == nullptr || outlen < MLX5_QPN_PRM_OUT_HDR_LEN)
		return -EINVAL;
	if (status != nullptr)
		*status = static_cast<uint8_t>(prm::get(bytes(out), prm::out_status));
	if (syndrome != nullptr)
		*syndrome = static_cast<uint32_t>(prm::get(bytes(out), prm::out_syndrome));
	return 0;
}

int
mlx5_qpn_prm_create_obj_out_id(const void *out, size_t outlen, uint32_t *obj_id)
{
	if (out == nullptr || obj_id == nullptr || outlen < MLX5_QPN_PRM_GENERAL_OBJ_OUT_LEN)
		return -EINVAL;
	int rc = status_errno(bytes(out));
	if (rc != 0)
		return rc;
	*obj_id = static_cast<uint32_t>(prm::get(bytes(out), prm::obj_out_id));
	return 0;
}

int
mlx5_qpn_prm_parse_hca_cap(const void *out, size_t outlen, struct mlx5_qpn_caps *caps)
{
	const uint8_t *cap = hca_cap_of(out, outlen);
	if (cap == nullptr || caps == nullptr)
		return -EINVAL;
	int rc = status_errno(bytes(out));
	if (rc != 0)
		return rc;
	caps->general_obj_types = prm::get(cap, prm::cap_general_obj_types);
	caps->reserved_qpn_obj =
		(caps->general_obj_types & MLX5_QPN_HCA_CAP_GENERAL_OBJECT_TYPES_RESERVED_QPN) ? 1 :
												 0;
	caps->log_max_qp = static_cast<uint8_t>(prm::get(cap, prm::cap_log_max_qp));
	return 0;
}

int
mlx5_qpn_prm_parse_hca_cap_2(const void *out, size_t outlen, struct mlx5_qpn_caps *caps)
{
	const uint8_t *cap = hca_cap_of(out, outlen);
	if (cap == nullptr || caps == nullptr)
		return -EINVAL;
	int rc = status_errno(bytes(out));
	if (rc != 0)
		return rc;
	caps->log_reserved_qpn_granularity =
		static_cast<uint8_t>(prm::get(cap, prm::cap2_log_reserved_qpn_granularity));
	caps->log_reserved_qpn_max_alloc =
		static_cast<uint8_t>(prm::get(cap, prm::cap2_log_reserved_qpn_max_alloc));
	caps->log_max_num_reserved_qpn =
		static_cast<uint8_t>(prm::get(cap, prm::cap2_log_max_num_reserved_qpn));
	return 0;
}

int
mlx5_qpn_prm_out_set_status(void *out, size_t outlen, uint8_t status, uint32_t syndrome)
{
	if (out == nullptr || outlen < MLX5_QPN_PRM_OUT_HDR_LEN)
		return -EINVAL;
	memset(out, 0, outlen);
	prm::set(bytes(out), prm::out_status, status);
	prm::set(bytes(out), prm::out_syndrome, syndrome);
	return 0;
}

int
mlx5_qpn_prm_create_obj_out(void *out, size_t outlen, uint32_t obj_id)
{
	if (out == nullptr || outlen < MLX5_QPN_PRM_GENERAL_OBJ_OUT_LEN)
		return -EINVAL;
	memset(out, 0, outlen);
	prm::set(bytes(out), prm::obj_out_id, obj_id);
	return 0;
}

int
mlx5_qpn_prm_hca_cap_out(void *out, size_t outlen, uint16_t op_mod,
			 const struct mlx5_qpn_caps *caps)
{
	if (out == nullptr || caps == nullptr || outlen < MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN)
		return -EINVAL;
	const unsigned int type = op_mod >> 1;
	if (type != MLX5_QPN_HCA_CAP_TYPE_GENERAL && type != MLX5_QPN_HCA_CAP_TYPE_GENERAL_2)
		return -EINVAL;
	memset(out, 0, outlen);
	uint8_t *cap = bytes(out) + MLX5_QPN_PRM_HCA_CAP_OFFSET;
	if (type == MLX5_QPN_HCA_CAP_TYPE_GENERAL) {
		prm::set(cap, prm::cap_general_obj_types, caps->general_obj_types);
		prm::set(cap, prm::cap_log_max_qp, caps->log_max_qp);
	} else {
		prm::set(cap, prm::cap2_log_reserved_qpn_granularity,
			 caps->log_reserved_qpn_granularity);
		prm::set(cap, prm::cap2_log_reserved_qpn_max_alloc,
			 caps->log_reserved_qpn_max_alloc);
		prm::set(cap, prm::cap2_log_max_num_reserved_qpn, caps->log_max_num_reserved_qpn);
	}
	return 0;
}

uint8_t
mlx5_qpn_prm_clamp_log_range(const struct mlx5_qpn_caps *caps, uint32_t want_log)
{
	if (caps == nullptr)
		return 0;
	uint32_t lo = caps->log_reserved_qpn_granularity;
	uint32_t hi = caps->log_reserved_qpn_max_alloc;
	if (lo > MLX5_QPN_PRM_MAX_LOG_RANGE)
		lo = MLX5_QPN_PRM_MAX_LOG_RANGE;
	if (hi < lo)
		hi = lo;
	if (hi > MLX5_QPN_PRM_MAX_LOG_RANGE)
		hi = MLX5_QPN_PRM_MAX_LOG_RANGE;
	uint32_t v = want_log < lo ? lo : (want_log > hi ? hi : want_log);
	return static_cast<uint8_t>(v);
}

} /* extern "C" */
