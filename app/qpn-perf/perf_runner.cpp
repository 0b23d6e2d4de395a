/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's runner: every peer of --only set up, checked and measured repetition after
 * repetition, interleaved, then the report.
 */
#include "perf_app.h"
#include "run_meta.h"

static bool
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

/* The quarantine's clock (CLOCK_MONOTONIC), the one the pools are judged against. */
static double
perf_now_s()
{
	return double(mlx5_qpn_clock_ns()) / 1e9;
}

std::vector<unsigned int> perf_lcores;

/* The range a peer hands out: qpnpool-q needs room for what its quarantine holds. */
static uint32_t
perf_peer_range(const struct perf_opts *o, const struct perf_peer *p)
{
	return p == &perf_peer_qpnpool_q ? std::max(o->range, o->range_q) : o->range;
}

/* Set up one peer's context and check it; false (with s.error) if it fails. `delta`: the heap
 * bytes its setup took. */
static bool
perf_setup_one(const struct perf_opts *o, perf_state &s, uint64_t *delta)
{
	struct perf_cfg cfg = perf_make_cfg(o, s.range);
	uint64_t before = perf_heap_allocated();
	int ret = s.peer->setup(&cfg, &s.ctx);

	if (ret != 0) {
		s.error = std::string("setup failed: ") + strerror(-ret);
		s.ctx = nullptr;
		return false;
	}
	uint64_t after = perf_heap_allocated();

	*delta = after > before ? after - before : 0;
	s.self_check = perf_self_check(o, &s);
	return s.self_check;
}

static void
perf_teardown_one(perf_state &s)
{
	if (s.ctx == nullptr)
		return;
	if (s.peer->lcore_fini != nullptr)
		perf_on_all_lcores(s.peer->lcore_fini, s.ctx);
	s.peer->teardown(s.ctx);
	s.ctx = nullptr;
}

/* Set up and check every selected peer; a peer that fails is reported and left out. */
static int
perf_setup_all(const struct perf_opts *o, std::vector<perf_state> &st, bool quiet)
{
	int rc = 0;

	for (const auto *p : perf_all_peers) {
		if (!perf_selected(o->only, p->name))
			continue;
		st.emplace_back();
		perf_state &s = st.back();
		uint64_t delta = 0;

		s.range = perf_peer_range(o, p);
		s.peer = p;
		s.lat_alloc.min = s.lat_free.min = UINT64_MAX;
		if (!perf_setup_one(o, s, &delta)) {
			PERF_LOG(ERR, "%s: %s", p->name, s.error.c_str());
			rc = -EIO;
			continue;
		}
		s.ok = true;
		if (!quiet && (s.peer->flags & PERF_F_HEAP_MEM))
			perf_measure_memory(o, &s, delta);
		if (!quiet)
			printf("  setup %-10s ok%s\n", p->name,
			       s.refuses_double_free ? " (refuses double free)" : "");
	}
	return rc;
}

static void
perf_teardown_all(std::vector<perf_state> &st)
{
	for (auto &s : st)
		perf_teardown_one(s);
}

/*
 * A repetition starts from contexts set up afresh, so that its figures are a sample of their
 * own and not the tail of the repetitions before it: a pool keeps the order its past left its
 * free QPNs in, and with one context for the whole run the quarantine's pair drifted upwards
 * over the repetitions (benchmark.md, "Independent repetitions"), which a median cannot undo.
 * What that history costs is still measured, by PH_AGED at the end of each repetition.
 */
static void
perf_renew(const struct perf_opts *o, perf_state &s)
{
	uint64_t delta = 0;

	perf_teardown_one(s);
	if (!perf_setup_one(o, s, &delta)) {
		PERF_LOG(ERR, "%s: a new context for the repetition: %s", s.peer->name,
			 s.error.c_str());
		s.ok = false;
	}
}

/* One timed run of a single-lcore workload, after its warm-up (caches filled, quarantine in
 * steady state; storms warm nothing: their idle sleep is the point). */
static void
perf_rep_phase(const struct perf_opts *o, perf_state &s, perf_phase ph, unsigned int rep)
{
	perf_series &r = s.ph[ph];
	perf_loop_res warm = {};

	if (ph != PH_STORM)
		perf_run_once(o, &s, ph, std::max<uint64_t>(r.n / 8, 1000), &warm);
	perf_timed t = perf_time_once(o, &s, ph, r.n);
	uint64_t ops = std::max<uint64_t>(t.res.ops, 1);

	r.cycles.push_back((double)t.cycles / ops);
	r.ns.push_back(perf_cycles_to_ns((double)t.cycles / ops));
	r.ops.push_back(t.res.ops);
	r.failures += t.res.failures;
	printf("  [%u/%u] %-9s %-10s %9.2f ns/op %8.1f cycles/op%s\n", rep + 1, o->repeat,
	       perf_phase_name[ph], s.peer->name, r.ns.back(), r.cycles.back(),
	       t.res.failures ? "  (failures)" : "");
}

