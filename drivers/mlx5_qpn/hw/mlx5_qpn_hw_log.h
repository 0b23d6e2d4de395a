/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_LOG_H
#define MLX5_QPN_HW_LOG_H

/**
 * @file
 * Internal: the log type of the hardware backend and its glue ("mlx5_qpn.hw"), registered in
 * mlx5_qpn_hw.cpp. Every line starts with "mlx5_qpn: " so users can grep one prefix.
 */

#include <rte_log.h>

extern int mlx5_qpn_hw_logtype;

#define MLX5_QPN_HW_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, mlx5_qpn_hw_logtype, "mlx5_qpn: " fmt "\n" __VA_OPT__(,) __VA_ARGS__)

#endif /* MLX5_QPN_HW_LOG_H */
