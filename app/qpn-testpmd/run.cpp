/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The runner: one for every engine and both connection implementations, as testpmd's
 * start_packet_forwarding() is one for every forwarding engine. It probes the devices, picks
 * the connection implementation (conn_select: the only place that asks which device this is),
 * assigns the lcores' roles, launches one lcore body on the workers, prints the progress lines
 * (batch mode) and stops, ends and tears down. The engines hold the work; the runner only decides
 * which body an lcore runs: the engine's own side, or its peer's for the other side.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <sched.h>
#include <thread>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_pause.h>

#include "stats.h"
#include "testpmd.h"

RTE_LOG_REGISTER(qpn_app_logtype, mlx5_qpn.app, INFO);

const qpn_engine *const engine_list[4] = {&engine_dci_reconnect, &engine_dct_accept, &engine_churn,
					  &engine_alloc};

const qpn_engine *
engine_find(const std::string &name)
{
	for (const qpn_engine *e : engine_list)
		if (name == e->name)
			return e;
	return nullptr;
}

namespace {

/* Whether a device is a hardware one: the only question the app asks about a device's kind, and
 * only to pick the connection implementation (conn_select). */
bool
dev_is_hw(struct mlx5_qpn_dev *dev)
{
	struct mlx5_qpn_dev_info info;
	return mlx5_qpn_dev_info_get(dev, &info) == 0 &&
	       (info.flags & MLX5_QPN_DEV_F_EMULATED) == 0;
}

run_ctx *g_ctx;
const qpn_engine *g_engine;
const qpn_engine *g_active;  /* whose body runs the active side (CM engines) */
const qpn_engine *g_passive; /* whose body runs the passive side */
bool g_running;
uint64_t g_start_tsc;

/* Hardware: the kernel's CM through librdmacm; otherwise the emulated CM fabric. */
const qpn_conn_ops *
conn_select(run_ctx *ctx)
{
	return dev_is_hw(ctx->dev) ? &conn_rdmacm_ops : &conn_emu_ops;
}

/* Which sides this process runs: --role, unless the connections cannot hold the peer here
 * (then the engine's side alone). */
void
sides_assign(run_ctx *ctx, const qpn_engine *e)
{
	ctx->side_active = ctx->cfg->role_client();
	ctx->side_passive = ctx->cfg->role_server();
	if (e->uses_cm && !ctx->conn->peer_in_process) {
		ctx->side_active = !e->passive_side;
		ctx->side_passive = e->passive_side;
	}
}

/* How many server lcores this run gets: --server-lcores, within the lcores AVAIL that may
 * serve, the peers (each server serves at least one) and what the connections allow. */
unsigned
servers_count(run_ctx *ctx, const qpn_engine *e, unsigned avail)
{
	const run_config &cfg = *ctx->cfg;
	unsigned n = std::min({cfg.server_lcores, avail, cfg.peers});
	if (e->uses_cm && !ctx->conn->passive_split)
		n = 1;
	n = std::max(n, 1u);
	if (n != cfg.server_lcores && e->uses_cm && ctx->side_passive)
		printf("qpn-testpmd: %u server lcore(s), not %u (%s)\n", n, cfg.server_lcores,
		       !ctx->conn->passive_split     ? "one listener on this device" :
		       cfg.peers < cfg.server_lcores ? "fewer --peers" :
						       "not enough worker lcores");
	return n;
}

/* Lcore roles (the layout is described in testpmd.h). */
void
roles_assign(run_ctx *ctx, const qpn_engine *e)
{
	/* Plain arrays: lcore ids only. */
	unsigned workers[RTE_MAX_LCORE], nw = 0, clients[RTE_MAX_LCORE], nc = 0;
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
	workers[nw++] = lc;
	for (auto &r : ctx->role)
		r = lcore_role{};
	for (auto &s : ctx->server_lcore)
		s = -1;
	ctx->nb_servers = 1;
	if (!ctx->side_active) {
		/* Server process: the first workers serve the passive nodes (the main lcore alone
		 * without workers); the other workers stay idle. */
		if (nw == 0) {
			servers_count(ctx, e, 1); /* one (the main lcore): says so if asked more */
			ctx->role[rte_get_main_lcore()].server = true;
		} else {
			ctx->nb_servers = servers_count(ctx, e, nw);
			for (unsigned k = 0; k < ctx->nb_servers; k++) {
				ctx->role[workers[k]] = lcore_role{.server = true, .server_idx = k};
				ctx->server_lcore[k] = static_cast<int>(workers[k]);
			}
		}
	} else if (!ctx->side_passive) {
		/* Client process: every worker (or the main lcore alone) is a client. */
		if (nw == 0)
			clients[nc++] = rte_get_main_lcore();
		for (unsigned i = 0; i < nw; i++)
			clients[nc++] = workers[i];
	} else if (nw <= 1) {
		/* One lcore runs a client and co-polls the only server. */
		servers_count(ctx, e, 1);
		const unsigned one = nw == 0 ? rte_get_main_lcore() : workers[0];
		clients[nc++] = one;
		ctx->role[one].server = true;
	} else if (ctx->cfg->co_poll) {
		/* Every worker is a client; the first ones also poll a server each. */
		ctx->nb_servers = servers_count(ctx, e, nw);
		for (unsigned k = 0; k < ctx->nb_servers; k++) {
			ctx->role[workers[k]] = lcore_role{.server = true, .server_idx = k};
			ctx->server_lcore[k] = static_cast<int>(workers[k]);
		}
		for (unsigned i = 0; i < nw; i++)
			clients[nc++] = workers[i];
	} else {
		/* The last workers serve, one client lcore at least stays. */
		ctx->nb_servers = servers_count(ctx, e, nw - 1);
		const unsigned first = nw - ctx->nb_servers;
		for (unsigned k = 0; k < ctx->nb_servers; k++) {
			ctx->role[workers[first + k]] = lcore_role{.server = true, .server_idx = k};
			ctx->server_lcore[k] = static_cast<int>(workers[first + k]);
		}
		for (unsigned i = 0; i < first; i++)
			clients[nc++] = workers[i];
	}
	/* --client-lcores: the first ones run; the others stay idle. */
	if (ctx->client_limit != 0 && nc > ctx->client_limit)
		nc = ctx->client_limit;
	for (unsigned i = 0; i < nc; i++) {
		lcore_role &r = ctx->role[clients[i]];
		r.client = true;
		r.client_idx = i;
		r.dev = i % static_cast<unsigned>(ctx->devs.size());
	}
	ctx->nb_clients = nc;
}

/* The lcore body of every engine. */
void
lcore_body(run_ctx *ctx, unsigned lc)
{
	if (!g_engine->uses_cm) {
		g_engine->lcore_run(ctx, lc);
		return;
	}
	const lcore_role &r = ctx->role[lc];
	if (r.client) {
		g_active->lcore_run(ctx, lc);
		ctx->clients_running.fetch_sub(1, std::memory_order_acq_rel);
		/* A co-polling client serves the passive side until every client is done. */
		if (r.server)
			while (ctx->clients_running.load(std::memory_order_acquire) != 0)
				g_passive->passive_poll(ctx, r.server_idx);
		else
			mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(ctx->devs[r.dev]));
		return;
	}
	if (r.server) {
		/* A server process has no clients: it serves until the run is stopped. */
		const bool alone = !ctx->side_active;
		while (ctx->clients_running.load(std::memory_order_acquire) != 0 ||
		       (alone && !ctx->stop.load(std::memory_order_acquire)))
			if (g_passive->passive_poll(ctx, r.server_idx) == 0 && ctx->cfg->idle_yield)
				/* More lcores than CPUs: an idle server gives its CPU to the lcore
				 * it waits for rather than spinning out its time slice. */
				sched_yield();
		/* The last frames (DREPs already sent) need no answer; done. */
		g_passive->passive_poll(ctx, r.server_idx);
	}
}

