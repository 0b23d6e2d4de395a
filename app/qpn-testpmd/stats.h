/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_STATS_H
#define QPN_TESTPMD_STATS_H

/*
 * What stats.cpp (text), stats_json.cpp (JSON) and monitor.cpp (timeline, telemetry) share: the
 * totals of the measured side, the counters since the last `clear stats` and the readable units.
 */
#include <cstdint>
#include <string>

#include "fmt_ns.h"
#include "testpmd.h"

/* Totals over the measured side. */
struct totals {
	uint64_t conns = 0, allocs = 0, frees = 0, eagain = 0, enospc = 0, errors = 0;
	uint64_t rej[MLX5_QPN_CM_REJ_REASON_SLOTS] = {};
	uint64_t stale = 0, peer_disc = 0, cm_busy = 0, sends = 0, cqes = 0, cqe_err = 0;
	uint64_t cqe_flushed = 0, dci_recoveries = 0, dci_replaced = 0;
	uint64_t conn_failed[kSyndSlots] = {}; /* by CQE syndrome (synd_slot()) */
	uint64_t pool_cyc = 0, cycle_cyc = 0;
	latency_hist hist[STEP_NB];
	unsigned measured_lcores = 0;
};

/* Histograms included: read only when no lcore runs (they are the lcores' own meanwhile). */
void collect(run_ctx *ctx, const qpn_engine *e, totals &t);
bool lcore_used(const lcore_stats &s);
const char *role_name(const run_ctx *ctx, unsigned lc);
double pool_share(const totals &t);
/* A counter summed over this run's servers (relaxed reads; any thread). */
uint64_t srv_sum(const run_ctx *ctx, std::atomic<uint64_t> lcore_stats::*m);

/* The CM's and the device's counters since the last `clear stats`: the library keeps them for
 * the process (the CM's) or the device's life, so a clear keeps a baseline and subtracts it. */
qpn_conn_totals conn_totals(run_ctx *ctx);
void dev_stats(run_ctx *ctx, struct mlx5_qpn_dev_stats *ds);
/* Forget the baseline (the devices were re-probed: their counters start again). */
void stats_baseline_reset();

/* monitor.cpp: "timeline": [{"t_s", "connections", "conn_per_sec"}, ...] as a member. */
struct json_writer;
void monitor_timeline_json(json_writer &js);

/* "transport retry counter exceeded=3, work request flushed error=12", or "none": the
 * connections failed by DC send errors, by reason. */
std::string conn_failed_line(const totals &t);

/* Cycles to ns. */
inline double
ns(uint64_t cycles, uint64_t hz)
{
	return static_cast<double>(cycles) * 1e9 / static_cast<double>(hz);
}

#endif
