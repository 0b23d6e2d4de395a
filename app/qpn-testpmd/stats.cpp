/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Progress line, summary and JSON of qpn-testpmd.
 *
 * Which numbers come from where: `connections` are completed connect+disconnect cycles of the
 * measured side (clients for dci-reconnect/churn, the server for dct-accept; alloc+free pairs
 * for alloc). `rej` and `stale_rejects` are the REJs the *clients* received (reason 10 =
 * STALE_CONN), whatever the engine. `steps` merge the histograms of the measured side, except
 * `rtu`, which only the passive side can time (REP sent -> RTU received). `pool_share` is the
 * TSC spent in reserved-QPN alloc + release calls over the measured side's busy TSC (a client
 * lcore's loop, its co-polled server calls included; the passive rounds for dct-accept): the
 * pool's share of the worker's time, not of the overlapping connection cycles.
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "mlx5_qpn_dc.h"
#include "json_writer.h"
#include "run_meta.h"
#include "testpmd.h"

const char *const step_names[STEP_NB] = {"alloc",     "req_rep", "rtu",  "send_cqe",
					 "dreq_drep", "release", "cycle"};

void
lcore_stats::clear()
{
	ops = 0;
	allocs = 0;
	frees = 0;
	eagain = 0;
	enospc = 0;
	errors = 0;
	for (auto &r : rej)
		r = 0;
	stale_rejects = 0;
	peer_disc = 0;
	cm_busy = 0;
	sends = 0;
	cqes = 0;
	cqe_errors = 0;
	recvs = 0;
	for (auto &h : hist)
		h.reset();
	pool_cycles = 0;
	cycle_cycles = 0;
}

void
stats_clear(run_ctx *ctx)
{
	for (auto &l : ctx->lc)
		l.clear();
	ctx->srv.clear();
	ctx->run_secs = 0;
	mlx5_qpn_pool_stats_reset(mlx5_qpn_dev_pool(ctx->dev));
}

void
count_rej(lcore_stats &st, uint16_t reason)
{
	if (reason < MLX5_QPN_CM_REJ_REASON_SLOTS)
		st.rej[reason].fetch_add(1, std::memory_order_relaxed);
	if (reason == MLX5_QPN_CM_REJ_STALE_CONN)
		st.stale_rejects.fetch_add(1, std::memory_order_relaxed);
}

bool
count_alloc_failure(lcore_stats &st, int rc)
{
	(rc == -EAGAIN ? st.eagain :
	 rc == -ENOSPC ? st.enospc :
			 st.errors)
		.fetch_add(1, std::memory_order_relaxed);
	return rc != -EAGAIN && rc != -ENOSPC;
}

