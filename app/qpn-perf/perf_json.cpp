/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's JSON file: run metadata, parameters, every workload per peer, the scaling curve with
 * each lcore's solo figure, cross-lcore and non-EAL runs, latency histograms, instruction counts,
 * memory and the aims met or not. doc/guides/benchmark.md describes the fields.
 */
#include "perf_app.h"

/* 1-minute load average: a busy machine makes the 2-lcore figures meaningless. */
double
perf_loadavg()
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

static void
perf_json_hist(json_writer &js, const char *key, const perf_hist &h)
{
	js.key(key);
	js.obj();
	js.kv("count", h.n);
	js.kv("min_ns", perf_cycles_to_ns((double)(h.n ? h.min : 0)));
	js.kv("mean_ns", h.n ? perf_cycles_to_ns((double)h.sum / (double)h.n) : 0.0);
	js.kv("p50_ns", perf_cycles_to_ns(perf_hist_pct(h, 50)));
	js.kv("p90_ns", perf_cycles_to_ns(perf_hist_pct(h, 90)));
	js.kv("p99_ns", perf_cycles_to_ns(perf_hist_pct(h, 99)));
	js.kv("p999_ns", perf_cycles_to_ns(perf_hist_pct(h, 99.9)));
	js.kv("max_ns", perf_cycles_to_ns((double)h.max));
	/* Non-empty buckets only, as [upper bound in ns (exclusive), count]. */
	js.key("hist");
	js.arr();
	for (unsigned int i = 0; i < PERF_HIST_BUCKETS; i++) {
		if (h.count[i] == 0)
			continue;
		js.arr();
		js.num(perf_cycles_to_ns((double)perf_hist_upper(i)));
		js.num(h.count[i]);
		js.end_arr();
	}
	js.end_arr();
	js.end_obj();
}

static void
perf_json_point(json_writer &js, const char *key, const perf_point &p)
{
	js.key(key);
	js.obj();
	js.kv("mops_median", perf_median(p.mops));
	js.kv("failures", p.failures);
	json_writer_series(js, "mops", p.mops);
	js.key("ns_per_op_by_runner_median");
	js.arr();
	for (const auto &v : p.slot_ns)
		js.num(perf_median(v));
	js.end_arr();
	js.end_obj();
}

static void
perf_json_params(json_writer &js, const struct perf_opts *o)
{
	js.key("params");
	js.obj();
	js.kv("iterations", o->iterations);
	js.kv("repeat", (uint64_t)o->repeat);
	js.kv("cache", (uint64_t)o->cache);
	js.kv("range", (uint64_t)o->range);
	js.kv("range_qpnpool_q", (uint64_t)std::max(o->range, o->range_q));
	js.kv("first_qpn", (uint64_t)kPerfFirstQpn);
	js.kv("quarantine_us", o->quarantine_us);
	js.kv("burst", (uint64_t)o->burst);
	js.kv("hold", (uint64_t)o->hold);
	js.kv("storm", (uint64_t)o->storm);
	js.kv("idle_us", (uint64_t)o->idle_us);
	js.kv_bool("lcores", o->lcores);
	js.key("lcore_ids");
	js.arr();
	for (unsigned int l : perf_lcores)
		js.num((uint64_t)l);
	js.end_arr();
	js.kv("block_log", (uint64_t)o->block_log);
	js.kv("budget_ms", o->budget_ms);
	js.kv_bool("quick", o->quick);
	js.kv_bool("count_instructions", o->count_instructions);
	js.kv("only", o->only.empty() ? "all" : o->only.c_str());
	js.end_obj();
}

