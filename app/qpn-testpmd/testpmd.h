/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_H
#define QPN_TESTPMD_H

/*
 * qpn-testpmd: engines in the manner of testpmd's forwarding engines — one struct of hooks per
 * engine, one file each. The runner (main.cpp) launches engine->lcore_run on every lcore,
 * prints a progress line every second and a summary (and JSON) at the end.
 */
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <rte_lcore.h>

#include "latency.h"
#include "mlx5_qpn.h"

struct run_config {
	std::vector<std::string> devargs;   /* --qpn-dev, repeatable */
	std::string engine = "alloc";
	double duration_s = 3.0;            /* --duration */
	uint64_t connections = 0;           /* --connections (0: run for duration) */
	unsigned burst = 8;                 /* --burst */
	unsigned hold = 64;                 /* --hold: QPNs an lcore keeps allocated */
	std::string json;                   /* --json */
};

/* What one lcore did; written by its lcore with relaxed atomics, read by the main lcore. */
struct lcore_stats {
	std::atomic<uint64_t> ops{0};       /* alloc+free pairs (alloc engine) or connections */
	std::atomic<uint64_t> allocs{0};
	std::atomic<uint64_t> frees{0};
	std::atomic<uint64_t> eagain{0};
	std::atomic<uint64_t> enospc{0};
	std::atomic<uint64_t> errors{0};
	latency_hist alloc_lat;              /* TSC cycles, owned by the lcore until done */
	latency_hist free_lat;
	std::atomic<bool> done{false};
};

struct run_ctx {
	const run_config *cfg;
	struct mlx5_qpn_dev *dev;           /* the first device */
	std::atomic<bool> stop{false};
	uint64_t tsc_hz;
	lcore_stats lc[RTE_MAX_LCORE];
};

/* An engine: testpmd's struct fwd_engine, for QPNs. */
struct qpn_engine {
	const char *name;
	const char *help;
	/* Called once on the main lcore before launch; 0 or negative errno. */
	int (*init)(run_ctx *ctx);
	/* The per-lcore loop; returns when ctx->stop is set (or its work is done). */
	int (*lcore_run)(run_ctx *ctx, unsigned lcore);
	/* Called once after every lcore returned. */
	void (*fini)(run_ctx *ctx);
};

extern const qpn_engine engine_alloc;

#endif
