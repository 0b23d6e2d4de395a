/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --allocator=ours|rdma-core|both and --client-lcores=N,...: one launch measures the active
 * side's allocator, or both allocators side by side, at one or more counts of client lcores.
 * Each measured run gets fresh devices (closed, purged where the backend keeps state, probed
 * again), so that no run inherits another's ranges, quarantine or blocks; the runs go back to
 * back, every count with ours then rdma-core, under the same options. The summary is one table
 * and the JSON one object:
 *   {"meta", "mode": "allocator-compare", "engine", "conditions": {...},
 *    "allocators": {"ours": [row, ...], "rdma-core": [row, ...]}}
 * where a row is {"client_lcores", "seconds", "connections" (completed), "allocations",
 * "conn_per_sec", "alloc_p50_ns", "alloc_p99_ns", "alloc_p999_ns", "cycle_p99_ns",
 * "stale_rejects", "alloc_waits", "errors", "device_commands" (every command the device ran
 * between the workers' launch and the stop: both sides' reservations, the blocks of rdma-core's
 * algorithm), "commands_per_1000_conns", "commands_per_1000_allocs"} (keys are only ever added; the report script
 * app/qpn-perf/qpn-perf-report reads them). The model both allocators run under is described
 * in doc/guides/app.md ("Ours beside rdma-core's allocator").
 */
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "json_writer.h"
#include "opt_num.h"
#include "run_meta.h"
#include "stats.h"
#include "testpmd.h"

