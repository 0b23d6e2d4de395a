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
#include "cm_glue.h"

RTE_LOG_REGISTER(qpn_app_logtype, mlx5_qpn.app, INFO);

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