namespace {

/* The CM's counters of the last CM run's connections (none before one). */
qpn_conn_totals
conn_totals(run_ctx *ctx)
{
	return ctx->conn != nullptr ? ctx->conn->totals(ctx) : qpn_conn_totals{};
}

double
ns(uint64_t cycles, uint64_t hz)
{
	return static_cast<double>(cycles) * 1e9 / static_cast<double>(hz);
}

/* Totals over the measured side. */
struct totals {
	uint64_t conns = 0, allocs = 0, frees = 0, eagain = 0, enospc = 0, errors = 0;
	uint64_t rej[MLX5_QPN_CM_REJ_REASON_SLOTS] = {};
	uint64_t stale = 0, peer_disc = 0, cm_busy = 0, sends = 0, cqes = 0, cqe_err = 0;
	uint64_t pool_cyc = 0, cycle_cyc = 0;
	latency_hist hist[STEP_NB];
	unsigned measured_lcores = 0;
};

bool
lcore_used(const lcore_stats &s)
{
	return s.ops.load() != 0 || s.allocs.load() != 0 || s.errors.load() != 0 ||
	       s.eagain.load() != 0 || s.enospc.load() != 0;
}

void
collect(run_ctx *ctx, const qpn_engine *e, totals &t)
{
	unsigned lc;
	/* Client-side numbers: REJs, sends, connections of the active side. */
	RTE_LCORE_FOREACH(lc)
	{
		const lcore_stats &s = ctx->lc[lc];
		for (unsigned r = 0; r < MLX5_QPN_CM_REJ_REASON_SLOTS; r++)
			t.rej[r] += s.rej[r].load();
		t.stale += s.stale_rejects.load();
		t.peer_disc += s.peer_disc.load();
		t.cm_busy += s.cm_busy.load();
		t.sends += s.sends.load();
		t.cqes += s.cqes.load();
		t.cqe_err += s.cqe_errors.load();
		t.errors += s.errors.load();
		if (e->passive_side)
			continue;
		if (lcore_used(s))
			t.measured_lcores++;
		t.conns += s.ops.load();
		t.allocs += s.allocs.load();
		t.frees += s.frees.load();
		t.eagain += s.eagain.load();
		t.enospc += s.enospc.load();
		t.pool_cyc += s.pool_cycles;
		t.cycle_cyc += s.cycle_cycles;
		for (unsigned i = 0; i < STEP_NB; i++)
			if (i != STEP_RTU)
				t.hist[i].merge(s.hist[i]);
	}
	const lcore_stats &v = ctx->srv;
	t.errors += v.errors.load();
	t.cqe_err += v.cqe_errors.load();
	t.hist[STEP_RTU].merge(v.hist[STEP_RTU]);
	if (e->passive_side) {
		t.measured_lcores = 1;
		t.conns = v.ops.load();
		t.allocs = v.allocs.load();
		t.frees = v.frees.load();
		t.eagain = v.eagain.load();
		t.enospc = v.enospc.load();
		t.pool_cyc = v.pool_cycles;
		t.cycle_cyc = v.cycle_cycles;
		for (unsigned i = 0; i < STEP_NB; i++)
			if (i != STEP_RTU)
				t.hist[i].merge(v.hist[i]);
		/* What the client measured of the exchanges the server takes part in. */
		RTE_LCORE_FOREACH(lc)
		{
			t.hist[STEP_REQ_REP].merge(ctx->lc[lc].hist[STEP_REQ_REP]);
			t.hist[STEP_SEND_CQE].merge(ctx->lc[lc].hist[STEP_SEND_CQE]);
			t.hist[STEP_DREQ_DREP].merge(ctx->lc[lc].hist[STEP_DREQ_DREP]);
		}
	}
}

double
pool_share(const totals &t)
{
	return t.cycle_cyc == 0 ?
		       0.0 :
		       static_cast<double>(t.pool_cyc) / static_cast<double>(t.cycle_cyc);
}

const char *
role_name(const run_ctx *ctx, unsigned lc)
{
	const lcore_role &r = ctx->role[lc];
	if (r.client && r.server)
		return "client+server";
	if (r.client)
		return "client";
	if (r.server)
		return "server";
	return "-";
}

} /* namespace */

void
stats_progress(run_ctx *ctx, double t, uint64_t *last_ops)
{
	uint64_t ops = 0, stale = 0, rej = 0;
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		ops += ctx->lc[lc].ops.load(std::memory_order_relaxed);
		stale += ctx->lc[lc].stale_rejects.load(std::memory_order_relaxed);
		for (auto &r : ctx->lc[lc].rej)
			rej += r.load(std::memory_order_relaxed);
	}
	if (ctx->nb_clients == 0) /* a server process: its connections are the server's */
		ops += ctx->srv.ops.load(std::memory_order_relaxed);
	struct mlx5_qpn_pool_stats ps;
	mlx5_qpn_pool_stats_get(mlx5_qpn_dev_pool(ctx->dev), &ps);
	printf("  [%5.1fs] %" PRIu64 " conns (%.0f/s), rej %" PRIu64 ", stale %" PRIu64
	       ", pool in use %" PRIu64 ", quarantine %" PRIu64 ", free %" PRIu64 "\n",
	       t, ops, static_cast<double>(ops - *last_ops), rej, stale, ps.in_use,
	       ps.in_quarantine, ps.free);
	fflush(stdout);
	*last_ops = ops;
}

void
stats_lcores(FILE *f, run_ctx *ctx)
{
	const double secs = ctx->run_secs > 0 ? ctx->run_secs : 1e-9;
	fprintf(f, "%-6s %-14s %12s %12s %10s %10s %8s %8s %8s\n", "lcore", "role", "conns",
		"conns/s", "alloc p50", "alloc p99", "rej", "stale", "eagain");
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		const lcore_stats &s = ctx->lc[lc];
		if (!lcore_used(s) && !ctx->role[lc].client)
			continue;
		uint64_t rej = 0;
		for (auto &r : s.rej)
			rej += r.load();
		const bool quiet = s.done.load(std::memory_order_acquire);
		fprintf(f,
			"%-6u %-14s %12" PRIu64 " %12.0f %8.0fns %8.0fns %8" PRIu64 " %8" PRIu64
			" %8" PRIu64 "\n",
			lc, role_name(ctx, lc), s.ops.load(),
			static_cast<double>(s.ops.load()) / secs,
			quiet ? ns(s.hist[STEP_ALLOC].percentile(50), ctx->tsc_hz) : 0.0,
			quiet ? ns(s.hist[STEP_ALLOC].percentile(99), ctx->tsc_hz) : 0.0, rej,
			s.stale_rejects.load(), s.eagain.load());
	}
	const lcore_stats &v = ctx->srv;
	if (lcore_used(v))
		fprintf(f,
			"%-6s %-14s %12" PRIu64 " %12.0f %10s %10s %8s %8" PRIu64 " %8" PRIu64
			"   (accepted and closed; %" PRIu64 " SENDs received)\n",
			ctx->server_lcore >= 0 ? std::to_string(ctx->server_lcore).c_str() : "-",
			"server side", v.ops.load(), static_cast<double>(v.ops.load()) / secs, "",
			"", "", v.stale_rejects.load(), v.eagain.load(), v.recvs.load());
}