namespace {

constexpr unsigned kMaxCounts = 8;

struct cmp_row {
	const char *alloc;
	unsigned lcores;
	double secs;
	uint64_t conns, allocs, stale, waits, errors, cmds;
	double alloc_ns[3]; /* p50, p99, p99.9 */
	double cycle_p99_ns;
};

/* Commands every device of the run executed (0 where the backend does not count them). */
uint64_t
commands_now(run_ctx *ctx)
{
	uint64_t n = 0;
	for (auto *d : ctx->devs) {
		struct mlx5_qpn_dev_stats st;
		if (mlx5_qpn_dev_stats_get(d, &st) == 0)
			n += st.dev_commands;
	}
	return n;
}

/* Fresh devices: close, remove what an emulated device keeps in shared memory (its blocks,
 * its lease file: the ranges the last run held would otherwise be cooling), probe again. */
int
fresh_devices(run_ctx *ctx)
{
	devices_close(ctx);
	for (auto &da : ctx->cfg->devargs) {
		std::string name = da.substr(0, da.find(','));
		int rc = mlx5_qpn_dev_purge(name.c_str());
		if (rc != 0 && rc != -ENOENT && rc != -EOPNOTSUPP)
			fprintf(stderr, "qpn-testpmd: cannot purge %s: %s\n", name.c_str(),
				strerror(-rc));
	}
	int rc = devices_probe(ctx, ctx->cfg->quarantine_us);
	stats_baseline_reset();
	return rc;
}

uint64_t g_cmd_start, g_cmd_stop;

void
on_started(run_ctx *ctx)
{
	g_cmd_start = commands_now(ctx);
}

void
on_stopping(run_ctx *ctx)
{
	g_cmd_stop = commands_now(ctx);
}

/* One measured run of ALLOC at LCORES client lcores. @return 0, or 1 (a failed start). */
int
measure(run_ctx *ctx, const qpn_engine *e, const char *alloc, unsigned lcores, cmp_row *row)
{
	if (fresh_devices(ctx) != 0)
		return 1;
	ctx->alloc_fw = strcmp(alloc, "rdma-core") == 0;
	ctx->client_limit = lcores;
	stats_clear(ctx);
	g_cmd_start = g_cmd_stop = 0;
	if (run_for(ctx, e, on_started, on_stopping) != 0)
		return 1;
	totals t;
	collect(ctx, e, t);
	const uint64_t hz = ctx->tsc_hz;
	*row = cmp_row{};
	row->alloc = alloc;
	row->lcores = ctx->nb_clients;
	row->secs = ctx->run_secs > 0 ? ctx->run_secs : 1e-9;
	row->conns = t.conns;
	row->allocs = t.allocs;
	row->stale = t.stale;
	row->waits = t.eagain + t.enospc;
	row->errors = t.errors;
	row->cmds = g_cmd_stop - g_cmd_start;
	const double pct[3] = {50, 99, 99.9};
	for (unsigned i = 0; i < 3; i++)
		row->alloc_ns[i] = ns(t.hist[STEP_ALLOC].percentile(pct[i]), hz);
	row->cycle_p99_ns = ns(t.hist[STEP_CYCLE].percentile(99), hz);
	return 0;
}

/* Commands per 1,000 of N (completed connections, or allocations: a rejected connection
 * allocated and released a QPN too). */
double
per_1000(const cmp_row &r, uint64_t n)
{
	return n != 0 ? 1000.0 * static_cast<double>(r.cmds) / static_cast<double>(n) : 0.0;
}

void
print_table(FILE *f, const std::vector<cmp_row> &rows)
{
	fprintf(f, "\nqpn-testpmd: allocators side by side\n");
	fprintf(f, "  %-9s %7s %10s %9s %9s %9s %10s %8s %8s %12s %13s\n", "allocator", "clients",
		"conns/s", "alloc p50", "alloc p99", "p99.9", "cycle p99", "stale", "waits",
		"cmds/1k conn", "cmds/1k alloc");
	for (const cmp_row &r : rows)
		fprintf(f,
			"  %-9s %7u %10.0f %9s %9s %9s %10s %8" PRIu64 " %8" PRIu64
			" %12.2f %13.2f\n",
			r.alloc, r.lcores, static_cast<double>(r.conns) / r.secs,
			fmt_ns(r.alloc_ns[0]).c_str(), fmt_ns(r.alloc_ns[1]).c_str(),
			fmt_ns(r.alloc_ns[2]).c_str(), fmt_ns(r.cycle_p99_ns).c_str(), r.stale,
			r.waits, per_1000(r, r.conns), per_1000(r, r.allocs));
	/* The ratio per count, where both ran. */
	for (const cmp_row &a : rows) {
		if (strcmp(a.alloc, "ours") != 0)
			continue;
		for (const cmp_row &b : rows)
			if (strcmp(b.alloc, "rdma-core") == 0 && b.lcores == a.lcores &&
			    b.conns != 0)
				fprintf(f,
					"  %u client lcore(s): ours / rdma-core conns/s %.2f, stale "
					"rejects %" PRIu64 " / %" PRIu64 "\n",
					a.lcores,
					(static_cast<double>(a.conns) / a.secs) /
						(static_cast<double>(b.conns) / b.secs),
					a.stale, b.stale);
	}
}

void
row_json(json_writer &js, const cmp_row &r)
{
	js.obj();
	js.kv("client_lcores", uint64_t(r.lcores));
	js.kv("seconds", r.secs);
	js.kv("connections", r.conns);
	js.kv("allocations", r.allocs);
	js.kv("conn_per_sec", static_cast<double>(r.conns) / r.secs);
	js.kv("alloc_p50_ns", r.alloc_ns[0]);
	js.kv("alloc_p99_ns", r.alloc_ns[1]);
	js.kv("alloc_p999_ns", r.alloc_ns[2]);
	js.kv("cycle_p99_ns", r.cycle_p99_ns);
	js.kv("stale_rejects", r.stale);
	js.kv("alloc_waits", r.waits);
	js.kv("errors", r.errors);
	js.kv("device_commands", r.cmds);
	js.kv("commands_per_1000_conns", per_1000(r, r.conns));
	js.kv("commands_per_1000_allocs", per_1000(r, r.allocs));
	js.end_obj();
}

void
conditions_json(json_writer &js, run_ctx *ctx)
{
	const run_config &cfg = *ctx->cfg;
	js.key("conditions");
	js.obj();
	js.kv("lcores", uint64_t(rte_lcore_count()));
	js.kv("server_lcores", uint64_t(ctx->nb_servers));
	js.kv("timewait_ms", uint64_t(cm_timewait_ms(cfg)));
	js.kv("cm_policy", cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	struct mlx5_qpn_dev_info info;
	if (ctx->dev != nullptr && mlx5_qpn_dev_info_get(ctx->dev, &info) == 0)
		js.kv("quarantine_us", info.quarantine_us);
	js.kv("duration_s", cfg.duration_s);
	js.kv("inflight", uint64_t(cfg.inflight));
	js.kv("peers", uint64_t(cfg.peers));
	js.kv("msgs_per_conn", uint64_t(cfg.msgs_per_conn));
	js.key("devargs");
	js.arr();
	for (auto &d : cfg.devargs)
		js.str(d.c_str());
	js.end_arr();
	js.end_obj();
}

int
write_json(run_ctx *ctx, const qpn_engine *e, const std::vector<cmp_row> &rows)
{
	const char *path = ctx->cfg->json.c_str();
	FILE *f = fopen(path, "w");
	if (f == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot write %s: %s\n", path, strerror(errno));
		return -errno;
	}
	json_writer js(f);
	js.obj();
	run_meta_json(js, "qpn-testpmd");
	js.kv("mode", "allocator-compare");
	js.kv("engine", e->name);
	conditions_json(js, ctx);
	js.key("allocators");
	js.obj();
	for (const char *a : {"ours", "rdma-core"}) {
		bool any = false;
		for (const cmp_row &r : rows)
			any |= strcmp(r.alloc, a) == 0;
		if (!any)
			continue;
		js.key(a);
		js.arr();
		for (const cmp_row &r : rows)
			if (strcmp(r.alloc, a) == 0)
				row_json(js, r);
		js.end_arr();
	}
	js.end_obj();
	js.end_obj();
	bool ok = js.ok();
	return fclose(f) == 0 && ok ? 0 : -EIO;
}

} /* namespace */

int
compare_parse_allocator(run_config *cfg, const char *v)
{
	if (strcmp(v, "ours") != 0 && strcmp(v, "rdma-core") != 0 && strcmp(v, "both") != 0) {
		fprintf(stderr, "%s\n",
			opt_num_error("qpn-testpmd", "--allocator", v,
				      "expected ours, rdma-core or both")
				.c_str());
		return -EINVAL;
	}
	cfg->allocator = v;
	return 0;
}

int
compare_parse_client_lcores(run_config *cfg, const char *v)
{
	std::vector<unsigned> out;
	const char *p = v;
	for (;;) {
		char *end = nullptr;
		errno = 0;
		unsigned long n = strtoul(p, &end, 10);
		/* Digits only: strtoul() would skip a leading space or newline, take a sign. */
		if (isdigit(static_cast<unsigned char>(*p)) == 0 || end == p || errno != 0 ||
		    n == 0 || n >= RTE_MAX_LCORE || (*end != ',' && *end != '\0') ||
		    out.size() == kMaxCounts) {
			fprintf(stderr, "%s\n",
				opt_num_error("qpn-testpmd", "--client-lcores", v,
					      "expected up to " + std::to_string(kMaxCounts) +
						      " counts 1.." +
						      std::to_string(RTE_MAX_LCORE - 1) +
						      " separated by commas, e.g. 1,2,4")
					.c_str());
			return -EINVAL;
		}
		out.push_back(static_cast<unsigned>(n));
		if (*end == '\0')
			break;
		p = end + 1;
	}
	cfg->client_lcores = out;
	return 0;
}

bool
compare_wanted(const run_config &cfg)
{
	return cfg.allocator == "both" || !cfg.client_lcores.empty();
}

int
compare_check(const run_config &cfg)
{
	if (cfg.allocator != "ours" && cfg.engine != "dci-reconnect" && cfg.engine != "churn") {
		fprintf(stderr,
			"qpn-testpmd: --allocator=%s applies to the engines that allocate on the "
			"active side (dci-reconnect, churn), not %s\n",
			cfg.allocator.c_str(), cfg.engine.c_str());
		return -EINVAL;
	}
	if (compare_wanted(cfg) && (cfg.interactive || cfg.role != "both")) {
		fprintf(stderr, "qpn-testpmd: --allocator=both and --client-lcores run several "
				"measured runs in one process: batch mode, --role=both only\n");
		return -EINVAL;
	}
	return 0;
}

int
run_compare(run_ctx *ctx, const qpn_engine *e)
{
	const run_config &cfg = *ctx->cfg;
	std::vector<unsigned> counts = cfg.client_lcores;
	if (counts.empty())
		counts.push_back(0); /* every client lcore the layout gives */
	std::vector<const char *> allocs;
	if (cfg.allocator != "rdma-core")
		allocs.push_back("ours");
	if (cfg.allocator != "ours")
		allocs.push_back("rdma-core");
	std::vector<cmp_row> rows;
	int rc = 0;
	for (unsigned n : counts)
		for (const char *a : allocs) {
			cmp_row r;
			if (measure(ctx, e, a, n, &r) != 0)
				return 1;
			if (n != 0 && r.lcores != n)
				printf("qpn-testpmd: %u client lcore(s), not %u (the lcores of -l/--lcores "
				       "after the server lcores)\n",
				       r.lcores, n);
			printf("qpn-testpmd: allocator %s, %u client lcore(s): %" PRIu64
			       " connections in %.2f s, %" PRIu64 " stale rejects\n",
			       a, r.lcores, r.conns, r.secs, r.stale);
			rc |= static_cast<int>(r.errors != 0);
			rows.push_back(r);
		}
	ctx->alloc_fw = false;
	ctx->client_limit = 0;
	print_table(stdout, rows);
	if (!cfg.json.empty()) {
		if (write_json(ctx, e, rows) == 0)
			printf("JSON summary written to %s\n", cfg.json.c_str());
		else
			rc = 1;
	}
	fflush(stdout);
	return rc;
}
