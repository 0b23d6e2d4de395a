/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_SIZING_H
#define MLX5_QPN_HW_SIZING_H

/**
 * @file
 * Internal: the decisions of the hardware backend, as pure functions so that each one is
 * unit-tested without a ConnectX. The backend (mlx5_qpn_hw.cpp) gathers facts — what the HCA
 * caps say, what the trial allocation answered — and asks these functions what to do:
 *
 *  - which RESERVED_QPN object size to request (the size the generic layer will ask for, not
 *    merely the granularity: the trial must prove the size that is used);
 *  - how a refused size steps down: one size on a bad-parameter answer (-EINVAL), straight to
 *    the granularity on any other, never below it;
 *  - what log_max_num_reserved_qpn means (0 = unknown: no firmware bound on the total);
 *  - whether caps 2 may be queried at all (only when cmd_hca_cap.hca_cap_2 is set, as
 *    rdma-core's get_hca_general_caps_2() is only called then);
 *  - which QPN source serves reserved_qpn=try|yes|no, and the one-line reason when `yes`
 *    cannot be served.
 *
 * Errors: negative errno where a function can fail (-EINVAL for NULL or short buffers).
 * Thread safety: every function is reentrant and touches only its arguments. None logs.
 */

#include <cstddef>
#include <cstdint>

#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Bit offset of hca_cap_2[0x1] in cmd_hca_cap (relative to the capability union):
 * rdma-core providers/mlx5/mlx5_ifc.h, struct mlx5_ifc_cmd_hca_cap_bits, DW 1 bit 31 (after
 * access_other_hca_roce[0x1], reserved_at_1[0x1e], vhca_resource_manager[0x1]).
 */
#define MLX5_QPN_HW_CAP_HCA_CAP_2_BIT 0x20

/**
 * Bit offset of max_wqe_sz_sq_dc[0x10] in cmd_hca_cap: the kernel's include/linux/mlx5/
 * mlx5_ifc.h and rdma-core's providers/mlx5/mlx5_ifc.h, DW 22 (bit 0x2c0) holds
 * max_flow_counter_31_16[0x10] then max_wqe_sz_sq_dc[0x10]. The largest DCI send WQE in bytes.
 */
#define MLX5_QPN_HW_CAP_MAX_WQE_SZ_SQ_DC_BIT 0x2d0

/**
 * Bit offsets of dct[0x1] and lag_dct[0x2] in cmd_hca_cap (rdma-core providers/mlx5/mlx5_ifc.h,
 * struct mlx5_ifc_cmd_hca_cap_bits: dct after rf at 0x219; lag_dct after reserved_at_270[0x6]).
 * dct clear: the kernel creates no DCI or DCT (check_qp_type, EOPNOTSUPP); lag_dct 0 while a
 * RoCE LAG is active: no DCT (create_dct, EOPNOTSUPP).
 */
#define MLX5_QPN_HW_CAP_DCT_BIT     0x21a
#define MLX5_QPN_HW_CAP_LAG_DCT_BIT 0x276

/**
 * QUERY_LAG (opcode 0x842, a DEVX general command; inbox and outbox 16 bytes): the outbox's
 * lag_context holds lag_state[0x3] at bit 0x1d (mlx5_ifc_lagc_bits), so bit 0x5d of the
 * outbox; non-zero while the device's ports are bonded (RoCE LAG), as UCX reads it.
 */
#define MLX5_QPN_HW_CMD_OP_QUERY_LAG    0x842
#define MLX5_QPN_HW_QUERY_LAG_LEN       16
#define MLX5_QPN_HW_QUERY_LAG_STATE_BIT 0x5d

/** What the probe learned about RESERVED_QPN objects; the first failing step wins. */
enum mlx5_qpn_hw_obj_verdict {
	MLX5_QPN_HW_OBJ_OK = 0,           /**< The trial object was created and destroyed. */
	MLX5_QPN_HW_OBJ_NOT_TRIED,        /**< reserved_qpn=no: never asked the firmware. */
	MLX5_QPN_HW_OBJ_NO_DEVX,          /**< The context was opened without DEVX. */
	MLX5_QPN_HW_OBJ_CAPS_UNREADABLE,  /**< QUERY_HCA_CAP was refused. */
	MLX5_QPN_HW_OBJ_NOT_ADVERTISED,   /**< general_obj_types bit 44 is clear. */
	MLX5_QPN_HW_OBJ_NO_CAPS2,         /**< cmd_hca_cap.hca_cap_2 is clear. */
	MLX5_QPN_HW_OBJ_CAPS2_UNREADABLE, /**< QUERY_HCA_CAP(caps 2) was refused. */
	MLX5_QPN_HW_OBJ_TRIAL_FAILED,     /**< CREATE_GENERAL_OBJECT was refused. */
};

/** The probe's facts, in the order the backend learns them. */
struct mlx5_qpn_hw_probe {
	enum mlx5_qpn_hw_obj_verdict verdict;
	int err;           /**< Negative errno of the failing step (0 if none or unknown). */
	uint8_t trial_log; /**< Object size (log2) the trial proved, or last refused. */
};

