/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What watches a run from beside it, as testpmd's main lcore and signal handler do:
 *  - the sampler thread (monitor_start/stop): one timeline point per second of run time whatever
 *    --stats-period says (the JSON's "timeline", bounded: beyond kMaxPoints every other point is
 *    dropped and the step doubles), a progress line every --stats-period in batch mode, and the
 *    live figures telemetry serves;
 *  - SIGINT/SIGTERM: the first stops the run the way its end does (summary, JSON, devices
 *    closed and purged), a second exits at once;
 *  - DPDK telemetry: /qpn_testpmd/stats beside the driver's /mlx5_qpn/... commands.
 *
 * Threads: the sampler reads only relaxed atomics of the run and publishes its figures in
 * atomics; the telemetry thread reads those and the step figures the last summary kept (under a
 * mutex). Neither touches a histogram an lcore is writing.
 */
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <csignal>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_telemetry.h>

#include "json_writer.h"
#include "stats.h"
#include "testpmd.h"

namespace {

/* An hour of one-second points; a longer run keeps every 2nd, 4th, ... second. */
constexpr size_t kMaxPoints = 3600;

struct tl_point {
	double t_s;
	uint64_t conns;
	double rate;
};

std::mutex g_tl_mu; /* the timeline: the sampler appends, the JSON writer reads */
std::vector<tl_point> g_tl;
double g_tl_step = 1.0;

std::thread g_sampler;
std::atomic<bool> g_sampler_stop{false};

/* Published by the sampler for telemetry. */
std::atomic<uint64_t> g_pub_conns{0}, g_pub_rate{0}, g_pub_elapsed_ms{0};
std::atomic<bool> g_pub_running{false};
std::atomic<const qpn_engine *> g_pub_engine{nullptr};

/* Steps of the last summary, for telemetry. */
std::mutex g_steps_mu;
struct step_fig {
	uint64_t count, min, mean, p50, p90, p99, p999, max;
} g_steps[STEP_NB];

std::atomic<int> g_signal{0};
run_ctx *g_sig_ctx;

sigset_t
stop_signals()
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	return s;
}

/* Signals go to the main thread: the prompt's read() must see EINTR to leave. */
void
block_signals_here()
{
	sigset_t s = stop_signals();
	pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

void
timeline_add(double t, uint64_t conns, double *last_t, uint64_t *last_c)
{
	const double dt = t - *last_t;
	tl_point p{t, conns, dt > 0 ? static_cast<double>(conns - *last_c) / dt : 0.0};
	*last_t = t;
	*last_c = conns;
	g_pub_conns.store(conns, std::memory_order_relaxed);
	g_pub_rate.store(static_cast<uint64_t>(p.rate), std::memory_order_relaxed);
	std::lock_guard<std::mutex> g(g_tl_mu);
	if (g_tl.size() >= kMaxPoints) {
		/* Decimate: keep every other point; the rates stay those of their second. */
		size_t k = 0;
		for (size_t i = 1; i < g_tl.size(); i += 2)
			g_tl[k++] = g_tl[i];
		g_tl.resize(k);
		g_tl_step *= 2;
	}
	g_tl.push_back(p);
}

void
sampler_body(run_ctx *ctx, const qpn_engine *e, double period, double base_s, uint64_t start)
{
	block_signals_here();
	const double hz = static_cast<double>(ctx->tsc_hz);
	const bool progress = period > 0;
	double next_print = period, last_print = 0;
	double last_t = base_s;
	uint64_t last_c = stats_conns(ctx, e), last_print_c = last_c;
	double next_tl;
	{
		std::lock_guard<std::mutex> g(g_tl_mu);
		next_tl = base_s + g_tl_step;
	}
	while (!g_sampler_stop.load(std::memory_order_acquire)) {
		usleep(10000);
		const double run_t = static_cast<double>(rte_rdtsc() - start) / hz;
		const double t = base_s + run_t;
		g_pub_elapsed_ms.store(static_cast<uint64_t>(t * 1e3), std::memory_order_relaxed);
		if (t >= next_tl) {
			timeline_add(t, stats_conns(ctx, e), &last_t, &last_c);
			std::lock_guard<std::mutex> g(g_tl_mu);
			next_tl += g_tl_step;
		}
		if (progress && run_t >= next_print) {
			/* The rate over the time that really passed (a busy machine wakes late). */
			stats_progress(ctx, run_t, &last_print_c, run_t - last_print);
			last_print = run_t;
			next_print += period;
		}
	}
}

void
on_signal(int sig)
{
	if (g_signal.exchange(sig) != 0) {
		static const char m[] = "\nqpn-testpmd: second signal: exiting now\n";
		ssize_t rc = write(STDERR_FILENO, m, sizeof(m) - 1);
		(void)rc;
		_exit(128 + sig);
	}
	/* Lock-free atomic stores are async-signal-safe: the lcores see the stop. */
	if (g_sig_ctx != nullptr)
		g_sig_ctx->stop.store(true, std::memory_order_release);
	static const char m[] = "\nqpn-testpmd: signal received: stopping the run (again to exit "
				"at once)\n";
	ssize_t rc = write(STDERR_FILENO, m, sizeof(m) - 1);
	(void)rc;
}

int
tel_stats(const char *, const char *, struct rte_tel_data *d)
{
	const qpn_engine *e = g_pub_engine.load(std::memory_order_relaxed);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "engine", e != nullptr ? e->name : "");
	rte_tel_data_add_dict_u64(d, "running",
				  static_cast<uint64_t>(
					  g_pub_running.load(std::memory_order_relaxed)));
	rte_tel_data_add_dict_u64(d, "elapsed_ms",
				  g_pub_elapsed_ms.load(std::memory_order_relaxed));
	rte_tel_data_add_dict_u64(d, "connections", g_pub_conns.load(std::memory_order_relaxed));
	rte_tel_data_add_dict_u64(d, "conn_per_sec", g_pub_rate.load(std::memory_order_relaxed));
	/* Steps as of the last summary (percentiles need the lcores' histograms at rest). */
	std::lock_guard<std::mutex> g(g_steps_mu);
	for (unsigned i = 0; i < STEP_NB; i++) {
		const step_fig &s = g_steps[i];
		const std::pair<const char *, uint64_t> kv[] = {
			{"count", s.count},  {"min_ns", s.min}, {"mean_ns", s.mean},
			{"p50_ns", s.p50},   {"p90_ns", s.p90}, {"p99_ns", s.p99},
			{"p999_ns", s.p999}, {"max_ns", s.max},
		};
		for (auto &x : kv) {
			char k[64];
			snprintf(k, sizeof(k), "%s_%s", step_names[i], x.first);
			rte_tel_data_add_dict_u64(d, k, x.second);
		}
	}
	return 0;
}

} /* namespace */

