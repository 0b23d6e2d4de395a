/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_COMPARE_H
#define QPN_TESTPMD_COMPARE_H

/*
 * What compare.cpp (--allocator=both, --client-lcores) and compare_sweep.cpp
 * (--allocator-sweep) share: one measured run of one allocator on fresh devices, its row in
 * the table and the JSON, and the conditions every figure of the launch shares, said once.
 */
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "testpmd.h"

struct json_writer;

/* One measured run. */
struct cmp_row {
	const char *alloc;
	unsigned asked;  /* client lcores asked for (--client-lcores; 0: every one) */
	unsigned lcores; /* client lcores the run got */
	double secs;
	uint64_t conns, allocs, stale, waits, errors, cmds;
	double alloc_ns[3]; /* p50, p99, p99.9 */
	double cycle_p99_ns;
};

/* Conns/s of a row. */
double cmp_rate(const cmp_row &r);

/* One run of ALLOC ("ours" or "rdma-core") at LCORES client lcores (0: every one) on fresh
 * devices (closed, purged, probed again with ctx->cfg's devargs and timewait). 0, or 1 (a failed
 * probe or start; its line printed). */
int cmp_measure(run_ctx *ctx, const qpn_engine *e, const char *alloc, unsigned lcores,
		cmp_row *row);

/* The row's members in the JSON object being written. */
void cmp_row_json(json_writer &js, const cmp_row &r);

/* `"conditions": {...}` as a member of the object being written; without the timewait and
 * the quarantine where they change PER_POINT. */
void cmp_conditions_json(json_writer &js, run_ctx *ctx, bool per_point);

/* The conditions every figure below shares, once, at the top of a table: CPU, load, lcores,
 * CM (policy, and the timewait unless PER_POINT), run time, devices. */
void cmp_conditions_print(FILE *f, run_ctx *ctx, bool per_point);

/* Parse V, up to 8 numbers LO..HI separated by commas, into *OUT: false if it is not one. */
bool cmp_parse_list(const char *v, unsigned long lo, unsigned long hi, std::vector<unsigned> *out);

/* Write the JSON file of --json: meta, MODE, the engine, the conditions (cmp_conditions_json),
 * then BODY's members; say where it went. 0, or -EIO after one line. */
int cmp_json_write(run_ctx *ctx, const qpn_engine *e, const char *mode, bool per_point,
		   const std::function<void(json_writer &)> &body);

/* ---- compare_sweep.cpp ---- */
/* Whether --allocator-sweep was given. */
bool sweep_wanted(const run_config &cfg);
/* After every option: 0, or -EINVAL (one line) where the sweep cannot run with them. */
int sweep_check(const run_config &cfg);
/* Batch mode: ours beside rdma-core's at every point of the sweep; table and JSON. Exit status
 * as run_batch. */
int run_sweep(run_ctx *ctx, const qpn_engine *e);

#endif /* QPN_TESTPMD_COMPARE_H */
