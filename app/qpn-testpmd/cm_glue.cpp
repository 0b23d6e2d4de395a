/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM engines' wiring and loops.
 *
 * Nodes. Every node is a CM agent attached to one in-process ring fabric:
 * - one *client* agent per device, whose GUID is the device's node GUID: all client lcores on a
 *   device share it, as all processes on one HCA share the node GUID and the kernel's CM. The
 *   agent is used by one thread at a time, so client lcores take a spinlock around it; whoever
 *   holds the lock polls it and hands each event to the lcore that owns the connection;
 * - one *server* agent per peer (--peers), each with a GUID of its own, as if it were a remote
 *   node: the passive side's (GUID, QPN) table of each peer is where STALE_CONN comes from. The
 *   server agents, the DCTs and the device's doorbell service are polled by one lcore only.
 *
 * Both sides take a reserved QPN per connection: the client for its REQ, the server for its REP
 * (as rdma-core's DC-over-CM test does): with one QPN per DCT for every connection, the active
 * side would see two live connections to the same (GUID, QPN) and reject the second REP as stale.
 *
 * Two processes (--role, --fabric): the agents attach to a shared-memory fabric instead; the
 * server process publishes (service id, node GUID, DCT number, DC key) of each peer in the
 * fabric's service directory, and the client process takes its peers from there, so it needs
 * nothing of the server but the fabric name and the device.
 *
 * Time: the CM gets mlx5_qpn_clock_ns(), the clock of the pool's quarantine, so "quarantine >=
 * timewait" compares like with like. Step latencies are TSC cycles (rte_rdtsc).
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <unordered_map>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_pause.h>

#include "mlx5_qpn_dc.h"
#include "testpmd.h"

RTE_LOG_REGISTER(qpn_app_logtype, mlx5_qpn.app, INFO);
#define APP_LOG(level, fmt, ...)                                                                \
	rte_log(RTE_LOG_##level, qpn_app_logtype, "qpn-testpmd: " fmt "\n", ##__VA_ARGS__)

namespace {

constexpr uint64_t kServiceId = 0x0106'0000'0000'4450ull; /* RDMA_PS_TCP-like service id */
constexpr uint64_t kDcKey = 0x5150'4e44'434b'4559ull;
constexpr unsigned kMaxSlots = 64;      /* connections one client lcore keeps at once */
constexpr uint32_t kAgentConns = 16384; /* CM slots per agent (timewait entries included) */
constexpr uint64_t kDrainNs = 3'000'000'000ull; /* longest wait for open connections at stop */
constexpr unsigned kShmSlots = 4096;    /* frames pending per node on a shared-memory fabric */
constexpr double kDirWaitS = 5.0;       /* how long a client waits for a server to publish */

/* A small event copy: what the loops need of struct mlx5_qpn_cm_event. */
struct mini_ev {
	uint32_t type;
	uint32_t conn_id;
	uint32_t remote_qpn;
	uint16_t reason;
};

struct spin {
	std::atomic_flag f = ATOMIC_FLAG_INIT;
	void lock()
	{
		while (f.test_and_set(std::memory_order_acquire))
			rte_pause();
	}
	void unlock() { f.clear(std::memory_order_release); }
};

struct client_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
	spin lock;
	/* conn id -> owning lcore; under lock. */
	std::unordered_map<uint32_t, unsigned> owner;
	/* Events waiting for their lcore; under lock. */
	std::vector<mini_ev> pending[RTE_MAX_LCORE];
};

struct server_conn {
	uint32_t qpn;
	uint64_t t_req;    /* REQ event seen */
	uint64_t t_acc;    /* accept (REP) sent */
	uint64_t t_alloc0; /* alloc started */
	uint64_t pool_cyc; /* alloc cycles */
	uint64_t t_end;    /* DISCONNECTED seen (0: not completed) */
	bool established;
};

struct server_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
	std::unordered_map<uint32_t, server_conn> conns;
};

/* DC resources: per device one DCT per peer on one CQ; per client lcore one DCI on one CQ. */
struct dc_dev {
	mlx5_qpn_cq *cq = nullptr;
	std::vector<mlx5_qpn_dct *> dct;
	std::vector<uint32_t> dctn;
};
struct dc_lcore {
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
};

} // namespace

struct cm_glue {
	mlx5_qpn_cm_fabric *fabric = nullptr;   /* in-process fabric, or */
	mlx5_qpn_cm_shm_fabric *shm = nullptr;  /* the shared-memory one (--fabric) */
	/* The peers clients connect to: this process's server nodes, or the directory's. */
	std::vector<uint64_t> peer_guid;
	std::vector<uint32_t> peer_dctn;
	std::vector<uint64_t> peer_key;
	std::vector<client_node *> clients; /* per device */
	std::vector<server_node *> servers; /* per peer */
	std::vector<dc_dev> dcdev;          /* per device */
	dc_lcore dcl[RTE_MAX_LCORE];
	cm_agent_totals last;               /* of the previous start (kept after fini) */
};

uint32_t cm_timewait_ms(const run_config &cfg)
{
	return mlx5_qpn_cm_timewait_ms(cfg.plt, cfg.ack_delay);
}

