/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf: the cost of handing out a QPN, ours next to its peers, in one run.
 *
 *   qpn-perf [EAL options] -- [--iterations=N] [--repeat=N] [--cache=N] [--range=N]
 *            [--quarantine-us=N] [--burst=N] [--lcores=on|off] [--json=FILE] [--only=LIST]
 *            [--block-log=G] [--budget-ms=N] [--quick]
 *
 * Every peer (perf.h) is set up once, checked once (unique in-range QPNs, double free refused
 * where the peer claims to check), then measured repetition after repetition with the peers
 * interleaved, so slow drifts of the machine hit all of them alike; figures are medians over
 * the repetitions. BRIEF §5 judges ratios against peers of the same run, never absolute times.
 */

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
#include "opt_num.h"

RTE_LOG_REGISTER(perf_logtype, mlx5_qpn.perf, INFO);

namespace {

/* ---------------------------------------------------------------- options */

struct perf_opts {
	uint64_t iterations = 2000000;  /* most pairs per timed run */
	unsigned int repeat = 5;
	uint32_t cache = 256;
	uint32_t range = 65536;
	uint64_t quarantine_us = 50;
	unsigned int burst = 32;
	bool lcores = true;
	unsigned int block_log = 8;
	uint64_t budget_ms = 200;       /* target length of one timed run */
	bool quick = false;
	std::string json;
	std::string only;
};

constexpr uint32_t perf_first_qpn = 0x1000; /* clear of QP0/QP1 and of low special QPNs */

enum {
	OPT_ITER = 256, OPT_REPEAT, OPT_CACHE, OPT_RANGE, OPT_QUAR, OPT_BURST, OPT_LCORES,
	OPT_JSON, OPT_ONLY, OPT_QUICK, OPT_BLOCK_LOG, OPT_BUDGET, OPT_HELP,
};

const struct option perf_long_opts[] = {
	{"iterations", required_argument, nullptr, OPT_ITER},
	{"repeat", required_argument, nullptr, OPT_REPEAT},
	{"cache", required_argument, nullptr, OPT_CACHE},
	{"range", required_argument, nullptr, OPT_RANGE},
	{"quarantine-us", required_argument, nullptr, OPT_QUAR},
	{"burst", required_argument, nullptr, OPT_BURST},
	{"lcores", required_argument, nullptr, OPT_LCORES},
	{"json", required_argument, nullptr, OPT_JSON},
	{"only", required_argument, nullptr, OPT_ONLY},
	{"quick", no_argument, nullptr, OPT_QUICK},
	{"block-log", required_argument, nullptr, OPT_BLOCK_LOG},
	{"budget-ms", required_argument, nullptr, OPT_BUDGET},
	{"help", no_argument, nullptr, OPT_HELP},
	{nullptr, 0, nullptr, 0},
};

void
perf_usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n"
	       "  --iterations=N     most alloc+free pairs per timed run (default 2000000)\n"
	       "  --repeat=N         repetitions; figures are medians (default 5)\n"
	       "  --cache=N          per-lcore cache of ours and of rte_mempool (default 256)\n"
	       "  --range=N          QPNs in the range every peer hands out (default 65536)\n"
	       "  --quarantine-us=N  quarantine of the qpnpool-q peer (default 50)\n"
	       "  --burst=N          bulk size of the burst loop, 0 = no burst loop (default 32)\n"
	       "  --lcores=on|off    also run on 2 lcores at once (default on)\n"
	       "  --json=FILE        write every figure as JSON\n"
	       "  --only=LIST        comma-separated peers: floor,mempool,ring,stack,rdmacore,\n"
	       "                     rdmavt,qpnpool,qpnpool-q\n"
	       "  --block-log=G      rdma-core model: 2^G QPNs per block (default 8)\n"
	       "  --budget-ms=N      target length of one timed run (default 200)\n"
	       "  --quick            short run: 200000 pairs, 3 repetitions, 10 ms budget\n",
	       prog);
}

/* Numeric options: the apps' one number parser (app/common/opt_num.h); one line naming the
 * option and the value as typed. */
bool
perf_parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	std::string why;

	if (opt_num_u64(s, min, max, out, &why))
		return true;
	fprintf(stderr, "%s\n", opt_num_error("qpn-perf", opt, s, why).c_str());
	return false;
}

int
perf_bad(const char *opt, const char *value, const char *why)
{
	fprintf(stderr, "%s\n", opt_num_error("qpn-perf", opt, value, why).c_str());
	return -EINVAL;
}

