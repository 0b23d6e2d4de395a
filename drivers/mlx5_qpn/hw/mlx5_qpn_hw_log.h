/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_LOG_H
#define MLX5_QPN_HW_LOG_H

/**
 * @file
 * Internal: the log type of the hardware backend and its glue ("mlx5_qpn.hw"), registered in
 * mlx5_qpn_hw.cpp; lines start with "mlx5_qpn.hw: " (the family: lib/log/mlx5_qpn_log.h).
 */

#include <rte_log.h>

#include "mlx5_qpn_log.h"

extern int mlx5_qpn_hw_logtype;

#define HW_LOG(level, ...) MLX5_QPN_LOG(hw, level, __VA_ARGS__)

#endif /* MLX5_QPN_HW_LOG_H */