static void
perf_json_scaling(json_writer &js, std::vector<perf_state> &st)
{
	perf_state *ours = perf_find(st, "qpnpool");
	perf_state *mp = perf_find(st, "mempool");
	perf_state *rc = perf_find(st, "rdmacore");

	js.key("scaling");
	js.obj();
	for (auto &s : st) {
		if (!s.ok || s.scaling.empty())
			continue;
		js.key(s.peer->name);
		js.obj();
		js.kv("ops_per_runner_per_run", s.multi_n);
		js.key("points");
		js.arr();
		for (unsigned int k = 1; k <= s.scaling.size(); k++) {
			double m = perf_point_mops(s, k);

			js.obj();
			js.kv("lcores", (uint64_t)k);
			js.kv("mops_median", m);
			js.kv("ours_over_this",
			      ours != nullptr ? perf_ratio(perf_point_mops(*ours, k), m) : NAN);
			js.kv("over_mempool",
			      mp != nullptr ? perf_ratio(m, perf_point_mops(*mp, k)) : NAN);
			js.kv("over_rdmacore",
			      rc != nullptr ? perf_ratio(m, perf_point_mops(*rc, k)) : NAN);
			js.kv("failures", s.scaling[k - 1].failures);
			json_writer_series(js, "mops", s.scaling[k - 1].mops);
			js.key("ns_per_op_by_lcore_median");
			js.arr();
			for (const auto &v : s.scaling[k - 1].slot_ns)
				js.num(perf_median(v));
			js.end_arr();
			js.end_obj();
		}
		js.end_arr();
		/* Each lcore alone, same launch: the VM's vCPUs are not equal. */
		js.key("solo");
		js.arr();
		for (unsigned int i = 0; i < s.solo.size(); i++) {
			js.obj();
			js.kv("lcore", (uint64_t)perf_lcores[i]);
			js.kv("mops_median", perf_median(s.solo[i].mops));
			js.kv("ns_per_op_median",
			      s.solo[i].slot_ns.empty() ? 0 : perf_median(s.solo[i].slot_ns[0]));
			js.end_obj();
		}
		js.end_arr();
		if (!s.cross.mops.empty())
			perf_json_point(js, "cross_lcore", s.cross);
		if (s.threads.size() == 2) {
			perf_json_point(js, "non_eal_1", s.threads[0]);
			perf_json_point(js, "non_eal_n", s.threads[1]);
		}
		js.end_obj();
	}
	js.end_obj();
}

static void
perf_json_phases(json_writer &js, const struct perf_opts *o, std::vector<perf_state> &st)
{
	perf_state *ours = perf_find(st, "qpnpool");

	for (int ph = 0; ph < PH_NB; ph++) {
		if (ph == PH_BURST && o->burst == 0)
			continue;
		double ref = ours != nullptr ? perf_median(ours->ph[ph].ns) : 0;

		js.key(perf_phase_name[ph]);
		js.obj();
		js.kv("description", perf_phase_desc[ph]);
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
}

static void
perf_json_counts(json_writer &js, const struct perf_opts *o, std::vector<perf_state> &st)
{
	js.key("instructions");
	js.obj();
	js.kv_bool("measured", perf_instr_measured);
	js.kv("method", "valgrind callgrind, client requests around the timed loop only "
			"(loop included), divided by the ops of the loop");
	if (!perf_instr_error.empty())
		js.kv("error", perf_instr_error.c_str());
	js.key("per_op");
	js.obj();
	for (auto &s : st) {
		if (!s.ok || s.instr[PH_PAIR] <= 0)
			continue;
		js.key(s.peer->name);
		js.obj();
		for (int ph = 0; ph < PH_NB; ph++)
			if (s.instr[ph] > 0)
				js.kv(perf_phase_name[ph], s.instr[ph]);
		js.end_obj();
	}
	js.end_obj();
	js.end_obj();

	js.key("hw_counters");
	js.obj();
	js.kv_bool("tried", o->count_instructions);
	js.kv_bool("available", o->count_instructions && perf_hw_error.empty());
	if (!perf_hw_error.empty())
		js.kv("error", perf_hw_error.c_str());
	js.key("instructions_per_pair");
	js.obj();
	for (auto &s : st)
		if (s.ok && s.hw_instr > 0)
			js.kv(s.peer->name, s.hw_instr);
	js.end_obj();
	js.end_obj();
}

/* Where the figures were measured, beside meta.machine (the CPU's identity is there). */
static void
perf_json_machine(json_writer &js)
{
	js.key("machine");
	js.obj();
	js.kv("online_cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	js.kv("tsc_hz", rte_get_tsc_hz());
	js.kv("dpdk_version", rte_version());
	js.kv("compiler", __VERSION__);
	js.kv("eal_lcores", (uint64_t)rte_lcore_count());
	js.kv("loadavg_1min_at_start", perf_load_at_start);
	js.kv("loadavg_1min_at_end", perf_loadavg());
	js.end_obj();
}

/* Each peer: what it is, whether it ran, its own counters. */
static void
perf_json_peers(json_writer &js, std::vector<perf_state> &st)
{
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
		js.kv("range", (uint64_t)s.range);
		if (s.ok && s.peer->stats_json != nullptr) {
			js.key("stats");
			js.obj();
			s.peer->stats_json(s.ctx, &js);
			js.end_obj();
		}
		js.end_obj();
	}
	js.end_obj();
}

/* Per-operation latency histograms. */
static void
perf_json_latency(json_writer &js, std::vector<perf_state> &st)
{
	js.key("latency");
	js.obj();
	js.kv("method", "each alloc and each free timed alone with rdtsc (its cost included)");
	for (auto &s : st) {
		if (!s.ok || s.lat_alloc.n == 0)
			continue;
		js.key(s.peer->name);
		js.obj();
		perf_json_hist(js, "alloc", s.lat_alloc);
		perf_json_hist(js, "free", s.lat_free);
		js.end_obj();
	}
	js.end_obj();
}

/* Memory per QPN and fixed, per peer. */
static void
perf_json_memory(json_writer &js, std::vector<perf_state> &st)
{
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
		js.kv("range", (uint64_t)s.range);
		js.kv("method", s.mem.method);
		js.end_obj();
	}
	js.end_obj();
}

