/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd [EAL options] -- [options]
 *
 * Drives reserved-QPN engines on every lcore against an mlx5_qpn device (the emulated sim0 by
 * default), prints a progress line every second and a summary at the end, and writes the same
 * as JSON with --json.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <thread>
#include <string>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "testpmd.h"

namespace {

const qpn_engine *const kEngines[] = {&engine_alloc};

const qpn_engine *find_engine(const std::string &name)
{
	for (const qpn_engine *e : kEngines)
		if (name == e->name)
			return e;
	return nullptr;
}

void usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n"
	       "  --qpn-dev=DEVARGS   device (repeatable; default sim0), e.g. sim0,quarantine_us=1000\n"
	       "                      or ib=mlx5_0\n"
	       "  --engine=NAME       engine:", prog);
	for (const qpn_engine *e : kEngines)
		printf(" %s", e->name);
	printf("\n  --duration=SEC      run time (default 3)\n"
	       "  --connections=N     stop each lcore after N operations\n"
	       "  --burst=N           QPNs per burst (alloc engine, default 8)\n"
	       "  --hold=N            QPNs each lcore keeps allocated (alloc engine, default 64)\n"
	       "  --json=FILE         write the summary as JSON\n"
	       "  -h, --help          this text\n");
	for (const qpn_engine *e : kEngines)
		printf("engine %s: %s\n", e->name, e->help);
}

bool parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
	char *end = nullptr;
	errno = 0;
	double x = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
		fprintf(stderr, "qpn-testpmd: bad value for --%s: \"%s\" (expected %g..%g)\n", opt, v,
			lo, hi);
		return false;
	}
	*out = x;
	return true;
}

