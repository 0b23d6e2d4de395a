/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd [EAL options] -- [options]
 *
 * Drives reserved-QPN engines on the lcores against mlx5_qpn devices (the emulated sim0 by
 * default): in batch mode for --duration seconds or --connections connections, with a progress
 * line every --stats-period seconds and a summary (and JSON) at the end; with -i at an
 * interactive prompt. SIGINT or SIGTERM ends a run as its end would (summary, JSON, devices
 * closed and, with --destroy-sim, purged); a second one exits at once.
 * Exit codes: 0 success, 1 run-time failure (probe, engine start, errors during the run),
 * 2 bad command line, 128 + N after signal N stopped the run (as a shell reports it).
 *
 * This file holds the program's outline only: the options are options*.cpp's, the runner
 * run.cpp's, the engines engine_*.cpp's, the connections conn*.cpp's, the prompt cli.cpp's.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_eal.h>

#include "opt_num.h"
#include "run_meta.h"
#include "testpmd.h"

namespace {

/* --destroy-sim: remove what the emulated devices leave in shared memory, at exit (the driver
 * knows which backends keep any: mlx5_qpn_dev_purge() says -EOPNOTSUPP for the others). */
void
destroy_sims(const run_config &cfg)
{
	for (auto &da : cfg.devargs) {
		std::string name = da.substr(0, da.find(','));
		int rc = mlx5_qpn_dev_purge(name.c_str());
		if (rc != 0 && rc != -ENOENT && rc != -EOPNOTSUPP && rc != -EBUSY)
			fprintf(stderr, "qpn-testpmd: --destroy-sim: %s: %s\n", name.c_str(),
				strerror(-rc));
	}
}

/* What the run is on, in the first lines of its output: the engine and device, the CPU (a
 * figure without its CPU cannot be compared), the process role. A secondary process does not
 * destroy the primary's device at its end. */
void
print_setup(run_ctx &ctx, run_config &cfg, const qpn_engine *engine)
{
	struct mlx5_qpn_dev_info info;
	char cpu[256];

	mlx5_qpn_dev_info_get(ctx.dev, &info);
	printf("qpn-testpmd: engine %s on %u lcore%s, device %s (%s, GUID %016" PRIx64
	       ", NUMA %d, cores %s), quarantine %" PRIu64 " us, CM timewait %u ms (%s)\n",
	       engine->name, rte_lcore_count(), rte_lcore_count() == 1 ? "" : "s", info.name,
	       info.backend, info.node_guid, info.numa_node, info.cores[0] ? info.cores : "-",
	       info.quarantine_us, cm_timewait_ms(cfg),
	       cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live");
	run_meta_cpu(cpu, sizeof(cpu));
	printf("qpn-testpmd: CPU %s\n", cpu);
	if (info.secondary) {
		/* --proc-type=secondary: the device and its pool are the primary's (driver.md §15). */
		printf("qpn-testpmd: secondary process: device %s of the primary (pid %d)\n",
		       info.name, int(info.primary_pid));
		cfg.destroy_sim = false;
	}
	if (cfg.role != "both" || !cfg.fabric.empty())
		printf("qpn-testpmd: role %s, CM fabric \"%s\" (shared memory /dev/shm/mlx5_qpn_cmfab_%s)"
		       "\n",
		       cfg.role.c_str(), cfg.fabric.c_str(), cfg.fabric.c_str());
	quarantine_warn(&ctx);
}

} /* namespace */

int
main(int argc, char **argv)
{
	run_meta_save_argv(argc, argv);
	signals_block_thread(); /* the EAL's threads inherit the mask: signals stay the main's */
	int eal = rte_eal_init(argc, argv);
	if (eal < 0) {
		fprintf(stderr,
			"qpn-testpmd: cannot initialise EAL (see the EAL messages above)\n");
		return 1;
	}
	argc -= eal;
	argv += eal;
	argv[0] = const_cast<char *>("qpn-testpmd");
	static run_config cfg;
	int rc = parse_args(argc, argv, &cfg);
	if (rc != 0) {
		rte_eal_cleanup();
		return rc > 0 ? 0 : 2;
	}
	const qpn_engine *engine = engine_find(cfg.engine);
	if (engine == nullptr) {
		fprintf(stderr, "qpn-testpmd: unknown engine \"%s\" (see --help)\n",
			opt_shown(cfg.engine.c_str()).c_str());
		rte_eal_cleanup();
		return 2;
	}
	static run_ctx ctx;
	ctx.cfg = &cfg;
	ctx.alloc_fw = cfg.allocator == "rdma-core";
	ctx.tsc_hz = rte_get_tsc_hz();
	signals_install(&ctx);
	signals_unblock_main();
	telemetry_init(&ctx);
	if (devices_probe(&ctx, cfg.quarantine_us) != 0) {
		rte_eal_cleanup();
		return 1;
	}
	print_setup(ctx, cfg, engine);

	if (cfg.interactive) {
		rc = cli_run(&ctx, &engine);
		const bool ran = run_engine() != nullptr;
		if (run_active())
			run_stop(&ctx);
		/* Leaving the prompt (quit, end of input, a signal) ends like a batch run. */
		int rrc = ran ? run_report(&ctx, engine) : 0;
		rc = rc == 0 && rrc == 0 ? 0 : 1;
	} else {
		rc = compare_wanted(cfg) ? run_compare(&ctx, engine) : run_batch(&ctx, engine);
	}
	devices_close(&ctx);
	if (cfg.destroy_sim)
		destroy_sims(cfg);
	rte_eal_cleanup();
	if (signal_caught() != 0) {
		printf("qpn-testpmd: stopped by signal %d (%s)\n", signal_caught(),
		       strsignal(signal_caught()));
		fflush(stdout);
		return 128 + signal_caught();
	}
	return rc;
}
