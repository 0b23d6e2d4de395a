/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEV_INTERNAL_H
#define MLX5_QPN_DEV_INTERNAL_H

/* Internal: device queries by name for telemetry, safe against a concurrent close; a vdev's
 * devargs for the vdev driver. */
#include <cstddef>

#include "mlx5_qpn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Copy a device's info and/or stats (either may be NULL) while holding the device registry lock,
 * so that a concurrent mlx5_qpn_dev_close() cannot free it underneath. info->pool_name points to
 * `pool_name` (of `len` bytes) instead of into the device.
 * @return 0; -ENODEV if no device has that name.
 */
int mlx5_qpn_dev_query(const char *name, struct mlx5_qpn_dev_info *info,
		       struct mlx5_qpn_dev_stats *stats, char *pool_name, size_t len);

/** Copy up to n device names (32 bytes each) under the registry lock; returns how many. */
unsigned int mlx5_qpn_dev_names(char (*names)[32], unsigned int n);

/**
 * The driver's devargs of vdev VDEV_NAME with ARGS into buf (mlx5_qpn_vdev_devargs() without its
 * check, for the vdev driver, which logs each refusal its own way): "" when they name no device.
 * @return 0; -EINVAL not a name of this driver (or a NULL argument); -E2BIG longer than size.
 */
int mlx5_qpn_vdev_to_devargs(const char *vdev_name, const char *args, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
