/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEV_LOG_H
#define MLX5_QPN_DEV_LOG_H

/* Internal: the generic driver layer's log type (mlx5_qpn.dev). One line per message, prefixed
 * "mlx5_qpn: " so that a tool's user sees where it comes from. */
#include <rte_log.h>

#ifdef __cplusplus
extern "C" {
#endif
extern int mlx5_qpn_dev_logtype;
#ifdef __cplusplus
}
#endif

#define DEV_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, mlx5_qpn_dev_logtype, "mlx5_qpn: " fmt "\n", ##__VA_ARGS__)

#endif