void roles_assign(run_ctx *ctx)
{
	/* Plain arrays: lcore ids only. */
	unsigned workers[RTE_MAX_LCORE], nw = 0, clients[RTE_MAX_LCORE], nc = 0;
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
		workers[nw++] = lc;
	for (auto &r : ctx->role)
		r = lcore_role{};
	ctx->server_lcore = -1;
	if (!ctx->cfg->role_client()) {
		/* Server process: one lcore serves every passive agent; others stay idle. */
		unsigned srv = nw == 0 ? rte_get_main_lcore() : workers[0];
		ctx->role[srv].server = true;
		ctx->server_lcore = nw == 0 ? -1 : static_cast<int>(srv);
	} else if (!ctx->cfg->role_server()) {
		/* Client process: every worker (or the main lcore alone) is a client. */
		if (nw == 0)
			clients[nc++] = rte_get_main_lcore();
		for (unsigned i = 0; i < nw; i++)
			clients[nc++] = workers[i];
	} else if (nw == 0) {
		clients[nc++] = rte_get_main_lcore();
		ctx->role[rte_get_main_lcore()].server = true;
	} else if (nw == 1) {
		clients[nc++] = workers[0];
		ctx->role[workers[0]].server = true;
	} else {
		ctx->server_lcore = static_cast<int>(workers[nw - 1]);
		ctx->role[workers[nw - 1]].server = true;
		for (unsigned i = 0; i + 1 < nw; i++)
			clients[nc++] = workers[i];
	}
	for (unsigned i = 0; i < nc; i++) {
		lcore_role &r = ctx->role[clients[i]];
		r.client = true;
		r.client_idx = i;
		r.dev = i % static_cast<unsigned>(ctx->devs.size());
	}
	ctx->nb_clients = nc;
}

static mlx5_qpn_cm *agent_create(run_ctx *ctx, const char *name, uint64_t guid,
				 mlx5_qpn_cm_transport *tp)
{
	int rc = ctx->cm->shm != nullptr ? mlx5_qpn_cm_shm_attach(ctx->cm->shm, guid, tp)
					 : mlx5_qpn_cm_fabric_attach(ctx->cm->fabric, guid, tp);
	if (rc != 0) {
		fprintf(stderr, "qpn-testpmd: cannot attach CM node %s (GUID %016" PRIx64 "): %s\n",
			name, guid, strerror(-rc));
		return nullptr;
	}
	mlx5_qpn_cm_params p{};
	p.name = name;
	p.node_guid = guid;
	p.policy = ctx->cfg->policy;
	p.max_conns = kAgentConns;
	p.packet_life_time = ctx->cfg->plt;
	p.ack_delay = ctx->cfg->ack_delay;
	p.cm_response_timeout = 20; /* ~4 s: no retransmission while an lcore is merely busy */
	p.max_cm_retries = 3;
	p.transport = tp;
	mlx5_qpn_cm *cm = mlx5_qpn_cm_create(&p);
	if (cm == nullptr)
		fprintf(stderr, "qpn-testpmd: cannot create CM agent %s: %s\n", name,
			rte_strerror(rte_errno));
	return cm;
}

static void dc_fini(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	for (auto &l : g->dcl) {
		mlx5_qpn_dci_destroy(l.dci);
		mlx5_qpn_cq_destroy(l.cq);
		l = dc_lcore{};
	}
	for (auto &d : g->dcdev) {
		for (auto *t : d.dct)
			mlx5_qpn_dct_destroy(t);
		mlx5_qpn_cq_destroy(d.cq);
	}
	g->dcdev.clear();
}

/* The data path is optional: -EOPNOTSUPP (no DC data path in this build or backend) makes the
 * engines skip the send step; any other error fails the start. */
static int dc_init(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	ctx->data_path = false;
	ctx->data_path_note.clear();
	if (ctx->cfg->msgs_per_conn == 0) {
		ctx->data_path_note = "--msgs-per-conn=0";
		return 0;
	}
	const char *what = "";
	int rc = 0;
	g->dcdev.resize(ctx->devs.size());
	for (size_t d = 0; d < ctx->devs.size() && rc == 0; d++) {
		what = "mlx5_qpn_cq_create";
		rc = mlx5_qpn_cq_create(ctx->devs[d], 12, &g->dcdev[d].cq);
		unsigned nb_dct = ctx->cfg->role_server() ? ctx->cfg->peers : 0;
		for (unsigned p = 0; p < nb_dct && rc == 0; p++) {
			mlx5_qpn_dct *t = nullptr;
			what = "mlx5_qpn_dct_create";
			rc = mlx5_qpn_dct_create(ctx->devs[d], g->dcdev[d].cq, kDcKey, &t);
			if (rc == 0) {
				g->dcdev[d].dct.push_back(t);
				g->dcdev[d].dctn.push_back(mlx5_qpn_dct_number(t));
			}
		}
	}
	unsigned lc;
	RTE_LCORE_FOREACH(lc) {
		if (rc != 0 || !ctx->role[lc].client)
			continue;
		mlx5_qpn_dev *dev = ctx->devs[ctx->role[lc].dev];
		what = "mlx5_qpn_cq_create";
		rc = mlx5_qpn_cq_create(dev, 10, &g->dcl[lc].cq);
		if (rc == 0) {
			what = "mlx5_qpn_dci_create";
			rc = mlx5_qpn_dci_create(dev, g->dcl[lc].cq, 8, &g->dcl[lc].dci);
		}
	}
	if (rc == 0 && !ctx->cfg->role_server()) {
		/* Client process: the DCTs are the server's, as published. */
		for (auto &d : g->dcdev)
			d.dctn = g->peer_dctn;
		for (uint32_t n : g->peer_dctn)
			if (n == 0) {
				dc_fini(ctx);
				ctx->data_path_note = "the server published no DCT (its "
						      "--msgs-per-conn=0 or no data path)";
				return 0;
			}
	}
	if (rc == 0) {
		ctx->data_path = true;
		return 0;
	}
	dc_fini(ctx);
	ctx->data_path_note = std::string(what) + ": " + strerror(-rc);
	if (rc == -EOPNOTSUPP)
		return 0;
	fprintf(stderr, "qpn-testpmd: DC data path: %s\n", ctx->data_path_note.c_str());
	return rc;
}

