/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_LOCALITY_H
#define MLX5_QPN_LOCALITY_H

/* Internal: where a device sits (NUMA node, nearby cores), through hwloc. */
#include <cstddef>

#include "mlx5_qpn_devargs.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Find the device's NUMA node and the cores near it. A backend whose descriptor has a `where`
 * hook (the emulated device: its numa and cores devargs) says where the device sits; cores
 * default to the NUMA node's cores (or all cores when no node is given). Otherwise (hardware):
 * the hwloc OS device of the same name (an OpenFabrics device such as "mlx5_0"), its first
 * non-I/O ancestor's NUMA node and cpuset.
 *
 * @param[out] numa   NUMA node, -1 if unknown.
 * @param[out] cores  hwloc list syntax, e.g. "0-3".
 * @return 0; -ENOENT if hwloc does not know the device (outputs still set to the fallback).
 */
int mlx5_qpn_locality(const struct mlx5_qpn_devargs *da, int *numa, char *cores, size_t len);

#ifdef __cplusplus
}
#endif

#endif