int
lcore_main(void *)
{
	unsigned lc = rte_lcore_id();
	lcore_body(g_ctx, lc);
	g_ctx->lc[lc].done.store(true, std::memory_order_release);
	return 0;
}

/* Undo a start (either side's begin done, or not). */
void
run_end(run_ctx *ctx)
{
	for (const qpn_engine *x : {g_active, g_passive})
		if (x != nullptr && x->end != nullptr)
			x->end(ctx);
	if (g_engine->uses_cm)
		ctx->conn->teardown(ctx);
}

/* What one client lcore reaches at a short timewait on the project's VMs (dci-reconnect at
 * 16 ms: 215k-292k conns/s, doc/guides/results.md), rounded up: the rate a cap is set against. */
constexpr double kLcoreConnsPerSec = 300000;

/* QPNs device D can hold: its pool's capacity within the device's total. */
double
dev_capacity(struct mlx5_qpn_dev *d, mlx5_qpn_dev_info *info)
{
	if (mlx5_qpn_dev_info_get(d, info) != 0)
		return 0;
	const double total = static_cast<double>(uint64_t(1) << info->log_max_num_reserved_qpn);
	return std::min(static_cast<double>(info->max_qpns), total);
}

/*
 * The cap the QPNs put on conns/s: a connection holds, on the client's device, its QPN for the
 * quarantine after its close, and on the server's (devs[0]) the server's QPN through the
 * server's own timewait and then the quarantine (tests/cm/test_cm_qpn_hold.cpp: less is stale);
 * the connection's own life is short beside them and left out. Each device's capacity over the
 * QPN-seconds a connection holds on it; the lowest is the cap, said in one line when it is below
 * what this run's lcores could do.
 */