void
show_pool(FILE *f, run_ctx *ctx)
{
	for (auto *d : ctx->devs)
		mlx5_qpn_pool_dump(f, mlx5_qpn_dev_pool(d));
}

void
show_device(FILE *f, run_ctx *ctx)
{
	for (auto *d : ctx->devs) {
		struct mlx5_qpn_dev_info info;
		mlx5_qpn_dev_info_get(d, &info);
		fprintf(f,
			"device %s: backend %s, GUID %016" PRIx64 ", NUMA %d, cores %s, "
			"quarantine %" PRIu64 " us, max %u QPNs, ranges of 2^%u\n",
			info.name, info.backend, info.node_guid, info.numa_node,
			info.cores[0] ? info.cores : "-", info.quarantine_us, info.max_qpns,
			info.log_range);
		mlx5_qpn_dev_dump(f, d);
	}
	fprintf(f,
		"CM: policy %s, packet life time %u, ack delay %u, timewait %u ms; "
		"data path: %s\n",
		ctx->cfg->policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live", ctx->cfg->plt,
		ctx->cfg->ack_delay, cm_timewait_ms(*ctx->cfg),
		ctx->data_path ? "DC (DCI -> DCT through the UAR)" :
				 (ctx->data_path_note.empty() ?
					  "not set up yet" :
					  ("none (" + ctx->data_path_note + ")").c_str()));
}

