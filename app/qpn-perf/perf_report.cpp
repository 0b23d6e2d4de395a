/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's report: statistics over the repetitions, the aims, the printed tables and the
 * JSON file.
 */
#include "fmt_ns.h"
#include "perf_app.h"

static void
perf_print_hist_line(const char *peer, const char *op, const perf_hist &h)
{
	if (h.n == 0)
		return;
	printf("  %-10s %-5s %8s %8s %8s %8s %9s %10s\n", peer, op,
	       fmt_ns(perf_cycles_to_ns((double)h.min)).c_str(),
	       fmt_ns(perf_cycles_to_ns(perf_hist_pct(h, 50))).c_str(),
	       fmt_ns(perf_cycles_to_ns(perf_hist_pct(h, 90))).c_str(),
	       fmt_ns(perf_cycles_to_ns(perf_hist_pct(h, 99))).c_str(),
	       fmt_ns(perf_cycles_to_ns(perf_hist_pct(h, 99.9))).c_str(),
	       fmt_ns(perf_cycles_to_ns((double)h.max)).c_str());
}

static void
perf_print_scaling(const struct perf_opts *o, std::vector<perf_state> &st)
{
	perf_state *ours = perf_find(st, "qpnpool");
	unsigned int nb = (unsigned int)perf_lcores.size();

	printf("\nscaling: alloc+free pairs on k lcores at once, Mops/s (median of %u); "
	       "ours/peer on the same lcores\n  %-10s",
	       o->repeat, "peer");
	for (unsigned int k = 1; k <= nb; k++)
		printf(" %8s%-2u", "k=", k);
	printf(" %12s\n", "ours/peer@N");
	for (auto &s : st) {
		if (!s.ok || s.scaling.size() < nb)
			continue;
		printf("  %-10s", s.peer->name);
		for (unsigned int k = 1; k <= nb; k++)
			printf(" %10.2f", perf_point_mops(s, k));
		printf(" %11.2fx\n", ours != nullptr ? perf_ratio(perf_point_mops(*ours, nb),
								  perf_point_mops(s, nb)) :
						       0.0);
	}
	printf("\nsolo: each lcore alone in the same launch, ns per pair (median)\n  %-10s",
	       "peer");
	for (unsigned int i = 0; i < nb; i++)
		printf("   lcore %-3u", perf_lcores[i]);
	printf("\n");
	for (auto &s : st) {
		if (!s.ok || s.solo.size() < nb)
			continue;
		printf("  %-10s", s.peer->name);
		for (unsigned int i = 0; i < nb; i++)
			printf(" %11.2f",
			       s.solo[i].slot_ns.empty() ? 0 : perf_median(s.solo[i].slot_ns[0]));
		printf("\n");
	}
	printf("\ncross-lcore (alloc on lcore %u, free on lcore %u) and non-EAL threads, Mops/s\n",
	       perf_lcores[0], perf_lcores[1]);
	printf("  %-10s %10s %10s %10s\n", "peer", "cross", "1 thread",
	       (std::to_string(nb) + " threads").c_str());
	for (auto &s : st) {
		if (!s.ok || s.scaling.empty())
			continue;
		auto cell = [](const perf_point *p) {
			char b[32] = "n/a";

			if (p != nullptr && !p->mops.empty())
				snprintf(b, sizeof(b), "%.2f", perf_median(p->mops));
			return std::string(b);
		};

		printf("  %-10s %10.10s %10.10s %10.10s\n", s.peer->name, cell(&s.cross).c_str(),
		       cell(s.threads.empty() ? nullptr : &s.threads[0]).c_str(),
		       cell(s.threads.size() < 2 ? nullptr : &s.threads[1]).c_str());
	}
}

/* One table per workload: each peer against ours. */
static void
perf_print_phases(const struct perf_opts *o, std::vector<perf_state> &st)
{
	perf_state *ours = perf_find(st, "qpnpool");

	for (int ph = 0; ph < PH_NB; ph++) {
		if (ph == PH_BURST && o->burst == 0)
			continue;
		double ref = ours != nullptr ? perf_median(ours->ph[ph].ns) : 0;

		printf("\n%s: %s, median of %u (ns and TSC cycles per QPN allocated and freed)\n",
		       perf_phase_name[ph], perf_phase_desc[ph], o->repeat);
		printf("  %-10s %10s %10s %10s %10s %9s %9s %8s\n", "peer", "ns/op", "cycles/op",
		       "min ns", "max ns", "vs ours", "failures", "instr");
		for (auto &s : st) {
			if (!s.ok)
				continue;
			const perf_series &r = s.ph[ph];
			double med = perf_median(r.ns);

			/* Instructions are counted under callgrind (--count=instructions) only. */
			char instr[16] = "-";
			if (s.instr[ph] > 0)
				snprintf(instr, sizeof(instr), "%.1f", s.instr[ph]);
			printf("  %-10s %10.2f %10.1f %10.2f %10.2f %8.2fx %9" PRIu64 " %8s\n",
			       s.peer->name, med, perf_median(r.cycles), perf_min(r.ns),
			       perf_max(r.ns), ref > 0 ? med / ref : 0.0, r.failures, instr);
		}
	}
}

