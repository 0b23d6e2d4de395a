/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DC_OPS_H
#define MLX5_QPN_DC_OPS_H

/**
 * @file
 * Internal: the DC half of a backend's operations table (mlx5_qpn_dev_ops::dc), the only door
 * through which the DC data path (dc/mlx5_qpn_dc.cpp) reaches a device, as rdma-core's mlx5
 * provider reaches its verbs or vfio backend through one per-context ops table.
 *
 * The split of work is mlx5dv's: a backend creates and destroys the objects (firmware commands)
 * and hands out where their queues live (the info structs below); the DC layer then writes send
 * WQEs, rings doorbells and polls CQEs in those queues itself, in the mlx5 layouts of
 * common/mlx5_qpn_prm_wqe.h, without calling the backend. A DCT receives through an SRQ on every
 * backend: the backend hands out its WQE list and buffers (mlx5_qpn_dc_srq_info) and the DC
 * layer posts them. A device that executes WQEs in software has an `execute` op; the DC layer
 * runs it inside mlx5_qpn_cq_poll() (and mlx5_qpn_dev_service_run()), so the application's
 * loop is the same on every backend.
 *
 * A backend without a DC data path leaves mlx5_qpn_dev_ops::dc NULL; a NULL table or a NULL
 * member makes the DC layer answer -EOPNOTSUPP. The hardware backend's table is
 * mlx5_qpn_hw_dc_ops (hw/mlx5_qpn_hw_dc.cpp), the emulated device's mlx5_qpn_sim_dc_ops.
 *
 * Errors: every function returns 0 (or a count) or a negative errno: -EINVAL for a NULL argument
 * or an object that is not this handle's, -ENOMEM when the device has no object or queue memory
 * left, -EOPNOTSUPP when the data path is off on this handle, and firmware errors mapped as in
 * common/mlx5_qpn_prm.h.
 *
 * Thread safety: create/destroy are slow-path commands that may be called from any thread;
 * execute and poll may run concurrently with them and with each other.
 */

#include <cstdint>

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_backend;
struct mlx5_qpn_dc_addr;
struct mlx5_qpn_dc_path;

/** A CQ as the DC layer uses it. */
struct mlx5_qpn_dc_cq_info {
	void *ring;      /**< 2^log_depth CQEs of MLX5_QPN_CQE_SIZE bytes, all invalid. */
	uint32_t *dbrec; /**< [MLX5_QPN_CQ_SET_CI]: consumer index (be32, low 24 bits). */
	uint32_t log_depth;
	uint32_t cqn;    /**< CQ number. */
	uint64_t handle; /**< The backend's, for the other calls. */
};

/** dci_info::flags: the doorbell register is mapped write-combining (a BlueFlame register):
 * the UAR write is followed by a flushing store barrier, as DPDK's mlx5_doorbell_ring(). */
#define MLX5_QPN_DC_DCI_UAR_WC 0x1u

/** A DCI as the DC layer uses it. */
struct mlx5_qpn_dc_dci_info {
	uint32_t qpn;        /**< The DCI's QP number. */
	uint32_t log_sq_bbs; /**< The SQ holds 2^log_sq_bbs basic blocks of 64 bytes (at least
				  what was asked; a backend may give more, as rdma-core rounds). */
	void *sq;            /**< The SQ ring. */
	uint32_t *dbrec;     /**< [MLX5_QPN_SND_DBR]: send counter in BBs (be32, low 16 bits). */
	void *uar_reg;       /**< 64-bit doorbell register (UAR page + 0x800; on hardware the
				  register rdma-core gave the QP, mlx5dv_qp::bf.reg). */
	uint64_t handle;
	uint32_t flags;      /**< MLX5_QPN_DC_DCI_*. */
	uint32_t max_inline; /**< Most inline bytes a SEND of this DCI carries (1 ..
				  MLX5_QPN_DC_MAX_INLINE): what the device's WQE size limit leaves
				  (hardware: cmd_hca_cap.max_wqe_sz_sq_dc). */
};

/** Size of an address vector: the DC datagram segment of a send WQE (struct mlx5_wqe_av). */
#define MLX5_QPN_DC_AH_AV_SIZE 48

/** An address handle as the DC layer uses it: the AV a WQE's datagram segment starts from
 * (the DC layer then writes the DC key and the DCT number into it, as rdma-core does). */
struct mlx5_qpn_dc_ah_info {
	uint8_t av[MLX5_QPN_DC_AH_AV_SIZE];
	uint64_t handle;
};

