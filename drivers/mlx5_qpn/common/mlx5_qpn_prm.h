/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_PRM_H
#define MLX5_QPN_PRM_H

/**
 * @file
 * Internal: the few mlx5 PRM command layouts the driver needs to reserve QPN ranges, as
 * builders of command inboxes and parsers of outboxes.
 *
 * PRM layouts are arrays of big-endian dwords; a field is named by its bit offset from the
 * start of the structure (bit 0 is the most significant bit of dword 0) and its width, which
 * is how the PRM tables and the mlx5_ifc.h files of the kernel, rdma-core and DPDK describe
 * them. Every offset below says where it was read from.
 *
 * The functions hold no state and touch only the buffers given, so the emulated device
 * (sim/) can decode the same inboxes and encode the same outboxes the hardware does.
 *
 * Errors: every function returns 0 or a negative errno (-EINVAL for a NULL buffer, a buffer
 * too short for the layout or a value that does not fit its field). None logs.
 *
 * Thread safety: all functions are reentrant.
 */

#include <cstddef>
#include <cstdint>

#include "mlx5_qpn_caps.h"
#include "mlx5_qpn_prm_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Opcodes and object types (mlx5_ifc.h: MLX5_CMD_OP_*, MLX5_OBJ_TYPE_*). ---- */

#define MLX5_QPN_CMD_OP_QUERY_HCA_CAP          0x100
#define MLX5_QPN_CMD_OP_CREATE_GENERAL_OBJECT  0xa00
#define MLX5_QPN_CMD_OP_DESTROY_GENERAL_OBJECT 0xa03
/** General object type RESERVED_QPN (rdma-core MLX5_OBJ_TYPE_RESERVED_QPN). */
#define MLX5_QPN_OBJ_TYPE_RESERVED_QPN 0x2c

/* ---- QUERY_HCA_CAP op_mod: capability type << 1 | current (1) or maximum (0). ---- */

#define MLX5_QPN_HCA_CAP_TYPE_GENERAL   0x00 /**< cmd_hca_cap. */
#define MLX5_QPN_HCA_CAP_TYPE_GENERAL_2 0x20 /**< cmd_hca_cap_2 (rdma-core ..._DEVICE_CAP_2). */
#define MLX5_QPN_HCA_CAP_OPMOD_MAX      0
#define MLX5_QPN_HCA_CAP_OPMOD_CUR      1
/** op_mod of QUERY_HCA_CAP for a capability type. */
#define MLX5_QPN_HCA_CAP_OP_MOD(type, cur) ((uint16_t)(((type) << 1) | ((cur)&1)))

/**
 * general_obj_types bit that advertises RESERVED_QPN: bit <object type> of the 64-bit field,
 * as rdma-core tests it (general_obj_types_caps & (1ULL << MLX5_OBJ_TYPE_RESERVED_QPN)).
 */
#define MLX5_QPN_HCA_CAP_GENERAL_OBJECT_TYPES_RESERVED_QPN (1ULL << MLX5_QPN_OBJ_TYPE_RESERVED_QPN)

/** Largest log_obj_range that makes sense: a QPN has 24 bits. */
#define MLX5_QPN_PRM_MAX_LOG_RANGE 24

/* ---- Buffer sizes in bytes. ---- */

/** query_hca_cap_in: opcode, uid, op_mod, 64 reserved bits. */
#define MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN 16
/** query_hca_cap_out: status, syndrome, 64 reserved bits, then a 0x8000-bit capability. */
#define MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN (16 + 4096)
/** Byte offset of the capability union inside query_hca_cap_out (bit 0x80). */
#define MLX5_QPN_PRM_HCA_CAP_OFFSET 16
/** create_reserved_qpn_in: general_obj_in_cmd_hdr (0x80 bits) + reserved_qpn (0x80 bits). */
#define MLX5_QPN_PRM_CREATE_RSVD_QPN_IN_LEN 32
/** destroy_general_object_in: the general_obj_in_cmd_hdr alone. */
#define MLX5_QPN_PRM_DESTROY_OBJ_IN_LEN 16
/** general_obj_out_cmd_hdr: status, syndrome, obj_id, 32 reserved bits. */
#define MLX5_QPN_PRM_GENERAL_OBJ_OUT_LEN 16
/** Every outbox starts with status (8 bits at 0x00) and syndrome (32 bits at 0x20). */
#define MLX5_QPN_PRM_OUT_HDR_LEN 8