void
qpn_cap_check(run_ctx *ctx, const qpn_engine *e)
{
	ctx->qpn_cap = ctx->qpn_hold_s = ctx->lcores_rate = 0;
	if (!e->uses_cm)
		return;
	const double tw_s = cm_timewait_ms(*ctx->cfg) / 1e3;
	std::vector<unsigned> clients_on(ctx->devs.size(), 0);
	for (unsigned lc = 0; lc < RTE_MAX_LCORE; lc++)
		if (ctx->role[lc].client)
			clients_on[ctx->role[lc].dev]++;
	double qpns = 0, q_s = 0; /* of the device that caps */
	for (size_t d = 0; d < ctx->devs.size(); d++) {
		mlx5_qpn_dev_info info{};
		const double cap_qpns = dev_capacity(ctx->devs[d], &info);
		const double dq_s = static_cast<double>(info.quarantine_us) / 1e6;
		double hold = 0;
		/* rdma-core's allocator (--allocator) gives the client's QPN straight back to the
		 * device: it holds none of the pool's. */
		if (ctx->side_active && ctx->nb_clients != 0 && !ctx->alloc_fw)
			hold += dq_s * clients_on[d] / ctx->nb_clients;
		if (ctx->side_passive && d == 0)
			hold += tw_s + dq_s;
		if (hold <= 0 || cap_qpns <= 0 ||
		    (ctx->qpn_cap != 0 && cap_qpns / hold >= ctx->qpn_cap))
			continue;
		ctx->qpn_cap = cap_qpns / hold;
		ctx->qpn_hold_s = hold;
		qpns = cap_qpns;
		q_s = dq_s;
	}
	const unsigned lcores = ctx->side_active ? ctx->nb_clients : ctx->nb_servers;
	ctx->lcores_rate = lcores * kLcoreConnsPerSec;
	if (ctx->qpn_cap != 0 && ctx->qpn_cap < ctx->lcores_rate)
		printf("qpn-testpmd: the device's QPNs cap conns/s at %.0f (%.0f QPNs / %.3f s held "
		       "per connection, timewait %.0f ms, quarantine %.0f ms), below the ~%.0f of "
		       "%u %s lcore(s)\n",
		       ctx->qpn_cap, qpns, ctx->qpn_hold_s, tw_s * 1e3, q_s * 1e3, ctx->lcores_rate,
		       lcores, ctx->side_active ? "client" : "server");
}

/* Connections, roles and the engines' begin. 0 or negative errno. */
int
run_setup(run_ctx *ctx, const qpn_engine *e)
{
	g_active = g_passive = nullptr;
	if (e->uses_cm) {
		g_active = e->passive_side ? e->peer : e;
		g_passive = e->passive_side ? e : e->peer;
		ctx->conn = conn_select(ctx);
	}
	sides_assign(ctx, e);
	roles_assign(ctx, e);
	qpn_cap_check(ctx, e);
	int rc = e->uses_cm ? ctx->conn->setup(ctx) : 0;
	if (rc != 0)
		return rc;
	for (const qpn_engine *x : {g_active, g_passive})
		if (rc == 0 && x != nullptr && x->begin != nullptr)
			rc = x->begin(ctx);
	if (rc != 0)
		run_end(ctx);
	return rc;
}

} /* namespace */

