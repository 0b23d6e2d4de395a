/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEV_LOG_H
#define MLX5_QPN_DEV_LOG_H

/* Internal: the generic driver layer's log type (mlx5_qpn.dev). One line per message, prefixed
 * "mlx5_qpn.dev: " (the family: lib/log/mlx5_qpn_log.h). */
#include <rte_log.h>

#include "mlx5_qpn_log.h"

#ifdef __cplusplus
extern "C" {
#endif
extern int mlx5_qpn_dev_logtype;
#ifdef __cplusplus
}
#endif

#define DEV_LOG(level, ...) MLX5_QPN_LOG(dev, level, __VA_ARGS__)

#endif