/* Ops per runner so that the slowest runner of a trial takes about the budget. */
static uint64_t
perf_calibrate_multi(const struct perf_opts *o, perf_state &s, perf_multi_mode mode,
		     const std::vector<unsigned int> &lc, uint64_t trial)
{
	perf_point pt;
	double worst = 0;

	if (perf_run_multi(&s, mode, lc, trial, &pt) >= 0)
		for (const auto &v : pt.slot_ns)
			worst = std::max(worst, v.empty() ? 0 : v[0]);
	return perf_calibrate_n(o, worst > 0 ? worst : 1e3);
}

/* Ops per run of each workload, from a short run (which also warms up). */
static void
perf_calibrate(const struct perf_opts *o, perf_state &s, bool scaling)
{
	uint64_t trial = std::min<uint64_t>(o->iterations, 20000);

	for (int ph = 0; ph < PH_NB; ph++) {
		if (ph == PH_BURST && o->burst == 0)
			continue;
		if (ph == PH_AGED) {
			s.ph[ph].n = s.ph[PH_PAIR].n;
			continue;
		}
		if (ph == PH_STORM) {
			/* Storms are bounded by their idle time, not by their cost. */
			uint64_t rounds =
				std::max<uint64_t>(4, o->budget_ms * 1000 / (2 * o->idle_us));

			s.ph[ph].n = rounds * o->storm;
			continue;
		}
		perf_timed t = perf_time_once(o, &s, (perf_phase)ph, trial);

		s.ph[ph].n = perf_calibrate_n(o, perf_cycles_to_ns((double)t.cycles / trial));
	}
	if (!scaling)
		return;
	/* Every runner runs n ops: budget on the slowest runner of a trial on all lcores. */
	s.multi_n = perf_calibrate_multi(o, s, PM_LCORES, perf_lcores, trial);
	s.cross_n = s.peer->flags & PERF_F_LOCAL ?
			    0 :
			    perf_calibrate_multi(o, s, PM_CROSS, {perf_lcores[0], perf_lcores[1]},
						 trial);
	s.thr_n = s.peer->flags & PERF_F_EAL_ONLY ?
			  0 :
			  perf_calibrate_multi(o, s, PM_THREADS,
					       std::vector<unsigned int>(perf_lcores.size(), 0),
					       trial);
}

/* One repetition of every multi-runner run of one peer. */
static bool
perf_rep_multi(const struct perf_opts *o, perf_state &s, unsigned int rep)
{
	unsigned int nb = (unsigned int)perf_lcores.size();

	s.scaling.resize(nb);
	s.solo.resize(nb);
	/* Each lcore alone (the VM's vCPUs differ), the first of them also the 1-lcore point. */
	for (unsigned int i = 0; i < nb; i++)
		if (perf_run_multi(&s, PM_LCORES, {perf_lcores[i]}, s.multi_n, &s.solo[i]) < 0)
			return false;
	s.scaling[0] = s.solo[0];
	for (unsigned int k = 2; k <= nb; k++) {
		std::vector<unsigned int> lc(perf_lcores.begin(), perf_lcores.begin() + k);

		if (perf_run_multi(&s, PM_LCORES, lc, s.multi_n, &s.scaling[k - 1]) < 0)
			return false;
	}
	if (!(s.peer->flags & PERF_F_LOCAL))
		perf_run_multi(&s, PM_CROSS, {perf_lcores[0], perf_lcores[1]}, s.cross_n, &s.cross);
	if (!(s.peer->flags & PERF_F_EAL_ONLY)) {
		s.threads.resize(2);
		perf_run_multi(&s, PM_THREADS, {0}, s.thr_n, &s.threads[0]);
		perf_run_multi(&s, PM_THREADS, std::vector<unsigned int>(nb, 0), s.thr_n,
			       &s.threads[1]);
	}
	printf("  [%u/%u] multi %-10s", rep + 1, o->repeat, s.peer->name);
	auto last = [](const perf_point &p) { return p.mops.empty() ? 0.0 : p.mops.back(); };

	for (unsigned int k = 1; k <= nb; k++)
		printf(" %u:%.1f", k, last(s.scaling[k - 1]));
	if (!s.cross.mops.empty())
		printf(" cross:%.1f", last(s.cross));
	if (!s.threads.empty())
		printf(" thr1:%.1f thr%u:%.1f", last(s.threads[0]), nb, last(s.threads[1]));
	printf(" Mops/s\n");
	return true;
}

