/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "qpndev": ours through the driver API, mlx5_qpn_reserved_alloc()/_dealloc() on an
 * emulated device (the seed API's shape on a device handle), no quarantine, compiled as an
 * application compiles them: inline from mlx5_qpn.h. Next to "qpnpool" it shows what the driver
 * layer costs on top of the bare pool (aim: at most 1.3x, benchmark guide).
 */
#include <cerrno>
#include <cstdio>
#include <unistd.h>

#include <mlx5_qpn/mlx5_qpn.h>

#include "json_writer.h"
#include "perf_loop.h"

namespace {

struct qpndev_ops {
	using ctx = struct mlx5_qpn_dev;
	using token = uint32_t;

	static int alloc(ctx *d, token *t) { return mlx5_qpn_reserved_alloc(d, t); }
	static int free(ctx *d, token t) { return mlx5_qpn_reserved_dealloc(d, t); }
	static int alloc_bulk(ctx *d, token *t, unsigned int n)
	{
		return mlx5_qpn_reserved_alloc_bulk(d, t, n);
	}
	static int free_bulk(ctx *d, const token *t, unsigned int n)
	{
		return mlx5_qpn_reserved_dealloc_bulk(d, t, n);
	}
	static uint32_t qpn(token t) { return t; }
};

char g_name[32];

int
qpndev_setup(const struct perf_cfg *cfg, void **ctx)
{
	char args[160];
	struct mlx5_qpn_dev *d;

	snprintf(g_name, sizeof(g_name), "simperf%d_%u", getpid(), cfg->seq);
	/* The whole range reserved up front (log_max_alloc 16): the timed loops never grow it. */
	snprintf(args, sizeof(args),
		 "%s,quarantine_us=0,cache=%u,max_qpns=%u,log_max_alloc=16,"
		 "log_max_num=24",
		 g_name, cfg->cache, cfg->range);
	int rc = mlx5_qpn_dev_probe(args, &d);
	if (rc != 0)
		return rc;
	*ctx = d;
	return 0;
}

void
qpndev_lcore_fini(void *ctx)
{
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(static_cast<struct mlx5_qpn_dev *>(ctx)));
}

void
qpndev_stats_json(void *ctx, struct json_writer *js)
{
	struct mlx5_qpn_dev_stats st;

	if (mlx5_qpn_dev_stats_get(static_cast<struct mlx5_qpn_dev *>(ctx), &st) != 0)
		return;
	js->kv("ranges_reserved", st.ranges_reserved);
	js->kv("qpns_reserved", st.qpns_reserved);
	js->kv("sync_reserves", st.sync_reserves);
	js->kv("allocs", st.pool.allocs);
	js->kv("frees", st.pool.frees);
}

void
qpndev_teardown(void *ctx)
{
	mlx5_qpn_dev_close(static_cast<struct mlx5_qpn_dev *>(ctx));
	mlx5_qpn_dev_purge(g_name); /* a run killed earlier leaves nothing either */
}

} // namespace

const struct perf_peer perf_peer_qpndev = {
	.name = "qpndev",
	.desc = "ours through the driver API (mlx5_qpn_reserved_alloc) on an emulated device",
	.flags = PERF_F_SCALING | PERF_F_CHECKS | PERF_F_OWN_RANGE,
	.setup = qpndev_setup,
	PERF_PEER_LOOPS(qpndev_ops),
	.lcore_fini = qpndev_lcore_fini,
	.footprint = nullptr,
	.stats_json = qpndev_stats_json,
	.teardown = qpndev_teardown,
};
