/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers "qpnpool" and "qpnpool-q": ours, mlx5_qpn_pool, called through its public API exactly
 * as an application calls it (the inline fast path of mlx5_qpn_pool.h, its slow paths through
 * the PLT of libmlx5_qpn.so), with its checks on (the pool always checks: double and foreign
 * frees are refused). "qpnpool" has no quarantine;
 * "qpnpool-q" keeps every released QPN for --quarantine-us before it can come back.
 */

#include <cerrno>
#include <cstdio>

#include <rte_errno.h>
#include <rte_memory.h>

#include <mlx5_qpn/mlx5_qpn_pool.h>

#include "perf_loop.h"
#include "json_writer.h"

namespace {

struct qpnpool_ops {
	using ctx = struct mlx5_qpn_pool;
	using token = uint32_t;

	static int alloc(ctx *p, token *t) { return mlx5_qpn_pool_alloc(p, t); }
	static int free(ctx *p, token t) { return mlx5_qpn_pool_free(p, t); }
	static int alloc_bulk(ctx *p, token *t, unsigned int n)
	{
		return mlx5_qpn_pool_alloc_bulk(p, t, n);
	}
	static int free_bulk(ctx *p, const token *t, unsigned int n)
	{
		return mlx5_qpn_pool_free_bulk(p, t, n);
	}
	static uint32_t qpn(token t) { return t; }
};

/* The same calls; a type of its own so that profiles (callgrind, perf) show the two loops apart. */
struct qpnpool_q_ops : qpnpool_ops {};

int
qpnpool_create(const struct perf_cfg *cfg, uint64_t quarantine_ns, void **ctx)
{
	char name[MLX5_QPN_POOL_NAMESIZE + 1];
	struct mlx5_qpn_pool_params params = {};
	struct mlx5_qpn_pool *p;
	int ret;

	snprintf(name, sizeof(name), "perf_qp%u", cfg->seq);
	params.name = name;
	params.quarantine_ns = quarantine_ns;
	params.cache_size = cfg->cache;
	params.capacity = cfg->range;
	params.socket_id = SOCKET_ID_ANY;
	p = mlx5_qpn_pool_create(&params);
	if (p == nullptr)
		return rte_errno > 0 ? -rte_errno : -ENOMEM;
	ret = mlx5_qpn_pool_range_add(p, cfg->first, cfg->range);
	if (ret != 0) {
		mlx5_qpn_pool_destroy(p);
		return ret;
	}
	*ctx = p;
	return 0;
}

int
qpnpool_setup(const struct perf_cfg *cfg, void **ctx)
{
	return qpnpool_create(cfg, 0, ctx);
}

int
qpnpool_q_setup(const struct perf_cfg *cfg, void **ctx)
{
	return qpnpool_create(cfg, cfg->quarantine_ns, ctx);
}

/* Run on every lcore that used the pool, before it is freed: no cache is left claimed. */
void
qpnpool_lcore_fini(void *ctx)
{
	mlx5_qpn_pool_cache_flush(static_cast<struct mlx5_qpn_pool *>(ctx));
}

void
qpnpool_stats_json(void *ctx, struct json_writer *js)
{
	struct mlx5_qpn_pool_stats st;

	if (mlx5_qpn_pool_stats_get(static_cast<struct mlx5_qpn_pool *>(ctx), &st) != 0)
		return;
	js->kv("quarantine_ns",
	       mlx5_qpn_pool_quarantine_ns(static_cast<struct mlx5_qpn_pool *>(ctx)));
	js->kv("capacity", st.capacity);
	js->kv("in_use", st.in_use);
	js->kv("in_quarantine", st.in_quarantine);
	js->kv("free", st.free);
	js->kv("allocs", st.allocs);
	js->kv("frees", st.frees);
	js->kv("cache_hits", st.cache_hits);
	js->kv("cache_misses", st.cache_misses);
	js->kv("refills", st.refills);
	js->kv("flushes", st.flushes);
	js->kv("steals", st.steals);
	js->kv("refused_frees", st.refused_frees);
	js->kv("enospc", st.enospc);
	js->kv("eagain", st.eagain);
	js->kv("nb_caches", (uint64_t)st.nb_caches);
}

void
qpnpool_teardown(void *ctx)
{
	mlx5_qpn_pool_destroy(static_cast<struct mlx5_qpn_pool *>(ctx));
}

} // namespace

const struct perf_peer perf_peer_qpnpool = {
	.name = "qpnpool",
	.desc = "ours: mlx5_qpn_pool, checks on, no quarantine",
	.flags = PERF_F_SCALING | PERF_F_HEAP_MEM | PERF_F_CHECKS,
	.setup = qpnpool_setup,
	PERF_PEER_LOOPS(qpnpool_ops),
	.lcore_fini = qpnpool_lcore_fini,
	.footprint = nullptr,
	.stats_json = qpnpool_stats_json,
	.teardown = qpnpool_teardown,
};

const struct perf_peer perf_peer_qpnpool_q = {
	.name = "qpnpool-q",
	.desc = "ours: mlx5_qpn_pool, checks on, quarantine of --quarantine-us",
	.flags = PERF_F_SCALING | PERF_F_HEAP_MEM | PERF_F_CHECKS,
	.setup = qpnpool_q_setup,
	PERF_PEER_LOOPS(qpnpool_q_ops),
	.lcore_fini = qpnpool_lcore_fini,
	.footprint = nullptr,
	.stats_json = qpnpool_stats_json,
	.teardown = qpnpool_teardown,
};