int parse_args(int argc, char **argv, run_config *cfg)
{
	static const struct option opts[] = {
		{"qpn-dev", required_argument, nullptr, 'd'},
		{"engine", required_argument, nullptr, 'e'},
		{"duration", required_argument, nullptr, 't'},
		{"connections", required_argument, nullptr, 'n'},
		{"burst", required_argument, nullptr, 'b'},
		{"hold", required_argument, nullptr, 'H'},
		{"json", required_argument, nullptr, 'j'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	int c;
	double x;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, nullptr)) != -1) {
		switch (c) {
		case 'd': cfg->devargs.push_back(optarg); break;
		case 'e': cfg->engine = optarg; break;
		case 't':
			if (!parse_num("duration", optarg, 0.01, 86400, &cfg->duration_s))
				return -EINVAL;
			break;
		case 'n':
			if (!parse_num("connections", optarg, 1, 1e15, &x))
				return -EINVAL;
			cfg->connections = static_cast<uint64_t>(x);
			break;
		case 'b':
			if (!parse_num("burst", optarg, 1, 64, &x))
				return -EINVAL;
			cfg->burst = static_cast<unsigned>(x);
			break;
		case 'H':
			if (!parse_num("hold", optarg, 0, 1 << 20, &x))
				return -EINVAL;
			cfg->hold = static_cast<unsigned>(x);
			break;
		case 'j': cfg->json = optarg; break;
		case 'h': usage(argv[0]); return 1;
		default:
			fprintf(stderr, "qpn-testpmd: unknown option \"%s\" (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qpn-testpmd: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (cfg->devargs.empty())
		cfg->devargs.push_back("sim0");
	return 0;
}

run_ctx *g_ctx;
const qpn_engine *g_engine;

int lcore_main(void *)
{
	unsigned lc = rte_lcore_id();
	g_engine->lcore_run(g_ctx, lc);
	g_ctx->lc[lc].done.store(true, std::memory_order_release);
	return 0;
}

double ns(uint64_t cycles, uint64_t hz) { return static_cast<double>(cycles) * 1e9 / static_cast<double>(hz); }

void step_json(FILE *f, const char *name, const latency_hist &h, uint64_t hz, bool comma)
{
	fprintf(f, "    \"%s\": {\"count\": %" PRIu64 ", \"p50_ns\": %.1f, \"p99_ns\": %.1f, "
		   "\"max_ns\": %.1f}%s\n", name, h.n, ns(h.percentile(50), hz),
		ns(h.percentile(99), hz), ns(h.max, hz), comma ? "," : "");
}

} /* namespace */

int main(int argc, char **argv)
{
	int eal = rte_eal_init(argc, argv);
	if (eal < 0) {
		fprintf(stderr, "qpn-testpmd: cannot initialise EAL (see the EAL messages above)\n");
		return 1;
	}
	argc -= eal;
	argv += eal;
	argv[0] = const_cast<char *>("qpn-testpmd");
	run_config cfg;
	int rc = parse_args(argc, argv, &cfg);
	if (rc != 0) {
		rte_eal_cleanup();
		return rc > 0 ? 0 : 2;
	}
	g_engine = find_engine(cfg.engine);
	if (g_engine == nullptr) {
		fprintf(stderr, "qpn-testpmd: unknown engine \"%s\" (see --help)\n", cfg.engine.c_str());
		rte_eal_cleanup();
		return 2;
	}
	static run_ctx ctx;
	ctx.cfg = &cfg;
	ctx.tsc_hz = rte_get_tsc_hz();
	std::vector<struct mlx5_qpn_dev *> devs;
	for (auto &da : cfg.devargs) {
		struct mlx5_qpn_dev *d = nullptr;
		rc = mlx5_qpn_dev_probe(da.c_str(), &d);
		if (rc != 0) {
			fprintf(stderr, "qpn-testpmd: cannot probe \"%s\": %s\n", da.c_str(), strerror(-rc));
			for (auto *x : devs)
				mlx5_qpn_dev_close(x);
			rte_eal_cleanup();
			return 1;
		}
		devs.push_back(d);
	}
	ctx.dev = devs[0];
	struct mlx5_qpn_dev_info info;
	mlx5_qpn_dev_info_get(ctx.dev, &info);
	printf("qpn-testpmd: engine %s on %u lcores, device %s (%s, GUID %016" PRIx64
	       ", NUMA %d, cores %s), quarantine %" PRIu64 " us\n", g_engine->name, rte_lcore_count(),
	       info.name, info.backend, info.node_guid, info.numa_node,
	       info.cores[0] ? info.cores : "-", info.quarantine_us);
	rc = g_engine->init(&ctx);
	if (rc != 0) {
		fprintf(stderr, "qpn-testpmd: engine %s: %s\n", g_engine->name, strerror(-rc));
		for (auto *x : devs)
			mlx5_qpn_dev_close(x);
		rte_eal_cleanup();
		return 1;
	}
	g_ctx = &ctx;
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
		rte_eal_remote_launch(lcore_main, nullptr, lc);

	/* The main lcore works too, and prints progress once a second. */
	const uint64_t hz = ctx.tsc_hz;
	const uint64_t start = rte_rdtsc();
	const uint64_t end = start + static_cast<uint64_t>(cfg.duration_s * static_cast<double>(hz));
	uint64_t next_print = start + hz, last_ops = 0;
	/* With workers, the main lcore monitors and prints (as testpmd's does); alone, it works. */
	unsigned workers = rte_lcore_count() - 1;
	if (workers == 0) {
		/* Alone: run the engine with a deadline set from here. */
		std::atomic<bool> *stop = &ctx.stop;
		std::thread timer([stop, &cfg] {
			usleep(static_cast<useconds_t>(cfg.duration_s * 1e6));
			stop->store(true);
		});
		lcore_main(nullptr);
		timer.join();
	} else {
		for (;;) {
			uint64_t now = rte_rdtsc();
			bool all_done = true;
			RTE_LCORE_FOREACH_WORKER(lc)
				all_done &= ctx.lc[lc].done.load(std::memory_order_acquire);
			if (now >= end || all_done)
				break;
			if (now >= next_print) {
				uint64_t ops = 0;
				RTE_LCORE_FOREACH_WORKER(lc)
					ops += ctx.lc[lc].ops.load(std::memory_order_relaxed);
				struct mlx5_qpn_pool_stats ps;
				mlx5_qpn_pool_stats_get(mlx5_qpn_dev_pool(ctx.dev), &ps);
				printf("  [%4.1fs] %" PRIu64 " ops (%.2f M/s), in use %" PRIu64
				       ", quarantine %" PRIu64 ", free %" PRIu64 "\n",
				       static_cast<double>(now - start) / static_cast<double>(hz), ops,
				       static_cast<double>(ops - last_ops) / 1e6, ps.in_use,
				       ps.in_quarantine, ps.free);
				fflush(stdout);
				last_ops = ops;
				next_print += hz;
			}
			usleep(1000);
		}
		ctx.stop.store(true);
		RTE_LCORE_FOREACH_WORKER(lc) {
			while (!ctx.lc[lc].done.load(std::memory_order_acquire))
				usleep(100);
			rte_eal_wait_lcore(lc);
		}
	}
	const double secs = static_cast<double>(rte_rdtsc() - start) / static_cast<double>(hz);
	g_engine->fini(&ctx);

	/* Summary. */
	latency_hist all_alloc, all_free;
	uint64_t tot_ops = 0, tot_eagain = 0, tot_enospc = 0, tot_err = 0;
	printf("\n---------------- qpn-testpmd summary: engine %s, %.2f s ----------------\n",
	       g_engine->name, secs);
	printf("%-6s %12s %10s %10s %10s %8s %8s %8s\n", "lcore", "ops", "Mops/s", "alloc p50",
	       "alloc p99", "eagain", "enospc", "errors");
	RTE_LCORE_FOREACH(lc) {
		lcore_stats &s = ctx.lc[lc];
		uint64_t ops = s.ops.load();
		if (ops == 0 && s.allocs.load() == 0 && s.errors.load() == 0)
			continue;
		all_alloc.merge(s.alloc_lat);
		all_free.merge(s.free_lat);
		tot_ops += ops;
		tot_eagain += s.eagain.load();
		tot_enospc += s.enospc.load();
		tot_err += s.errors.load();
		printf("%-6u %12" PRIu64 " %10.3f %8.0fns %8.0fns %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
		       lc, ops, static_cast<double>(ops) / secs / 1e6,
		       ns(s.alloc_lat.percentile(50), hz), ns(s.alloc_lat.percentile(99), hz),
		       s.eagain.load(), s.enospc.load(), s.errors.load());
	}
	printf("total  %12" PRIu64 " %10.3f   alloc p50/p99/max %.0f/%.0f/%.0f ns, free p50/p99/max "
	       "%.0f/%.0f/%.0f ns\n", tot_ops, static_cast<double>(tot_ops) / secs / 1e6,
	       ns(all_alloc.percentile(50), hz), ns(all_alloc.percentile(99), hz),
	       ns(all_alloc.max, hz), ns(all_free.percentile(50), hz), ns(all_free.percentile(99), hz),
	       ns(all_free.max, hz));
	struct mlx5_qpn_dev_stats ds;
	mlx5_qpn_dev_stats_get(ctx.dev, &ds);
	mlx5_qpn_dev_dump(stdout, ctx.dev);
	if (!cfg.json.empty()) {
		FILE *f = fopen(cfg.json.c_str(), "w");
		if (f == nullptr) {
			fprintf(stderr, "qpn-testpmd: cannot write %s: %s\n", cfg.json.c_str(),
				strerror(errno));
			tot_err++;
		} else {
			fprintf(f, "{\n  \"engine\": \"%s\",\n  \"duration_s\": %.3f,\n  \"lcores\": %u,\n",
				g_engine->name, secs, rte_lcore_count());
			fprintf(f, "  \"connections\": %" PRIu64 ",\n  \"conn_per_sec\": %.1f,\n", tot_ops,
				static_cast<double>(tot_ops) / secs);
			fprintf(f, "  \"stale_rejects\": 0,\n  \"rej\": {},\n");
			fprintf(f, "  \"errors\": {\"eagain\": %" PRIu64 ", \"enospc\": %" PRIu64
				   ", \"other\": %" PRIu64 "},\n", tot_eagain, tot_enospc, tot_err);
			fprintf(f, "  \"per_lcore\": [");
			bool first = true;
			RTE_LCORE_FOREACH(lc) {
				uint64_t ops = ctx.lc[lc].ops.load();
				if (ops == 0)
					continue;
				fprintf(f, "%s{\"lcore\": %u, \"ops\": %" PRIu64 ", \"ops_per_sec\": %.1f}",
					first ? "" : ", ", lc, ops, static_cast<double>(ops) / secs);
				first = false;
			}
			fprintf(f, "],\n  \"steps\": {\n");
			step_json(f, "alloc", all_alloc, hz, true);
			step_json(f, "release", all_free, hz, false);
			fprintf(f, "  },\n  \"pool\": {\"capacity\": %" PRIu64 ", \"in_use\": %" PRIu64
				   ", \"in_quarantine\": %" PRIu64 ", \"free\": %" PRIu64
				   ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64
				   ", \"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
				   ", \"steals\": %" PRIu64 ", \"refused_frees\": %" PRIu64 "},\n",
				ds.pool.capacity, ds.pool.in_use, ds.pool.in_quarantine, ds.pool.free,
				ds.pool.allocs, ds.pool.frees, ds.pool.cache_hits, ds.pool.cache_misses,
				ds.pool.steals, ds.pool.refused_frees);
			fprintf(f, "  \"device\": {\"name\": \"%s\", \"backend\": \"%s\", \"node_guid\": \"%016"
				   PRIx64 "\", \"ranges_reserved\": %" PRIu64 ", \"qpns_reserved\": %" PRIu64
				   ", \"reserve_failures\": %" PRIu64 ", \"numa_node\": %d}\n}\n",
				info.name, info.backend, info.node_guid, ds.ranges_reserved,
				ds.qpns_reserved, ds.reserve_failures, info.numa_node);
			fclose(f);
			printf("JSON summary written to %s\n", cfg.json.c_str());
		}
	}
	for (auto *x : devs)
		mlx5_qpn_dev_close(x);
	rte_eal_cleanup();
	return tot_err == 0 ? 0 : 1;
}
