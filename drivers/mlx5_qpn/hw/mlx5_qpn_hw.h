/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_H
#define MLX5_QPN_HW_H

/**
 * @file
 * Internal: the rdma-core hardware backend, `mlx5_qpn_hw_ops` (declared in mlx5_qpn_ops.h),
 * registered at load as backend "hw" for devices named "ib=<ibv device name>"
 * (mlx5_qpn_backend.h); it takes only the generic devargs keys.
 *
 * open:            glue -> ibv_get_device_list -> the device named da->name (e.g. "mlx5_0").
 *                  Not found: one line `mlx5_qpn: no RDMA device "<name>" (<n> devices found)`
 *                  and -ENODEV. rdma-core missing (library or symbol): one line
 *                  `mlx5_qpn: no RDMA device "<name>": rdma-core unavailable (<what>)` and
 *                  -ENODEV too, since for the caller both mean "this device cannot be had".
 *                  A device that is not mlx5: -ENOTSUP. -EINVAL for a NULL/empty name.
 *                  The context is opened with DEVX (mlx5dv_open_device); when DEVX is refused
 *                  it falls back to ibv_open_device and caps.devx = 0. HCA caps and caps 2 are
 *                  read with QUERY_HCA_CAP through mlx5dv_devx_general_cmd; RESERVED_QPN
 *                  support is then proven by creating and destroying one object of
 *                  2^log_reserved_qpn_granularity QPNs.
 * query_caps:      the caps read at open. caps.reserved_qpn_obj is 1 only when bit 44 of
 *                  general_obj_types is set AND the trial allocation succeeded (the raw bits
 *                  stay in caps.general_obj_types).
 * range_reserve:   one DEVX CREATE_GENERAL_OBJECT(RESERVED_QPN, log_obj_range = log_size);
 *                  log_size must be within [granularity, max(max_alloc, granularity)]
 *                  (-EINVAL otherwise); -ENOTSUP when objects are not usable (use the
 *                  single-QPN fallback); firmware errors as mlx5_qpn_fw_status_to_errno().
 * range_release:   destroys the object; -EINVAL for a handle this device did not give.
 * qpn_reserve_one / qpn_release_one: mlx5dv_reserved_qpn_alloc / _dealloc, their positive
 *                  errno returned negated.
 * qp_create / qp_destroy: NULL (not supported on hardware yet: -EOPNOTSUPP by the ops rule).
 * uar_map / uar_unmap: mlx5dv_devx_alloc_uar, non-cached first, BlueFlame if refused.
 * close:           destroys every object, single QPN and UAR still held, closes the context.
 *
 * The backend pointer handed out is a struct mlx5_qpn_hw_dev (private to mlx5_qpn_hw.cpp).
 * Thread safety: each op may be called from any thread; firmware commands run outside the
 * backend's bookkeeping lock, which only the slow path takes. close must not race other ops.
 */

#include "mlx5_qpn_ops.h"

#endif /* MLX5_QPN_HW_H */
