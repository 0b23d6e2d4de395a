/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's own internals, shared by its files: the options (perf_options.cpp), the per-peer
 * state and the measurements (perf_measure.cpp), the run (perf_runner.cpp) and the tables and
 * JSON (perf_report.cpp). The peers' interface is perf.h.
 */
#ifndef QPN_PERF_APP_H
#define QPN_PERF_APP_H

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>
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

#include <mlx5_qpn/mlx5_qpn_config.h>
#include <mlx5_qpn/mlx5_qpn_pool.h>

#include "perf.h"
#include "json_writer.h"
#include "run_meta.h"
#include "opt_num.h"

struct perf_opts {
	uint64_t iterations = 2000000; /* most pairs per timed run */
	unsigned int repeat = 5;
	uint32_t cache = 256;
	uint32_t range = 65536;
	uint32_t range_q = 1u << 20;   /* range of qpnpool-q: large enough for its quarantine */
	uint64_t quarantine_us = 1000; /* the quarantine aim holds for 1 ms..1 s */
	unsigned int burst = 32;
	unsigned int hold = 1024;    /* QPNs held live by the hold workload */
	unsigned int storm = 256;    /* connections per reconnect storm */
	unsigned int idle_us = 1000; /* idle before each storm */
	bool lcores = true;
	unsigned int block_log = 8;
	uint64_t budget_ms = 200; /* target length of one timed run */
	bool quick = false;
	bool count_instructions = false;
	std::string count_child; /* internal: run under callgrind, dumps named for DIR */
	std::string json;
	std::string only;
};

constexpr uint32_t kPerfFirstQpn = 0x1000; /* clear of QP0/QP1 and of low special QPNs */

/* perf_options.cpp: returns 0, 1 (--help), or -EINVAL after one readable error line. */
int perf_parse_args(int argc, char **argv, struct perf_opts *o);

const struct perf_peer *const perf_all_peers[] = {
	&perf_peer_floor,   &perf_peer_floor_inl, &perf_peer_mempool,  &perf_peer_mempool_packed,
	&perf_peer_ring,    &perf_peer_stack,     &perf_peer_rdmacore, &perf_peer_rdmavt,
	&perf_peer_qpnpool, &perf_peer_qpnpool_q, &perf_peer_qpndev,
};

/* Single-lcore workloads, each timed as a whole. PH_AGED is the pair loop once more, at the
 * end of a repetition, on the contexts its other workloads used: what a peer's history (the
 * order a pool's past left its free QPNs in) costs. Every other figure starts from contexts
 * set up afresh for the repetition (perf_renew()). */
enum perf_phase { PH_PAIR, PH_BURST, PH_HOLD, PH_STORM, PH_AGED, PH_NB };
const char *const perf_phase_name[PH_NB] = {"pair", "burst", "hold", "storm", "pair_aged"};
const char *const perf_phase_desc[PH_NB] = {
	"alloc+free pair on one lcore",
	"bulk alloc+free on one lcore",
	"hold-and-release: K live, each step takes one and frees the oldest",
	"reconnect storm: S allocs then S frees after an idle sleep (storms timed only)",
	"the pair again at the end of the repetition, after its other workloads",
};

struct perf_series {
	std::vector<double> ns;     /* ns per op, one per repetition */
	std::vector<double> cycles; /* TSC cycles per op */
	std::vector<uint64_t> ops;
	uint64_t failures = 0;
	uint64_t n = 0; /* calibrated ops per timed run */
};

/* Several runners at once: lcores, non-EAL threads or a producer/consumer pair. */
struct perf_point {
	std::vector<double> mops;                 /* total throughput, one per repetition */
	std::vector<std::vector<double>> slot_ns; /* [slot][rep]: ns per op seen by each runner */
	uint64_t failures = 0;
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
	uint32_t range = 0; /* QPNs of this peer's range */
	bool ok = false;
	std::string error;
	bool self_check = false;
	bool refuses_double_free = false;
	perf_series ph[PH_NB];
	uint64_t multi_n = 0;            /* ops per runner per multi-lcore run */
	uint64_t cross_n = 0;            /* QPNs moved per cross-lcore run */
	uint64_t thr_n = 0;              /* ops per thread per non-EAL run */
	std::vector<perf_point> scaling; /* [k-1]: k EAL lcores at once */
	std::vector<perf_point> solo;    /* [i]: lcore i alone */
	perf_point cross;                /* alloc on lcore 0, free on lcore 1 */
	std::vector<perf_point> threads; /* [0]: 1 non-EAL thread, [1]: as many as lcores */
	perf_hist lat_alloc = {}, lat_free = {};
	double instr[PH_NB] = {}; /* instructions per op from callgrind, 0 = not measured */
	double hw_instr = 0;      /* instructions per pair from perf_event_open, 0 = not measured */
	perf_mem mem;
	/* The order of kPerfOrderQpns hand-outs at the end of each repetition (perf_order()). */
	std::vector<double> order_adjacent_pct; /* neighbours one QPN apart, % */
	std::vector<double> order_pages;        /* changes of 512-QPN block (a 4 KB slot page) */
	uint32_t order_qpns = 0;                /* QPNs taken per look */
};

/* The lcores of the run: [0] is the main lcore, then the workers in -l order. */
extern std::vector<unsigned int> perf_lcores;
extern unsigned int perf_seq;
extern double perf_load_at_start;
extern std::string perf_hw_error; /* why hardware counters are not available, or "" */
extern bool perf_instr_measured;
extern std::string perf_instr_error;

struct perf_timed {
	uint64_t cycles;
	perf_loop_res res;
};