/* Client process: wait for the server process to publish its peers, take up to --peers. */
static int peers_from_directory(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	const run_config &cfg = *ctx->cfg;
	mlx5_qpn_cm_shm_service svc[MLX5_QPN_CM_SHM_MAX_SERVICES];
	const uint64_t deadline = mlx5_qpn_clock_ns() + static_cast<uint64_t>(kDirWaitS * 1e9);
	int n;
	while ((n = mlx5_qpn_cm_shm_lookup(g->shm, kServiceId, svc,
					    MLX5_QPN_CM_SHM_MAX_SERVICES)) == 0 &&
	       mlx5_qpn_clock_ns() < deadline)
		usleep(10000);
	if (n <= 0) {
		fprintf(stderr, "qpn-testpmd: no server on CM fabric \"%s\" after %.0f s (start "
				"qpn-testpmd --role=server --fabric=%s first)\n",
			cfg.fabric.c_str(), kDirWaitS, cfg.fabric.c_str());
		return -ETIMEDOUT;
	}
	unsigned take = std::min(static_cast<unsigned>(n), cfg.peers);
	for (unsigned i = 0; i < take; i++) {
		g->peer_guid.push_back(svc[i].node_guid);
		g->peer_dctn.push_back(svc[i].dct_number);
		g->peer_key.push_back(svc[i].dc_key);
	}
	printf("qpn-testpmd: %d server node(s) on CM fabric \"%s\" (pid %d), using %u\n", n,
	       cfg.fabric.c_str(), static_cast<int>(svc[0].pid), take);
	return 0;
}

int cm_glue_init(run_ctx *ctx)
{
	if (ctx->cm == nullptr)
		ctx->cm = new cm_glue();
	cm_glue *g = ctx->cm;
	const run_config &cfg = *ctx->cfg;
	roles_assign(ctx);
	char name[64];
	g->peer_guid.clear();
	g->peer_dctn.clear();
	g->peer_key.clear();
	if (!cfg.fabric.empty()) {
		int rc = mlx5_qpn_cm_shm_fabric_open(cfg.fabric.c_str(), MLX5_QPN_CM_SHM_MAX_NODES,
						     kShmSlots, &g->shm);
		if (rc != 0) {
			fprintf(stderr, "qpn-testpmd: cannot open the CM fabric \"%s\": %s\n",
				cfg.fabric.c_str(), strerror(-rc));
			return rc;
		}
	} else {
		snprintf(name, 16, "tp%u_%u", static_cast<unsigned>(getpid() % 100000),
			 ctx->fabric_seq++);
		unsigned nodes = static_cast<unsigned>(ctx->devs.size()) + cfg.peers;
		g->fabric = mlx5_qpn_cm_fabric_create(name, nodes, 4096);
		if (g->fabric == nullptr) {
			fprintf(stderr, "qpn-testpmd: cannot create the CM fabric: %s\n",
				rte_strerror(rte_errno));
			return -ENOMEM;
		}
	}
	int rc = 0;
	if (!cfg.role_server())
		rc = peers_from_directory(ctx);
	for (size_t d = 0; d < ctx->devs.size() && rc == 0 && cfg.role_client(); d++) {
		mlx5_qpn_dev_info info;
		mlx5_qpn_dev_info_get(ctx->devs[d], &info);
		auto *c = new client_node();
		g->clients.push_back(c);
		c->guid = info.node_guid;
		snprintf(name, sizeof(name), "client-%.24s", info.name);
		c->cm = agent_create(ctx, name, c->guid, &c->tp);
		if (c->cm == nullptr)
			rc = -ENOMEM;
	}
	mlx5_qpn_dev_info info0;
	mlx5_qpn_dev_info_get(ctx->dev, &info0);
	for (unsigned p = 0; p < cfg.peers && rc == 0 && cfg.role_server(); p++) {
		auto *s = new server_node();
		g->servers.push_back(s);
		/* A GUID of its own, as a remote node: the device GUID with the top byte flipped. */
		s->guid = (info0.node_guid ^ (0xA5ull << 56)) + p + 1;
		snprintf(name, sizeof(name), "server-%u", p);
		s->cm = agent_create(ctx, name, s->guid, &s->tp);
		if (s->cm == nullptr)
			rc = -ENOMEM;
		else if ((rc = mlx5_qpn_cm_listen(s->cm, kServiceId)) != 0)
			fprintf(stderr, "qpn-testpmd: listen: %s\n", strerror(-rc));
	}
	for (server_node *s : g->servers) {
		g->peer_guid.push_back(s->guid);
		g->peer_key.push_back(kDcKey);
	}
	if (rc == 0)
		rc = dc_init(ctx);
	if (rc == 0 && cfg.role_server() && g->shm != nullptr) {
		/* Publish each peer for client processes (DCT 0: no data path here). */
		for (size_t p = 0; p < g->servers.size() && rc == 0; p++) {
			mlx5_qpn_cm_shm_service svc{};
			svc.service_id = kServiceId;
			svc.node_guid = g->servers[p]->guid;
			svc.dc_key = kDcKey;
			svc.dct_number = ctx->data_path ? g->dcdev[0].dctn[p] : 0;
			rc = mlx5_qpn_cm_shm_publish(g->shm, &svc);
			if (rc != 0)
				fprintf(stderr, "qpn-testpmd: cannot publish server %zu on fabric "
						"\"%s\": %s\n", p, cfg.fabric.c_str(), strerror(-rc));
		}
	}
	if (rc != 0) {
		cm_glue_fini(ctx);
		return rc;
	}
	return 0;
}

