/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_OPS_H
#define MLX5_QPN_OPS_H

/**
 * @file
 * Internal: the backend operations table of an mlx5_qpn device (the shape of DPDK's
 * eth_dev_ops). One table per backend: the emulated device (sim/) and the rdma-core hardware
 * backend (hw/). The generic layer (mlx5_qpn_dev.cpp) holds the pool and calls these only on
 * slow paths, never while holding anything the fast path takes.
 *
 * All functions return 0 or a negative errno. Firmware status codes are mapped the way
 * rdma-core maps them (see common/mlx5_qpn_prm.h: mlx5_qpn_fw_status_to_errno()).
 */

#include <stdint.h>

#include "mlx5_qpn_devargs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device capabilities that matter for QPN reservation (HCA caps and caps 2). */
struct mlx5_qpn_caps {
	uint64_t node_guid;                   /**< Node GUID (host order). */
	uint64_t general_obj_types;           /**< HCA caps general_obj_types bit mask. */
	uint8_t reserved_qpn_obj;             /**< general_obj_types bit 44 (RESERVED_QPN) set. */
	uint8_t log_reserved_qpn_granularity; /**< Smallest object: 2^g QPNs (caps 2). */
	uint8_t log_reserved_qpn_max_alloc;   /**< Largest object: 2^m QPNs (caps 2). */
	uint8_t log_max_num_reserved_qpn;     /**< Most reserved QPNs in total: 2^n (caps 2). */
	uint8_t log_max_qp;                   /**< log2 of the number of QPs. */
	uint8_t nb_ports;                     /**< Physical ports. */
	uint8_t devx;                         /**< DEVX commands available on the context. */
	uint8_t port; /**< The 1-based physical port this handle serves (0 is taken as 1). */
	/** Most QPNs this handle may take from the device in all, reserved or ordinary (the
	 * emulated device's limit= devarg); 0: only the log_max_* caps bound it. */
	uint32_t qpn_limit;
};

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

/** The emulated mlx5 device (drivers/mlx5_qpn/sim/). */
extern const struct mlx5_qpn_dev_ops mlx5_qpn_sim_ops;
/** The rdma-core hardware backend (drivers/mlx5_qpn/hw/). */
extern const struct mlx5_qpn_dev_ops mlx5_qpn_hw_ops;

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_OPS_H */
