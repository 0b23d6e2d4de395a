/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEVARGS_H
#define MLX5_QPN_DEVARGS_H

/**
 * @file
 * Device arguments of the mlx5_qpn driver, in DPDK's "name,key=value,..." syntax.
 *
 * The first token names the device: "simN..." (any name that starts with "sim") is the emulated
 * mlx5 device, "ib=<ibv device name>" is a real device through rdma-core. The grammar (single
 * commas, KEY=VALUE with one '=', no whitespace, no duplicates, numbers decimal or 0x-hex without
 * a leading zero) is checked on the text as written, then rte_kvargs splits it and each key is
 * checked against an allow-list; see doc/guides/driver.md §3 for the keys and every refusal.
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLX5_QPN_DEV_NAMESIZE 32

/** Reserved-QPN policy (like UCX's UCX_RC_MLX5_DCI_... try/yes/no knobs). */
enum mlx5_qpn_rsvd_policy {
	MLX5_QPN_RSVD_TRY = 0, /**< Reserved QPNs if the device has them, else ordinary QPNs. */
	MLX5_QPN_RSVD_YES,     /**< Reserved QPNs or fail with -EOPNOTSUPP. */
	MLX5_QPN_RSVD_NO,      /**< Ordinary QPNs from the device's QPN table only. */
};

/** Backend kind. */
enum mlx5_qpn_backend_kind {
	MLX5_QPN_BACKEND_SIM = 0,
	MLX5_QPN_BACKEND_HW,
};

/** Parsed device arguments; every field has a default (see mlx5_qpn_devargs_parse()). */
struct mlx5_qpn_devargs {
	enum mlx5_qpn_backend_kind kind;
	char name[MLX5_QPN_DEV_NAMESIZE];  /**< "sim0" or the ibv device name ("mlx5_0"). */

	/* Common. */
	enum mlx5_qpn_rsvd_policy reserved_qpn; /**< reserved_qpn=try|yes|no (default try). */
	uint64_t quarantine_us;   /**< quarantine_us=N (default 2000000: a typical CM timewait). */
	uint32_t cache;           /**< cache=N per-thread cache batch (default 64). */
	uint32_t log_range;       /**< log_range=N: log2 QPNs per reservation (default: caps max). */
	uint32_t low_water;       /**< low_water=N: reserve more when free < N (default 2*cache). */
	uint32_t max_qpns;        /**< max_qpns=N: most QPNs the device's pool holds (default 65536). */
	int numa_node;            /**< numa=N (sim; hw reads it through hwloc). -1: unknown. */
	char cores[64];           /**< cores=LIST (sim: cores near the device, e.g. "0-3"). */

	/* Emulated device. */
	uint64_t guid;            /**< guid=0x... node GUID (default derived from the name). */
	uint32_t ports;           /**< ports=N (1..4, default 1). */
	int32_t cap_reserved_qpn; /**< cap_reserved_qpn=0|1: general_obj_types bit 44 (default 1). */
	uint32_t log_gran;        /**< log_gran=N: log_reserved_qpn_granularity (default 0). */
	uint32_t log_max_alloc;   /**< log_max_alloc=N: log_reserved_qpn_max_alloc (default 10). */
	uint32_t log_max_num;     /**< log_max_num=N: log_max_num_reserved_qpn (default 16). */
	uint32_t log_max_qp;      /**< log_max_qp=N (default 18, as ConnectX). */
	uint32_t qpn_inc;         /**< qpn_inc=N: rdmavt qpn_inc stride (default 1). */
	uint32_t qos_shift;       /**< qos_shift=N: rdmavt qos_shift (default 0). */
	uint32_t rsvd_first;      /**< rsvd_first=N: driver-reserved QPN range start (default 0). */
	uint32_t rsvd_count;      /**< rsvd_count=N: driver-reserved QPN range length (default 0). */
	uint32_t aip;             /**< aip=0|1: confine allocation to the AIP prefix 0x81 (default 0). */

	/* Fault injection (emulated device). */
	uint32_t fault_nodevx;    /**< fault_nodevx=1: cap bit set but object creation fails. */
	uint32_t fault_fw_rate;   /**< fault_fw_rate=N: a firmware error every N commands (0 off). */
	uint32_t fault_fw_after;  /**< fault_fw_after=N: every command after the Nth fails (0 off). */
	uint32_t fault_fw_status; /**< fault_fw_status=N: the PRM status injected (0: NO_RES_ERR 0xf, -EAGAIN). */
	uint32_t slow_cmd_us;     /**< slow_cmd_us=N: each firmware command takes N us. */
	uint32_t limit;           /**< limit=N: the device reserves at most N QPNs in total (0 off). */
	uint32_t fw_first_fit;    /**< fw_first_fit=1: RESERVED_QPN objects from the lowest free
				       block, so a destroyed range comes back at once (default 0). */
};

/**
 * Parse devargs into *da (all defaults first).
 *
 * @return 0; -EINVAL for a malformed list (empty pair, bare key, "k==v", empty key or value,
 *         whitespace, a [list]), an unknown or duplicate key, a bad or out-of-range value or a bad
 *         device name: one log line names the offending text as written.
 */
int mlx5_qpn_devargs_parse(const char *devargs, struct mlx5_qpn_devargs *da);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_DEVARGS_H */