/* Returns 0, or -EINVAL after one readable error line. */
int
perf_parse_args(int argc, char **argv, struct perf_opts *o)
{
	bool set_iter = false, set_repeat = false, set_budget = false;
	uint64_t v;
	int opt;

	optind = 1;
	opterr = 0;
	int li = -1;
	while ((opt = getopt_long(argc, argv, ":", perf_long_opts, &li)) != -1) {
		/* The option's name as --NAME (the value may be in the next argument). */
		std::string long_name = li >= 0 ? std::string("--") + perf_long_opts[li].name : "";
		const char *name = li >= 0 ? long_name.c_str()
			: (optind > 0 && optind <= argc ? argv[optind - 1] : "?");
		li = -1;

		switch (opt) {
		case OPT_ITER:
			if (!perf_parse_u64(name, optarg, 1000, UINT64_C(10000000000), &v))
				return -EINVAL;
			o->iterations = v;
			set_iter = true;
			break;
		case OPT_REPEAT:
			if (!perf_parse_u64(name, optarg, 1, 1000, &v))
				return -EINVAL;
			o->repeat = (unsigned int)v;
			set_repeat = true;
			break;
		case OPT_CACHE:
			if (!perf_parse_u64(name, optarg, 1, 65536, &v))
				return -EINVAL;
			o->cache = (uint32_t)v;
			break;
		case OPT_RANGE:
			if (!perf_parse_u64(name, optarg, 1024, MLX5_QPN_MAX - perf_first_qpn, &v))
				return -EINVAL;
			o->range = (uint32_t)v;
			break;
		case OPT_QUAR:
			if (!perf_parse_u64(name, optarg, 0, 10000000, &v))
				return -EINVAL;
			o->quarantine_us = v;
			break;
		case OPT_BURST:
			if (!perf_parse_u64(name, optarg, 0, PERF_MAX_BURST, &v))
				return -EINVAL;
			o->burst = (unsigned int)v;
			break;
		case OPT_LCORES:
			if (optarg != nullptr && strcmp(optarg, "on") == 0)
				o->lcores = true;
			else if (optarg != nullptr && strcmp(optarg, "off") == 0)
				o->lcores = false;
			else
				return perf_bad(name, optarg, "expected on or off");
			break;
		case OPT_JSON:
			if (optarg == nullptr || *optarg == '\0')
				return perf_bad(name, optarg, "empty; expected a file name");
			o->json = optarg;
			break;
		case OPT_ONLY:
			if (optarg == nullptr || *optarg == '\0')
				return perf_bad(name, optarg, "empty; expected a list of peers");
			o->only = optarg;
			break;
		case OPT_QUICK:
			o->quick = true;
			break;
		case OPT_BLOCK_LOG:
			if (!perf_parse_u64(name, optarg, 0, 20, &v))
				return -EINVAL;
			o->block_log = (unsigned int)v;
			break;
		case OPT_BUDGET:
			if (!perf_parse_u64(name, optarg, 1, 60000, &v))
				return -EINVAL;
			o->budget_ms = v;
			set_budget = true;
			break;
		case OPT_HELP:
			perf_usage(argv[0]);
			return 1;
		case ':':
			fprintf(stderr, "qpn-perf: option \"%s\" needs a value (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		default:
			PERF_LOG(ERR, "unknown option '%s' (see --help)", name);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		PERF_LOG(ERR, "unexpected argument '%s' (see --help)", argv[optind]);
		return -EINVAL;
	}
	if (o->quick) {
		if (!set_iter)
			o->iterations = 200000;
		if (!set_repeat)
			o->repeat = 3;
		if (!set_budget)
			o->budget_ms = 10;
	}
	if ((o->range >> o->block_log) < 2) {
		PERF_LOG(ERR, "--range=%u holds fewer than 2 blocks of 2^%u QPNs (--block-log)",
			o->range, o->block_log);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- peers */

const struct perf_peer *const perf_all_peers[] = {
	&perf_peer_floor, &perf_peer_mempool, &perf_peer_ring, &perf_peer_stack,
	&perf_peer_rdmacore, &perf_peer_rdmavt, &perf_peer_qpnpool, &perf_peer_qpnpool_q,
	&perf_peer_qpndev,
};

enum perf_phase { PH_PAIR, PH_BURST, PH_NB };
const char *const perf_phase_name[PH_NB] = {"pair", "burst"};

struct perf_series {
	std::vector<double> ns;      /* ns per op, one per repetition */
	std::vector<double> cycles;  /* TSC cycles per op */
	std::vector<uint64_t> ops;
	uint64_t failures = 0;
	uint64_t n = 0;              /* calibrated ops per timed run */
};

struct perf_scaling {
	std::vector<double> mops;    /* 2-lcore throughput, Mops/s, one per repetition */
	std::vector<double> lcore_ns[2]; /* ns per op seen by each lcore */
	uint64_t failures = 0;
	uint64_t n = 0;              /* ops per lcore per timed run */
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

unsigned int perf_seq;
double perf_load_at_start = -1;

/* Bytes allocated in the DPDK heaps of all sockets (memzones included). */
uint64_t
perf_heap_allocated(void)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats st;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
			sum += st.heap_allocsz_bytes;
	}
	return sum;
}

struct perf_cfg
perf_make_cfg(const struct perf_opts *o, uint32_t range)
{
	struct perf_cfg cfg = {};

	cfg.first = perf_first_qpn;
	cfg.range = range;
	cfg.cache = o->cache;
	cfg.quarantine_ns = o->quarantine_us * 1000;
	cfg.burst = o->burst;
	cfg.block_log = o->block_log;
	cfg.seq = perf_seq++;
	return cfg;
}

/*
 * Memory: for peers that live in the DPDK heap, the heap grows by fixed + per_qpn * range at
 * setup. Setting up a second instance at half the range separates the two terms.
 */
void
perf_measure_memory(const struct perf_opts *o, perf_state *s, uint64_t full_delta)
{
	if (s->peer->flags & PERF_F_HEAP_MEM) {
		struct perf_cfg half = perf_make_cfg(o, o->range / 2);
		uint64_t before = perf_heap_allocated();
		void *ctx = nullptr;

		if (s->peer->setup(&half, &ctx) != 0)
			return;
		uint64_t after = perf_heap_allocated();
		uint64_t half_delta = after > before ? after - before : 0;

		s->peer->teardown(ctx);
		s->mem.valid = true;
		s->mem.method = "dpdk-heap-delta";
		s->mem.total_bytes = full_delta;
		s->mem.bytes_per_qpn = ((double)full_delta - (double)half_delta) /
			(double)(o->range - o->range / 2);
		s->mem.fixed_bytes = (double)full_delta - s->mem.bytes_per_qpn * o->range;
	} else if (s->peer->footprint != nullptr) {
		/*
		 * Self-accounted, called after the timed runs: the most the peer held (its memory
		 * grows with use), all of it counted per QPN.
		 */
		s->mem.valid = true;
		s->mem.method = "self-accounted";
		s->mem.total_bytes = s->peer->footprint(s->ctx);
		s->mem.bytes_per_qpn = (double)s->mem.total_bytes / o->range;
		s->mem.fixed_bytes = 0;
	}
}

/*
 * Untimed check through the generic hooks: a batch of allocations must be distinct and in the
 * range, every free must succeed, and a peer that claims to check must refuse a double free.
 */
bool
perf_self_check(const struct perf_opts *o, perf_state *s)
{
	unsigned int k = std::min<uint32_t>(1024, o->range / (2 * rte_lcore_count()));
	std::vector<uint64_t> tokens(k);
	std::vector<uint8_t> seen(o->range);
	std::set<uint32_t> own;
	uint32_t qpn;
	uint64_t tok;
	int ret;

	for (unsigned int i = 0; i < k; i++) {
		ret = s->peer->alloc(s->ctx, &qpn, &tokens[i]);
		if (ret != 0) {
			s->error = "self-check: alloc " + std::to_string(i) + " failed: " +
				strerror(-ret);
			return false;
		}
		if (s->peer->flags & PERF_F_OWN_RANGE) {
			/* A device's own ranges: distinct and 24-bit is all that can be asked. */
			if (qpn > 0xFFFFFF || !own.insert(qpn).second) {
				s->error = "self-check: QPN " + std::to_string(qpn) +
					" not 24-bit or handed out twice";
				return false;
			}
			continue;
		}
		if (qpn < perf_first_qpn || qpn - perf_first_qpn >= o->range ||
		    seen[qpn - perf_first_qpn]) {
			s->error = "self-check: QPN " + std::to_string(qpn) +
				" out of range or handed out twice";
			return false;
		}
		seen[qpn - perf_first_qpn] = 1;
	}
	for (unsigned int i = 0; i < k; i++) {
		ret = s->peer->free(s->ctx, tokens[i]);
		if (ret != 0) {
			s->error = std::string("self-check: free failed: ") + strerror(-ret);
			return false;
		}
	}
	if (s->peer->flags & PERF_F_CHECKS) {
		/* Free the last QPN again: it must be refused and change nothing. */
		ret = s->peer->free(s->ctx, tokens[k - 1]);
		s->refuses_double_free = ret == -EINVAL;
		if (!s->refuses_double_free) {
			s->error = "self-check: a double free was not refused with -EINVAL";
			return false;
		}
		/* And the peer still works. */
		if (s->peer->alloc(s->ctx, &qpn, &tok) != 0 || s->peer->free(s->ctx, tok) != 0) {
			s->error = "self-check: alloc/free failed after a refused double free";
			return false;
		}
	}
	return true;
}

/* ---------------------------------------------------------------- timing */

struct perf_timed {
	uint64_t cycles;
	perf_loop_res res;
};

void
perf_run_once(perf_state *s, perf_phase ph, uint64_t n, unsigned int burst, perf_loop_res *res)
{
	if (ph == PH_PAIR)
		s->peer->run_pairs(s->ctx, n, res);
	else
		s->peer->run_burst(s->ctx, n, burst, res);
}

perf_timed
perf_time_once(perf_state *s, perf_phase ph, uint64_t n, unsigned int burst)
{
	perf_timed t = {};
	uint64_t t0 = rte_rdtsc_precise();

	perf_run_once(s, ph, n, burst, &t.res);
	t.cycles = rte_rdtsc_precise() - t0;
	return t;
}

double
perf_cycles_to_ns(double cycles)
{
	return cycles * 1e9 / (double)rte_get_tsc_hz();
}

/* Ops per timed run so that one run takes about the budget; at least 1000 ops. */
uint64_t
perf_calibrate_n(const struct perf_opts *o, double ns_per_op)
{
	double n = (double)o->budget_ms * 1e6 / std::max(ns_per_op, 0.1);
	uint64_t k = (uint64_t)std::min(n, (double)o->iterations);

	return std::max<uint64_t>(k, 1000);
}

/* Two-lcore run: both lcores warm up, meet at a start line, run n ops, report by atomics. */
struct perf_mc_job {
	perf_state *s;
	uint64_t n, warm;
	std::atomic<unsigned int> ready{0};
	std::atomic<bool> go{false};
	std::atomic<uint64_t> t0[2], t1[2], ops[2], fails[2];
};

void
perf_mc_body(perf_mc_job *j, unsigned int idx)
{
	perf_loop_res warm = {}, res = {};

	j->s->peer->run_pairs(j->s->ctx, j->warm, &warm);
	j->ready.fetch_add(1, std::memory_order_acq_rel);
	while (!j->go.load(std::memory_order_acquire))
		rte_pause();
	uint64_t t0 = rte_rdtsc_precise();
	j->s->peer->run_pairs(j->s->ctx, j->n, &res);
	uint64_t t1 = rte_rdtsc_precise();

	j->t0[idx].store(t0, std::memory_order_relaxed);
	j->t1[idx].store(t1, std::memory_order_relaxed);
	j->ops[idx].store(res.ops, std::memory_order_relaxed);
	j->fails[idx].store(res.failures + warm.failures, std::memory_order_release);
}

int
perf_mc_worker(void *arg)
{
	perf_mc_body(static_cast<perf_mc_job *>(arg), 1);
	return 0;
}

/* Returns Mops/s over both lcores, or a negative value if the worker could not be launched. */
double
perf_run_two(perf_state *s, unsigned int worker, uint64_t n, double lcore_ns[2],
	uint64_t *failures)
{
	perf_mc_job j;

	j.s = s;
	j.n = n;
	j.warm = std::max<uint64_t>(n / 8, 1000);
	for (int i = 0; i < 2; i++) {
		j.t0[i] = j.t1[i] = j.ops[i] = j.fails[i] = 0;
	}
	if (rte_eal_remote_launch(perf_mc_worker, &j, worker) != 0)
		return -1;
	{
		perf_loop_res warm = {};

		s->peer->run_pairs(s->ctx, j.warm, &warm);
		j.ready.fetch_add(1, std::memory_order_acq_rel);
		while (j.ready.load(std::memory_order_acquire) < 2)
			rte_pause();
		j.go.store(true, std::memory_order_release);
		uint64_t t0 = rte_rdtsc_precise();
		perf_loop_res res = {};

		s->peer->run_pairs(s->ctx, n, &res);
		uint64_t t1 = rte_rdtsc_precise();

		j.t0[0] = t0;
		j.t1[0] = t1;
		j.ops[0] = res.ops;
		j.fails[0] = res.failures + warm.failures;
	}
	rte_eal_wait_lcore(worker);

	uint64_t start = std::min(j.t0[0].load(), j.t0[1].load(std::memory_order_acquire));
	uint64_t end = std::max(j.t1[0].load(), j.t1[1].load(std::memory_order_acquire));
	uint64_t ops = j.ops[0].load() + j.ops[1].load(std::memory_order_acquire);

	*failures = j.fails[0].load() + j.fails[1].load(std::memory_order_acquire);
	for (int i = 0; i < 2; i++) {
		uint64_t o = j.ops[i].load(std::memory_order_acquire);

		lcore_ns[i] = o != 0 ? perf_cycles_to_ns((double)(j.t1[i] - j.t0[i]) / o) : 0;
	}
	if (end <= start)
		return 0;
	return (double)ops * (double)rte_get_tsc_hz() / (double)(end - start) / 1e6;
}

/* Run a peer hook on every lcore (main included), one after the other. */
struct perf_hook_job {
	void (*fn)(void *);
	void *ctx;
};

int
perf_hook_worker(void *arg)
{
	auto *h = static_cast<perf_hook_job *>(arg);

	h->fn(h->ctx);
	return 0;
}

void
perf_on_all_lcores(void (*fn)(void *), void *ctx)
{
	perf_hook_job h = {fn, ctx};
	unsigned int lcore;

	fn(ctx);
	RTE_LCORE_FOREACH_WORKER(lcore) {
		if (rte_eal_remote_launch(perf_hook_worker, &h, lcore) == 0)
			rte_eal_wait_lcore(lcore);
	}
}

/* ---------------------------------------------------------------- statistics */

double
perf_median(std::vector<double> v)
{
	size_t m;

	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	m = v.size() / 2;
	return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double
perf_min(const std::vector<double> &v)
{
	return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

double
perf_max(const std::vector<double> &v)
{
	return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

perf_state *
perf_find(std::vector<perf_state> &st, const char *name)
{
	for (auto &s : st)
		if (s.ok && strcmp(s.peer->name, name) == 0)
			return &s;
	return nullptr;
}

/* A ratio of two figures, or NaN (JSON null) when one of them is missing. */
double
perf_ratio(double a, double b)
{
	return a > 0 && b > 0 ? a / b : __builtin_nan("");
}

/* ---------------------------------------------------------------- output */

struct perf_aim {
	const char *key;
	const char *what;
	double value;
	const char *aim;
	bool lower_is_better;
	double bound;
};

std::vector<perf_aim>
perf_aims(std::vector<perf_state> &st, bool scaling)
{
	std::vector<perf_aim> a;
	perf_state *ours = perf_find(st, "qpnpool");
	perf_state *q = perf_find(st, "qpnpool-q");
	perf_state *mp = perf_find(st, "mempool");
	perf_state *fl = perf_find(st, "floor");
	perf_state *rc = perf_find(st, "rdmacore");
	double o = ours ? perf_median(ours->ph[PH_PAIR].ns) : 0;

	a.push_back({"ours_over_mempool", "ours / rte_mempool (pair, 1 lcore)",
		perf_ratio(o, mp ? perf_median(mp->ph[PH_PAIR].ns) : 0), "<= 0.5", true, 0.5});
	a.push_back({"ours_over_floor", "ours / floor (pair, 1 lcore)",
		perf_ratio(o, fl ? perf_median(fl->ph[PH_PAIR].ns) : 0), "<= 3", true, 3});
	a.push_back({"quarantine_over_no_quarantine", "ours with / without quarantine (pair)",
		perf_ratio(q ? perf_median(q->ph[PH_PAIR].ns) : 0, o), "<= 1.3", true, 1.3});
	if (scaling) {
		double o2 = ours ? perf_median(ours->scaling.mops) : 0;
		double o1 = o > 0 ? 1e3 / o : 0;

		a.push_back({"ours_2lcore_speedup", "ours 2-lcore / 1-lcore throughput",
			perf_ratio(o2, o1), ">= 1.8", false, 1.8});
		a.push_back({"ours_over_mutex_2lcore",
			"ours / rdma-core model throughput, 2 lcores",
			perf_ratio(o2, rc ? perf_median(rc->scaling.mops) : 0), ">= 20", false, 20});
	}
	return a;
}

bool
perf_meets(const perf_aim &a)
{
	if (!(a.value > 0))
		return false;
	return a.lower_is_better ? a.value <= a.bound : a.value >= a.bound;
}

void
perf_print_tables(const struct perf_opts *o, std::vector<perf_state> &st, bool scaling)
{
	perf_state *ours = perf_find(st, "qpnpool");

	for (int ph = 0; ph < PH_NB; ph++) {
		if (ph == PH_BURST && o->burst == 0)
			continue;
		double ref = ours ? perf_median(ours->ph[ph].ns) : 0;

		printf("\n%s: %s, median of %u (ns and TSC cycles per QPN allocated and freed)\n",
			perf_phase_name[ph],
			ph == PH_PAIR ? "alloc+free pair on one lcore" : "bulk alloc+free on one lcore",
			o->repeat);
		if (ph == PH_BURST)
			printf("burst of %u\n", o->burst);
		printf("  %-10s %10s %10s %10s %10s %9s %9s\n", "peer", "ns/op", "cycles/op",
			"min ns", "max ns", "vs ours", "failures");
		for (auto &s : st) {
			if (!s.ok)
				continue;
			const perf_series &r = s.ph[ph];
			double med = perf_median(r.ns);

			printf("  %-10s %10.2f %10.1f %10.2f %10.2f %8.2fx %9" PRIu64 "\n",
				s.peer->name, med, perf_median(r.cycles), perf_min(r.ns),
				perf_max(r.ns), ref > 0 ? med / ref : 0.0, r.failures);
		}
	}
	if (scaling) {
		double ref = ours ? perf_median(ours->scaling.mops) : 0;

		printf("\nscaling: alloc+free pairs, Mops/s (median of %u)\n", o->repeat);
		printf("  %-10s %10s %10s %9s %12s\n", "peer", "1 lcore", "2 lcores", "speed-up",
			"ours/peer@2");
		for (auto &s : st) {
			if (!s.ok || !(s.peer->flags & PERF_F_SCALING))
				continue;
			double m1 = 1e3 / std::max(perf_median(s.ph[PH_PAIR].ns), 1e-9);
			double m2 = perf_median(s.scaling.mops);

			printf("  %-10s %10.2f %10.2f %8.2fx %11.2fx\n", s.peer->name, m1, m2,
				m1 > 0 ? m2 / m1 : 0.0, m2 > 0 ? ref / m2 : 0.0);
		}
	}
	printf("\nmemory for a range of %u QPNs\n", o->range);
	printf("  %-10s %12s %14s %14s  %s\n", "peer", "bytes/QPN", "fixed bytes", "total bytes",
		"method");
	for (auto &s : st) {
		if (!s.ok || !s.mem.valid)
			continue;
		printf("  %-10s %12.2f %14.0f %14" PRIu64 "  %s\n", s.peer->name,
			s.mem.bytes_per_qpn, s.mem.fixed_bytes, s.mem.total_bytes, s.mem.method);
	}
	printf("\nBRIEF section 5 ratios (measured in this run)\n");
	for (const auto &a : perf_aims(st, scaling)) {
		if (a.value > 0)
			printf("  %-45s %8.3f  aim %-7s %s\n", a.what, a.value, a.aim,
				perf_meets(a) ? "met" : "NOT met");
		else
			printf("  %-45s %8s  aim %-7s\n", a.what, "n/a", a.aim);
	}
}

std::string
perf_cpu_model(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	std::string model = "unknown";

	if (f == nullptr)
		return model;
	while (fgets(line, sizeof(line), f) != nullptr) {
		if (strncmp(line, "model name", 10) == 0) {
			char *p = strchr(line, ':');

			if (p != nullptr) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = '\0';
				model = p;
			}
			break;
		}
	}
	fclose(f);
	return model;
}

/* 1-minute load average: a busy machine makes the 2-lcore figures meaningless. */
double
perf_loadavg(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double l = -1;

	if (f == nullptr)
		return l;
	if (fscanf(f, "%lf", &l) != 1)
		l = -1;
	fclose(f);
	return l;
}

void
json_writer_series(json_writer &js, const char *key, const std::vector<double> &v)
{
	js.key(key);
	js.arr();
	for (double d : v)
		js.num(d);
	js.end_arr();
}

int
perf_write_json(const struct perf_opts *o, std::vector<perf_state> &st, bool scaling,
	double elapsed_s)
{
	FILE *f = fopen(o->json.c_str(), "w");

	if (f == nullptr) {
		PERF_LOG(ERR, "cannot write %s: %s", o->json.c_str(), strerror(errno));
		return -errno;
	}
	json_writer js(f);
	perf_state *ours = perf_find(st, "qpnpool");

	js.obj();
	js.kv("tool", "qpn-perf");
	js.kv("version", MLX5_QPN_VERSION);
	js.kv("unit", "ns and TSC cycles per QPN allocated and freed; throughput in Mops/s");

	js.key("machine");
	js.obj();
	js.kv("cpu_model", perf_cpu_model().c_str());
	js.kv("online_cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	js.kv("tsc_hz", rte_get_tsc_hz());
	js.kv("dpdk_version", rte_version());
	js.kv("compiler", __VERSION__);
	js.kv("eal_lcores", (uint64_t)rte_lcore_count());
	js.kv("loadavg_1min_at_start", perf_load_at_start);
	js.kv("loadavg_1min_at_end", perf_loadavg());
	js.end_obj();

	js.key("params");
	js.obj();
	js.kv("iterations", o->iterations);
	js.kv("repeat", (uint64_t)o->repeat);
	js.kv("cache", (uint64_t)o->cache);
	js.kv("range", (uint64_t)o->range);
	js.kv("first_qpn", (uint64_t)perf_first_qpn);
	js.kv("quarantine_us", o->quarantine_us);
	js.kv("burst", (uint64_t)o->burst);
	js.kv_bool("lcores", scaling);
	js.kv("block_log", (uint64_t)o->block_log);
	js.kv("budget_ms", o->budget_ms);
	js.kv_bool("quick", o->quick);
	js.kv("only", o->only.empty() ? "all" : o->only.c_str());
	js.end_obj();

	js.key("peers");
	js.obj();
	for (auto &s : st) {
		js.key(s.peer->name);
		js.obj();
		js.kv("description", s.peer->desc);
		js.kv_bool("ok", s.ok);
		if (!s.error.empty())
			js.kv("error", s.error.c_str());
		js.kv_bool("self_check", s.self_check);
		js.kv_bool("refuses_double_free", s.refuses_double_free);
		if (s.ok && s.peer->stats_json != nullptr) {
			js.key("stats");
			js.obj();
			s.peer->stats_json(s.ctx, &js);
			js.end_obj();
		}
		js.end_obj();
	}
	js.end_obj();

	js.key("results");
	js.obj();
	for (int ph = 0; ph < PH_NB; ph++) {
		if (ph == PH_BURST && o->burst == 0)
			continue;
		double ref = ours ? perf_median(ours->ph[ph].ns) : 0;

		js.key(perf_phase_name[ph]);
		js.obj();
		for (auto &s : st) {
			if (!s.ok)
				continue;
			const perf_series &r = s.ph[ph];
			double med = perf_median(r.ns);

			js.key(s.peer->name);
			js.obj();
			js.kv("ns_per_op_median", med);
			js.kv("cycles_per_op_median", perf_median(r.cycles));
			js.kv("ratio_to_ours", perf_ratio(med, ref));
			js.kv("ops_per_run", r.n);
			js.kv("failures", r.failures);
			json_writer_series(js, "ns_per_op", r.ns);
			json_writer_series(js, "cycles_per_op", r.cycles);
			js.end_obj();
		}
		js.end_obj();
	}
	if (scaling) {
		double ref = ours ? perf_median(ours->scaling.mops) : 0;

		js.key("scaling");
		js.obj();
		for (auto &s : st) {
			if (!s.ok || !(s.peer->flags & PERF_F_SCALING))
				continue;
			double m1 = perf_ratio(1e3, perf_median(s.ph[PH_PAIR].ns));
			double m2 = perf_median(s.scaling.mops);

			js.key(s.peer->name);
			js.obj();
			js.kv("mops_1lcore_median", m1);
			js.kv("mops_2lcore_median", m2);
			js.kv("speedup_2_over_1", perf_ratio(m2, m1));
			js.kv("ours_over_peer_2lcore", perf_ratio(ref, m2));
			js.kv("ops_per_lcore_per_run", s.scaling.n);
			js.kv("failures", s.scaling.failures);
			json_writer_series(js, "mops_2lcore", s.scaling.mops);
			json_writer_series(js, "ns_per_op_lcore0", s.scaling.lcore_ns[0]);
			json_writer_series(js, "ns_per_op_lcore1", s.scaling.lcore_ns[1]);
			js.end_obj();
		}
		js.end_obj();
	}
	js.end_obj();

	js.key("memory");
	js.obj();
	for (auto &s : st) {
		if (!s.ok || !s.mem.valid)
			continue;
		js.key(s.peer->name);
		js.obj();
		js.kv("bytes_per_qpn", s.mem.bytes_per_qpn);
		js.kv("fixed_bytes", s.mem.fixed_bytes);
		js.kv("total_bytes", s.mem.total_bytes);
		js.kv("method", s.mem.method);
		js.end_obj();
	}
	js.end_obj();

	js.key("ratios");
	js.obj();
	for (const auto &a : perf_aims(st, scaling)) {
		js.key(a.key);
		js.obj();
		js.kv("what", a.what);
		js.kv("value", a.value);
		js.kv("aim", a.aim);
		if (a.value > 0)
			js.kv_bool("meets_aim", perf_meets(a));
		else
			js.kv("meets_aim", (const char *)nullptr);
		js.end_obj();
	}
	js.end_obj();
	js.kv("elapsed_s", elapsed_s);
	js.end_obj();

	bool ok = js.ok();

	if (fclose(f) != 0 || !ok) {
		PERF_LOG(ERR, "error writing %s", o->json.c_str());
		return -EIO;
	}
	return 0;
}

/* ---------------------------------------------------------------- runner */

bool
perf_selected(const std::string &only, const char *name)
{
	size_t pos = 0;

	if (only.empty())
		return true;
	while (pos <= only.size()) {
		size_t end = only.find(',', pos);

		if (end == std::string::npos)
			end = only.size();
		if (only.compare(pos, end - pos, name) == 0 && strlen(name) == end - pos)
			return true;
		pos = end + 1;
	}
	return false;
}

/* Every name of --only must be a peer. */
bool
perf_check_only(const std::string &only)
{
	size_t pos = 0;

	while (!only.empty() && pos <= only.size()) {
		size_t end = only.find(',', pos);
		bool known = false;

		if (end == std::string::npos)
			end = only.size();
		std::string name = only.substr(pos, end - pos);

		for (const auto *p : perf_all_peers)
			known = known || name == p->name;
		if (!known) {
			perf_bad("--only", only.c_str(),
				 ("unknown peer '" + name + "'; see --help for the list").c_str());
			return false;
		}
		pos = end + 1;
	}
	return true;
}

double
perf_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
perf_main(const struct perf_opts *o)
{
	std::vector<perf_state> st;
	unsigned int worker = rte_get_next_lcore(-1, 1, 0);
	bool scaling = o->lcores;
	double t_start = perf_now_s();
	int rc = 0;

	if (scaling && worker >= RTE_MAX_LCORE) {
		PERF_LOG(WARNING, "one EAL lcore only: no 2-lcore scaling (run with -l 0-1)");
		scaling = false;
	}
	if (rte_lcore_id() != rte_get_main_lcore()) {
		PERF_LOG(ERR, "must run on the main lcore");
		return -EINVAL;
	}
	perf_load_at_start = perf_loadavg();
	if (perf_load_at_start > 0.5 * sysconf(_SC_NPROCESSORS_ONLN))
		PERF_LOG(WARNING, "load average %.2f on %ld CPUs: other work will skew the figures, "
			"above all the 2-lcore ones", perf_load_at_start,
			sysconf(_SC_NPROCESSORS_ONLN));
	printf("qpn-perf: range %u QPNs, cache %u, quarantine %" PRIu64 " us, burst %u, "
	       "%u repetitions, TSC %" PRIu64 " Hz, %s\n",
	       o->range, o->cache, o->quarantine_us, o->burst, o->repeat, rte_get_tsc_hz(),
	       rte_version());

	/* Set up and check every selected peer. */
	for (const auto *p : perf_all_peers) {
		if (!perf_selected(o->only, p->name))
			continue;
		st.emplace_back();
		perf_state &s = st.back();
		struct perf_cfg cfg = perf_make_cfg(o, o->range);
		uint64_t before = perf_heap_allocated();
		int ret;

		s.peer = p;
		ret = p->setup(&cfg, &s.ctx);
		if (ret != 0) {
			s.error = std::string("setup failed: ") + strerror(-ret);
			PERF_LOG(ERR, "%s: %s", p->name, s.error.c_str());
			s.ctx = nullptr;
			rc = -EIO;
			continue;
		}
		uint64_t after = perf_heap_allocated();
		uint64_t delta = after > before ? after - before : 0;

		s.self_check = perf_self_check(o, &s);
		if (!s.self_check) {
			PERF_LOG(ERR, "%s: %s", p->name, s.error.c_str());
			rc = -EIO;
			continue;
		}
		s.ok = true;
		if (s.peer->flags & PERF_F_HEAP_MEM)
			perf_measure_memory(o, &s, delta);
		printf("  setup %-10s ok%s\n", p->name,
			s.refuses_double_free ? " (refuses double free)" : "");
	}

	/* Calibrate the length of each timed run from a short run (which also warms up). */
	printf("calibrating...\n");
	for (auto &s : st) {
		if (!s.ok)
			continue;
		for (int ph = 0; ph < PH_NB; ph++) {
			if (ph == PH_BURST && o->burst == 0)
				continue;
			uint64_t n = std::min<uint64_t>(o->iterations, 20000);
			perf_timed t = perf_time_once(&s, (perf_phase)ph, n, o->burst);

			s.ph[ph].n = perf_calibrate_n(o, perf_cycles_to_ns((double)t.cycles / n));
		}
		if (scaling && (s.peer->flags & PERF_F_SCALING)) {
			double lns[2];
			uint64_t fails, n = std::min<uint64_t>(o->iterations, 20000);
			double mops = perf_run_two(&s, worker, n, lns, &fails);

			/* Each lcore runs n ops: budget on the per-lcore time. */
			s.scaling.n = perf_calibrate_n(o, mops > 0 ? 2e3 / mops : 1e3);
		}
	}

	for (unsigned int rep = 0; rep < o->repeat; rep++) {
		for (int ph = 0; ph < PH_NB; ph++) {
			if (ph == PH_BURST && o->burst == 0)
				continue;
			for (auto &s : st) {
				if (!s.ok)
					continue;
				perf_series &r = s.ph[ph];
				perf_loop_res warm = {};

				/* Warm-up: caches filled, quarantine in steady state. */
				perf_run_once(&s, (perf_phase)ph, std::max<uint64_t>(r.n / 8, 1000),
					o->burst, &warm);
				perf_timed t = perf_time_once(&s, (perf_phase)ph, r.n, o->burst);
				uint64_t ops = std::max<uint64_t>(t.res.ops, 1);

				r.cycles.push_back((double)t.cycles / ops);
				r.ns.push_back(perf_cycles_to_ns((double)t.cycles / ops));
				r.ops.push_back(t.res.ops);
				r.failures += t.res.failures;
				printf("  [%u/%u] %-5s %-10s %9.2f ns/op %8.1f cycles/op%s\n", rep + 1,
					o->repeat, perf_phase_name[ph], s.peer->name, r.ns.back(),
					r.cycles.back(), t.res.failures ? "  (failures)" : "");
			}
		}
		if (!scaling)
			continue;
		for (auto &s : st) {
			if (!s.ok || !(s.peer->flags & PERF_F_SCALING))
				continue;
			double lns[2];
			uint64_t fails = 0;
			double mops = perf_run_two(&s, worker, s.scaling.n, lns, &fails);

			if (mops < 0) {
				PERF_LOG(ERR, "cannot launch lcore %u", worker);
				scaling = false;
				break;
			}
			s.scaling.mops.push_back(mops);
			s.scaling.lcore_ns[0].push_back(lns[0]);
			s.scaling.lcore_ns[1].push_back(lns[1]);
			s.scaling.failures += fails;
			printf("  [%u/%u] 2lc   %-10s %9.2f Mops/s%s\n", rep + 1, o->repeat,
				s.peer->name, mops, fails ? "  (failures)" : "");
		}
	}
	fflush(stdout);

	for (auto &s : st)
		if (s.ok && !(s.peer->flags & PERF_F_HEAP_MEM))
			perf_measure_memory(o, &s, 0);
	perf_print_tables(o, st, scaling);
	for (auto &s : st) {
		if (s.ok && (s.ph[PH_PAIR].failures || s.ph[PH_BURST].failures ||
			     s.scaling.failures))
			PERF_LOG(WARNING, "%s: some allocations failed (see failures); for "
				"qpnpool-q the range may be too small for the quarantine",
				s.peer->name);
	}

	/* Figures of the peers' own counters are read before teardown. */
	if (!o->json.empty()) {
		int ret = perf_write_json(o, st, scaling, perf_now_s() - t_start);

		if (ret != 0)
			rc = ret;
		else
			printf("\nJSON written to %s\n", o->json.c_str());
	}
	for (auto &s : st) {
		if (s.ctx == nullptr)
			continue;
		if (s.peer->lcore_fini != nullptr)
			perf_on_all_lcores(s.peer->lcore_fini, s.ctx);
		s.peer->teardown(s.ctx);
		s.ctx = nullptr;
	}
	return rc;
}

} // namespace

int
main(int argc, char **argv)
{
	struct perf_opts opts;
	int ret, n;

	n = rte_eal_init(argc, argv);
	if (n < 0) {
		fprintf(stderr, "qpn-perf: EAL init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	/* getopt sees the program name and then our own options. */
	argv[n] = argv[0];
	ret = perf_parse_args(argc - n, argv + n, &opts);
	if (ret == 0 && !perf_check_only(opts.only))
		ret = -EINVAL;
	if (ret == 0)
		ret = perf_main(&opts);
	rte_eal_cleanup();
	if (ret == 1)
		return 0; /* --help */
	return ret == 0 ? 0 : (ret == -EINVAL ? 2 : 1);
}
