/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_DC_H
#define MLX5_QPN_HW_DC_H

/**
 * @file
 * Internal: the hardware backend's DC table, mlx5_qpn_hw_dc_ops (mlx5_qpn_dev_ops::dc of
 * mlx5_qpn_hw_ops), and the verbs arguments it builds (exposed so that tests check them).
 *
 * Objects are rdma-core's, created through the glue (mlx5_qpn_glue.h), their queues handed to
 * the DC layer from mlx5dv_init_obj():
 *  - CQ: ibv_create_cq(2^log_depth - 1: mlx5 adds one and rounds to a power of two), ring,
 *    doorbell record, depth and CQN from MLX5DV_OBJ_CQ; 64-byte CQEs only;
 *  - DCI: mlx5dv_create_qp(IBV_QPT_DRIVER, MLX5DV_QP_INIT_ATTR_MASK_DC, MLX5DV_DCTYPE_DCI) on
 *    the CQ, 2^(log_sq_bbs - 3) WRs of up to 256 inline bytes (so rdma-core sizes the SQ to
 *    2^log_sq_bbs BBs), then RESET->INIT (pkey 0, the path's port) ->RTR (the path: MTU and
 *    address vector) ->RTS (timeout, retries, PSN 0) with ibv_modify_qp, as rdma-core's DC
 *    tests and UCX do; SQ ring, BB count, doorbell record and the UAR register (bf.reg;
 *    write-combining when bf.size != 0) from MLX5DV_OBJ_QP. Recovery (dci_reset): RESET (mask
 *    IBV_QP_STATE), then the same INIT, RTR and RTS;
 *  - DCT: an SRQ, then mlx5dv_create_qp(MLX5DV_DCTYPE_DCT, dct_access_key = the DC key) on the
 *    CQ and the SRQ, RESET->INIT (access flags, pkey, port) ->RTR (min RNR timer, the path's
 *    AV and MTU); its number is qp_num after RTR (the kernel creates the DCT at RTR). The SRQ's WQE
 *    list (MLX5DV_OBJ_SRQ) and one buffer per WQE, registered with ibv_reg_mr, go to the DC
 *    layer, which writes, posts and reposts the receive WQEs itself (dc/mlx5_qpn_dc_rx.cpp
 *    says why), so mlx5_qpn_dct_read() works as on the emulated device;
 *  - AH: ibv_create_ah, its AV (struct mlx5_wqe_av, 48 bytes) copied from MLX5DV_OBJ_AH.
 * The path (mlx5_qpn_dc.h, struct mlx5_qpn_dc_path) is resolved against the port: its MTU at
 * most the port's active MTU; NULL on InfiniBand: no GRH unless the port requires one
 * (IBV_QPF_GRH_REQUIRED: then the port's GID 0, on a given path without one too); NULL on
 * RoCE: the first RoCE v2 GID
 * of an IPv4 address (ibv_query_gid_ex), hop limit 64, or -EINVAL when the port has none.
 * There is no execute/poll: the ConnectX executes WQEs itself.
 *
 * The doorbell register of a DCI is whatever rdma-core gave its QP. The DEVX non-cached UAR
 * (mlx5dv_devx_alloc_uar(MLX5DV_UAR_ALLOC_TYPE_NC), the uar_map op) is a single page per
 * context: every NC allocation returns that page and freeing it does nothing, so it is never
 * a per-DCI resource.
 *
 * Fork safety: destroy calls in a process other than the opener destroy nothing (the objects
 * are the parent's through the shared uverbs file). Thread safety: as mlx5_qpn_dc_ops.h.
 */

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The hardware backend's DC operations. */
extern const struct mlx5_qpn_dc_ops mlx5_qpn_hw_dc_ops;

/** The default port of a handle (devarg port=, mlx5_qpn_hw.h): its DC objects and AHs use the
 * handle's port; a dual-port device's second port is a handle opened with port=2. */
#define MLX5_QPN_HW_DC_PORT 1

/** Largest inline payload a DCI is created for (= MLX5_QPN_DC_MAX_INLINE). */
#define MLX5_QPN_HW_DC_MAX_INLINE 256

/** Receive WQEs of a DCT's SRQ (rdma-core makes a list of max_wr + 1, rounded up: 256). */
#define MLX5_QPN_HW_DC_SRQ_WR 255

/** Messages of a DCT kept readable (mlx5_qpn_dct_read), as the emulated device's ring. */
#define MLX5_QPN_HW_DC_RX_HOLD 64

/** Bytes of a DCT's receive buffer per SRQ WQE: the largest SEND a DCI makes. */
#define MLX5_QPN_HW_DC_RX_STRIDE 256

/** Arguments of mlx5dv_create_qp() for a DCI (dct_key unused) or a DCT (srq non-NULL). */
void mlx5_qpn_hw_dc_qp_attr(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
			    uint32_t log_sq_bbs, uint64_t dc_key, struct ibv_qp_init_attr_ex *attr,
			    struct mlx5dv_qp_init_attr *dv);

/**
 * Bytes libmlx5 reserves per WQE of an IBV_QPT_DRIVER DCI before its data (providers/mlx5/
 * verbs.c, _sq_overhead, without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS): the largest operation the
 * QP may carry, a bind-MW/UMR (ctrl 16, UMR ctrl 48, mkey context 64, KLMs 64 = 192), and the
 * datagram segment (48). A SEND the DC layer posts is 64 bytes before its data; the ring is
 * sized by this.
 */
#define MLX5_QPN_HW_DC_LIBMLX5_WQE_OVERHEAD 240

/** libmlx5's WQE size of a DCI of these caps (mlx5_calc_send_wqe): the overhead above, then
 * the inline header and data to 16 bytes or the data segments, whichever is larger, in whole
 * 64-byte BBs (a 256-byte inline WQE takes 512 bytes). */
uint32_t mlx5_qpn_hw_dc_dci_wqe_bytes(const struct ibv_qp_cap *cap);

/** The SQ ring libmlx5 allocates and the kernel pins for cap (mlx5_calc_sq_size):
 * max_send_wr x mlx5_qpn_hw_dc_dci_wqe_bytes(), rounded up to a power of two. */
uint64_t mlx5_qpn_hw_dc_dci_ring_bytes(const struct ibv_qp_cap *cap);

/** The send capabilities of a DCI whose SENDs carry at most max_inline bytes, so that rdma-core
 * makes its SQ 2^log_sq_bbs BBs with its own WQE size (max_send_wr, max_inline_data, and
 * max_send_sge 1 when 0; max_inline <= 256). */
void mlx5_qpn_hw_dc_dci_cap(uint32_t log_sq_bbs, uint32_t max_inline, struct ibv_qp_cap *cap);

/** Arguments of ibv_create_ah() for addr (port 0 means MLX5_QPN_HW_DC_PORT here; the backend
 * then puts the handle's port). */
void mlx5_qpn_hw_dc_ah_attr(const struct mlx5_qpn_dc_addr *addr, struct ibv_ah_attr *attr);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_HW_DC_H */
