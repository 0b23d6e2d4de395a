/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_LOG_H
#define MLX5_QPN_LOG_H

/**
 * @file
 * Internal: the library's one log macro family (not installed).
 *
 * Every component registers one rte_log type named after it,
 *     RTE_LOG_REGISTER(mlx5_qpn_<component>_logtype, mlx5_qpn.<component>, <default level>);
 * and logs through
 *     MLX5_QPN_LOG(<component>, <LEVEL>, fmt, ...);
 * which writes one line prefixed "mlx5_qpn.<component>: ". The prefix is the log type's name, so
 * a line says which `--log-level=mlx5_qpn.<component>:debug` turns it up or down, and one
 * `--log-level=mlx5_qpn.*:...` reaches them all. The components' short macros (POOL_LOG,
 * SIM_LOG, ...) are this macro with the component filled in, nothing else.
 *
 * Components: shm, pool, cm (lib/); dev (the generic driver layer and the lease file), hw, sim,
 * dc (drivers/mlx5_qpn/).
 */

#include <rte_log.h>

#define MLX5_QPN_LOG(comp, level, fmt, ...)                                                        \
	MLX5_QPN_LOG_AT(comp, RTE_LOG_##level, fmt, ##__VA_ARGS__)

/** The same with the level as a value (RTE_LOG_ERR, ...), for a level chosen at run time. */
#define MLX5_QPN_LOG_AT(comp, rte_level, fmt, ...)                                                 \
	rte_log(rte_level, mlx5_qpn_##comp##_logtype, "mlx5_qpn." #comp ": " fmt "\n",             \
		##__VA_ARGS__)

#endif /* MLX5_QPN_LOG_H */