void cm_glue_free(run_ctx *ctx)
{
	cm_glue_fini(ctx);
	delete ctx->cm;
	ctx->cm = nullptr;
}

cm_agent_totals cm_glue_totals(run_ctx *ctx)
{
	cm_agent_totals t;
	cm_glue *g = ctx->cm;
	if (g == nullptr)
		return t;
	if (g->fabric == nullptr && g->shm == nullptr)
		return g->last;
	auto add = [&t](mlx5_qpn_cm *cm) {
		mlx5_qpn_cm_stats s;
		if (cm == nullptr || mlx5_qpn_cm_stats_get(cm, &s) != 0)
			return;
		t.stale_rejects_sent += s.stale_rejects;
		t.stale_dreqs += s.stale_dreqs;
		t.retransmits += s.retransmits;
		t.timeouts += s.timeouts;
		t.malformed += s.malformed;
		t.unexpected += s.unexpected;
		t.established += s.established;
	};
	for (auto *c : g->clients)
		add(c->cm);
	for (auto *s : g->servers)
		add(s->cm);
	t.fabric_drops = g->shm != nullptr ? mlx5_qpn_cm_shm_drops(g->shm)
					   : mlx5_qpn_cm_fabric_drops(g->fabric);
	t.stale_rejects_sent += g->last.stale_rejects_sent;
	t.stale_dreqs += g->last.stale_dreqs;
	t.retransmits += g->last.retransmits;
	t.timeouts += g->last.timeouts;
	t.malformed += g->last.malformed;
	t.unexpected += g->last.unexpected;
	t.established += g->last.established;
	t.fabric_drops += g->last.fabric_drops;
	return t;
}

void cm_glue_fini(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	if (g == nullptr)
		return;
	if (g->fabric != nullptr || g->shm != nullptr)
		g->last = cm_glue_totals(ctx); /* keep the counters for the summary */
	dc_fini(ctx);
	for (auto *c : g->clients) {
		mlx5_qpn_cm_destroy(c->cm);
		delete c;
	}
	g->clients.clear();
	for (auto *s : g->servers) {
		/* Connections still open at the end: give their QPNs back. */
		for (auto &kv : s->conns)
			mlx5_qpn_reserved_dealloc(ctx->dev, kv.second.qpn);
		mlx5_qpn_cm_destroy(s->cm);
		delete s;
	}
	g->servers.clear();
	mlx5_qpn_cm_fabric_destroy(g->fabric);
	g->fabric = nullptr;
	/* Detaches this process's nodes and withdraws its directory entries; the segment stays
	 * while the other process uses it, and goes with the last user's close. */
	mlx5_qpn_cm_shm_fabric_close(g->shm);
	g->shm = nullptr;
}

/* ------------------------------------------------------------------------------------------ */
/* The passive side: every server agent, the DCTs' CQs and the doorbell service.               */

static void count_rej(lcore_stats &st, uint16_t reason)
{
	if (reason < MLX5_QPN_CM_REJ_REASON_SLOTS)
		st.rej[reason].fetch_add(1, std::memory_order_relaxed);
	if (reason == MLX5_QPN_CM_REJ_STALE_CONN)
		st.stale_rejects.fetch_add(1, std::memory_order_relaxed);
}

/* The passive side gives its QPN back when its own timewait ends, not at DISCONNECTED: the
 * active side entered timewait later (when the DREP arrived) and, under the strict policy, holds
 * (server GUID, server QPN) until then; the pool's quarantine then covers that difference. The
 * cycle is counted from the REQ to DISCONNECTED (plus the release call). */
