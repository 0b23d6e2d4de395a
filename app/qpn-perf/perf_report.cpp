/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's report: statistics over the repetitions, the aims, the printed tables and the
 * JSON file.
 */
#include "perf_app.h"

static double
perf_median(std::vector<double> v)
{
	size_t m;

	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	m = v.size() / 2;
	return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

static double
perf_min(const std::vector<double> &v)
{
	return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

static double
perf_max(const std::vector<double> &v)
{
	return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

static perf_state *
perf_find(std::vector<perf_state> &st, const char *name)
{
	for (auto &s : st)
		if (s.ok && strcmp(s.peer->name, name) == 0)
			return &s;
	return nullptr;
}

/* A ratio of two figures, or NaN (JSON null) when one of them is missing. */
static double
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

static std::vector<perf_aim>
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
			     perf_ratio(o2, rc ? perf_median(rc->scaling.mops) : 0), ">= 20", false,
			     20});
	}
	return a;
}

static bool
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
		       ph == PH_PAIR ? "alloc+free pair on one lcore" :
				       "bulk alloc+free on one lcore",
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

static std::string
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

static void
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
	run_meta_json(js, "qpn-perf");

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
