/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_CAPS_H
#define MLX5_QPN_CAPS_H

/**
 * @file
 * Internal: the device capabilities as the PRM reports them (QUERY_HCA_CAP), in common/ because
 * the layouts' parsers (mlx5_qpn_prm.h) fill them and every backend and the generic layer read
 * them. Plain data: nothing above common/ is needed to use it.
 */

#include <cstdint>

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

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_CAPS_H */