/** Decoded general_obj_in_cmd_hdr (CREATE/DESTROY/QUERY_GENERAL_OBJECT). */
struct mlx5_qpn_prm_obj_hdr {
	uint16_t opcode;
	uint16_t uid;
	uint16_t obj_type;
	uint8_t log_obj_range;
	uint8_t rsvd;
	uint32_t obj_id;
};

/* ---- Inbox builders (the hardware backend sends these). Each zeroes all of in[0..inlen). */

/**
 * QUERY_HCA_CAP inbox.
 * @param in     Buffer of at least MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN bytes.
 * @param inlen  Its size in bytes.
 * @param op_mod MLX5_QPN_HCA_CAP_OP_MOD(type, cur).
 * @return 0, or -EINVAL (NULL or short buffer).
 */
int mlx5_qpn_prm_query_hca_cap_in(uint32_t *in, size_t inlen, uint16_t op_mod);

/**
 * CREATE_GENERAL_OBJECT inbox for a RESERVED_QPN object of 2^log_range QPNs.
 * @return 0, or -EINVAL (NULL or short buffer, log_range > MLX5_QPN_PRM_MAX_LOG_RANGE).
 */
int mlx5_qpn_prm_create_rsvd_qpn_in(uint32_t *in, size_t inlen, uint8_t log_range);

/**
 * DESTROY_GENERAL_OBJECT inbox.
 * @return 0, or -EINVAL (NULL or short buffer).
 */
int mlx5_qpn_prm_destroy_obj_in(uint32_t *in, size_t inlen, uint16_t obj_type, uint32_t obj_id);

/* ---- Inbox parsers (the emulated device decodes what the backend sent). ---- */

/**
 * Opcode (bits 0x00..0x0f) and op_mod (bits 0x30..0x3f) common to every inbox.
 * @return 0, or -EINVAL (NULL pointer or inlen < 8).
 */
int mlx5_qpn_prm_in_opcode(const void *in, size_t inlen, uint16_t *opcode, uint16_t *op_mod);

/**
 * Decode a general_obj_in_cmd_hdr.
 * @return 0, or -EINVAL (NULL pointer or inlen < 16).
 */
int mlx5_qpn_prm_obj_hdr_parse(const void *in, size_t inlen, struct mlx5_qpn_prm_obj_hdr *hdr);

/* ---- Outbox parsers (the backend decodes what the device returned). ---- */

/**
 * Status byte and syndrome of any outbox.
 * @return 0 (fields filled, whatever the status), or -EINVAL (NULL or outlen < 8).
 */
int mlx5_qpn_prm_out_status(const void *out, size_t outlen, uint8_t *status, uint32_t *syndrome);

/**
 * Negative errno of a command status, 0 for OK, mapped as mlx5_core/rdma-core report them
 * (mlx5_qpn_cmd_status_to_errno() with the sign the ops table uses).
 */
static inline int
mlx5_qpn_fw_status_to_errno(uint8_t status)
{
	return -mlx5_qpn_cmd_status_to_errno(status);
}

/**
 * Object id of a CREATE_GENERAL_OBJECT outbox (for RESERVED_QPN: the first QPN).
 * @return 0; the negative errno of a non-zero status; -EINVAL for a NULL or short buffer.
 */
int mlx5_qpn_prm_create_obj_out_id(const void *out, size_t outlen, uint32_t *obj_id);

