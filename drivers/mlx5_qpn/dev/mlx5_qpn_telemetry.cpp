/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK telemetry commands (query them with dpdk-telemetry.py):
 *   /mlx5_qpn/pool/list            names of the pools of this DPDK instance
 *   /mlx5_qpn/pool/stats,<name>    a pool's counters
 *   /mlx5_qpn/dev/list             probed devices of this process
 *   /mlx5_qpn/dev/info,<name>      a device's caps, source, locality
 *   /mlx5_qpn/dev/stats,<name>     a device's counters, its pool's included
 */
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <rte_common.h>
#include <rte_memzone.h>
#include <rte_telemetry.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_dev_internal.h"

namespace {

void
pool_walk(const struct rte_memzone *mz, void *arg)
{
	auto *d = static_cast<struct rte_tel_data *>(arg);
	if (strncmp(mz->name, "QPNP_", 5) == 0)
		rte_tel_data_add_array_string(d, mz->name + 5);
}

int
tel_pool_list(const char *, const char *, struct rte_tel_data *d)
{
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	rte_memzone_walk(pool_walk, d);
	return 0;
}

void
add_pool_stats(struct rte_tel_data *d, const struct mlx5_qpn_pool_stats &st)
{
	rte_tel_data_add_dict_u64(d, "capacity", st.capacity);
	rte_tel_data_add_dict_u64(d, "in_use", st.in_use);
	rte_tel_data_add_dict_u64(d, "in_quarantine", st.in_quarantine);
	rte_tel_data_add_dict_u64(d, "free", st.free);
	rte_tel_data_add_dict_u64(d, "allocs", st.allocs);
	rte_tel_data_add_dict_u64(d, "frees", st.frees);
	rte_tel_data_add_dict_u64(d, "cache_hits", st.cache_hits);
	rte_tel_data_add_dict_u64(d, "cache_misses", st.cache_misses);
	rte_tel_data_add_dict_u64(d, "refills", st.refills);
	rte_tel_data_add_dict_u64(d, "flushes", st.flushes);
	rte_tel_data_add_dict_u64(d, "steals", st.steals);
	rte_tel_data_add_dict_u64(d, "refused_frees", st.refused_frees);
	rte_tel_data_add_dict_u64(d, "enospc", st.enospc);
	rte_tel_data_add_dict_u64(d, "eagain", st.eagain);
	rte_tel_data_add_dict_u64(d, "ranges", st.nb_ranges);
	rte_tel_data_add_dict_u64(d, "caches", st.nb_caches);
}

int
tel_pool_stats(const char *, const char *params, struct rte_tel_data *d)
{
	if (params == nullptr || *params == '\0')
		return -EINVAL;
	struct mlx5_qpn_pool *p = mlx5_qpn_pool_lookup(params);
	struct mlx5_qpn_pool_stats st;
	if (p == nullptr || mlx5_qpn_pool_stats_get(p, &st) != 0)
		return -EINVAL;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "name", params);
	rte_tel_data_add_dict_u64(d, "quarantine_ns", mlx5_qpn_pool_quarantine_ns(p));
	add_pool_stats(d, st);
	return 0;
}

int
tel_dev_list(const char *, const char *, struct rte_tel_data *d)
{
	static char names[64][32]; /* telemetry commands run on one thread */
	unsigned n = mlx5_qpn_dev_names(names, RTE_DIM(names));
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	for (unsigned i = 0; i < n; i++)
		rte_tel_data_add_array_string(d, names[i]);
	return 0;
}