/** Where QPNs come from on this device. */
enum mlx5_qpn_hw_source {
	MLX5_QPN_HW_SRC_OBJECTS = 0, /**< RESERVED_QPN objects (then rdma-core's single QPNs). */
	MLX5_QPN_HW_SRC_ORDINARY, /**< One UD QP on a one-entry CQ per QPN (as UCX falls back). */
	MLX5_QPN_HW_SRC_NONE,     /**< reserved_qpn=yes on a device without objects: refuse. */
};

/**
 * The source for a policy and what the probe learned. try: objects when proven, ordinary QPs
 * otherwise (rdma-core's mlx5dv_reserved_qpn_alloc creates the same object type, so it cannot
 * succeed where the trial failed); yes: objects or NONE; no: ordinary QPs.
 * @return the source; MLX5_QPN_HW_SRC_NONE for a NULL probe.
 */
enum mlx5_qpn_hw_source mlx5_qpn_hw_source_choose(enum mlx5_qpn_rsvd_policy policy,
						  const struct mlx5_qpn_hw_probe *probe);

/**
 * Why objects are (not) usable, as one short phrase for a log line, e.g.
 * "general_obj_types bit 44 (RESERVED_QPN) clear" or "trial object of 2^7 QPNs refused
 * (Invalid argument)". Always NUL-terminates a non-empty buffer.
 * @return the length written (snprintf semantics), or -EINVAL for NULL arguments.
 */
int mlx5_qpn_hw_probe_reason(const struct mlx5_qpn_hw_probe *probe, char *buf, size_t len);

/** Name of a source for log lines ("RESERVED_QPN objects", "ordinary UD QPs", "none"). */
const char *mlx5_qpn_hw_source_name(enum mlx5_qpn_hw_source src);

/**
 * 1 if a QUERY_HCA_CAP(general) outbox sets cmd_hca_cap.hca_cap_2, 0 if not.
 * @return 0/1, or -EINVAL for a NULL or short outbox.
 */
int mlx5_qpn_hw_caps2_advertised(const void *out, size_t outlen);

/**
 * cmd_hca_cap.max_wqe_sz_sq_dc of a QUERY_HCA_CAP(general) outbox.
 * @return the size in bytes (0: the firmware leaves it unset), or -EINVAL for a NULL or short
 *         outbox.
 */
int mlx5_qpn_hw_caps_max_wqe_sz_sq_dc(const void *out, size_t outlen);

/**
 * cmd_hca_cap.dct of a QUERY_HCA_CAP(general) outbox.
 * @return 0/1, or -EINVAL for a NULL or short outbox.
 */
int mlx5_qpn_hw_caps_dct(const void *out, size_t outlen);

/**
 * cmd_hca_cap.lag_dct of a QUERY_HCA_CAP(general) outbox.
 * @return 0..3, or -EINVAL for a NULL or short outbox.
 */
int mlx5_qpn_hw_caps_lag_dct(const void *out, size_t outlen);

/**
 * lag_state of a QUERY_LAG outbox (MLX5_QPN_HW_QUERY_LAG_LEN bytes).
 * @return 0..7 (0: no LAG), or -EINVAL for a NULL or short outbox.
 */
int mlx5_qpn_hw_lag_state(const void *out, size_t outlen);

/**
 * The most inline bytes a DCI's SEND may carry under a max_wqe_sz_sq_dc of max_wqe bytes, as
 * libmlx5 and the kernel size a DCI's WQE: control and DC datagram segments (64 bytes), the
 * inline header (4) and data to 16 bytes, the whole in 64-byte BBs. 0 (unread) leaves
 * `cap`; the result is at most `cap`, and 0 when not even one inline byte fits.
 */
uint32_t mlx5_qpn_hw_dc_max_inline(uint32_t max_wqe, uint32_t cap);

/**
 * log_max_num_reserved_qpn as a bound: a read of 0 means unknown (caps 2 unread, or firmware
 * leaving it unset), which bounds nothing — the 24-bit QPN space is returned; other values
 * pass through (capped at 24).
 */
uint8_t mlx5_qpn_hw_log_max_num(uint8_t raw);

/**
 * The object size the generic layer will request, so the trial proves exactly that: the
 * devarg log_range (UINT32_MAX = unset: the largest object, max(max_alloc, granularity)),
 * clamped to [granularity, max(max_alloc, granularity)], then halved while above the
 * granularity and larger than the bound on the total: min(max_qpns, limit if non-zero,
 * 2^mlx5_qpn_hw_log_max_num()). This mirrors the generic layer's first grow.
 * @return the log2 size; the granularity for a NULL caps.
 */
uint8_t mlx5_qpn_hw_request_log(const struct mlx5_qpn_caps *caps, uint32_t devarg_log_range,
				uint32_t max_qpns, uint32_t limit);

/**
 * The next size to try after the firmware answered rc to an object of 2^cur QPNs, while cur is
 * above the granularity: cur - 1 when rc is -EINVAL (bad parameter: this firmware accepts
 * objects up to some size below cur); the granularity for any other refusal (a resource
 * state, a limit, a busy device, an errno without status: firmware answers these to large
 * objects too, and the granularity is the size rdma-core and UCX always request, so it is
 * the one size worth one more command before objects are given up). -1 on success or at the
 * granularity (nothing smaller to try).
 */
int mlx5_qpn_hw_step_down(uint8_t cur, uint8_t granularity, int rc);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLX5_QPN_HW_SIZING_H */