/**
 * The SRQ a DCT receives into, whose receive WQEs the DC layer writes and posts itself: the
 * linked list of 2^log_wqes WQEs (common/mlx5_qpn_prm_wqe.h) with none posted yet, its doorbell
 * record, and one registered receive buffer of rx_stride bytes per WQE. The device takes posted
 * WQEs in list order, checks each data segment against the region of lkey, and names the WQE's
 * index in the responder CQE's wqe_counter; with none posted a SEND waits (RNR).
 * The DC layer owns the WQEs because it polls the CQ itself: rdma-core's SRQ bookkeeping
 * (which WQEs are free again) happens only in its own ibv_poll_cq, which nothing calls here.
 */
struct mlx5_qpn_dc_srq_info {
	void *wqes;        /**< The WQE ring (mlx5dv_srq::buf), all unposted. */
	uint32_t *dbrec;   /**< [MLX5_QPN_SRQ_DBR]: posted WQE counter (be32, low 16 bits). */
	uint32_t log_wqes; /**< 2^log_wqes WQEs (rdma-core: max_wr + 1, rounded up). */
	uint32_t stride;   /**< Bytes per WQE (>= MLX5_QPN_SRQ_WQE_MIN_STRIDE, power of two). */
	uint8_t *buf;      /**< Receive buffers: WQE i receives at buf + i * rx_stride. */
	uint32_t lkey;     /**< Of the memory region covering buf. */
	uint32_t rsvd;
};

/** A DCT as the DC layer uses it. */
struct mlx5_qpn_dc_dct_info {
	uint32_t dctn;      /**< DCT number. */
	uint32_t rx_slots;  /**< Messages kept readable: WQEs held back (a power of two). */
	uint32_t rx_stride; /**< Bytes per receive buffer (>= MLX5_QPN_DC_MAX_INLINE). */
	uint32_t rsvd;
	struct mlx5_qpn_dc_srq_info srq;
	uint64_t handle;
};

/** DC operations of a backend. */
struct mlx5_qpn_dc_ops {
	/** Create a CQ of 2^log_depth CQEs (1 <= log_depth <= 16). */
	int (*cq_create)(struct mlx5_qpn_backend *be, uint32_t log_depth,
			 struct mlx5_qpn_dc_cq_info *cq);
	/** Destroy a CQ; -EBUSY while a DCI or DCT still completes on it. */
	int (*cq_destroy)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq);
	/** Create a DCI completing on cq (a CQ of this handle), its SQ 2^log_sq_bbs BBs, moved to
	 * RTS with path at RTR (NULL: the port's default, mlx5_qpn_dc.h). */
	int (*dci_create)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq,
			  uint32_t log_sq_bbs, const struct mlx5_qpn_dc_path *path,
			  struct mlx5_qpn_dc_dci_info *dci);
	/** Move a DCI (in ERR, or any state) through RESET -> INIT -> RTR (path, as at create) ->
	 * RTS; its SQ starts at counter 0 and its doorbell record is zeroed. NULL: a backend whose
	 * DCIs cannot be recovered (the DC layer answers -EOPNOTSUPP). */
	int (*dci_reset)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dci_info *dci,
			 const struct mlx5_qpn_dc_path *path);
	/** Destroy a DCI and free its QP number. */
	int (*dci_destroy)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dci_info *dci);
	/** Create a DCT with a DC key, receiving completions on cq (a CQ of this handle), moved
	 * to RTR with path (NULL: the port's default). */
	int (*dct_create)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq,
			  uint64_t dc_key, const struct mlx5_qpn_dc_path *path,
			  struct mlx5_qpn_dc_dct_info *dct);
	/** Destroy a DCT and free its number. */
	int (*dct_destroy)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dct_info *dct);
	/** The device's execution step: run rung WQEs (bounded). NULL: the device executes them
	 * itself (hardware). The DC layer calls it from mlx5_qpn_cq_poll() and
	 * mlx5_qpn_dev_service_run(). @return WQEs executed (>= 0). */
	int (*execute)(struct mlx5_qpn_backend *be);
	/** Consume doorbell writes (counting them); NULL if the device needs no one to. @return
	 * doorbells consumed (>= 0). */
	int (*poll)(struct mlx5_qpn_backend *be);
	/** Create an address handle for addr (checked by the DC layer: sl, flow label). */
	int (*ah_create)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_addr *addr,
			 struct mlx5_qpn_dc_ah_info *ah);
	/** Destroy an address handle. */
	int (*ah_destroy)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_ah_info *ah);
	/** Whether the device raised a CQ error on cq (an overrun: it completes nothing more on
	 * it). The DC layer asks where a DCI stops making progress (its send queue full, a
	 * recovery waiting for completions), never on the fast path. @return 0, or -EIO (cq is
	 * in error). NULL: a device that never overruns a CQ silently. */
	int (*cq_check)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq);
};

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_DC_OPS_H */