/* Repetitions the machine disturbed (perf_disturbed()); absent without the floor peer. */
static void
perf_json_disturbance(json_writer &js, std::vector<perf_state> &st)
{
	const perf_disturbance dist = perf_disturbed(st);
	if (dist.measured) {
		js.key("disturbance");
		js.obj();
		js.kv("witness", "floor pair, cycles");
		js.kv("threshold", kPerfDisturbed);
		js.kv("best_cycles", dist.best_cycles);
		js.key("repetitions");
		js.arr();
		for (unsigned int r : dist.reps)
			js.num((uint64_t)r + 1);
		js.end_arr();
		if (dist.pair_vs_mempool_undisturbed > 0)
			js.kv("pair_vs_mempool_undisturbed", dist.pair_vs_mempool_undisturbed);
		else
			js.kv("pair_vs_mempool_undisturbed", (const char *)nullptr); /* null */
		js.end_obj();
	}
}

/* The order of the hand-outs at the end of each repetition (perf_order()). */
static void
perf_json_order(json_writer &js, std::vector<perf_state> &st)
{
	js.key("order");
	js.obj();
	js.kv("what", "QPNs taken one by one at the end of each repetition: neighbours one "
		      "apart (%), changes of 512-QPN block (a 4 KB page of ours' slot words)");
	for (auto &s : st) {
		if (!s.ok || s.order_pages.empty())
			continue;
		js.key(s.peer->name);
		js.obj();
		js.kv("qpns", (uint64_t)s.order_qpns);
		js.kv("block_changes_in_address_order", (uint64_t)(s.order_qpns / 512));
		json_writer_series(js, "adjacent_pct", s.order_adjacent_pct);
		json_writer_series(js, "block_changes", s.order_pages);
		js.end_obj();
	}
	js.end_obj();
}

/* The quarantine's cost after the repetitions' other workloads (perf_aged()). */
static void
perf_json_history(json_writer &js, std::vector<perf_state> &st)
{
	const perf_history aged = perf_aged(st);
	if (aged.ratio > 0) {
		js.key("history");
		js.obj();
		js.kv("what", "ours with / without quarantine, cycles per pair, pair_aged medians");
		js.kv("quarantine_vs_none_aged", aged.ratio);
		js.kv("with_cycles", aged.with_cycles);
		js.kv("without_cycles", aged.without_cycles);
		js.end_obj();
	}
}

/* The aims, each met or not with the figures it comes from (null: not measured). */
static void
perf_json_aims(json_writer &js, std::vector<perf_state> &st)
{
	js.key("aims");
	js.obj();
	for (const auto &a : perf_aims(st)) {
		js.key(a.key.c_str());
		js.obj();
		js.kv("what", a.what.c_str());
		if (a.value > 0)
			js.kv("value", a.value);
		else
			js.kv("value", (const char *)nullptr);
		js.kv("aim", a.aim.c_str());
		js.kv("figures", a.figures.c_str());
		if (a.value > 0)
			js.kv_bool("met", perf_meets(a));
		else
			js.kv("met", (const char *)nullptr);
		js.end_obj();
	}
	js.end_obj();
}

int
perf_write_json(const struct perf_opts *o, std::vector<perf_state> &st, double elapsed_s)
{
	FILE *f = fopen(o->json.c_str(), "w");

	if (f == nullptr) {
		PERF_LOG(ERR, "cannot write %s: %s", o->json.c_str(), strerror(errno));
		return -errno;
	}
	json_writer js(f);

	js.obj();
	js.kv("tool", "qpn-perf");
	js.kv("version", MLX5_QPN_VERSION);
	js.kv("unit", "ns and TSC cycles per QPN allocated and freed; throughput in Mops/s");
	run_meta_json(js, "qpn-perf");
	perf_json_machine(js);
	perf_json_params(js, o);
	perf_json_peers(js, st);
	js.key("results");
	js.obj();
	perf_json_phases(js, o, st);
	perf_json_scaling(js, st);
	js.end_obj();
	perf_json_latency(js, st);
	perf_json_counts(js, o, st);
	perf_json_memory(js, st);
	perf_json_disturbance(js, st);
	perf_json_order(js, st);
	perf_json_history(js, st);
	perf_json_aims(js, st);
	js.kv("elapsed_s", elapsed_s);
	js.end_obj();

	bool ok = js.ok();

	if (fclose(f) != 0 || !ok) {
		PERF_LOG(ERR, "error writing %s", o->json.c_str());
		return -EIO;
	}
	return 0;
}