static void server_release(run_ctx *ctx, server_conn &sc, bool completed)
{
	lcore_stats &st = ctx->srv;
	uint64_t t0 = rte_rdtsc();
	int rc = mlx5_qpn_reserved_dealloc(ctx->dev, sc.qpn);
	uint64_t t1 = rte_rdtsc();
	if (rc != 0) {
		st.errors.fetch_add(1, std::memory_order_relaxed);
		APP_LOG(ERR, "server: release of QPN 0x%x: %s", sc.qpn, strerror(-rc));
		return;
	}
	st.hist[STEP_RELEASE].record(t1 - t0);
	st.frees.fetch_add(1, std::memory_order_relaxed);
	if (completed) {
		uint64_t cyc = sc.t_end - sc.t_alloc0 + (t1 - t0);
		st.hist[STEP_CYCLE].record(cyc);
		st.pool_cycles += sc.pool_cyc + (t1 - t0);
		st.cycle_cycles += cyc;
	}
}

static void server_poll(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	lcore_stats &st = ctx->srv;
	uint64_t now = mlx5_qpn_clock_ns();
	for (server_node *s : g->servers) {
		/* Tick first: a timewait that ended is gone before the next REQ is looked at. */
		mlx5_qpn_cm_tick(s->cm, now);
		int rc = mlx5_qpn_cm_poll(s->cm, now);
		if (rc < 0) {
			st.errors.fetch_add(1, std::memory_order_relaxed);
			continue;
		}
		mlx5_qpn_cm_event ev;
		while (mlx5_qpn_cm_poll_event(s->cm, &ev) == 0) {
			switch (ev.type) {
			case MLX5_QPN_CM_EVENT_REQ: {
				server_conn sc{};
				sc.t_req = sc.t_alloc0 = rte_rdtsc();
				rc = mlx5_qpn_reserved_alloc(ctx->dev, &sc.qpn);
				uint64_t t1 = rte_rdtsc();
				if (rc != 0) {
					(rc == -EAGAIN ? st.eagain : rc == -ENOSPC ? st.enospc : st.errors)
						.fetch_add(1, std::memory_order_relaxed);
					mlx5_qpn_cm_reject(s->cm, ev.conn_id,
							   MLX5_QPN_CM_REJ_NO_RESOURCES, nullptr, 0,
							   mlx5_qpn_clock_ns());
					break;
				}
				st.allocs.fetch_add(1, std::memory_order_relaxed);
				st.hist[STEP_ALLOC].record(t1 - sc.t_alloc0);
				sc.pool_cyc = t1 - sc.t_alloc0;
				rc = mlx5_qpn_cm_accept(s->cm, ev.conn_id, sc.qpn, nullptr, 0,
							mlx5_qpn_clock_ns());
				sc.t_acc = rte_rdtsc();
				if (rc != 0) {
					APP_LOG(ERR, "server: accept: %s", strerror(-rc));
					st.errors.fetch_add(1, std::memory_order_relaxed);
					mlx5_qpn_cm_reject(s->cm, ev.conn_id,
							   MLX5_QPN_CM_REJ_NO_RESOURCES, nullptr, 0,
							   mlx5_qpn_clock_ns());
					server_release(ctx, sc, false);
					break;
				}
				s->conns[ev.conn_id] = sc;
				break;
			}
			case MLX5_QPN_CM_EVENT_ESTABLISHED: {
				auto it = s->conns.find(ev.conn_id);
				if (it != s->conns.end() && !it->second.established) {
					it->second.established = true;
					st.hist[STEP_RTU].record(rte_rdtsc() - it->second.t_acc);
				}
				break;
			}
			case MLX5_QPN_CM_EVENT_REJECTED:
			case MLX5_QPN_CM_EVENT_DISCONNECTED: {
				if (ev.type == MLX5_QPN_CM_EVENT_REJECTED)
					count_rej(st, ev.reason);
				auto it = s->conns.find(ev.conn_id);
				if (it == s->conns.end())
					break;
				server_conn &sc = it->second;
				if (ev.type == MLX5_QPN_CM_EVENT_DISCONNECTED && sc.established) {
					sc.t_end = rte_rdtsc();
					st.ops.fetch_add(1, std::memory_order_relaxed);
				}
				mlx5_qpn_cm_conn_info ci;
				if (mlx5_qpn_cm_conn_get(s->cm, ev.conn_id, &ci) == 0 &&
				    ci.state == MLX5_QPN_CM_STATE_TIMEWAIT)
					break; /* released at TIMEWAIT_EXIT */
				server_release(ctx, sc, sc.t_end != 0);
				s->conns.erase(it);
				break;
			}
			case MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT: {
				auto it = s->conns.find(ev.conn_id);
				if (it != s->conns.end()) {
					server_release(ctx, it->second, it->second.t_end != 0);
					s->conns.erase(it);
				}
				break;
			}
			default:
				break;
			}
		}
	}
	if (ctx->data_path) {
		for (mlx5_qpn_dev *d : ctx->devs)
			mlx5_qpn_dev_service_run(d);
		mlx5_qpn_wc wc[32];
		for (auto &dd : g->dcdev) {
			int n = mlx5_qpn_cq_poll(dd.cq, wc, 32);
			for (int i = 0; i < n; i++) {
				if (wc[i].syndrome != 0)
					st.cqe_errors.fetch_add(1, std::memory_order_relaxed);
				else
					st.recvs.fetch_add(1, std::memory_order_relaxed);
			}
		}
	}
}

