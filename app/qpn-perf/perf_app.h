/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's own internals, shared by its files: the options (perf_options.cpp), the per-peer
 * state and the measurements (perf_measure.cpp), the run (perf_runner.cpp) and the tables and
 * JSON (perf_report.cpp). The peers' interface is perf.h.
 */
#ifndef QPN_PERF_APP_H
#define QPN_PERF_APP_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <set>
#include <vector>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_pause.h>
#include <rte_version.h>

#include <mlx5_qpn_config.h>
#include <mlx5_qpn_pool.h>

#include "perf.h"
#include "json_writer.h"
#include "run_meta.h"
#include "opt_num.h"

struct perf_opts {
	uint64_t iterations = 2000000; /* most pairs per timed run */
	unsigned int repeat = 5;
	uint32_t cache = 256;
	uint32_t range = 65536;
	uint64_t quarantine_us = 50;
	unsigned int burst = 32;
	bool lcores = true;
	unsigned int block_log = 8;
	uint64_t budget_ms = 200; /* target length of one timed run */
	bool quick = false;
	std::string json;
	std::string only;
};

constexpr uint32_t perf_first_qpn = 0x1000; /* clear of QP0/QP1 and of low special QPNs */

/* perf_options.cpp: returns 0, 1 (--help), or -EINVAL after one readable error line. */
int perf_parse_args(int argc, char **argv, struct perf_opts *o);

const struct perf_peer *const perf_all_peers[] = {
	&perf_peer_floor,   &perf_peer_mempool,   &perf_peer_ring,
	&perf_peer_stack,   &perf_peer_rdmacore,  &perf_peer_rdmavt,
	&perf_peer_qpnpool, &perf_peer_qpnpool_q, &perf_peer_qpndev,
};

enum perf_phase { PH_PAIR, PH_BURST, PH_NB };
const char *const perf_phase_name[PH_NB] = {"pair", "burst"};

struct perf_series {
	std::vector<double> ns;     /* ns per op, one per repetition */
	std::vector<double> cycles; /* TSC cycles per op */
	std::vector<uint64_t> ops;
	uint64_t failures = 0;
	uint64_t n = 0; /* calibrated ops per timed run */
};

struct perf_scaling {
	std::vector<double> mops;        /* 2-lcore throughput, Mops/s, one per repetition */
	std::vector<double> lcore_ns[2]; /* ns per op seen by each lcore */
	uint64_t failures = 0;
	uint64_t n = 0; /* ops per lcore per timed run */
};

struct perf_mem {
	bool valid = false;
	const char *method = "";
	double bytes_per_qpn = 0;
	double fixed_bytes = 0;
	uint64_t total_bytes = 0;
};

struct perf_state {
	const struct perf_peer *peer;
	void *ctx = nullptr;
	bool ok = false;
	std::string error;
	bool self_check = false;
	bool refuses_double_free = false;
	perf_series ph[PH_NB];
	perf_scaling scaling;
	perf_mem mem;
};

extern unsigned int perf_seq;
extern double perf_load_at_start;

struct perf_timed {
	uint64_t cycles;
	perf_loop_res res;
};

/* perf_measure.cpp: memory, self-check, timed runs, the two-lcore run, hooks on every lcore. */
uint64_t perf_heap_allocated(void);

struct perf_cfg perf_make_cfg(const struct perf_opts *o, uint32_t range);

void perf_measure_memory(const struct perf_opts *o, perf_state *s, uint64_t full_delta);

bool perf_self_check(const struct perf_opts *o, perf_state *s);

void perf_run_once(perf_state *s, perf_phase ph, uint64_t n, unsigned int burst,
		   perf_loop_res *res);

perf_timed perf_time_once(perf_state *s, perf_phase ph, uint64_t n, unsigned int burst);

double perf_cycles_to_ns(double cycles);

uint64_t perf_calibrate_n(const struct perf_opts *o, double ns_per_op);

double perf_run_two(perf_state *s, unsigned int worker, uint64_t n, double lcore_ns[2],
		    uint64_t *failures);

void perf_on_all_lcores(void (*fn)(void *), void *ctx);

/* perf_report.cpp: statistics over the repetitions, the printed tables, the JSON file. */
void perf_print_tables(const struct perf_opts *o, std::vector<perf_state> &st, bool scaling);

double perf_loadavg(void);

int perf_write_json(const struct perf_opts *o, std::vector<perf_state> &st, bool scaling,
		    double elapsed_s);

/* perf_options.cpp: every name of --only must be a peer. */
bool perf_check_only(const std::string &only);

/* perf_runner.cpp: the run itself. */
int perf_main(const struct perf_opts *o);

#endif /* QPN_PERF_APP_H */