void
stats_summary(FILE *f, run_ctx *ctx, const qpn_engine *e)
{
	totals t;
	collect(ctx, e, t);
	const uint64_t hz = ctx->tsc_hz;
	const double secs = ctx->run_secs > 0 ? ctx->run_secs : 1e-9;
	fprintf(f, "\n---------------- qpn-testpmd summary: engine %s, %.2f s ----------------\n",
		e->name, ctx->run_secs);
	stats_lcores(f, ctx);
	fprintf(f,
		"connections: %" PRIu64 " (%s), %.0f/s in total, %.0f/s per lcore "
		"(%u lcore%s)\n",
		t.conns,
		e->uses_cm ? (e->passive_side ? "passive side" : "active side") :
			     "alloc+free pairs",
		static_cast<double>(t.conns) / secs,
		static_cast<double>(t.conns) / secs / (t.measured_lcores ? t.measured_lcores : 1),
		t.measured_lcores, t.measured_lcores == 1 ? "" : "s");
	fprintf(f, "%-10s %10s %10s %10s %12s\n", "step", "count", "p50", "p99", "max");
	for (unsigned i = 0; i < STEP_NB; i++) {
		const latency_hist &h = t.hist[i];
		if (i == STEP_SEND_CQE && e->uses_cm && !ctx->data_path && h.n == 0) {
			fprintf(f, "%-10s skipped (no data path: %s)\n", step_names[i],
				ctx->data_path_note.c_str());
			continue;
		}
		fprintf(f, "%-10s %10" PRIu64 " %8.0fns %8.0fns %10.0fns\n", step_names[i], h.n,
			ns(h.percentile(50), hz), ns(h.percentile(99), hz), ns(h.max, hz));
	}
	fprintf(f,
		"pool share of the connection cycle: %.2f%% of the worker's time ((alloc + "
		"release) / busy TSC)\n",
		100.0 * pool_share(t));
	if (e->uses_cm) {
		qpn_conn_totals a = conn_totals(ctx);
		fprintf(f, "stale rejects (REJ STALE_CONN seen by clients): %" PRIu64 "\n",
			t.stale);
		fprintf(f, "REJ by reason:");
		bool any = false;
		for (unsigned r = 0; r < MLX5_QPN_CM_REJ_REASON_SLOTS; r++)
			if (t.rej[r] != 0) {
				fprintf(f, " %s(%u)=%" PRIu64,
					mlx5_qpn_cm_rej_reason_name(uint16_t(r)), r, t.rej[r]);
				any = true;
			}
		fprintf(f, "%s\n", any ? "" : " none");
		fprintf(f,
			"CM: established %" PRIu64 ", stale REJs sent %" PRIu64
			", stale DREQs %" PRIu64 ", retransmits %" PRIu64 ", timeouts %" PRIu64
			", fabric drops %" PRIu64 ", closed by peer %" PRIu64
			", connect retries %" PRIu64 "\n",
			a.established, a.stale_rejects_sent, a.stale_dreqs, a.retransmits,
			a.timeouts, a.fabric_drops, t.peer_disc, t.cm_busy);
		fprintf(f,
			"data path: %" PRIu64 " sends, %" PRIu64 " completions, %" PRIu64
			" error completions, %" PRIu64 " received by DCTs\n",
			t.sends, t.cqes, t.cqe_err, ctx->srv.recvs.load());
	}
	fprintf(f,
		"alloc waits (all free QPNs in quarantine) %" PRIu64 ", enospc %" PRIu64
		", errors %" PRIu64 "\n",
		t.eagain, t.enospc, t.errors);
	struct mlx5_qpn_dev_stats ds;
	mlx5_qpn_dev_stats_get(ctx->dev, &ds);
	fprintf(f,
		"pool: capacity %" PRIu64 ", in use %" PRIu64 ", in quarantine %" PRIu64
		", free %" PRIu64 ", allocs %" PRIu64 ", frees %" PRIu64 ", cache hits %" PRIu64
		", misses %" PRIu64 ", refused frees %" PRIu64 "\n",
		ds.pool.capacity, ds.pool.in_use, ds.pool.in_quarantine, ds.pool.free,
		ds.pool.allocs, ds.pool.frees, ds.pool.cache_hits, ds.pool.cache_misses,
		ds.pool.refused_frees);
	fprintf(f,
		"device: ranges reserved %" PRIu64 " (%" PRIu64 " QPNs), released %" PRIu64
		", reserve failures %" PRIu64 "\n",
		ds.ranges_reserved, ds.qpns_reserved, ds.ranges_released, ds.reserve_failures);
}

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
	const run_config &cfg = *ctx->cfg;
	struct mlx5_qpn_dev_info info;
	mlx5_qpn_dev_info_get(ctx->dev, &info);
	struct mlx5_qpn_dev_stats ds;
	mlx5_qpn_dev_stats_get(ctx->dev, &ds);
	qpn_conn_totals a = conn_totals(ctx);

	json_writer js(f);
	js.obj();
	run_meta_json(js, "qpn-testpmd");
	js.kv("engine", e->name);
	js.kv("duration_s", ctx->run_secs);
	js.kv("lcores", uint64_t(rte_lcore_count()));
	js.kv("measured_side", e->uses_cm ? (e->passive_side ? "passive" : "active") : "pool");
	js.kv("role", cfg.role.c_str());
	js.kv("fabric", cfg.fabric.c_str());
	js.kv("cm_policy", cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	js.kv("timewait_ms", uint64_t(cm_timewait_ms(cfg)));
	js.kv("quarantine_us", info.quarantine_us);
	js.kv_bool("data_path", ctx->data_path);
	js.kv("connections", t.conns);
	js.kv("conn_per_sec", static_cast<double>(t.conns) / secs);
	js.kv("conn_per_sec_per_lcore",
	      static_cast<double>(t.conns) / secs / (t.measured_lcores ? t.measured_lcores : 1));
	js.kv("pool_share", pool_share(t));
	js.kv("stale_rejects", t.stale);
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
	js.key("data");
	js.obj();
	js.kv("sends", t.sends);
	js.kv("completions", t.cqes);
	js.kv("error_completions", t.cqe_err);
	js.kv("received", ctx->srv.recvs.load());
	js.end_obj();
	js.key("errors");
	js.obj();
	js.kv("eagain", t.eagain);
	js.kv("enospc", t.enospc);
	js.kv("other", t.errors);
	js.end_obj();
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
	js.key("steps");
	js.obj();
	for (unsigned i = 0; i < STEP_NB; i++) {
		const latency_hist &h = t.hist[i];
		js.key(step_names[i]);
		js.obj();
		js.kv("count", h.n);
		js.kv("p50_ns", ns(h.percentile(50), hz));
		js.kv("p99_ns", ns(h.percentile(99), hz));
		js.kv("max_ns", ns(h.max, hz));
		js.end_obj();
	}
	js.end_obj();
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
	js.end_obj();
	bool ok = js.ok();
	int rc = fclose(f) == 0 && ok ? 0 : -EIO;
	return rc;
}