/* ------------------------------------------------------------------------------------------ */
/* The active side: connection slots of one client lcore.                                     */

namespace {

enum slot_state { S_IDLE, S_CONNECTING, S_SENDING, S_DISCONNECTING };

struct slot {
	slot_state state = S_IDLE;
	uint32_t qpn = 0;
	bool owns_qpn = false;
	bool peer_closed = false;
	bool abort = false;        /* churn: disconnect without sending */
	uint32_t conn_id = 0;
	unsigned peer = 0;
	unsigned msgs = 0;
	unsigned posted = 0, done = 0;
	uint64_t t0 = 0, pool = 0, t_conn = 0, t_send = 0, t_disc = 0;
};

struct xorshift {
	uint64_t s;
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

struct client_loop {
	run_ctx *ctx;
	unsigned lcore;
	const client_mode &mode;
	lcore_stats &st;
	client_node *node;
	mlx5_qpn_dev *dev;
	dc_lcore *dc;
	uint64_t quota; /* connections to start (0: unlimited) */
	uint64_t started = 0;
	unsigned rr = 0;
	slot slots[kMaxSlots];
	unsigned active_slots;
	xorshift rng;
	std::vector<mini_ev> evs;

	client_loop(run_ctx *c, unsigned lc, const client_mode &m)
		: ctx(c), lcore(lc), mode(m), st(c->lc[lc]),
		  node(c->cm->clients[c->role[lc].dev]), dev(c->devs[c->role[lc].dev]),
		  dc(&c->cm->dcl[lc]), rng{c->cfg->seed * 0x9E3779B97F4A7C15ull + lc + 1}
	{
		const run_config &cfg = *ctx->cfg;
		active_slots = std::min(std::max(cfg.inflight, cfg.force_shared_qpn ? 2u : 1u),
					kMaxSlots);
		quota = 0;
		if (cfg.connections != 0) {
			quota = cfg.connections / ctx->nb_clients;
			if (ctx->role[lc].client_idx < cfg.connections % ctx->nb_clients)
				quota++;
			if (quota == 0)
				quota = UINT64_MAX; /* nothing to do: mark as finished below */
		}
	}

	void release(slot &s, bool completed)
	{
		uint64_t t1 = rte_rdtsc();
		if (s.owns_qpn) {
			uint64_t t0 = rte_rdtsc();
			int rc = mlx5_qpn_reserved_dealloc(dev, s.qpn);
			t1 = rte_rdtsc();
			if (rc == 0) {
				st.hist[STEP_RELEASE].record(t1 - t0);
				st.frees.fetch_add(1, std::memory_order_relaxed);
				s.pool += t1 - t0;
			} else {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(ERR, "lcore %u: release of QPN 0x%x: %s", lcore, s.qpn,
					strerror(-rc));
			}
		}
		if (completed) {
			st.hist[STEP_CYCLE].record(t1 - s.t0);
			st.pool_cycles += s.pool;
			st.cycle_cycles += t1 - s.t0;
			st.ops.fetch_add(1, std::memory_order_relaxed);
		}
		s = slot{};
	}

	void disconnect(slot &s)
	{
		node->lock.lock();
		int rc = mlx5_qpn_cm_disconnect(node->cm, s.conn_id, mlx5_qpn_clock_ns());
		node->lock.unlock();
		s.t_disc = rte_rdtsc();
		if (rc != 0) {
			/* The peer closed it meanwhile (its DISCONNECTED event is on its way). */
			s.peer_closed = true;
		}
		s.state = S_DISCONNECTING;
	}

	/* Connection usable: send, or close right away without a data path. */
	void established(slot &s)
	{
		uint64_t now = rte_rdtsc();
		st.hist[STEP_REQ_REP].record(now - s.t_conn);
		if (!ctx->data_path || s.msgs == 0 || s.abort) {
			disconnect(s);
			return;
		}
		s.state = S_SENDING;
		s.t_send = now;
		post_more(s);
		if (s.msgs == 0)
			disconnect(s);
	}

	/* Post what is left of a slot's sends (the send queue may have been full). */
	void post_more(slot &s)
	{
		const uint32_t dctn = ctx->cm->dcdev[ctx->role[lcore].dev].dctn[s.peer];
		const uint64_t key = ctx->cm->peer_key[s.peer];
		uint8_t payload[64];
		memset(payload, 0x5a, sizeof(payload));
		unsigned idx = static_cast<unsigned>(&s - slots);
		unsigned before = s.posted;
		while (s.posted < s.msgs) {
			uint64_t wr_id = (uint64_t(idx) << 32) | s.posted;
			int rc = mlx5_qpn_dci_post_send(dc->dci, dctn, key, payload, sizeof(payload),
							wr_id);
			if (rc == -ENOBUFS)
				break; /* send queue full: post the rest after completions */
			if (rc != 0) {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(ERR, "lcore %u: post_send: %s", lcore, strerror(-rc));
				s.msgs = s.posted;
				break;
			}
			s.posted++;
			st.sends.fetch_add(1, std::memory_order_relaxed);
		}
		if (s.posted != before)
			mlx5_qpn_dci_ring(dc->dci);
	}

