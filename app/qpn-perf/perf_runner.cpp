/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's runner: every peer of --only set up, checked and measured repetition after
 * repetition, interleaved, then the report.
 */
#include "perf_app.h"

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

static double
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
		PERF_LOG(WARNING,
			 "load average %.2f on %ld CPUs: other work will skew the figures, "
			 "above all the 2-lcore ones",
			 perf_load_at_start, sysconf(_SC_NPROCESSORS_ONLN));
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
				printf("  [%u/%u] %-5s %-10s %9.2f ns/op %8.1f cycles/op%s\n",
				       rep + 1, o->repeat, perf_phase_name[ph], s.peer->name,
				       r.ns.back(), r.cycles.back(),
				       t.res.failures ? "  (failures)" : "");
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
		if (s.ok &&
		    (s.ph[PH_PAIR].failures || s.ph[PH_BURST].failures || s.scaling.failures))
			PERF_LOG(WARNING,
				 "%s: some allocations failed (see failures); for "
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