/* perf_measure.cpp: memory, self-check, timed runs, calibration, hooks on every lcore. */
uint64_t perf_heap_allocated();

struct perf_cfg perf_make_cfg(const struct perf_opts *o, uint32_t range);

void perf_measure_memory(const struct perf_opts *o, perf_state *s, uint64_t full_delta);

bool perf_self_check(const struct perf_opts *o, perf_state *s);

void perf_run_once(const struct perf_opts *o, perf_state *s, perf_phase ph, uint64_t n,
		   perf_loop_res *res);

perf_timed perf_time_once(const struct perf_opts *o, perf_state *s, perf_phase ph, uint64_t n);

double perf_cycles_to_ns(double cycles);

uint64_t perf_calibrate_n(const struct perf_opts *o, double ns_per_op);

void perf_on_all_lcores(void (*fn)(void *), void *ctx);

/* perf_multi.cpp: several runners at once. */
enum perf_multi_mode {
	PM_LCORES,  /* pairs on the given EAL lcores */
	PM_THREADS, /* pairs on k non-EAL threads */
	PM_CROSS,   /* alloc on the first lcore, free on the second */
};

/* Longest a multi run may take (ms): runners stop early on an oversubscribed machine. */
extern uint64_t perf_multi_limit_ms;

/* One multi run: adds a repetition to pt; returns Mops/s, or < 0 if a runner did not start. */
double perf_run_multi(perf_state *s, perf_multi_mode mode, const std::vector<unsigned int> &lc,
		      uint64_t n, perf_point *pt);

/* perf_stats.cpp: statistics and aims shared by the tables and the JSON. */
double perf_median(std::vector<double> v);
double perf_min(const std::vector<double> &v);
double perf_max(const std::vector<double> &v);
double perf_ratio(double a, double b);
perf_state *perf_find(std::vector<perf_state> &st, const char *name);
double perf_hist_pct(const perf_hist &h, double p); /* cycles at percentile p (0..100) */

struct perf_aim {
	std::string key;
	std::string what;
	double value; /* NaN when not measured */
	std::string aim;
	bool lower_is_better;
	double bound;
	std::string figures; /* the figures the ratio comes from, readable */
};

std::vector<perf_aim> perf_aims(std::vector<perf_state> &st);

/* Fewest repetitions whose median is a figure (qpn-perf-report says the same). */
constexpr unsigned int kPerfMinRepeat = 3;
/* Why a run's verdicts are not figures to quote: too few repetitions, or a load average above
 * half the CPUs at its start (the warning perf_announce() prints); "" when neither. */
std::string perf_unreliable(unsigned int repeat, double load, unsigned int cpus);

/*
 * Repetitions the machine disturbed. On a VM the host (or the other thread of the core) slows
 * loops bound by stores in some repetitions and not in others, and a median of few repetitions
 * follows them; rte_mempool's pair, bound by its dependencies, barely moves. The out-of-line
 * floor (the same bare array in every build) is the witness: a repetition in which its pair took
 * more than kPerfDisturbed x its best is disturbed. Reported beside the aims, which stay the
 * medians of every repetition.
 */
constexpr double kPerfDisturbed = 1.15;
struct perf_disturbance {
	bool measured = false;          /* the floor ran (one repetition: none disturbed) */
	double best_cycles = 0;         /* the floor's best pair */
	std::vector<unsigned int> reps; /* disturbed repetitions, 0-based */
	/* ours / rte_mempool per pair, median of the per-repetition ratios of the undisturbed
	 * repetitions; 0: not available */
	double pair_vs_mempool_undisturbed = 0;
};
perf_disturbance perf_disturbed(std::vector<perf_state> &st);

/* The quarantine's cost after a repetition's other workloads (PH_AGED), beside the aim's
 * (PH_PAIR, fresh contexts): ours with / without quarantine, medians; 0: not measured. */
struct perf_history {
	double with_cycles = 0, without_cycles = 0, ratio = 0;
};
perf_history perf_aged(std::vector<perf_state> &st);

/* QPNs a look at the hand-out order takes (perf_order()). */
constexpr uint32_t kPerfOrderQpns = 8192;
/* Take up to kPerfOrderQpns QPNs, note how they follow each other, free them. */
void perf_order(perf_state *s);
bool perf_meets(const perf_aim &a);
double perf_point_mops(const perf_state &s, unsigned int k); /* median Mops/s on k lcores */

/* perf_report.cpp: the printed tables; perf_json.cpp: the JSON file. */
void perf_print_tables(const struct perf_opts *o, std::vector<perf_state> &st);

double perf_loadavg();

int perf_write_json(const struct perf_opts *o, std::vector<perf_state> &st, double elapsed_s);

/* perf_count.cpp: instructions per op (callgrind in a child) and hardware counters. */
int perf_count_child(const struct perf_opts *o, std::vector<perf_state> &st);
int perf_count_instructions(const struct perf_opts *o, std::vector<perf_state> &st);
void perf_count_hw(const struct perf_opts *o, std::vector<perf_state> &st);
void perf_save_argv(int argc, char **argv);

/* perf_options.cpp: every name of --only must be a peer. */
bool perf_check_only(const std::string &only);
/* The mlx5_qpn vdev the EAL probed, if any, becomes the device of the peer "qpndev"
 * (peer_qpndev.cpp); 0, or -ENODEV with one line (a vdev not probed, or more than one). */
int perf_qpndev_from_eal();

/* perf_runner.cpp: the run itself. */
int perf_main(const struct perf_opts *o);

#endif /* QPN_PERF_APP_H */