int
tel_dev_info(const char *, const char *params, struct rte_tel_data *d)
{
	struct mlx5_qpn_dev_info in;
	char pool[32];
	if (params == nullptr || mlx5_qpn_dev_query(params, &in, nullptr, pool, sizeof(pool)) != 0)
		return -EINVAL;
	static const char *const src[] = {"objects", "single", "ordinary"};
	char guid[24];
	snprintf(guid, sizeof(guid), "%016" PRIx64, in.node_guid);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "name", in.name);
	rte_tel_data_add_dict_string(d, "backend", in.backend);
	rte_tel_data_add_dict_u64(d, "emulated",
				  static_cast<uint64_t>((in.flags & MLX5_QPN_DEV_F_EMULATED) != 0));
	rte_tel_data_add_dict_string(d, "node_guid", guid);
	rte_tel_data_add_dict_u64(d, "port", in.port);
	rte_tel_data_add_dict_string(d, "source", src[in.source]);
	rte_tel_data_add_dict_u64(d, "reserved_qpn_cap", in.reserved_qpn_cap);
	rte_tel_data_add_dict_u64(d, "log_reserved_qpn_granularity",
				  in.log_reserved_qpn_granularity);
	rte_tel_data_add_dict_u64(d, "log_reserved_qpn_max_alloc", in.log_reserved_qpn_max_alloc);
	rte_tel_data_add_dict_u64(d, "log_max_num_reserved_qpn", in.log_max_num_reserved_qpn);
	rte_tel_data_add_dict_u64(d, "log_range", in.log_range);
	rte_tel_data_add_dict_u64(d, "max_qpns", in.max_qpns);
	rte_tel_data_add_dict_u64(d, "quarantine_us", in.quarantine_us);
	rte_tel_data_add_dict_int(d, "numa_node", in.numa_node);
	rte_tel_data_add_dict_string(d, "cores", in.cores);
	rte_tel_data_add_dict_string(d, "pool", in.pool_name);
	return 0;
}

int
tel_dev_stats(const char *, const char *params, struct rte_tel_data *d)
{
	struct mlx5_qpn_dev_stats st;
	if (params == nullptr || mlx5_qpn_dev_query(params, nullptr, &st, nullptr, 0) != 0)
		return -EINVAL;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "ranges_reserved", st.ranges_reserved);
	rte_tel_data_add_dict_u64(d, "ranges_released", st.ranges_released);
	rte_tel_data_add_dict_u64(d, "qpns_reserved", st.qpns_reserved);
	rte_tel_data_add_dict_u64(d, "reserve_failures", st.reserve_failures);
	rte_tel_data_add_dict_u64(d, "sync_reserves", st.sync_reserves);
	rte_tel_data_add_dict_u64(d, "bg_reserves", st.bg_reserves);
	rte_tel_data_add_dict_int(d, "last_error", st.last_error);
	rte_tel_data_add_dict_u64(d, "backoff_skips", st.backoff_skips);
	rte_tel_data_add_dict_u64(d, "cooling_qpns", st.cooling_qpns);
	rte_tel_data_add_dict_u64(d, "cooled_ranges", st.cooled_ranges);
	rte_tel_data_add_dict_u64(d, "lease_errors", st.lease_errors);
	rte_tel_data_add_dict_u64(d, "mp_grow_requests", st.mp_grow_requests);
	rte_tel_data_add_dict_u64(d, "mp_ipc_grows", st.mp_ipc_grows);
	rte_tel_data_add_dict_u64(d, "mp_dead_reclaimed", st.mp_dead_reclaimed);
	add_pool_stats(d, st.pool);
	return 0;
}

} /* namespace */

RTE_INIT(mlx5_qpn_telemetry_init)
{
	rte_telemetry_register_cmd("/mlx5_qpn/pool/list", tel_pool_list,
				   "Lists the QPN pools. Takes no parameters");
	rte_telemetry_register_cmd("/mlx5_qpn/pool/stats", tel_pool_stats,
				   "Returns a QPN pool's counters. Parameters: pool name");
	rte_telemetry_register_cmd("/mlx5_qpn/dev/list", tel_dev_list,
				   "Lists the probed mlx5_qpn devices. Takes no parameters");
	rte_telemetry_register_cmd(
		"/mlx5_qpn/dev/info", tel_dev_info,
		"Returns an mlx5_qpn device's caps and locality. Parameters: device name");
	rte_telemetry_register_cmd(
		"/mlx5_qpn/dev/stats", tel_dev_stats,
		"Returns an mlx5_qpn device's counters. Parameters: device name");
}