void
monitor_start(run_ctx *ctx, const qpn_engine *e, bool progress)
{
	g_sampler_stop.store(false);
	g_pub_engine.store(e, std::memory_order_relaxed);
	g_pub_running.store(true, std::memory_order_relaxed);
	/* The period is read here, not in the thread: the prompt may set it meanwhile. */
	g_sampler = std::thread(sampler_body, ctx, e, progress ? ctx->cfg->stats_period_s : 0.0,
				ctx->run_secs, rte_rdtsc());
}

void
monitor_stop()
{
	if (!g_sampler.joinable())
		return;
	g_sampler_stop.store(true, std::memory_order_release);
	g_sampler.join();
	g_pub_running.store(false, std::memory_order_relaxed);
}

void
monitor_clear()
{
	std::lock_guard<std::mutex> g(g_tl_mu);
	g_tl.clear();
	g_tl_step = 1.0;
	g_pub_conns.store(0, std::memory_order_relaxed);
	g_pub_rate.store(0, std::memory_order_relaxed);
	g_pub_elapsed_ms.store(0, std::memory_order_relaxed);
	std::lock_guard<std::mutex> s(g_steps_mu);
	memset(g_steps, 0, sizeof(g_steps));
}

void
monitor_timeline_json(json_writer &js)
{
	std::lock_guard<std::mutex> g(g_tl_mu);
	js.key("timeline");
	js.arr();
	for (const tl_point &p : g_tl) {
		js.obj();
		js.kv("t_s", p.t_s);
		js.kv("connections", p.conns);
		js.kv("conn_per_sec", p.rate);
		js.end_obj();
	}
	js.end_arr();
}

void
telemetry_keep_steps(const latency_hist *hist, uint64_t hz)
{
	std::lock_guard<std::mutex> g(g_steps_mu);
	for (unsigned i = 0; i < STEP_NB; i++) {
		const latency_hist &h = hist[i];
		auto n = [hz](double cycles) {
			return static_cast<uint64_t>(cycles * 1e9 / static_cast<double>(hz));
		};
		g_steps[i] = {h.n,
			      n(double(h.n ? h.min : 0)),
			      n(h.mean()),
			      n(double(h.percentile(50))),
			      n(double(h.percentile(90))),
			      n(double(h.percentile(99))),
			      n(double(h.percentile(99.9))),
			      n(double(h.max))};
	}
}

void
signals_install(run_ctx *ctx)
{
	g_sig_ctx = ctx;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: the prompt's read() returns and the prompt ends */
	sigaction(SIGINT, &sa, nullptr);
	sigaction(SIGTERM, &sa, nullptr);
}

void
signals_block_thread()
{
	block_signals_here();
}

void
signals_unblock_main()
{
	sigset_t s = stop_signals();
	pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

int
signal_caught()
{
	return g_signal.load(std::memory_order_acquire);
}

namespace {

int g_tel_rc;

} /* namespace */

/* Before main: the EAL loads Debian's PMD plugins in rte_eal_init(), and their commands can fill
 * the telemetry library's fixed table (DPDK 22.11) before a later registration. */
RTE_INIT(qpn_testpmd_telemetry)
{
	g_tel_rc = rte_telemetry_register_cmd(
		"/qpn_testpmd/stats", tel_stats,
		/* at most 127 characters (RTE_TEL_MAX_STRING_LEN) */
		"Returns qpn-testpmd's run: connections, conn/s, per-step percentiles (ns) as of the "
		"last summary. No parameters");
}

void
telemetry_init(run_ctx *)
{
	if (g_tel_rc != 0)
		APP_LOG(WARNING, "no telemetry command /qpn_testpmd/stats: %s",
			strerror(-g_tel_rc));
}
