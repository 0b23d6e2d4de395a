/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DC_BE_H
#define MLX5_QPN_DC_BE_H

/**
 * @file
 * Internal extras of the DC data path (mlx5_qpn_dc.h) for the test suite, which links the
 * static archive (none of them is in the shared library's exports, config/mlx5_qpn.map):
 *  - creation on a backend handle instead of a probed device, for a process that opens a
 *    backend directly (a fork()ed child, a second handle of the same emulated device): the
 *    registry allows one probed device per name and process. The handle leads to its ops
 *    table (struct mlx5_qpn_backend, mlx5_qpn_ops.h) and the DC part of it (mlx5_qpn_dc_ops.h);
 *  - progress of a backend handle's device (mlx5_qpn_dev_service_run() on the handle).
 */

#include <cstdint>

#include "mlx5_qpn_dc.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_backend;

/**
 * mlx5_qpn_cq_create() on a backend handle. Same returns: -EOPNOTSUPP (and one line) when the
 * handle's ops have no DC part or no CQ ops.
 */
int mlx5_qpn_cq_create_be(struct mlx5_qpn_backend *be, uint32_t log_depth, struct mlx5_qpn_cq **cq);

/** mlx5_qpn_dci_create() with the device of cq. Same returns. */
int mlx5_qpn_dci_create_cq(struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
			   struct mlx5_qpn_dci **dci);

/** mlx5_qpn_dci_create_path() with the device of cq. Same returns. */
int mlx5_qpn_dci_create_cq_path(struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
				const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dci **dci);

/** mlx5_qpn_dct_create() with the device of cq. Same returns. */
int mlx5_qpn_dct_create_cq(struct mlx5_qpn_cq *cq, uint64_t dc_key, struct mlx5_qpn_dct **dct);

/** mlx5_qpn_dct_create_path() with the device of cq. Same returns. */
int mlx5_qpn_dct_create_cq_path(struct mlx5_qpn_cq *cq, uint64_t dc_key,
				const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dct **dct);

/** mlx5_qpn_ah_create() on a backend handle. Same returns. */
int mlx5_qpn_ah_create_be(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_addr *addr,
			  struct mlx5_qpn_ah **ah);

/** mlx5_qpn_dev_service_run() on a backend handle. Same returns. */
int mlx5_qpn_dc_service_run_be(struct mlx5_qpn_backend *be);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_DC_BE_H */
