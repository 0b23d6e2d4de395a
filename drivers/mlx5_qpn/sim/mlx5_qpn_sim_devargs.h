/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_SIM_DEVARGS_H
#define MLX5_QPN_SIM_DEVARGS_H

/**
 * @file
 * Internal: the emulated device's own devargs keys. The generic parser hands every key of
 * "simN,..." that it does not know to the emulated backend's key table (sim_devargs.cpp), which
 * fills this struct inside mlx5_qpn_devargs.be_args; "ib=..." refuses these keys ("only the
 * emulated device (simN) takes this key"). doc/guides/driver.md §3 lists them.
 */

#include <cstdint>

#include "mlx5_qpn_devargs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The emulated device's keys; every field has a default (sim_args_default()). */
struct mlx5_qpn_sim_devargs {
	uint64_t guid;            /**< guid=0x... node GUID (default derived from the name). */
	int numa_node;            /**< numa=N where the device "sits" (default -1: unknown). */
	char cores[64];           /**< cores=LIST: cores near the device, e.g. "0-3" or "0:2". */
	uint32_t ports;           /**< ports=N (1..4, default 1). */
	int32_t cap_reserved_qpn; /**< cap_reserved_qpn=0|1: general_obj_types bit 44 (default 1). */
	uint32_t log_gran;        /**< log_gran=N: log_reserved_qpn_granularity (default 0). */
	uint32_t log_max_alloc;   /**< log_max_alloc=N: log_reserved_qpn_max_alloc (default 10). */
	uint32_t log_max_num;     /**< log_max_num=N: log_max_num_reserved_qpn (default 20). */
	uint32_t log_max_qp;      /**< log_max_qp=N (default 18, as ConnectX). */
	uint32_t qpn_inc;         /**< qpn_inc=N: rdmavt qpn_inc stride (default 1). */
	uint32_t qos_shift;       /**< qos_shift=N: rdmavt qos_shift (default 0). */
	uint32_t rsvd_first;      /**< rsvd_first=N: driver-reserved QPN range start (default 0). */
	uint32_t rsvd_count; /**< rsvd_count=N: driver-reserved QPN range length (default 0). */
	uint32_t aip;        /**< aip=0|1: confine allocation to the AIP prefix 0x81 (default 0). */

	/* Fault injection. */
	uint32_t fault_nodevx; /**< fault_nodevx=1: cap bit set but object creation fails. */
	uint32_t
		fault_fw_rate; /**< fault_fw_rate=N: every N-th create or modify command fails (0 off). */
	uint32_t
		fault_fw_after; /**< fault_fw_after=N: every create or modify after the Nth fails (0 off). */
	uint32_t
		fault_fw_status; /**< fault_fw_status=N: the PRM status injected (0: NO_RES_ERR 0xf, -EAGAIN). */
	uint32_t slow_cmd_us;  /**< slow_cmd_us=N: each firmware command takes N us (default 10). */
	uint32_t limit;        /**< limit=N: the device reserves at most N QPNs in total (0 off). */
	uint32_t fw_first_fit; /**< fw_first_fit=1: RESERVED_QPN objects from the lowest free
				       block, so a destroyed range comes back at once (default 0). */
	uint32_t dc_err_every; /**< dc_err_every=N: every N-th SEND the device executes is lost:
				    it completes with 0x15 (transport retry exceeded) and moves its
				    DCI to ERR (0 off, the default). */
};

/** The emulated device's keys inside parsed devargs (their backend must be the emulated one). */
static inline struct mlx5_qpn_sim_devargs *
mlx5_qpn_sim_args(struct mlx5_qpn_devargs *da)
{
	return (struct mlx5_qpn_sim_devargs *)(void *)da->be_args;
}

/** Read-only mlx5_qpn_sim_args(). */
static inline const struct mlx5_qpn_sim_devargs *
mlx5_qpn_sim_cargs(const struct mlx5_qpn_devargs *da)
{
	return (const struct mlx5_qpn_sim_devargs *)(const void *)da->be_args;
}

#ifdef __cplusplus
static_assert(sizeof(struct mlx5_qpn_sim_devargs) <=
		      sizeof(((struct mlx5_qpn_devargs *)nullptr)->be_args),
	      "the emulated device's keys fit mlx5_qpn_devargs.be_args");
}
#endif

#endif /* MLX5_QPN_SIM_DEVARGS_H */