void
run_serve(run_ctx *ctx, unsigned lcore)
{
	if (ctx->role[lcore].server)
		g_passive->passive_poll(ctx, ctx->role[lcore].server_idx);
}

bool
run_active()
{
	return g_running;
}

const qpn_engine *
run_engine()
{
	return g_engine;
}

double
run_start_elapsed(run_ctx *ctx)
{
	if (!g_running)
		return 0;
	return static_cast<double>(rte_rdtsc() - g_start_tsc) / static_cast<double>(ctx->tsc_hz);
}

double
run_elapsed(run_ctx *ctx)
{
	if (!g_running)
		return ctx->run_secs;
	return ctx->run_secs +
	       static_cast<double>(rte_rdtsc() - g_start_tsc) / static_cast<double>(ctx->tsc_hz);
}

void
devices_close(run_ctx *ctx)
{
	for (auto *x : ctx->devs)
		if (ctx->cfg->eal_devs.empty())
			mlx5_qpn_dev_close(x);
	/* The EAL's devices are the EAL's to close: removed as vdevs (a new probe plugs them). */
	for (auto &e : ctx->cfg->eal_devs)
		eal_dev_unplug("qpn-testpmd", e);
	ctx->devs.clear();
	ctx->dev = nullptr;
}

int
devices_probe(run_ctx *ctx, int64_t quarantine_us)
{
	for (size_t i = 0; i < ctx->cfg->devargs.size(); i++) {
		const std::string &da = ctx->cfg->devargs[i];
		std::string full = devargs_with_quarantine(da, quarantine_us, *ctx->cfg);
		struct mlx5_qpn_dev *d = nullptr;
		const auto &eal = ctx->cfg->eal_devs;
		int rc = i < eal.size() ? eal_dev_plug("qpn-testpmd", eal[i], full, &d) :
					  mlx5_qpn_dev_probe(full.c_str(), &d);
		if (rc != 0) {
			/* The driver (or eal_dev_plug) already said why in one line; add nothing. */
			if (i >= eal.size() && rc != -EINVAL && rc != -ENODEV &&
			    rc != -EOPNOTSUPP && rc != -EEXIST)
				fprintf(stderr, "qpn-testpmd: cannot probe \"%s\": %s\n",
					da.c_str(), strerror(-rc));
			devices_close(ctx);
			return rc;
		}
		ctx->devs.push_back(d);
	}
	ctx->dev = ctx->devs[0];
	return 0;
}

int
devices_reprobe(run_ctx *ctx, int64_t quarantine_us)
{
	devices_close(ctx);
	int rc = devices_probe(ctx, quarantine_us);
	/* The new devices count from zero, and what was counted on the old ones (connections,
	 * steps, rejects, pool) would read as this set-up's: the totals start again. */
	stats_clear(ctx);
	if (rc == 0)
		ctx->cfg->quarantine_us = quarantine_us;
	return rc;
}

void
quarantine_warn(run_ctx *ctx)
{
	const uint32_t tw_ms = cm_timewait_ms(*ctx->cfg);
	for (auto *d : ctx->devs) {
		struct mlx5_qpn_dev_info info;
		if (mlx5_qpn_dev_info_get(d, &info) != 0 ||
		    info.quarantine_us >= uint64_t(tw_ms) * 1000u)
			continue;
		printf("qpn-testpmd: warning: device %s's quarantine %" PRIu64 " us is shorter "
		       "than the CM timewait %u ms: a QPN can come back while a peer still holds "
		       "it (REJ STALE_CONN)\n",
		       info.name, info.quarantine_us, tw_ms);
	}
}

