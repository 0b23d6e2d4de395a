/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "qpndev": ours through the driver API, mlx5_qpn_reserved_alloc()/_dealloc() on an
 * emulated device (the seed API's shape on a device handle), no quarantine, compiled as an
 * application compiles them: inline from mlx5_qpn.h. With --vdev=mlx5_qpn_... the device is the
 * one the EAL probed, with its devargs (the EAL closes it). Next to "qpnpool" it shows what the driver
 * layer costs on top of the bare pool (aim: at most 1.3x, benchmark guide).
 */
#include <cerrno>
#include <cstdio>
#include <unistd.h>

#include <mlx5_qpn/mlx5_qpn.h>

#include "eal_devs.h"
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
std::vector<eal_dev> g_eal; /* the EAL's mlx5_qpn vdev: at most one */

int
qpndev_setup(const struct perf_cfg *cfg, void **ctx)
{
	char args[160];
	struct mlx5_qpn_dev *d;

	if (!g_eal.empty()) {
		d = mlx5_qpn_dev_lookup(g_eal[0].name.c_str());
		if (d == nullptr)
			return -ENODEV;
		*ctx = d;
		return 0;
	}
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
	js->kv("device", g_eal.empty() ? g_name : g_eal[0].name.c_str());
	js->kv("ranges_reserved", st.ranges_reserved);
	js->kv("qpns_reserved", st.qpns_reserved);
	js->kv("sync_reserves", st.sync_reserves);
	js->kv("allocs", st.pool.allocs);
	js->kv("frees", st.pool.frees);
}

void
qpndev_teardown(void *ctx)
{
	if (!g_eal.empty()) {
		qpndev_lcore_fini(ctx); /* the EAL's device stays, every QPN back in its pool */
		return;
	}
	mlx5_qpn_dev_close(static_cast<struct mlx5_qpn_dev *>(ctx));
	mlx5_qpn_dev_purge(g_name); /* a run killed earlier leaves nothing either */
}

} // namespace

int
perf_qpndev_from_eal()
{
	int rc = eal_devs_list("qpn-perf", &g_eal);
	if (rc == 0 && g_eal.size() > 1) {
		fprintf(stderr, "qpn-perf: the peer qpndev runs on one device: give one "
				"--vdev=mlx5_qpn_...\n");
		rc = -ENODEV;
	}
	if (rc == 0 && !g_eal.empty())
		printf("qpn-perf: peer qpndev on device %s (vdev %s)\n", g_eal[0].name.c_str(),
		       g_eal[0].vdev.c_str());
	return rc;
}

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
