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
 * where a row is {"client_lcores" (the client lcores the run got), "client_lcores_asked" (the count
 * of --client-lcores it ran for; 0: every one the layout gives), "seconds", "connections"
 * (completed), "allocations", "conn_per_sec", "alloc_p50_ns", "alloc_p99_ns", "alloc_p999_ns",
 * "cycle_p99_ns", "stale_rejects", "alloc_waits", "errors", "device_commands" (every command the
 * device ran between the workers' launch and the stop: both sides' reservations, the blocks of
 * rdma-core's algorithm), "commands_per_1000_conns", "commands_per_1000_allocs"} (keys are only
 * ever added; the report script app/qpn-perf/qpn-perf-report reads them). The model both allocators
 * run under is described in doc/guides/app_reference.md §7 ("Ours beside rdma-core's allocator"). A
 * count the lcore layout cannot give is said before the first run, and every row, ratio and plot is
 * matched by the count asked for: two counts that both ran on one lcore are still two pairs.
 * --allocator-sweep runs the same pairs over the device's conditions (compare_sweep.cpp).
 */
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "compare.h"
#include "json_writer.h"
#include "opt_num.h"
#include "run_meta.h"
#include "stats.h"

namespace {

constexpr unsigned kMaxCounts = 8;

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

} /* namespace */

double
cmp_rate(const cmp_row &r)
{
	return static_cast<double>(r.conns) / r.secs;
}

int
cmp_measure(run_ctx *ctx, const qpn_engine *e, const char *alloc, unsigned lcores, cmp_row *row)
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
	row->asked = lcores;
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

namespace {

/* Commands per 1,000 of N (completed connections, or allocations: a rejected connection
 * allocated and released a QPN too). */
double
per_1000(const cmp_row &r, uint64_t n)
{
	return n != 0 ? 1000.0 * static_cast<double>(r.cmds) / static_cast<double>(n) : 0.0;
}

/* The client lcores of a row: the count it got, and the count asked for where they differ. */
std::string
clients_cell(const cmp_row &r)
{
	std::string c = std::to_string(r.lcores);
	if (r.asked != 0 && r.asked != r.lcores)
		c += " of " + std::to_string(r.asked);
	return c;
}

void
print_table(FILE *f, const std::vector<cmp_row> &rows)
{
	fprintf(f, "  %-9s %7s %10s %9s %9s %9s %10s %8s %8s %12s %13s\n", "allocator", "clients",
		"conns/s", "alloc p50", "alloc p99", "p99.9", "cycle p99", "stale", "waits",
		"cmds/1k conn", "cmds/1k alloc");
	for (const cmp_row &r : rows)
		fprintf(f,
			"  %-9s %7s %10.0f %9s %9s %9s %10s %8" PRIu64 " %8" PRIu64
			" %12.2f %13.2f\n",
			r.alloc, clients_cell(r).c_str(), cmp_rate(r),
			fmt_ns(r.alloc_ns[0]).c_str(), fmt_ns(r.alloc_ns[1]).c_str(),
			fmt_ns(r.alloc_ns[2]).c_str(), fmt_ns(r.cycle_p99_ns).c_str(), r.stale,
			r.waits, per_1000(r, r.conns), per_1000(r, r.allocs));
	/* The ratio per pair: the rows of one count asked for, where both ran. */
	for (size_t i = 0; i < rows.size(); i++) {
		const cmp_row &a = rows[i];
		if (strcmp(a.alloc, "ours") != 0)
			continue;
		for (size_t j = 0; j < rows.size(); j++) {
			const cmp_row &b = rows[j];
			if (strcmp(b.alloc, "rdma-core") != 0 || b.asked != a.asked || b.conns == 0)
				continue;
			fprintf(f,
				"  %s client lcore(s): ours / rdma-core conns/s %.2f, stale rejects "
				"%" PRIu64 " / %" PRIu64 "\n",
				clients_cell(a).c_str(), cmp_rate(a) / cmp_rate(b), a.stale,
				b.stale);
			break;
		}
	}
}

} /* namespace */

void
cmp_row_json(json_writer &js, const cmp_row &r)
{
	js.kv("client_lcores", uint64_t(r.lcores));
	js.kv("client_lcores_asked", uint64_t(r.asked));
	js.kv("seconds", r.secs);
	js.kv("connections", r.conns);
	js.kv("allocations", r.allocs);
	js.kv("conn_per_sec", cmp_rate(r));
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
}

void
cmp_conditions_json(json_writer &js, run_ctx *ctx, bool per_point)
{
	const run_config &cfg = *ctx->cfg;
	double load = -1;
	getloadavg(&load, 1);
	js.key("conditions");
	js.obj();
	js.kv("loadavg_1min", load);
	js.kv("lcores", uint64_t(rte_lcore_count()));
	js.kv("server_lcores", uint64_t(ctx->nb_servers));
	if (!per_point)
		js.kv("timewait_ms", uint64_t(cm_timewait_ms(cfg)));
	js.kv("cm_policy", cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	struct mlx5_qpn_dev_info info;
	if (!per_point && ctx->dev != nullptr && mlx5_qpn_dev_info_get(ctx->dev, &info) == 0)
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

void
cmp_conditions_print(FILE *f, run_ctx *ctx, bool per_point)
{
	const run_config &cfg = *ctx->cfg;
	char cpu[160];
	run_meta_cpu(cpu, sizeof(cpu));
	double load = -1;
	getloadavg(&load, 1);
	fprintf(f, "  conditions: %s, %ld CPUs online, load %.2f\n", cpu,
		sysconf(_SC_NPROCESSORS_ONLN), load);
	/* A server without a lcore of its own is polled by a client lcore (testpmd.h). */
	unsigned dedicated = 0;
	for (unsigned k = 0; k < ctx->nb_servers; k++)
		dedicated += ctx->server_lcore[k] >= 0 ? 1 : 0;
	fprintf(f, "  %u EAL lcores: %u server(s), %s; CM %s", rte_lcore_count(), ctx->nb_servers,
		dedicated == ctx->nb_servers ? "each on a lcore of its own" :
		dedicated == 0               ? "polled by the client lcores" :
					       "some polled by the client lcores",
		cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	if (!per_point)
		fprintf(f, ", timewait %u ms", cm_timewait_ms(cfg));
	fprintf(f, "; %.1f s per run, --inflight=%u --peers=%u --msgs-per-conn=%u\n",
		cfg.duration_s, cfg.inflight, cfg.peers, cfg.msgs_per_conn);
	for (auto &d : cfg.devargs)
		fprintf(f, "  device %s%s\n", d.c_str(),
			per_point ? " (slow_cmd_us, fw_first_fit per point)" : "");
}

int
cmp_json_write(run_ctx *ctx, const qpn_engine *e, const char *mode, bool per_point,
	       const std::function<void(json_writer &)> &body)
{
	const char *path = ctx->cfg->json.c_str();
	FILE *f = fopen(path, "w");
	if (f == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot write %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	json_writer js(f);
	js.obj();
	run_meta_json(js, "qpn-testpmd");
	js.kv("mode", mode);
	js.kv("engine", e->name);
	cmp_conditions_json(js, ctx, per_point);
	body(js);
	js.end_obj();
	bool ok = js.ok();
	if (fclose(f) != 0 || !ok) {
		fprintf(stderr, "qpn-testpmd: cannot write %s\n", path);
		return -EIO;
	}
	printf("JSON summary written to %s\n", path);
	return 0;
}

namespace {

int
write_json(run_ctx *ctx, const qpn_engine *e, const std::vector<cmp_row> &rows)
{
	return cmp_json_write(ctx, e, "allocator-compare", false, [&rows](json_writer &js) {
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
				if (strcmp(r.alloc, a) == 0) {
					js.obj();
					cmp_row_json(js, r);
					js.end_obj();
				}
			js.end_arr();
		}
		js.end_obj();
	});
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

bool
cmp_parse_list(const char *v, unsigned long lo, unsigned long hi, std::vector<unsigned> *out)
{
	out->clear();
	const char *p = v;
	for (;;) {
		char *end = nullptr;
		errno = 0;
		unsigned long n = strtoul(p, &end, 10);
		/* Digits only: strtoul() would skip a leading space or newline, take a sign. */
		if (isdigit(static_cast<unsigned char>(*p)) == 0 || end == p || errno != 0 ||
		    n < lo || n > hi || (*end != ',' && *end != '\0') || out->size() == kMaxCounts)
			return false;
		out->push_back(static_cast<unsigned>(n));
		if (*end == '\0')
			return true;
		p = end + 1;
	}
}

int
compare_parse_client_lcores(run_config *cfg, const char *v)
{
	if (!cmp_parse_list(v, 1, RTE_MAX_LCORE - 1, &cfg->client_lcores)) {
		fprintf(stderr, "%s\n",
			opt_num_error("qpn-testpmd", "--client-lcores", v,
				      "expected up to " + std::to_string(kMaxCounts) +
					      " counts 1.." + std::to_string(RTE_MAX_LCORE - 1) +
					      " separated by commas, e.g. 1,2,4")
				.c_str());
		return -EINVAL;
	}
	return 0;
}

bool
compare_wanted(const run_config &cfg)
{
	return cfg.allocator == "both" || !cfg.client_lcores.empty() || sweep_wanted(cfg);
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
		fprintf(stderr,
			"qpn-testpmd: --allocator=both, --client-lcores and --allocator-sweep "
			"run several measured runs in one process: batch mode, --role=both "
			"only\n");
		return -EINVAL;
	}
	return sweep_check(cfg);
}

namespace {

/* The counts the layout cannot give, said before the first run: the runs go ahead at what the
 * layout gives, and their rows say both counts. */
void
counts_note(run_ctx *ctx, const qpn_engine *e, const std::vector<unsigned> &counts)
{
	const unsigned avail = run_clients_available(ctx, e);
	for (unsigned n : counts)
		if (n > avail)
			printf("qpn-testpmd: --client-lcores=%u runs on %u client lcore(s): the lcores of "
			       "-l/--lcores after the main and the server lcores\n",
			       n, avail);
}

} /* namespace */

int
run_compare(run_ctx *ctx, const qpn_engine *e)
{
	if (sweep_wanted(*ctx->cfg))
		return run_sweep(ctx, e);
	const run_config &cfg = *ctx->cfg;
	std::vector<unsigned> counts = cfg.client_lcores;
	if (counts.empty())
		counts.push_back(0); /* every client lcore the layout gives */
	counts_note(ctx, e, counts);
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
			if (cmp_measure(ctx, e, a, n, &r) != 0)
				return 1;
			printf("qpn-testpmd: allocator %s, %s client lcore(s): %" PRIu64
			       " connections in %.2f s, %" PRIu64 " stale rejects\n",
			       a, clients_cell(r).c_str(), r.conns, r.secs, r.stale);
			rc |= static_cast<int>(r.errors != 0);
			rows.push_back(r);
		}
	ctx->alloc_fw = false;
	ctx->client_limit = 0;
	printf("\nqpn-testpmd: allocators side by side\n");
	cmp_conditions_print(stdout, ctx, false);
	print_table(stdout, rows);
	if (!cfg.json.empty()) {
		if (write_json(ctx, e, rows) != 0)
			rc = 1;
	}
	fflush(stdout);
	return rc;
}