/* The run's parameters in one line, and what will skew its figures. */
static void
perf_announce(const struct perf_opts *o, bool scaling)
{
	if (o->lcores && !scaling)
		PERF_LOG(WARNING, "one EAL lcore only: no scaling (run with -l 0-1 or more)");
	perf_load_at_start = perf_loadavg();
	if (perf_load_at_start > 0.5 * sysconf(_SC_NPROCESSORS_ONLN))
		PERF_LOG(WARNING,
			 "load average %.2f on %ld CPUs: other work will skew the figures, "
			 "above all the multi-lcore ones",
			 perf_load_at_start, sysconf(_SC_NPROCESSORS_ONLN));
	char cpu[256];

	run_meta_cpu(cpu, sizeof(cpu));
	printf("qpn-perf: range %u QPNs (qpnpool-q %u), cache %u, quarantine %" PRIu64
	       " us, burst %u, hold %u, storm %u after %u us, %u repetitions, %zu lcore%s, "
	       "TSC %" PRIu64 " Hz, %s\nqpn-perf: CPU %s\n",
	       o->range, std::max(o->range, o->range_q), o->cache, o->quarantine_us, o->burst,
	       o->hold, o->storm, o->idle_us, o->repeat, perf_lcores.size(),
	       perf_lcores.size() == 1 ? "" : "s", rte_get_tsc_hz(), rte_version(), cpu);
}

/* One repetition: every workload of every peer, latency, scaling (*scaling goes false if the
 * lcores cannot be launched), the aged pair and the hand-out order. */
static void
perf_repetition(const struct perf_opts *o, std::vector<perf_state> &st, unsigned int rep,
		bool *scaling)
{
	for (auto &s : st)
		if (s.ok)
			perf_renew(o, s);
	for (int ph = 0; ph < PH_NB; ph++) {
		if ((ph == PH_BURST && o->burst == 0) || ph == PH_AGED)
			continue;
		for (auto &s : st)
			if (s.ok)
				perf_rep_phase(o, s, (perf_phase)ph, rep);
	}
	/* Latency: every operation timed alone; the histograms add up over repetitions. */
	for (auto &s : st) {
		perf_loop_res res = {};

		if (s.ok)
			s.peer->run_lat(s.ctx, std::min<uint64_t>(s.ph[PH_PAIR].n, 1000000),
					&s.lat_alloc, &s.lat_free, &res);
	}
	for (auto &s : st) {
		if (!*scaling || !s.ok || !(s.peer->flags & PERF_F_SCALING))
			continue;
		if (!perf_rep_multi(o, s, rep)) {
			PERF_LOG(ERR, "cannot launch the lcores: no scaling figures");
			*scaling = false;
			break;
		}
	}
	for (auto &s : st)
		if (s.ok)
			perf_rep_phase(o, s, PH_AGED, rep);
	for (auto &s : st)
		if (s.ok)
			perf_order(&s);
}

/* After the tables: instruction counts, memory, and a warning per peer that failed some. */
static void
perf_after_runs(const struct perf_opts *o, std::vector<perf_state> &st)
{
	if (o->count_instructions) {
		perf_count_hw(o, st);
		if (perf_count_instructions(o, st) != 0)
			PERF_LOG(WARNING, "instructions not counted: %s", perf_instr_error.c_str());
	}
	for (auto &s : st)
		if (s.ok && !(s.peer->flags & PERF_F_HEAP_MEM))
			perf_measure_memory(o, &s, 0);
	perf_print_tables(o, st);
	for (auto &s : st) {
		bool failed = false;

		for (const auto &r : s.ph)
			failed = failed || r.failures != 0;
		for (const auto &p : s.scaling)
			failed = failed || p.failures != 0;
		if (s.ok && failed)
			PERF_LOG(WARNING,
				 "%s: some allocations failed (see failures); for "
				 "qpnpool-q the range may be too small for the quarantine",
				 s.peer->name);
	}
}

int
perf_main(const struct perf_opts *o)
{
	std::vector<perf_state> st;
	unsigned int lcore;
	double t_start = perf_now_s();
	int rc;

	perf_lcores.assign(1, rte_get_main_lcore());
	RTE_LCORE_FOREACH_WORKER(lcore)
	perf_lcores.push_back(lcore);
	bool scaling = o->lcores && perf_lcores.size() >= 2;

	if (rte_lcore_id() != rte_get_main_lcore()) {
		PERF_LOG(ERR, "must run on the main lcore");
		return -EINVAL;
	}
	if (!o->count_child.empty()) {
		/* Under callgrind, for the parent: instructions only, nothing printed. */
		rc = perf_setup_all(o, st, true);
		int ret = perf_count_child(o, st);

		perf_teardown_all(st);
		return ret != 0 ? ret : rc;
	}
	perf_announce(o, scaling);
	/* Twenty budgets, at least 250 ms: a bound for stalls, not a target. */
	perf_multi_limit_ms = std::max<uint64_t>(250, 20 * o->budget_ms);
	rc = perf_setup_all(o, st, false);
	printf("calibrating...\n");
	for (auto &s : st)
		if (s.ok)
			perf_calibrate(o, s, scaling);
	for (unsigned int rep = 0; rep < o->repeat; rep++)
		perf_repetition(o, st, rep, &scaling);
	fflush(stdout);
	perf_after_runs(o, st);

	/* Figures of the peers' own counters are read before teardown. */
	if (!o->json.empty()) {
		int ret = perf_write_json(o, st, perf_now_s() - t_start);

		if (ret != 0)
			rc = ret;
		else
			printf("\nJSON written to %s\n", o->json.c_str());
	}
	perf_teardown_all(st);
	return rc;
}
