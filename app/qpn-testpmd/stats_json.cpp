/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's JSON summary (--json). The keys are a contract (doc/guides/app_reference.md §4 and
 * the report script read them): keys are only ever added. Per step:
 *   "steps": {name: {"count", "min_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns",
 *                    "max_ns", "hist": [[upper_ns, count], ...]}}
 * where "hist" lists the non-empty buckets of the step's log-linear histogram (latency.h) in
 * increasing order, each with its upper bound; and "timeline" (monitor.cpp) is
 *   [{"t_s", "connections", "conn_per_sec"}, ...], one point a second.
 *
 * The writer is app/common's json_writer (libjansson behind a streaming interface), shared with
 * qpn-perf; this file only says what is written.
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "json_writer.h"
#include "run_meta.h"
#include "stats.h"
#include "testpmd.h"

namespace {

void
steps_json(json_writer &js, const totals &t, uint64_t hz)
{
	js.key("steps");
	js.obj();
	for (unsigned i = 0; i < STEP_NB; i++) {
		const latency_hist &h = t.hist[i];
		js.key(step_names[i]);
		js.obj();
		js.kv("count", h.n);
		js.kv("min_ns", ns(h.n ? h.min : 0, hz));
		js.kv("mean_ns", h.mean() * 1e9 / static_cast<double>(hz));
		js.kv("p50_ns", ns(h.percentile(50), hz));
		js.kv("p90_ns", ns(h.percentile(90), hz));
		js.kv("p99_ns", ns(h.percentile(99), hz));
		js.kv("p999_ns", ns(h.percentile(99.9), hz));
		js.kv("max_ns", ns(h.max, hz));
		js.key("hist");
		js.arr();
		for (unsigned b = 0; b < latency_hist::kBuckets; b++) {
			if (h.count[b] == 0)
				continue;
			js.arr();
			js.num(ns(latency_hist::upper(b), hz));
			js.num(h.count[b]);
			js.end_arr();
		}
		js.end_arr();
		js.end_obj();
	}
	js.end_obj();
}

/* "per_server": [{"server", "lcore" (null: co-polled), "peers": [...], "connections",
 * "conn_per_sec", "received", "stale_rejects", "errors"}], one per server of the passive side run
 * here (none in a client process). */
void
servers_json(json_writer &js, const run_ctx *ctx, double secs)
{
	js.key("per_server");
	js.arr();
	for (unsigned k = 0; k < ctx->nb_servers && ctx->side_passive; k++) {
		const lcore_stats &v = ctx->srv[k];
		js.obj();
		js.kv("server", uint64_t(k));
		js.key("lcore");
		if (ctx->server_lcore[k] < 0)
			js.null();
		else
			js.num(uint64_t(ctx->server_lcore[k]));
		js.key("peers");
		js.arr();
		for (unsigned p = k; p < ctx->cfg->peers; p += ctx->nb_servers)
			js.num(uint64_t(p));
		js.end_arr();
		js.kv("connections", v.ops.load());
		js.kv("conn_per_sec", static_cast<double>(v.ops.load()) / secs);
		js.kv("received", v.recvs.load());
		js.kv("stale_rejects", v.stale_rejects.load());
		js.kv("errors", v.errors.load());
		js.end_obj();
	}
	js.end_arr();
}

/* The run: what ran, with which parameters, and its headline counts. */
void
run_json(json_writer &js, run_ctx *ctx, const qpn_engine *e, const totals &t, double secs,
	 const mlx5_qpn_dev_info &info)
{
	const run_config &cfg = *ctx->cfg;
	run_meta_json(js, "qpn-testpmd");
	js.kv("engine", e->name);
	js.kv("duration_s", ctx->run_secs);
	js.kv("lcores", uint64_t(rte_lcore_count()));
	js.kv("measured_side", e->uses_cm ? (e->passive_side ? "passive" : "active") : "pool");
	js.kv("allocator", ctx->alloc_fw ? "rdma-core" : "ours");
	js.kv("role", cfg.role.c_str());
	js.kv("server_lcores", uint64_t(ctx->nb_servers));
	js.kv("fabric", cfg.fabric.c_str());
	js.kv("cm_policy", cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	js.kv("timewait_ms", uint64_t(cm_timewait_ms(cfg)));
	js.kv("quarantine_us", info.quarantine_us);
	/* The cap the devices' QPNs put on conns/s (0: none), the QPN-seconds a connection holds
	 * on the device that caps, the rate the lcores are taken to reach, and whether the cap is
	 * below it (the start-up line). */
	js.kv("qpn_cap_conn_per_sec", ctx->qpn_cap);
	js.kv("qpn_hold_s_per_conn", ctx->qpn_hold_s);
	js.kv("lcores_conn_per_sec", ctx->lcores_rate);
	js.kv_bool("qpn_capped", ctx->qpn_cap != 0 && ctx->qpn_cap < ctx->lcores_rate);
	js.kv_bool("data_path", ctx->data_path);
	js.kv("connections", t.conns);
	js.kv("conn_per_sec", static_cast<double>(t.conns) / secs);
	js.kv("conn_per_sec_per_lcore",
	      static_cast<double>(t.conns) / secs / (t.measured_lcores ? t.measured_lcores : 1));
	js.kv("pool_share", pool_share(t));
	js.kv("stale_rejects", t.stale);
}

/* The CM: REJ reasons seen, then the connections' CM counters. */
void
cm_json(json_writer &js, run_ctx *ctx, const totals &t)
{
	qpn_conn_totals a = conn_totals(ctx);
	js.key("rej");
	js.obj();
	for (unsigned r = 0; r < MLX5_QPN_CM_REJ_REASON_SLOTS; r++)
		if (t.rej[r] != 0)
			js.kv(mlx5_qpn_cm_rej_reason_name(uint16_t(r)), t.rej[r]);
	js.end_obj();
	js.key("cm");
	js.obj();
	js.kv("established", a.established);
	js.kv("stale_rejects_sent", a.stale_rejects_sent);
	js.kv("stale_dreqs", a.stale_dreqs);
	js.kv("retransmits", a.retransmits);
	js.kv("timeouts", a.timeouts);
	js.kv("fabric_drops", a.fabric_drops);
	js.kv("closed_by_peer", t.peer_disc);
	js.end_obj();
}

/* The DC data path, then the engines' allocation errors. */
void
data_json(json_writer &js, run_ctx *ctx, const totals &t)
{
	js.key("data");
	js.obj();
	js.kv("sends", t.sends);
	js.kv("completions", t.cqes);
	js.kv("error_completions", t.cqe_err);
	js.kv("flushed_completions", t.cqe_flushed);
	js.kv("dci_recoveries", t.dci_recoveries);
	js.kv("dci_replaced", t.dci_replaced);
	js.kv("received", srv_sum(ctx, &lcore_stats::recvs));
	/* Connections failed by a DC send error, by the CQE syndrome's name. */
	js.key("failed_connections");
	js.obj();
	for (unsigned k = 0; k < kSyndSlots; k++)
		if (t.conn_failed[k] != 0)
			js.kv(mlx5_qpn_wc_syndrome_str(uint8_t(k)), t.conn_failed[k]);
	js.end_obj();
	js.end_obj();
	js.key("errors");
	js.obj();
	js.kv("eagain", t.eagain);
	js.kv("enospc", t.enospc);
	js.kv("other", t.errors);
	js.end_obj();
}

void
per_lcore_json(json_writer &js, run_ctx *ctx, double secs)
{
	js.key("per_lcore");
	js.arr();
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		const lcore_stats &s = ctx->lc[lc];
		if (!lcore_used(s))
			continue;
		js.obj();
		js.kv("lcore", uint64_t(lc));
		js.kv("role", role_name(ctx, lc));
		js.kv("connections", s.ops.load());
		js.kv("conn_per_sec", static_cast<double>(s.ops.load()) / secs);
		js.end_obj();
	}
	js.end_arr();
}

/* The pool engine: what it does, in its own terms. */
void
alloc_engine_json(json_writer &js, const totals &t, double secs, uint64_t hz)
{
	js.key("alloc_engine");
	js.obj();
	js.kv("pairs", t.conns);
	js.kv("pairs_per_sec", static_cast<double>(t.conns) / secs);
	js.kv("allocs", t.allocs);
	js.kv("frees", t.frees);
	js.kv("alloc_p50_ns", ns(t.hist[STEP_ALLOC].percentile(50), hz));
	js.kv("free_p50_ns", ns(t.hist[STEP_RELEASE].percentile(50), hz));
	js.end_obj();
}

/* The device and its pool, from the driver's own counters. */
void
device_json(json_writer &js, const mlx5_qpn_dev_info &info, const mlx5_qpn_dev_stats &ds)
{
	js.key("pool");
	js.obj();
	js.kv("capacity", ds.pool.capacity);
	js.kv("in_use", ds.pool.in_use);
	js.kv("in_quarantine", ds.pool.in_quarantine);
	js.kv("free", ds.pool.free);
	js.kv("allocs", ds.pool.allocs);
	js.kv("frees", ds.pool.frees);
	js.kv("cache_hits", ds.pool.cache_hits);
	js.kv("cache_misses", ds.pool.cache_misses);
	js.kv("steals", ds.pool.steals);
	js.kv("refused_frees", ds.pool.refused_frees);
	js.kv("eagain", ds.pool.eagain);
	js.end_obj();
	js.key("device");
	js.obj();
	char guid[24];
	snprintf(guid, sizeof(guid), "%016" PRIx64, info.node_guid);
	js.kv("name", info.name);
	js.kv("backend", info.backend);
	js.kv("node_guid", guid);
	js.kv("ranges_reserved", ds.ranges_reserved);
	js.kv("ranges_released", ds.ranges_released);
	js.kv("qpns_reserved", ds.qpns_reserved);
	js.kv("reserve_failures", ds.reserve_failures);
	js.key("numa_node");
	if (info.numa_node < 0)
		js.null();
	else
		js.num(uint64_t(info.numa_node));
	js.end_obj();
}

} /* namespace */

int
stats_json(const char *path, run_ctx *ctx, const qpn_engine *e)
{
	FILE *f = fopen(path, "w");
	if (f == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot write %s: %s\n", path, strerror(errno));
		return -errno;
	}
	totals t;
	collect(ctx, e, t);
	const uint64_t hz = ctx->tsc_hz;
	const double secs = ctx->run_secs > 0 ? ctx->run_secs : 1e-9;
	struct mlx5_qpn_dev_info info;
	mlx5_qpn_dev_info_get(ctx->dev, &info);
	struct mlx5_qpn_dev_stats ds;
	dev_stats(ctx, &ds);

	json_writer js(f);
	js.obj();
	run_json(js, ctx, e, t, secs, info);
	cm_json(js, ctx, t);
	data_json(js, ctx, t);
	per_lcore_json(js, ctx, secs);
	servers_json(js, ctx, secs);
	steps_json(js, t, hz);
	monitor_timeline_json(js);
	if (!e->uses_cm)
		alloc_engine_json(js, t, secs, hz);
	device_json(js, info, ds);
	js.end_obj();
	bool ok = js.ok();
	int rc = fclose(f) == 0 && ok ? 0 : -EIO;
	return rc;
}
