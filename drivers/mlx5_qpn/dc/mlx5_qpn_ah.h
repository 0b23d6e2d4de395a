/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_AH_H
#define MLX5_QPN_AH_H

/**
 * @file
 * Internal to the DC data path: what an address handle is (dc/mlx5_qpn_ah.cpp creates it,
 * mlx5_qpn_dci_post_send() copies its address vector into each WQE). Immutable after create,
 * so any number of DCIs of its device may read it concurrently.
 */

#include "mlx5_qpn_dc_ops.h"

struct mlx5_qpn_ah {
	struct mlx5_qpn_backend *be;      /* the device it routes for */
	const struct mlx5_qpn_dc_ops *dc; /* be's, checked at create */
	struct mlx5_qpn_dc_ah_info info;  /* the AV (route) and the backend's handle */
};

#endif /* MLX5_QPN_AH_H */