	void on_cqes()
	{
		mlx5_qpn_wc wc[32];
		int n = mlx5_qpn_cq_poll(dc->cq, wc, 32);
		for (int i = 0; i < n; i++) {
			unsigned idx = static_cast<unsigned>(wc[i].wr_id >> 32);
			st.cqes.fetch_add(1, std::memory_order_relaxed);
			if (wc[i].syndrome != 0 || wc[i].opcode == MLX5_QPN_CQE_REQ_ERR)
				st.cqe_errors.fetch_add(1, std::memory_order_relaxed);
			if (idx >= kMaxSlots || slots[idx].state != S_SENDING)
				continue;
			slot &s = slots[idx];
			s.done++;
			if (s.posted < s.msgs)
				post_more(s);
			if (s.done >= s.msgs) {
				st.hist[STEP_SEND_CQE].record(rte_rdtsc() - s.t_send);
				if (s.peer_closed)
					release(s, false);
				else
					disconnect(s);
			}
		}
	}

	slot *find(uint32_t conn_id)
	{
		for (unsigned i = 0; i < kMaxSlots; i++)
			if (slots[i].state != S_IDLE && slots[i].conn_id == conn_id)
				return &slots[i];
		return nullptr;
	}

	void on_event(const mini_ev &ev)
	{
		slot *s = find(ev.conn_id);
		if (s == nullptr)
			return;
		switch (ev.type) {
		case MLX5_QPN_CM_EVENT_ESTABLISHED:
			if (s->state == S_CONNECTING)
				established(*s);
			break;
		case MLX5_QPN_CM_EVENT_REJECTED:
			/* Count it, release the QPN, go on: a stale reject must not stall the run. */
			count_rej(st, ev.reason);
			release(*s, false);
			break;
		case MLX5_QPN_CM_EVENT_DISCONNECTED:
			if (s->state == S_DISCONNECTING && !s->peer_closed) {
				st.hist[STEP_DREQ_DREP].record(rte_rdtsc() - s->t_disc);
				release(*s, true);
			} else if (s->state == S_SENDING && s->done < s->posted) {
				/* Closed by the peer (e.g. its stale-connection DREQ) while sends are
				 * in flight: wait for their completions, then release. */
				st.peer_disc.fetch_add(1, std::memory_order_relaxed);
				s->peer_closed = true;
			} else {
				st.peer_disc.fetch_add(1, std::memory_order_relaxed);
				release(*s, false);
			}
			break;
		default:
			break;
		}
	}

	/* Start a connection on an idle slot. @return false when it should wait (no QPN now). */
	bool start(slot &s)
	{
		const run_config &cfg = *ctx->cfg;
		unsigned idx = static_cast<unsigned>(&s - slots);
		s = slot{};
		const unsigned nb_peers = static_cast<unsigned>(ctx->cm->peer_guid.size());
		s.peer = mode.churn ? rng.below(nb_peers) : (rr++ % nb_peers);
		s.msgs = cfg.msgs_per_conn;
		if (mode.churn) {
			s.msgs = rng.below(2 * cfg.msgs_per_conn + 1);
			s.abort = rng.below(8) == 0;
		}
		s.t0 = rte_rdtsc();
		/* Negative control: odd slots borrow the QPN of the slot before them while it is
		 * open, so two connections of this node present one QPN to one peer at once. */
		if (cfg.force_shared_qpn && (idx & 1) && slots[idx - 1].state != S_IDLE &&
		    slots[idx - 1].owns_qpn) {
			s.qpn = slots[idx - 1].qpn;
			s.peer = slots[idx - 1].peer;
			s.owns_qpn = false;
		} else {
			int rc = mlx5_qpn_reserved_alloc(dev, &s.qpn);
			uint64_t t1 = rte_rdtsc();
			if (rc != 0) {
				(rc == -EAGAIN ? st.eagain : rc == -ENOSPC ? st.enospc : st.errors)
					.fetch_add(1, std::memory_order_relaxed);
				if (rc != -EAGAIN && rc != -ENOSPC)
					APP_LOG(ERR, "lcore %u: alloc: %s", lcore, strerror(-rc));
				s = slot{};
				return false;
			}
			st.hist[STEP_ALLOC].record(t1 - s.t0);
			st.allocs.fetch_add(1, std::memory_order_relaxed);
			s.pool = t1 - s.t0;
			s.owns_qpn = true;
		}
		node->lock.lock();
		s.t_conn = rte_rdtsc();
		int rc = mlx5_qpn_cm_connect(node->cm, ctx->cm->peer_guid[s.peer], kServiceId,
					     s.qpn, nullptr, 0, mlx5_qpn_clock_ns(), &s.conn_id);
		if (rc == 0)
			node->owner[s.conn_id] = lcore;
		node->lock.unlock();
		if (rc != 0) {
			(rc == -ENOSPC || rc == -ENOBUFS ? st.cm_busy : st.errors)
				.fetch_add(1, std::memory_order_relaxed);
			if (rc != -ENOSPC && rc != -ENOBUFS)
				APP_LOG(ERR, "lcore %u: connect: %s", lcore, strerror(-rc));
			release(s, false);
			return false;
		}
		s.state = S_CONNECTING;
		started++;
		return true;
	}