/**
 * Read the general device capabilities (op_mod type 0) from a QUERY_HCA_CAP outbox into
 * caps->general_obj_types, caps->reserved_qpn_obj (bit 44 of it) and caps->log_max_qp.
 * Other fields of *caps are left untouched.
 * @return 0; the negative errno of a non-zero status; -EINVAL for a NULL or short buffer.
 */
int mlx5_qpn_prm_parse_hca_cap(const void *out, size_t outlen, struct mlx5_qpn_caps *caps);

/**
 * Read HCA capabilities 2 (op_mod type 0x20) from a QUERY_HCA_CAP outbox into
 * caps->log_reserved_qpn_granularity, log_reserved_qpn_max_alloc and log_max_num_reserved_qpn.
 * Other fields of *caps are left untouched.
 * @return 0; the negative errno of a non-zero status; -EINVAL for a NULL or short buffer.
 */
int mlx5_qpn_prm_parse_hca_cap_2(const void *out, size_t outlen, struct mlx5_qpn_caps *caps);

/* ---- Outbox builders (the emulated device answers with these). Each zeroes out[0..outlen). */

/** Status and syndrome only (what a failing command returns). 0 or -EINVAL. */
int mlx5_qpn_prm_out_set_status(void *out, size_t outlen, uint8_t status, uint32_t syndrome);

/** Successful CREATE_GENERAL_OBJECT outbox carrying obj_id. 0 or -EINVAL. */
int mlx5_qpn_prm_create_obj_out(void *out, size_t outlen, uint32_t obj_id);

/**
 * Successful QUERY_HCA_CAP outbox for op_mod's capability type: general caps from
 * caps->general_obj_types and log_max_qp, caps 2 from the three reserved-QPN fields.
 * @return 0, or -EINVAL (NULL or short buffer, a capability type other than those two).
 */
int mlx5_qpn_prm_hca_cap_out(void *out, size_t outlen, uint16_t op_mod,
			     const struct mlx5_qpn_caps *caps);

/* ---- Policy helper. ---- */

/**
 * The log2 size of the next RESERVED_QPN object for a wanted size: at least the
 * granularity, at most log_reserved_qpn_max_alloc (a max_alloc below the granularity, as
 * reported by old firmware that leaves it 0, counts as the granularity).
 */
uint8_t mlx5_qpn_prm_clamp_log_range(const struct mlx5_qpn_caps *caps, uint32_t want_log);

#ifdef __cplusplus
} /* extern "C" */

/*
 * C++ accessors over PRM layouts: constexpr so tests and the emulated device can name fields
 * the same way the builders do. A field is (bit offset, width); it must lie inside one dword
 * or be a dword-aligned 64-bit field.
 */