/* Latency percentiles of each operation alone, per peer. */
static void
perf_print_latency(std::vector<perf_state> &st)
{
	printf("\nlatency of each operation alone (TSC read included)\n");
	printf("  %-10s %-5s %8s %8s %8s %8s %9s %10s\n", "peer", "op", "min", "p50", "p90", "p99",
	       "p99.9", "max");
	for (auto &s : st) {
		if (!s.ok)
			continue;
		perf_print_hist_line(s.peer->name, "alloc", s.lat_alloc);
		perf_print_hist_line(s.peer->name, "free", s.lat_free);
	}
}

/* Memory per peer. */
static void
perf_print_memory(const struct perf_opts *o, std::vector<perf_state> &st)
{
	printf("\nmemory for a range of %u QPNs (qpnpool-q: %u)\n", o->range,
	       std::max(o->range, o->range_q));
	printf("  %-10s %12s %14s %14s  %s\n", "peer", "bytes/QPN", "fixed bytes", "total bytes",
	       "method");
	for (auto &s : st) {
		if (!s.ok || !s.mem.valid)
			continue;
		printf("  %-10s %12.2f %14.0f %14" PRIu64 "  %s\n", s.peer->name,
		       s.mem.bytes_per_qpn, s.mem.fixed_bytes, s.mem.total_bytes, s.mem.method);
	}
}

/* The repetitions the machine disturbed, and the hand-out order. */
static void
perf_print_disturbance(std::vector<perf_state> &st)
{
	const perf_disturbance dist = perf_disturbed(st);
	if (dist.measured) {
		printf("\ndisturbance: repetitions in which the floor's pair took more than %.2fx "
		       "its best (%.1f cycles): ",
		       kPerfDisturbed, dist.best_cycles);
		if (dist.reps.empty())
			printf("none\n");
		for (size_t i = 0; i < dist.reps.size(); i++)
			printf("%u%s", dist.reps[i] + 1, i + 1 < dist.reps.size() ? ", " : "\n");
		if (!dist.reps.empty() && dist.pair_vs_mempool_undisturbed > 0)
			printf("  ours / rte_mempool per pair over the other repetitions (median of "
			       "their ratios): %.3f; the aims below take every repetition\n",
			       dist.pair_vs_mempool_undisturbed);
	}
	printf("\norder of %u QPNs taken at the end of each repetition (neighbours one apart, "
	       "changes of 512-QPN block; %u in address order), median\n",
	       kPerfOrderQpns, kPerfOrderQpns / 512);
	for (auto &s : st)
		if (s.ok && !s.order_pages.empty())
			printf("  %-10s %6.1f %% adjacent %8.0f block changes (%.0f-%.0f)\n",
			       s.peer->name, perf_median(s.order_adjacent_pct),
			       perf_median(s.order_pages), perf_min(s.order_pages),
			       perf_max(s.order_pages));
}

/* The quarantine after the other workloads, and the aims met or not. */
static void
perf_print_aims(const struct perf_opts *o, std::vector<perf_state> &st)
{
	const perf_history aged = perf_aged(st);
	if (aged.ratio > 0)
		printf("\nhistory: ours with / without quarantine per pair at the end of each "
		       "repetition, after its other workloads (pair_aged): %.3f (%.1f / %.1f "
		       "cycles); the aim below takes the pair of fresh contexts\n",
		       aged.ratio, aged.with_cycles, aged.without_cycles);
	printf("\naims (benchmark guide; measured in this run)\n");
	const std::string why = perf_unreliable(o->repeat, perf_load_at_start,
						(unsigned int)sysconf(_SC_NPROCESSORS_ONLN));
	if (!why.empty())
		printf("  not figures to quote: %s\n", why.c_str());
	for (const auto &a : perf_aims(st)) {
		if (a.value > 0)
			printf("  %-48s %8.3f  aim %-6s %-7s  %s\n", a.what.c_str(), a.value,
			       a.aim.c_str(), perf_meets(a) ? "met" : "NOT met", a.figures.c_str());
		else
			printf("  %-48s %8s  aim %-6s %-7s  %s\n", a.what.c_str(), "n/a",
			       a.aim.c_str(), "", a.figures.c_str());
	}
}

void
perf_print_tables(const struct perf_opts *o, std::vector<perf_state> &st)
{
	perf_state *ours = perf_find(st, "qpnpool");

	perf_print_phases(o, st);
	perf_print_latency(st);
	if (perf_lcores.size() >= 2 && ours != nullptr && !ours->scaling.empty())
		perf_print_scaling(o, st);
	perf_print_memory(o, st);
	if (o->count_instructions && !perf_hw_error.empty())
		printf("\nhardware counters: %s\n", perf_hw_error.c_str());
	perf_print_disturbance(st);
	perf_print_aims(o, st);
}
