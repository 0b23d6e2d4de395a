/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's statistics: medians over repetitions, percentiles of the latency histograms, and
 * the aims (the benchmark guide's "Aims"), each with the figures it comes from.
 */
#include "perf_app.h"

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

/* The smallest bucket bound with p % of the samples at or below it, never above the maximum. */
double
perf_hist_pct(const perf_hist &h, double p)
{
	uint64_t want, cum = 0;

	if (h.n == 0)
		return 0;
	want = (uint64_t)ceil(p / 100.0 * (double)h.n);
	want = std::max<uint64_t>(want, 1);
	for (unsigned int i = 0; i < PERF_HIST_BUCKETS; i++) {
		cum += h.count[i];
		if (cum >= want)
			return (double)std::min<uint64_t>(perf_hist_upper(i) - 1, h.max);
	}
	return (double)h.max;
}

double
perf_point_mops(const perf_state &s, unsigned int k)
{
	return k >= 1 && k <= s.scaling.size() ? perf_median(s.scaling[k - 1].mops) : 0;
}

static std::string perf_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static std::string
perf_fmt(const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

/*
 * Ours / a peer on one lcore: the median of the per-repetition ratios. The peers run one after
 * the other in each repetition, so a repetition's two figures share the machine's state; a
 * ratio of the two medians pairs figures of different repetitions, and on a VM that slows the
 * store-bound loops in some repetitions and not in others it swings with which loop a
 * disturbance hit (a run of a895e0c: with / without quarantine 1.425 as the ratio of medians,
 * per-repetition ratios 1.09-1.56 with median 1.24). 0 when not measured.
 */
static double
perf_paired(const perf_state *a, const perf_state *b, perf_phase ph, double *lo, double *hi)
{
	std::vector<double> r;

	if (a != nullptr && b != nullptr)
		for (size_t i = 0; i < a->ph[ph].cycles.size() && i < b->ph[ph].cycles.size(); i++)
			if (a->ph[ph].cycles[i] > 0 && b->ph[ph].cycles[i] > 0)
				r.push_back(a->ph[ph].cycles[i] / b->ph[ph].cycles[i]);
	*lo = r.empty() ? 0 : perf_min(r);
	*hi = r.empty() ? 0 : perf_max(r);
	return perf_median(r);
}

/* Through the driver API (mlx5_qpn_reserved_alloc/dealloc) / the bare pool, per pair: what an
 * application that links the driver pays on top of the pool, in cycles and in instructions. */
static void
perf_driver_aims(std::vector<perf_aim> &a, const perf_state *ours, const perf_state *dev)
{
	double lo, hi, v = perf_paired(dev, ours, PH_PAIR, &lo, &hi);
	double dc = dev != nullptr ? perf_median(dev->ph[PH_PAIR].cycles) : 0;
	double oc = ours != nullptr ? perf_median(ours->ph[PH_PAIR].cycles) : 0;
	double di = dev != nullptr ? dev->instr[PH_PAIR] : 0,
	       oi = ours != nullptr ? ours->instr[PH_PAIR] : 0;

	a.push_back({"driver_vs_pool_cycles", "driver API / bare pool, cycles per pair, 1 lcore", v,
		     "<= 1.3", true, 1.3,
		     perf_fmt("per repetition %.3f-%.3f; medians driver %.1f, pool %.1f cycles", lo,
			      hi, dc, oc)});
	a.push_back({"driver_vs_pool_instructions",
		     "driver API / bare pool, instructions per pair, 1 lcore", perf_ratio(di, oi),
		     "<= 1.3", true, 1.3,
		     di > 0 ? perf_fmt("driver %.1f, pool %.1f instructions", di, oi) :
			      "not measured (run with --count=instructions)"});
}

/* The benchmark guide's aims, from this run's figures only; NaN where a figure was not measured. */
std::vector<perf_aim>
perf_aims(std::vector<perf_state> &st)
{
	std::vector<perf_aim> a;
	perf_state *ours = perf_find(st, "qpnpool");
	perf_state *q = perf_find(st, "qpnpool-q");
	perf_state *mp = perf_find(st, "mempool");
	perf_state *fl = perf_find(st, "floor");
	perf_state *rc = perf_find(st, "rdmacore");
	double oc = ours != nullptr ? perf_median(ours->ph[PH_PAIR].cycles) : 0;
	double mc = mp != nullptr ? perf_median(mp->ph[PH_PAIR].cycles) : 0;
	double oi = ours != nullptr ? ours->instr[PH_PAIR] : 0,
	       mi = mp != nullptr ? mp->instr[PH_PAIR] : 0;
	double qc = q != nullptr ? perf_median(q->ph[PH_PAIR].cycles) : 0;
	double fc = fl != nullptr ? perf_median(fl->ph[PH_PAIR].cycles) : 0;

	double lo, hi, v;

	v = perf_paired(ours, mp, PH_PAIR, &lo, &hi);
	a.push_back({"pair_cycles_vs_mempool", "ours / rte_mempool, cycles per pair, 1 lcore", v,
		     "<= 0.5", true, 0.5,
		     perf_fmt("per repetition %.3f-%.3f; medians ours %.1f, rte_mempool %.1f "
			      "cycles",
			      lo, hi, oc, mc)});
	a.push_back({"pair_instructions_vs_mempool",
		     "ours / rte_mempool, instructions per pair, 1 lcore", perf_ratio(oi, mi),
		     "<= 1.5", true, 1.5,
		     oi > 0 ? perf_fmt("ours %.1f, rte_mempool %.1f instructions", oi, mi) :
			      "not measured (run with --count=instructions)"});
	v = perf_paired(q, ours, PH_PAIR, &lo, &hi);
	a.push_back({"quarantine_vs_none", "ours with / without quarantine, cycles per pair", v,
		     "<= 1.3", true, 1.3,
		     perf_fmt("per repetition %.3f-%.3f; medians with %.1f, without %.1f cycles",
			      lo, hi, qc, oc)});
	v = perf_paired(ours, fl, PH_PAIR, &lo, &hi);
	a.push_back({"pair_vs_floor", "ours / out-of-line floor, cycles per pair", v, "<= 3", true,
		     3,
		     perf_fmt("per repetition %.3f-%.3f; medians ours %.1f, floor %.1f cycles", lo,
			      hi, oc, fc)});
	perf_driver_aims(a, ours, perf_find(st, "qpndev"));
	unsigned int nb = ours != nullptr ? (unsigned int)ours->scaling.size() : 0;

	for (unsigned int k = 1; k <= nb; k++) {
		double o = perf_point_mops(*ours, k),
		       m = mp != nullptr ? perf_point_mops(*mp, k) : 0;

		a.push_back({perf_fmt("throughput_vs_mempool_at_%u", k),
			     perf_fmt("ours@%u / rte_mempool@%u, pairs/s", k, k), perf_ratio(o, m),
			     ">= 1", false, 1,
			     perf_fmt("ours %.2f, rte_mempool %.2f Mops/s", o, m)});
	}
	if (nb >= 2) {
		double o = perf_point_mops(*ours, 2),
		       r = rc != nullptr ? perf_point_mops(*rc, 2) : 0;

		a.push_back({"throughput_vs_rdmacore_at_2", "ours@2 / rdma-core model@2, pairs/s",
			     perf_ratio(o, r), ">= 20", false, 20,
			     perf_fmt("ours %.2f, rdma-core model %.3f Mops/s", o, r)});
	}
	/* A ratio of a peer that did not run (--only) is 0: say so rather than give its 0s. */
	for (perf_aim &x : a)
		if (!(x.value > 0) && x.figures.compare(0, 12, "not measured") != 0)
			x.figures = "not measured (a peer it needs did not run: see --only)";
	return a;
}

bool
perf_meets(const perf_aim &a)
{
	if (!(a.value > 0))
		return false;
	return a.lower_is_better ? a.value <= a.bound : a.value >= a.bound;
}

perf_disturbance
perf_disturbed(std::vector<perf_state> &st)
{
	perf_disturbance d;
	const perf_state *floor = perf_find(st, "floor");
	const perf_state *ours = perf_find(st, "qpnpool");
	const perf_state *mp = perf_find(st, "mempool");

	if (floor == nullptr || floor->ph[PH_PAIR].cycles.empty())
		return d;
	const std::vector<double> &f = floor->ph[PH_PAIR].cycles;
	d.measured = true;
	d.best_cycles = perf_min(f);
	std::vector<double> ratios;
	for (unsigned int r = 0; r < f.size(); r++) {
		if (f[r] > kPerfDisturbed * d.best_cycles) {
			d.reps.push_back(r);
			continue;
		}
		if (ours != nullptr && mp != nullptr && r < ours->ph[PH_PAIR].cycles.size() &&
		    r < mp->ph[PH_PAIR].cycles.size())
			ratios.push_back(
				perf_ratio(ours->ph[PH_PAIR].cycles[r], mp->ph[PH_PAIR].cycles[r]));
	}
	d.pair_vs_mempool_undisturbed = perf_median(ratios);
	return d;
}

perf_history
perf_aged(std::vector<perf_state> &st)
{
	perf_history h;
	const perf_state *ours = perf_find(st, "qpnpool");
	const perf_state *q = perf_find(st, "qpnpool-q");

	if (ours == nullptr || q == nullptr || ours->ph[PH_AGED].cycles.empty() ||
	    q->ph[PH_AGED].cycles.empty())
		return h;
	h.with_cycles = perf_median(q->ph[PH_AGED].cycles);
	h.without_cycles = perf_median(ours->ph[PH_AGED].cycles);
	h.ratio = perf_ratio(h.with_cycles, h.without_cycles);
	return h;
}

std::string
perf_unreliable(unsigned int repeat, double load, unsigned int cpus)
{
	std::string why;
	if (repeat < kPerfMinRepeat)
		why = perf_fmt("%u repetition%s (a median needs %u or more)", repeat,
			       repeat == 1 ? "" : "s", kPerfMinRepeat);
	if (load > 0.5 * cpus)
		why += perf_fmt("%sload average %.2f on %u CPUs at the start",
				why.empty() ? "" : "; ", load, cpus);
	return why;
}