int
run_start(run_ctx *ctx, const qpn_engine *e)
{
	if (g_running)
		return -EBUSY;
	for (auto &l : ctx->lc)
		l.done.store(false);
	ctx->stop.store(false);
	g_engine = e;
	g_ctx = ctx;
	int rc = run_setup(ctx, e);
	if (rc != 0) {
		fprintf(stderr, "qpn-testpmd: engine %s: %s\n", e->name, strerror(-rc));
		return rc;
	}
	ctx->clients_running.store(ctx->nb_clients);
	if (e->uses_cm && !ctx->data_path)
		printf("qpn-testpmd: send step skipped (no data path: %s)\n",
		       ctx->data_path_note.c_str());
	g_running = true;
	g_start_tsc = rte_rdtsc();
	stats_show_restart(ctx, e);
	/* Progress lines in batch mode only: at the prompt they would cut through its lines. */
	monitor_start(ctx, e, !ctx->cfg->interactive);
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
	rte_eal_remote_launch(lcore_main, nullptr, lc);
	return 0;
}

void
run_stop(run_ctx *ctx)
{
	if (!g_running)
		return;
	ctx->stop.store(true);
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
	{
		rte_eal_wait_lcore(lc);
		/* The acquire pairs with the worker's release of `done`: what it wrote (CM agents,
		 * histograms) is visible here in the C++ model, which ThreadSanitizer checks (it cannot
		 * see the hand-over inside an uninstrumented rte_eal_wait_lcore). */
		while (!ctx->lc[lc].done.load(std::memory_order_acquire))
			rte_pause();
	}
	monitor_stop();
	ctx->run_secs += static_cast<double>(rte_rdtsc() - g_start_tsc) /
			 static_cast<double>(ctx->tsc_hz);
	run_end(ctx);
	g_running = false;
}

int
run_batch(run_ctx *ctx, const qpn_engine *e)
{
	if (run_for(ctx, e) != 0)
		return 1;
	return run_report(ctx, e);
}

unsigned
run_clients_available(run_ctx *ctx, const qpn_engine *e)
{
	const unsigned limit = ctx->client_limit;
	ctx->client_limit = 0;
	if (e->uses_cm)
		ctx->conn = conn_select(ctx);
	sides_assign(ctx, e);
	roles_assign(ctx, e);
	ctx->client_limit = limit;
	return ctx->nb_clients;
}

int
run_for(run_ctx *ctx, const qpn_engine *e, void (*started)(run_ctx *), void (*stopping)(run_ctx *))
{
	if (run_start(ctx, e) != 0)
		return 1;
	if (started != nullptr)
		started(ctx);
	const run_config &cfg = *ctx->cfg;
	const uint64_t hz = ctx->tsc_hz;
	const uint64_t start = rte_rdtsc();
	const uint64_t end = start +
			     static_cast<uint64_t>(cfg.duration_s * static_cast<double>(hz));
	unsigned lc;
	if (rte_lcore_count() == 1) {
		/* Alone: the main lcore runs the engine; a timer thread ends it (a signal sets
		 * ctx->stop itself). */
		std::atomic<bool> *stop = &ctx->stop;
		std::atomic<bool> finished{false};
		const double dur = cfg.duration_s;
		std::thread timer([stop, &finished, dur] {
			signals_block_thread(); /* the signal is the main thread's */
			for (double t = 0; t < dur && !finished.load(); t += 0.01)
				usleep(10000);
			stop->store(true);
		});
		lcore_main(nullptr);
		finished.store(true);
		timer.join();
	} else {
		/* The main lcore waits for the end, the work done or a signal; the monitor
		 * (monitor.cpp) prints the progress lines. */
		for (;;) {
			uint64_t now = rte_rdtsc();
			bool all_done = true;
			RTE_LCORE_FOREACH_WORKER(lc)
			all_done &= ctx->lc[lc].done.load(std::memory_order_acquire);
			if (now >= end || all_done || signal_caught() != 0)
				break;
			usleep(1000);
		}
	}
	if (stopping != nullptr)
		stopping(ctx);
	run_stop(ctx);
	return 0;
}

int
run_report(run_ctx *ctx, const qpn_engine *e)
{
	const run_config &cfg = *ctx->cfg;
	stats_summary(stdout, ctx, e);
	uint64_t errors = 0;
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	errors += ctx->lc[lc].errors.load();
	for (const lcore_stats &v : ctx->srv)
		errors += v.errors.load();
	if (!cfg.json.empty()) {
		if (stats_json(cfg.json.c_str(), ctx, e) == 0)
			printf("JSON summary written to %s\n", cfg.json.c_str());
		else
			errors++;
	}
	fflush(stdout);
	return errors == 0 ? 0 : 1;
}
