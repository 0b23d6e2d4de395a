/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_OPS_H
#define MLX5_QPN_OPS_H

/**
 * @file
 * Internal: the backend operations table of an mlx5_qpn device (the shape of DPDK's
 * eth_dev_ops). One table per backend, which the backend registers itself with its descriptor
 * (mlx5_qpn_backend.h): this header names none of them. The generic layer (dev/) holds the pool
 * and calls these only on slow paths, never while holding anything the fast path takes.
 *
 * All functions return 0 or a negative errno. Firmware status codes are mapped the way
 * rdma-core maps them (see common/mlx5_qpn_prm.h: mlx5_qpn_fw_status_to_errno()).
 */

#include <cstdint>

#include "mlx5_qpn_caps.h"
#include "mlx5_qpn_devargs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One reserved range as the device gave it. */
struct mlx5_qpn_range_obj {
	uint32_t first_qpn; /**< Object id = first QPN, aligned to 2^log_size. */
	uint8_t log_size;   /**< The range holds 2^log_size QPNs. */
	uint8_t single;     /**< Came from the single-QPN fallback API. */
	uint16_t rsvd;
	uint64_t handle; /**< Backend's handle to destroy it. */
};

/** A mapped UAR page. */
struct mlx5_qpn_uar {
	void *base_addr;   /**< Start of the mapped page (4 KiB). */
	void *reg_addr;    /**< Doorbell/BlueFlame register (base + 0x800). */
	uint32_t page_id;  /**< UAR page index. */
	uint64_t mmap_off; /**< mmap offset of the page. */
	uint64_t handle;   /**< Backend's handle to unmap it. */
};

struct mlx5_qpn_backend;
struct mlx5_qpn_dc_ops;

/** Backend operations. A NULL op means "not supported" (-EOPNOTSUPP). */
struct mlx5_qpn_dev_ops {
	/** Open the device named by the devargs; fill *out. -ENODEV if it does not exist. */
	int (*open)(const struct mlx5_qpn_devargs *da, struct mlx5_qpn_backend **out);
	/** Read the capabilities. */
	int (*query_caps)(struct mlx5_qpn_backend *be, struct mlx5_qpn_caps *caps);
	/** Reserve 2^log_size contiguous QPNs as one RESERVED_QPN object. */
	int (*range_reserve)(struct mlx5_qpn_backend *be, uint32_t log_size,
			     struct mlx5_qpn_range_obj *obj);
	/** Destroy a reserved range object; its QPNs go back to the device. */
	int (*range_release)(struct mlx5_qpn_backend *be, const struct mlx5_qpn_range_obj *obj);
	/** Fallback: one reserved QPN (rdma-core's mlx5dv_reserved_qpn_alloc). */
	int (*qpn_reserve_one)(struct mlx5_qpn_backend *be, uint32_t *qpn);
	/** Fallback: return one reserved QPN (mlx5dv_reserved_qpn_dealloc). */
	int (*qpn_release_one)(struct mlx5_qpn_backend *be, uint32_t qpn);
	/** Ordinary QP number from the device's QPN table (for reserved_qpn=try fallback). */
	int (*qp_create)(struct mlx5_qpn_backend *be, uint32_t *qpn);
	/** Destroy an ordinary QP number. */
	int (*qp_destroy)(struct mlx5_qpn_backend *be, uint32_t qpn);
	/** Map a UAR page. */
	int (*uar_map)(struct mlx5_qpn_backend *be, struct mlx5_qpn_uar *uar);
	/** Unmap a UAR page. */
	int (*uar_unmap)(struct mlx5_qpn_backend *be, struct mlx5_qpn_uar *uar);
	/** The DC objects (mlx5_qpn_dc_ops.h); NULL: no DC data path (-EOPNOTSUPP). */
	const struct mlx5_qpn_dc_ops *dc;
	/** Commands the device executed so far (every opener's); NULL: not counted. */
	int (*cmd_count)(struct mlx5_qpn_backend *be, uint64_t *n);
	/** Close the device; everything it still holds is released. */
	void (*close)(struct mlx5_qpn_backend *be);
};

/**
 * What every backend handle begins with, so that a handle alone (the DC layer's *_be() entry
 * points, a process that opened a backend without the generic layer) leads to its table: the
 * backend's private handle has this as its first member, set by its open.
 */
struct mlx5_qpn_backend {
	const struct mlx5_qpn_dev_ops *ops;
};

/**
 * The backend handle of a probed device: how the DC layer (dc/) reaches the device's table
 * (mlx5_qpn_dev_ops::dc) without seeing the generic layer's device. Defined by the generic layer.
 */
struct mlx5_qpn_dev;
struct mlx5_qpn_backend *mlx5_qpn_dev_backend(struct mlx5_qpn_dev *dev);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_OPS_H */