namespace mlx5_qpn_prm {

struct field {
	uint32_t bit_off;
	uint32_t width;
};

constexpr bool
field_ok(field f)
{
	return (f.width >= 1 && f.width <= 32 && (f.bit_off % 32) + f.width <= 32) ||
	       (f.width == 64 && f.bit_off % 32 == 0);
}

constexpr uint32_t
load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

constexpr void
store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/** Byte just past the field: the buffer must be at least this long. */
constexpr size_t
field_end(field f)
{
	return (f.bit_off / 32) * 4 + (f.width == 64 ? 8 : 4);
}

/** Write v into field f of the big-endian layout at buf (bits above the width dropped). */
constexpr void
set(uint8_t *buf, field f, uint64_t v)
{
	uint8_t *dw = buf + (f.bit_off / 32) * 4;
	if (f.width == 64) {
		store_be32(dw, (uint32_t)(v >> 32));
		store_be32(dw + 4, (uint32_t)v);
		return;
	}
	const uint32_t shift = 32 - (f.bit_off % 32) - f.width;
	const uint32_t mask = (f.width == 32 ? 0xffffffffu : ((1u << f.width) - 1)) << shift;
	const uint32_t old = load_be32(dw);
	store_be32(dw, (old & ~mask) | (((uint32_t)v << shift) & mask));
}

/** Read field f of the big-endian layout at buf. */
constexpr uint64_t
get(const uint8_t *buf, field f)
{
	const uint8_t *dw = buf + (f.bit_off / 32) * 4;
	if (f.width == 64)
		return (uint64_t)load_be32(dw) << 32 | load_be32(dw + 4);
	const uint32_t shift = 32 - (f.bit_off % 32) - f.width;
	const uint32_t mask = f.width == 32 ? 0xffffffffu : ((1u << f.width) - 1);
	return (load_be32(dw) >> shift) & mask;
}

/*
 * Fields. Offsets are bits from the start of their structure, as in the mlx5_ifc.h files
 * (struct mlx5_ifc_<name>_bits): the kernel's include/linux/mlx5/mlx5_ifc.h, rdma-core's
 * providers/mlx5/mlx5_ifc.h and DPDK's drivers/common/mlx5/mlx5_prm.h agree on all of them.
 */

/* Every inbox: opcode[0x10] at 0x00, uid[0x10] at 0x10, op_mod[0x10] at 0x30. */
inline constexpr field in_opcode{0x00, 16};
inline constexpr field in_uid{0x10, 16};
inline constexpr field in_op_mod{0x30, 16};

/* Every outbox: status[0x8] at 0x00, syndrome[0x20] at 0x20. */
inline constexpr field out_status{0x00, 8};
inline constexpr field out_syndrome{0x20, 32};

/*
 * general_obj_in_cmd_hdr: opcode, uid, obj_type[0x10] at 0x30 (where op_mod is elsewhere),
 * obj_id[0x20] at 0x40, reserved_at_60[0x3] then log_obj_range[0x5] at 0x63.
 */
inline constexpr field obj_in_type{0x30, 16};
inline constexpr field obj_in_id{0x40, 32};
inline constexpr field obj_in_log_range{0x63, 5};

/* general_obj_out_cmd_hdr: obj_id[0x20] at 0x40. */
inline constexpr field obj_out_id{0x40, 32};

/*
 * cmd_hca_cap (relative to the capability union, byte MLX5_QPN_PRM_HCA_CAP_OFFSET of the
 * outbox): log_max_qp[0x5] at 0x9b (after reserved_at_99[0x2]); general_obj_types[0x40]
 * at 0x400 (after log_max_current_uc_list[0x5] at 0x3fb, before reserved_at_440).
 */
inline constexpr field cap_log_max_qp{0x9b, 5};
inline constexpr field cap_general_obj_types{0x400, 64};

/*
 * cmd_hca_cap_2: DW 4 holds reserved_at_80[0x3], max_num_prog_sample_field[0x5],
 * reserved_at_88[0x3], log_max_num_reserved_qpn[0x5] at 0x8b, reserved_at_90[0x3],
 * log_reserved_qpn_granularity[0x5] at 0x93, reserved_at_98[0x3],
 * log_reserved_qpn_max_alloc[0x5] at 0x9b (DPDK mlx5_prm.h; rdma-core's mlx5_ifc.h places
 * log_reserved_qpn_granularity at 0x93 likewise).
 */
inline constexpr field cap2_log_max_num_reserved_qpn{0x8b, 5};
inline constexpr field cap2_log_reserved_qpn_granularity{0x93, 5};
inline constexpr field cap2_log_reserved_qpn_max_alloc{0x9b, 5};

static_assert(field_ok(in_opcode) && field_ok(in_op_mod) && field_ok(out_status) &&
	      field_ok(out_syndrome) && field_ok(obj_in_type) && field_ok(obj_in_id) &&
	      field_ok(obj_in_log_range) && field_ok(obj_out_id) && field_ok(cap_log_max_qp) &&
	      field_ok(cap_general_obj_types) && field_ok(cap2_log_max_num_reserved_qpn) &&
	      field_ok(cap2_log_reserved_qpn_granularity) &&
	      field_ok(cap2_log_reserved_qpn_max_alloc));

} /* namespace mlx5_qpn_prm */
#endif /* __cplusplus */

#endif /* MLX5_QPN_PRM_H */
