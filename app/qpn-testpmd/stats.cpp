/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Progress line, `show stats`, summary and `clear stats` of qpn-testpmd (the JSON is
 * stats_json.cpp's).
 *
 * Which numbers come from where: `connections` are completed connect+disconnect cycles of the
 * measured side (clients for dci-reconnect/churn, the server for dct-accept; alloc+free pairs
 * for alloc). `rej` and `stale_rejects` are the REJs the *clients* received (reason 10 =
 * STALE_CONN), whatever the engine. `steps` merge the histograms of the measured side, except
 * `rtu`, which only the passive side can time (REP sent -> RTU received). `pool_share` is the
 * TSC spent in reserved-QPN alloc + release calls over the measured side's busy TSC (a client
 * lcore's loop, its co-polled server calls included; the passive rounds for dct-accept): the
 * pool's share of the worker's time, not of the overlapping connection cycles. The CM's and the
 * device's counters are shown since the last `clear stats`.
 */
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "stats.h"
#include "testpmd.h"

const char *const step_names[STEP_NB] = {"alloc",     "req_rep", "rtu",  "send_cqe",
					 "dreq_drep", "release", "cycle"};

namespace {

/* Counters at the last `clear stats`. The library keeps its counters for the process (CM) or
 * the device; some cannot be reset (the pool's allocs and frees are its accounting), and a
 * reset of a pool in shared memory would zero another process's figures too. So a clear keeps
 * a baseline here and what is shown is the difference. */
struct baseline {
	qpn_conn_totals cm;
	struct mlx5_qpn_dev_stats dev;
} g_base;

/* The last `show stats` of the running start: the start's clock and the count then (rates
 * since then); at a start, the start itself. A pause between two starts is not run time, so a
 * show of the next start does not count back across it. */
double g_show_secs;
uint64_t g_show_conns;
bool g_show_shown;

uint64_t
since(uint64_t now, uint64_t base)
{
	return now >= base ? now - base : 0; /* a counter that started again (re-probe) */
}

qpn_conn_totals
conn_totals_raw(run_ctx *ctx)
{
	return ctx->conn != nullptr ? ctx->conn->totals(ctx) : qpn_conn_totals{};
}

} /* namespace */

qpn_conn_totals
conn_totals(run_ctx *ctx)
{
	qpn_conn_totals a = conn_totals_raw(ctx);
	const qpn_conn_totals &b = g_base.cm;
	a.stale_rejects_sent = since(a.stale_rejects_sent, b.stale_rejects_sent);
	a.stale_dreqs = since(a.stale_dreqs, b.stale_dreqs);
	a.retransmits = since(a.retransmits, b.retransmits);
	a.timeouts = since(a.timeouts, b.timeouts);
	a.malformed = since(a.malformed, b.malformed);
	a.unexpected = since(a.unexpected, b.unexpected);
	a.fabric_drops = since(a.fabric_drops, b.fabric_drops);
	a.established = since(a.established, b.established);
	return a;
}

void
dev_stats(run_ctx *ctx, struct mlx5_qpn_dev_stats *ds)
{
	*ds = {};
	if (ctx->dev == nullptr || mlx5_qpn_dev_stats_get(ctx->dev, ds) != 0)
		return;
	const struct mlx5_qpn_dev_stats &b = g_base.dev;
	ds->ranges_reserved = since(ds->ranges_reserved, b.ranges_reserved);
	ds->ranges_released = since(ds->ranges_released, b.ranges_released);
	ds->qpns_reserved = since(ds->qpns_reserved, b.qpns_reserved);
	ds->reserve_failures = since(ds->reserve_failures, b.reserve_failures);
	struct mlx5_qpn_pool_stats &p = ds->pool;
	const struct mlx5_qpn_pool_stats &q = b.pool;
	p.allocs = since(p.allocs, q.allocs);
	p.frees = since(p.frees, q.frees);
	p.cache_hits = since(p.cache_hits, q.cache_hits);
	p.cache_misses = since(p.cache_misses, q.cache_misses);
	p.refills = since(p.refills, q.refills);
	p.flushes = since(p.flushes, q.flushes);
	p.steals = since(p.steals, q.steals);
	p.refused_frees = since(p.refused_frees, q.refused_frees);
	p.enospc = since(p.enospc, q.enospc);
	p.eagain = since(p.eagain, q.eagain);
}

void
stats_baseline_reset()
{
	/* The CM's counters belong to the process (conn.h keeps them over runs): kept. */
	g_base.dev = {};
}

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
	cqe_flushed = 0;
	dci_recoveries = 0;
	dci_replaced = 0;
	for (auto &f : conn_failed)
		f = 0;
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
	for (auto &v : ctx->srv)
		v.clear();
	ctx->run_secs = 0;
	g_base.cm = conn_totals_raw(ctx);
	g_base.dev = {};
	if (ctx->dev != nullptr)
		mlx5_qpn_dev_stats_get(ctx->dev, &g_base.dev);
	g_show_secs = 0;
	g_show_conns = 0;
	g_show_shown = false;
	monitor_clear();
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

std::string
conn_failed_line(const totals &t)
{
	std::string out;
	char buf[96];
	for (unsigned k = 0; k < kSyndSlots; k++)
		if (t.conn_failed[k] != 0) {
			snprintf(buf, sizeof(buf), "%s%s=%" PRIu64, out.empty() ? "" : ", ",
				 mlx5_qpn_wc_syndrome_str(uint8_t(k)), t.conn_failed[k]);
			out += buf;
		}
	return out.empty() ? "none" : out;
}

bool
lcore_used(const lcore_stats &s)
{
	return s.ops.load() != 0 || s.allocs.load() != 0 || s.errors.load() != 0 ||
	       s.eagain.load() != 0 || s.enospc.load() != 0;
}

namespace {

/* The measured side's counts of one lcore (or server) into T (RTU: the other side's step). */
void
add_measured(totals &t, const lcore_stats &s)
{
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

} /* namespace */

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
		t.cqe_flushed += s.cqe_flushed.load();
		t.dci_recoveries += s.dci_recoveries.load();
		t.dci_replaced += s.dci_replaced.load();
		for (unsigned k = 0; k < kSyndSlots; k++)
			t.conn_failed[k] += s.conn_failed[k].load();
		t.errors += s.errors.load();
		if (e->passive_side)
			continue;
		if (lcore_used(s))
			t.measured_lcores++;
		add_measured(t, s);
	}
	for (unsigned k = 0; k < ctx->nb_servers; k++) {
		const lcore_stats &v = ctx->srv[k];
		t.errors += v.errors.load();
		t.cqe_err += v.cqe_errors.load();
		t.hist[STEP_RTU].merge(v.hist[STEP_RTU]);
		if (!e->passive_side)
			continue;
		add_measured(t, v);
	}
	if (e->passive_side) {
		t.measured_lcores = ctx->nb_servers;
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

uint64_t
srv_sum(const run_ctx *ctx, std::atomic<uint64_t> lcore_stats::*m)
{
	uint64_t n = 0;
	for (unsigned k = 0; k < ctx->nb_servers; k++)
		n += (ctx->srv[k].*m).load(std::memory_order_relaxed);
	return n;
}

uint64_t
stats_conns(run_ctx *ctx, const qpn_engine *e)
{
	if (e != nullptr && e->passive_side)
		return srv_sum(ctx, &lcore_stats::ops);
	uint64_t ops = 0;
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	ops += ctx->lc[lc].ops.load(std::memory_order_relaxed);
	if (ctx->nb_clients == 0) /* a server process: its connections are the server's */
		ops += srv_sum(ctx, &lcore_stats::ops);
	return ops;
}

namespace {

/* What the measured side counts: connections, or alloc+free pairs for the pool engine. */
const char *
unit(const qpn_engine *e)
{
	return e != nullptr && !e->uses_cm ? "pairs" : "conns";
}

void
rej_stale(run_ctx *ctx, uint64_t *rej, uint64_t *stale)
{
	unsigned lc;
	*rej = *stale = 0;
	RTE_LCORE_FOREACH(lc)
	{
		*stale += ctx->lc[lc].stale_rejects.load(std::memory_order_relaxed);
		for (auto &r : ctx->lc[lc].rej)
			*rej += r.load(std::memory_order_relaxed);
	}
}

/* The tail of a progress line: rejects and the pool's gauges. */
void
print_live_tail(FILE *f, run_ctx *ctx)
{
	uint64_t rej, stale;
	rej_stale(ctx, &rej, &stale);
	struct mlx5_qpn_pool_stats ps;
	mlx5_qpn_pool_stats_get(mlx5_qpn_dev_pool(ctx->dev), &ps);
	fprintf(f,
		", rej %" PRIu64 ", stale %" PRIu64 ", pool in use %" PRIu64 ", quarantine %" PRIu64
		", free %" PRIu64 "\n",
		rej, stale, ps.in_use, ps.in_quarantine, ps.free);
}

} /* namespace */

void
stats_progress(run_ctx *ctx, double t, uint64_t *last_ops, double period)
{
	const qpn_engine *e = run_engine();
	uint64_t ops = stats_conns(ctx, e);
	printf("  [%5.1fs] %" PRIu64 " %s (%.0f/s)", t, ops, unit(e),
	       static_cast<double>(ops - *last_ops) / (period > 0 ? period : 1));
	print_live_tail(stdout, ctx);
	fflush(stdout);
	*last_ops = ops;
}

void
stats_show_restart(run_ctx *ctx, const qpn_engine *e)
{
	g_show_secs = 0;
	g_show_conns = stats_conns(ctx, e);
	g_show_shown = false;
}

void
stats_show_running(FILE *f, run_ctx *ctx, const qpn_engine *e)
{
	const double now = run_start_elapsed(ctx), total = run_elapsed(ctx);
	const uint64_t conns = stats_conns(ctx, e);
	const double dt = now - g_show_secs;
	const uint64_t dc = conns >= g_show_conns ? conns - g_show_conns : conns;
	fprintf(f,
		"  [%.1f s since start, %.1f s run in all] %" PRIu64 " %s: %.0f/s since the %s "
		"(%.1f s ago), %.0f/s on average",
		now, total, conns, unit(e), dt > 0 ? static_cast<double>(dc) / dt : 0.0,
		g_show_shown ? "last show" : "start", dt,
		total > 0 ? static_cast<double>(conns) / total : 0.0);
	print_live_tail(f, ctx);
	g_show_secs = now;
	g_show_conns = conns;
	g_show_shown = true;
	stats_lcores(f, ctx);
	fprintf(f, "(per-step latency in the summary: stop, or show stats once stopped)\n");
}

void
stats_lcores(FILE *f, run_ctx *ctx)
{
	const double el = run_elapsed(ctx);
	const double secs = el > 0 ? el : 1e-9;
	const bool running = run_active();
	const qpn_engine *e = run_engine();
	fprintf(f, "%-6s %-14s %12s %12s %10s %10s %8s %8s %8s\n", "lcore", "role", unit(e),
		"per s", "alloc p50", "alloc p99", "rej", "stale", "eagain");
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		const lcore_stats &s = ctx->lc[lc];
		if (!lcore_used(s) && !ctx->role[lc].client)
			continue;
		uint64_t rej = 0;
		for (auto &r : s.rej)
			rej += r.load();
		/* The histograms are the lcore's own until it is done. */
		const bool quiet = (!running || s.done.load(std::memory_order_acquire)) &&
				   s.hist[STEP_ALLOC].n != 0;
		fprintf(f,
			"%-6u %-14s %12" PRIu64 " %12.0f %10s %10s %8" PRIu64 " %8" PRIu64
			" %8" PRIu64 "\n",
			lc, e != nullptr && !e->uses_cm ? "pool" : role_name(ctx, lc), s.ops.load(),
			static_cast<double>(s.ops.load()) / secs,
			quiet ? fmt_ns(ns(s.hist[STEP_ALLOC].percentile(50), ctx->tsc_hz)).c_str() :
				"-",
			quiet ? fmt_ns(ns(s.hist[STEP_ALLOC].percentile(99), ctx->tsc_hz)).c_str() :
				"-",
			rej, s.stale_rejects.load(), s.eagain.load());
	}
	for (unsigned k = 0; k < ctx->nb_servers; k++) {
		const lcore_stats &v = ctx->srv[k];
		if (!lcore_used(v))
			continue;
		const int slc = ctx->server_lcore[k];
		fprintf(f,
			"%-6s %-14s %12" PRIu64 " %12.0f %10s %10s %8s %8" PRIu64 " %8" PRIu64
			"   (accepted and closed; %" PRIu64 " SENDs received)\n",
			slc >= 0 ? std::to_string(slc).c_str() : "-",
			ctx->nb_servers > 1 ? ("server side " + std::to_string(k)).c_str() :
					      "server side",
			v.ops.load(), static_cast<double>(v.ops.load()) / secs, "", "", "",
			v.stale_rejects.load(), v.eagain.load(), v.recvs.load());
	}
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
			"quarantine %" PRIu64 " us, up to %u QPNs reserved (its pool's ranges), "
			"ranges of 2^%u\n",
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

namespace {

void
steps_table(FILE *f, run_ctx *ctx, const qpn_engine *e, const totals &t)
{
	const uint64_t hz = ctx->tsc_hz;
	fprintf(f, "%-10s %9s %9s %9s %9s %9s %9s %9s %9s\n", "step", "count", "min", "mean", "p50",
		"p90", "p99", "p99.9", "max");
	for (unsigned i = 0; i < STEP_NB; i++) {
		const latency_hist &h = t.hist[i];
		/* The pool engine has two steps: the alloc call and the free (release) call. */
		if (!e->uses_cm && i != STEP_ALLOC && i != STEP_RELEASE)
			continue;
		if (i == STEP_SEND_CQE && e->uses_cm && !ctx->data_path && h.n == 0) {
			fprintf(f, "%-10s skipped (no data path: %s)\n", step_names[i],
				ctx->data_path_note.c_str());
			continue;
		}
		const char *name = !e->uses_cm && i == STEP_RELEASE ? "free" : step_names[i];
		if (h.n == 0) {
			fprintf(f, "%-10s %9d %9s %9s %9s %9s %9s %9s %9s\n", name, 0, "-", "-",
				"-", "-", "-", "-", "-");
			continue;
		}
		fprintf(f, "%-10s %9" PRIu64 " %9s %9s %9s %9s %9s %9s %9s\n", name, h.n,
			fmt_ns(ns(h.n ? h.min : 0, hz)).c_str(),
			fmt_ns(h.mean() * 1e9 / static_cast<double>(hz)).c_str(),
			fmt_ns(ns(h.percentile(50), hz)).c_str(),
			fmt_ns(ns(h.percentile(90), hz)).c_str(),
			fmt_ns(ns(h.percentile(99), hz)).c_str(),
			fmt_ns(ns(h.percentile(99.9), hz)).c_str(), fmt_ns(ns(h.max, hz)).c_str());
	}
}

void
cm_lines(FILE *f, run_ctx *ctx, const totals &t)
{
	qpn_conn_totals a = conn_totals(ctx);
	fprintf(f, "stale rejects (REJ STALE_CONN seen by clients): %" PRIu64 "\n", t.stale);
	fprintf(f, "REJ by reason:");
	bool any = false;
	for (unsigned r = 0; r < MLX5_QPN_CM_REJ_REASON_SLOTS; r++)
		if (t.rej[r] != 0) {
			fprintf(f, " %s(%u)=%" PRIu64, mlx5_qpn_cm_rej_reason_name(uint16_t(r)), r,
				t.rej[r]);
			any = true;
		}
	fprintf(f, "%s\n", any ? "" : " none");
	fprintf(f,
		"CM: established %" PRIu64 ", stale REJs sent %" PRIu64 ", stale DREQs %" PRIu64
		", retransmits %" PRIu64 ", timeouts %" PRIu64 ", fabric drops %" PRIu64
		", closed by peer %" PRIu64 ", connect retries %" PRIu64 "\n",
		a.established, a.stale_rejects_sent, a.stale_dreqs, a.retransmits, a.timeouts,
		a.fabric_drops, t.peer_disc, t.cm_busy);
	fprintf(f,
		"data path: %" PRIu64 " sends, %" PRIu64 " completions, %" PRIu64
		" error completions, %" PRIu64 " flushed, %" PRIu64 " DCI recoveries, %" PRIu64
		" DCIs replaced, %" PRIu64 " received by DCTs\n",
		t.sends, t.cqes, t.cqe_err, t.cqe_flushed, t.dci_recoveries, t.dci_replaced,
		srv_sum(ctx, &lcore_stats::recvs));
	fprintf(f, "connections failed by DC sends: %s\n", conn_failed_line(t).c_str());
}

} /* namespace */

void
stats_summary(FILE *f, run_ctx *ctx, const qpn_engine *e)
{
	totals t;
	collect(ctx, e, t);
	const double secs = ctx->run_secs > 0 ? ctx->run_secs : 1e-9;
	const unsigned nl = t.measured_lcores ? t.measured_lcores : 1;
	fprintf(f, "\n---------------- qpn-testpmd summary: engine %s, %.2f s ----------------\n",
		e->name, ctx->run_secs);
	stats_lcores(f, ctx);
	if (e->uses_cm)
		fprintf(f,
			"connections: %" PRIu64 " (%s), %.0f/s in total, %.0f/s per lcore "
			"(%u lcore%s)\n",
			t.conns, e->passive_side ? "passive side" : "active side",
			static_cast<double>(t.conns) / secs,
			static_cast<double>(t.conns) / secs / nl, t.measured_lcores,
			t.measured_lcores == 1 ? "" : "s");
	else
		fprintf(f,
			"pairs: %" PRIu64 " alloc+free pairs, %.0f pairs/s in total, %.0f pairs/s "
			"per lcore (%u lcore%s); %" PRIu64 " allocs, %" PRIu64 " frees\n",
			t.conns, static_cast<double>(t.conns) / secs,
			static_cast<double>(t.conns) / secs / nl, t.measured_lcores,
			t.measured_lcores == 1 ? "" : "s", t.allocs, t.frees);
	steps_table(f, ctx, e, t);
	telemetry_keep_steps(t.hist, ctx->tsc_hz);
	if (e->uses_cm) {
		fprintf(f,
			"pool share of the worker's time: %.2f%% ((alloc + release) / busy TSC)\n",
			100.0 * pool_share(t));
		cm_lines(f, ctx, t);
	}
	fprintf(f,
		"alloc waits (all free QPNs in quarantine) %" PRIu64 ", enospc %" PRIu64
		", errors %" PRIu64 "\n",
		t.eagain, t.enospc, t.errors);
	struct mlx5_qpn_dev_stats ds;
	dev_stats(ctx, &ds);
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