	/* Poll the shared agent and collect this lcore's events. */
	void poll_agent()
	{
		node->lock.lock();
		uint64_t now = mlx5_qpn_clock_ns();
		mlx5_qpn_cm_tick(node->cm, now);
		mlx5_qpn_cm_poll(node->cm, now);
		mlx5_qpn_cm_event ev;
		while (mlx5_qpn_cm_poll_event(node->cm, &ev) == 0) {
			auto it = node->owner.find(ev.conn_id);
			if (it == node->owner.end())
				continue;
			unsigned owner = it->second;
			if (ev.type == MLX5_QPN_CM_EVENT_REJECTED ||
			    ev.type == MLX5_QPN_CM_EVENT_DISCONNECTED ||
			    ev.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT)
				node->owner.erase(it); /* nothing more for the lcore after these */
			if (ev.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT)
				continue;
			node->pending[owner].push_back(
				mini_ev{ev.type, ev.conn_id, ev.remote_qpn, ev.reason});
		}
		evs.swap(node->pending[lcore]);
		node->pending[lcore].clear();
		node->lock.unlock();
	}

	unsigned open_slots() const
	{
		unsigned n = 0;
		for (const slot &s : slots)
			n += s.state != S_IDLE;
		return n;
	}

	void run()
	{
		const bool server = ctx->role[lcore].server;
		uint64_t drain_deadline = 0;
		unsigned storm = 0;
		for (;;) {
			bool stopping = ctx->stop.load(std::memory_order_relaxed) ||
					(quota != 0 && started >= quota);
			if (stopping && drain_deadline == 0)
				drain_deadline = mlx5_qpn_clock_ns() + kDrainNs;
			if (server)
				server_poll(ctx);
			else if (ctx->data_path && !ctx->cfg->role_server())
				/* No server lcore in this process: execute our doorbells here (the
				 * server process's service may run them too; the device serialises). */
				for (mlx5_qpn_dev *d : ctx->devs)
					mlx5_qpn_dev_service_run(d);
			poll_agent();
			for (const mini_ev &ev : evs)
				on_event(ev);
			evs.clear();
			if (ctx->data_path) {
				on_cqes();
				/* Sends that found the send queue full (storms): post them now. */
				for (slot &s : slots)
					if (s.state == S_SENDING && s.posted < s.msgs)
						post_more(s);
			}
			if (!stopping) {
				unsigned limit = active_slots;
				if (mode.churn) {
					/* Reconnect storms: every 512 connections, all slots at once
					 * for the next 128. */
					if (storm == 0 && rng.below(512) == 0)
						storm = 128;
					if (storm > 0)
						limit = kMaxSlots;
				}
				for (unsigned i = 0; i < limit; i++) {
					if (slots[i].state != S_IDLE)
						continue;
					if (quota != 0 && started >= quota)
						break;
					if (!start(slots[i]))
						break;
					if (storm > 0)
						storm--;
				}
				if (mode.churn && rng.below(64) == 0) {
					/* A burst of bare alloc/free mixed in (no connection). */
					uint32_t q[8];
					if (mlx5_qpn_reserved_alloc_bulk(dev, q, 8) == 0)
						mlx5_qpn_reserved_dealloc_bulk(dev, q, 8);
				}
			} else if (open_slots() == 0 || mlx5_qpn_clock_ns() > drain_deadline) {
				break;
			}
		}
		/* Anything still open at the drain deadline: forget it, give the QPN back. */
		for (slot &s : slots)
			if (s.state != S_IDLE) {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(WARNING, "lcore %u: connection 0x%x still open at stop", lcore,
					s.conn_id);
				release(s, false);
			}
	}
};

} // namespace

int cm_lcore_run(run_ctx *ctx, unsigned lcore, const client_mode &mode)
{
	const lcore_role &r = ctx->role[lcore];
	if (r.client) {
		client_loop *cl = new client_loop(ctx, lcore, mode);
		cl->run();
		delete cl;
		ctx->clients_running.fetch_sub(1, std::memory_order_acq_rel);
		/* A co-polling client serves the passive side until every client is done. */
		if (r.server)
			while (ctx->clients_running.load(std::memory_order_acquire) != 0)
				server_poll(ctx);
		else
			mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(ctx->devs[r.dev]));
		return 0;
	}
	if (r.server) {
		/* A server process has no clients: it serves until the run is stopped. */
		const bool alone = !ctx->cfg->role_client();
		while (ctx->clients_running.load(std::memory_order_acquire) != 0 ||
		       (alone && !ctx->stop.load(std::memory_order_acquire)))
			server_poll(ctx);
		/* The last frames (DREPs already sent) need no answer; done. */
		server_poll(ctx);
	}
	return 0;
}
