/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `alloc` engine: pool only. Each lcore keeps `hold` reserved QPNs allocated and, in bursts,
 * releases its oldest and takes new ones through the driver API, timing each call. With the
 * quarantine on, this is the steady state of a DCI that reconnects without doing anything else.
 * It runs on every lcore the runner launches (no CM, no sides).
 */
#include <cerrno>
#include <deque>

#include <rte_cycles.h>
#include <rte_pause.h>

#include "testpmd.h"

static int
alloc_lcore_run(run_ctx *ctx, unsigned lcore)
{
	lcore_stats &st = ctx->lc[lcore];
	const run_config &cfg = *ctx->cfg;
	std::deque<uint32_t> held;
	uint32_t q[64];
	unsigned burst = cfg.burst < 64 ? cfg.burst : 64;
	while (!ctx->stop.load(std::memory_order_relaxed)) {
		/* Fill up to `hold`, one QPN per call (the seed API's shape). */
		for (unsigned i = 0; i < burst && held.size() < cfg.hold + burst; i++) {
			uint64_t t0 = rte_rdtsc();
			int rc = mlx5_qpn_reserved_alloc(ctx->dev, &q[i]);
			uint64_t t1 = rte_rdtsc();
			if (rc == 0) {
				st.hist[STEP_ALLOC].record(t1 - t0);
				st.pool_cycles += t1 - t0;
				st.cycle_cycles += t1 - t0;
				held.push_back(q[i]);
				st.allocs.fetch_add(1, std::memory_order_relaxed);
			} else {
				count_alloc_failure(st, rc);
				if (rc == -EAGAIN)
					rte_pause(); /* every free QPN in quarantine: let time pass */
				break;
			}
		}
		/* Release the oldest ones beyond `hold`. */
		while (held.size() > cfg.hold ||
		       (held.size() > 0 && st.enospc.load(std::memory_order_relaxed) &&
			held.size() > cfg.hold / 2)) {
			uint32_t x = held.front();
			held.pop_front();
			uint64_t t0 = rte_rdtsc();
			int rc = mlx5_qpn_reserved_dealloc(ctx->dev, x);
			uint64_t t1 = rte_rdtsc();
			if (rc == 0) {
				st.hist[STEP_RELEASE].record(t1 - t0);
				st.pool_cycles += t1 - t0;
				st.cycle_cycles += t1 - t0;
				st.frees.fetch_add(1, std::memory_order_relaxed);
				st.ops.fetch_add(1, std::memory_order_relaxed);
			} else {
				st.errors.fetch_add(1, std::memory_order_relaxed);
			}
			if (held.size() <= cfg.hold)
				break;
		}
		if (cfg.connections != 0 &&
		    st.ops.load(std::memory_order_relaxed) >= cfg.connections)
			break;
	}
	for (uint32_t x : held) {
		if (mlx5_qpn_reserved_dealloc(ctx->dev, x) == 0)
			st.frees.fetch_add(1, std::memory_order_relaxed);
		else
			st.errors.fetch_add(1, std::memory_order_relaxed);
	}
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(ctx->dev));
	return 0;
}

const qpn_engine engine_alloc = {
	.name = "alloc",
	.help = "pool only: keep --hold QPNs per lcore, release the oldest and allocate in bursts",
	.uses_cm = false,
	.passive_side = false,
	.begin = nullptr,
	.end = nullptr,
	.lcore_run = alloc_lcore_run,
	.passive_poll = nullptr,
	.peer = nullptr,
};
