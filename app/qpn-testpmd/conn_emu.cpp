/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated connections (conn.h): lib/cm's agents over a ring fabric, and the emulated DC data
 * path (conn_emu_dc.cpp).
 *
 * Nodes. Every node is a CM agent attached to one in-process ring fabric:
 * - one *client* agent per client lcore, polled by that lcore alone: no lock, no hand-over of
 *   events between lcores, and each lcore's timers and timewait entries in its own agent, so
 *   client lcores scale. (One agent per device behind a spinlock, as all processes on one HCA
 *   share the kernel's CM, serialised every client lcore on it.) The first client lcore of a
 *   device has the device's node GUID; the others the GUID with their rank in bits 40..47: the
 *   fabric routes by GUID. Stale detection loses nothing by it: it keys on (GUID, QPN) and the
 *   lcores' QPNs come from one pool, so two lcores never present one QPN (the negative control,
 *   --force-shared-qpn, shares a QPN between two connections of one lcore);
 * - one *server* agent per peer (--peers), each with a GUID of its own, as if it were a remote
 *   node: the passive side's (GUID, QPN) table of each peer is where STALE_CONN comes from. The
 *   peers are split among the server lcores (--server-lcores; peer p is server p % nb_servers's):
 *   each server lcore polls only its own peers' agents and DCTs (a CQ of its own per device), so
 *   no agent is shared and none needs a lock. Splitting loses nothing of the CM's checks: each
 *   (GUID, QPN) table, timewait and stale-REQ check is a peer's, and a peer stays on one lcore.
 *   The device's doorbell service runs on server 0 only (conn_emu_dc.cpp says why).
 *
 * Both sides take a reserved QPN per connection (the engines do): the client for its REQ, the
 * server for its REP (as rdma-core's DC-over-CM test does): with one QPN per DCT for every
 * connection, the active side would see two live connections to the same (GUID, QPN) and reject
 * the second REP as stale.
 *
 * Two processes (--role, --fabric): the agents attach to a shared-memory fabric instead; the
 * server process publishes (service id, node GUID, DCT number, DC key) of each peer in the
 * fabric's service directory, and the client process takes its peers from there, so it needs
 * nothing of the server but the fabric name and the device.
 *
 * Time: the CM gets mlx5_qpn_clock_ns(), the clock of the pool's quarantine, so "quarantine >=
 * timewait" compares like with like; one system-wide clock, so a frame's send time (which the
 * fabrics carry and the agents handle it at) means the same in both processes of --role. Step
 * latencies are TSC cycles (rte_rdtsc), the engines'.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <unistd.h>

#include <rte_errno.h>

#include "conn_emu.h"

uint32_t
agent_conns(const run_config &cfg)
{
	/* A batch run makes no more connections than its duration allows: a 0.2 s run at a 1 s
	 * timewait needs no second's worth of slots (at the prompt a run lasts until `stop`). */
	uint64_t ms = cm_timewait_ms(cfg);
	if (!cfg.interactive && cfg.duration_s > 0)
		ms = std::min<uint64_t>(ms, static_cast<uint64_t>(cfg.duration_s * 1000) + 1);
	uint64_t want = std::max<uint64_t>(kAgentConns, ms * 384);
	uint32_t n = kAgentConns;
	while (n < want && n < kAgentConnsMax)
		n <<= 1;
	return n;
}

emu_state g_emu;

namespace {

mlx5_qpn_cm *
agent_create(run_ctx *ctx, const char *name, uint64_t guid, mlx5_qpn_cm_transport *tp,
	     uint32_t slots)
{
	int rc = g_emu.shm != nullptr ? mlx5_qpn_cm_shm_fabric_attach(g_emu.shm, guid, tp) :
					mlx5_qpn_cm_fabric_attach(g_emu.fabric, guid, tp);
	if (rc != 0) {
		fprintf(stderr, "qpn-testpmd: cannot attach CM node %s (GUID %016" PRIx64 "): %s\n",
			name, guid, strerror(-rc));
		return nullptr;
	}
	mlx5_qpn_cm_params p{};
	p.name = name;
	p.node_guid = guid;
	p.policy = ctx->cfg->policy;
	p.max_conns = slots;
	/* Events are taken every poll round; the default (2 x max_conns) would be a ~70 MB ring at a
	 * 1 s timewait, and too short a one for the 16384 slots of a 16 ms run. */
	p.event_queue_size = std::min(kAgentEvents, 4 * slots);
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
int
peers_from_directory(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	const run_config &cfg = *ctx->cfg;
	mlx5_qpn_cm_shm_service svc[MLX5_QPN_CM_SHM_MAX_SERVICES];
	const uint64_t deadline = mlx5_qpn_clock_ns() + static_cast<uint64_t>(kDirWaitS * 1e9);
	int n;
	while ((n = mlx5_qpn_cm_shm_fabric_lookup(g->shm, kServiceId, svc,
						  MLX5_QPN_CM_SHM_MAX_SERVICES)) == 0 &&
	       mlx5_qpn_clock_ns() < deadline)
		usleep(10000);
	if (n <= 0) {
		fprintf(stderr,
			"qpn-testpmd: no server on CM fabric \"%s\" after %.0f s (start "
			"qpn-testpmd --role=server --fabric=%s first)\n",
			cfg.fabric.c_str(), kDirWaitS, cfg.fabric.c_str());
		return -ETIMEDOUT;
	}
	unsigned take = std::min(static_cast<unsigned>(n), cfg.peers);
	for (unsigned i = 0; i < take; i++) {
		g->peer_guid.push_back(svc[i].node_guid);
		g->peer_dctn.push_back(svc[i].dct_qpn);
		g->peer_key.push_back(svc[i].dc_key);
	}
	printf("qpn-testpmd: %d server node(s) on CM fabric \"%s\" (pid %d), using %u\n", n,
	       cfg.fabric.c_str(), static_cast<int>(svc[0].pid), take);
	return 0;
}

qpn_conn_totals
emu_totals(run_ctx *)
{
	emu_state *g = &g_emu;
	if (g->fabric == nullptr && g->shm == nullptr)
		return g->last;
	qpn_conn_totals t;
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
		if (c != nullptr)
			add(c->cm);
	for (auto *s : g->servers)
		add(s->cm);
	t.fabric_drops = g->shm != nullptr ? mlx5_qpn_cm_shm_fabric_drops(g->shm) :
					     mlx5_qpn_cm_fabric_drops(g->fabric);
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

void
emu_teardown(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	if (g->fabric != nullptr || g->shm != nullptr)
		g->last = emu_totals(ctx); /* keep the counters for the summary */
	emu_dc_fini(ctx);
	for (auto *c : g->clients) {
		if (c == nullptr)
			continue;
		mlx5_qpn_cm_destroy(c->cm);
		delete c;
	}
	g->clients.clear();
	for (auto *s : g->servers) {
		mlx5_qpn_cm_destroy(s->cm);
		delete s;
	}
	g->servers.clear();
	/* Events of this run that nobody took must not reach the next one. */
	for (auto &q : g->mine)
		q.clear();
	for (auto &q : g->passive)
		q.clear();
	mlx5_qpn_cm_fabric_destroy(g->fabric);
	g->fabric = nullptr;
	/* Detaches this process's nodes and withdraws its directory entries; the segment stays
	 * while the other process uses it, and goes with the last user's close. */
	mlx5_qpn_cm_shm_fabric_close(g->shm);
	g->shm = nullptr;
}

/* The CM fabric: the shared-memory one named by --fabric, else an in-process one. */
int
emu_open_fabric(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	const run_config &cfg = *ctx->cfg;
	if (!cfg.fabric.empty()) {
		int rc = mlx5_qpn_cm_shm_fabric_open(cfg.fabric.c_str(), MLX5_QPN_CM_SHM_MAX_NODES,
						     kShmSlots, &g->shm);
		if (rc != 0)
			fprintf(stderr, "qpn-testpmd: cannot open the CM fabric \"%s\": %s\n",
				cfg.fabric.c_str(), strerror(-rc));
		return rc;
	}
	char name[16];
	snprintf(name, sizeof(name), "tp%u_%u", static_cast<unsigned>(getpid() % 100000),
		 g->fabric_seq++);
	unsigned nodes = ctx->nb_clients + cfg.peers;
	g->fabric = mlx5_qpn_cm_fabric_create(name, nodes, 4096);
	if (g->fabric == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot create the CM fabric: %s\n",
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	return 0;
}

/* One CM agent per client lcore, on the GUID of its lcore's device (a rank per device). */
int
emu_create_clients(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	g->clients.assign(ctx->nb_clients, nullptr);
	for (unsigned lc = 0; lc < RTE_MAX_LCORE; lc++) {
		const lcore_role &r = ctx->role[lc];
		if (!r.client)
			continue;
		mlx5_qpn_dev_info info;
		mlx5_qpn_dev_info_get(ctx->devs[r.dev], &info);
		auto *c = new client_node();
		g->clients[r.client_idx] = c;
		const uint64_t rank = r.client_idx / ctx->devs.size();
		c->guid = info.node_guid ^ (rank << 40);
		char name[64];
		snprintf(name, sizeof(name), "client%u-%.24s", r.client_idx, info.name);
		c->cm = agent_create(ctx, name, c->guid, &c->tp, agent_conns(*ctx->cfg));
		if (c->cm == nullptr)
			return -ENOMEM;
	}
	return 0;
}

/* One listening CM agent per peer (DC target), each a remote node of its own. */
int
emu_create_servers(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	const run_config &cfg = *ctx->cfg;
	mlx5_qpn_dev_info info0;
	mlx5_qpn_dev_info_get(ctx->dev, &info0);
	for (unsigned p = 0; p < cfg.peers; p++) {
		auto *s = new server_node();
		g->servers.push_back(s);
		/* A GUID of its own, as a remote node: the device GUID with the top byte flipped. */
		s->guid = (info0.node_guid ^ (0xA5ull << 56)) + p + 1;
		char name[64];
		snprintf(name, sizeof(name), "server-%u", p);
		/* The clients spread their connections over the peers: each needs its share. */
		s->cm = agent_create(ctx, name, s->guid, &s->tp,
				     std::max(kAgentConnsMin, agent_conns(cfg) / cfg.peers));
		if (s->cm == nullptr)
			return -ENOMEM;
		int rc = mlx5_qpn_cm_listen(s->cm, kServiceId);
		if (rc != 0) {
			fprintf(stderr, "qpn-testpmd: listen: %s\n", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Publish each peer on the shared fabric for client processes (DCT 0: no data path here). */
int
emu_publish_servers(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	for (size_t p = 0; p < g->servers.size(); p++) {
		mlx5_qpn_cm_shm_service svc{};
		svc.service_id = kServiceId;
		svc.node_guid = g->servers[p]->guid;
		svc.dc_key = kDcKey;
		svc.dct_qpn = ctx->data_path ? g->dcdev[0].dctn[p] : 0;
		int rc = mlx5_qpn_cm_shm_fabric_publish(g->shm, &svc);
		if (rc != 0) {
			fprintf(stderr,
				"qpn-testpmd: cannot publish server %zu on fabric \"%s\": %s\n", p,
				ctx->cfg->fabric.c_str(), strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int
emu_setup(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	g->peer_guid.clear();
	g->peer_dctn.clear();
	g->peer_key.clear();
	int rc = emu_open_fabric(ctx);
	if (rc != 0)
		return rc;
	if (!ctx->side_passive)
		rc = peers_from_directory(ctx);
	if (rc == 0 && ctx->side_active)
		rc = emu_create_clients(ctx);
	if (rc == 0 && ctx->side_passive)
		rc = emu_create_servers(ctx);
	for (server_node *s : g->servers) {
		g->peer_guid.push_back(s->guid);
		g->peer_key.push_back(kDcKey);
	}
	ctx->nb_peers = static_cast<unsigned>(g->peer_guid.size());
	if (rc == 0)
		rc = emu_dc_init(ctx);
	if (rc == 0 && ctx->side_passive && g->shm != nullptr)
		rc = emu_publish_servers(ctx);
	if (rc != 0) {
		emu_teardown(ctx);
		return rc;
	}
	return 0;
}

/* ---- active side: each client lcore's own agent ---- */

client_node *
node_of(run_ctx *ctx, unsigned lcore)
{
	return g_emu.clients[ctx->role[lcore].client_idx];
}

int
emu_start(run_ctx *ctx, unsigned lcore, unsigned peer, uint32_t qpn, uint32_t *conn)
{
	return mlx5_qpn_cm_connect(node_of(ctx, lcore)->cm, g_emu.peer_guid[peer], kServiceId, qpn,
				   nullptr, 0, mlx5_qpn_clock_ns(), conn);
}

int
emu_disconnect(run_ctx *ctx, unsigned lcore, uint32_t conn)
{
	return mlx5_qpn_cm_disconnect(node_of(ctx, lcore)->cm, conn, mlx5_qpn_clock_ns());
}

/* The CM keeps its own timewait; nothing is held for a connection the engine let go. */
void
emu_active_release(run_ctx *, unsigned, uint32_t)
{
}

/* Poll the lcore's agent (its frames at their send times, then its timers: no tick first, see
 * passive_round()) and take its events. */
void
take_events(client_node *node, std::vector<mini_ev> &evs)
{
	uint64_t now = mlx5_qpn_clock_ns();
	mlx5_qpn_cm_poll(node->cm, now);
	mlx5_qpn_cm_event ev;
	while (mlx5_qpn_cm_poll_event(node->cm, &ev) == 0)
		if (ev.type != MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT) /* the engine is done with it */
			evs.push_back(mini_ev{ev.type, ev.conn_id, ev.reason});
}

qpn_conn_event_type
ev_type(uint32_t cm_type)
{
	switch (cm_type) {
	case MLX5_QPN_CM_EVENT_REQ:
		return QPN_CONN_EV_REQUEST;
	case MLX5_QPN_CM_EVENT_ESTABLISHED:
		return QPN_CONN_EV_ESTABLISHED;
	case MLX5_QPN_CM_EVENT_REJECTED:
		return QPN_CONN_EV_REJECTED;
	case MLX5_QPN_CM_EVENT_DISCONNECTED:
		return QPN_CONN_EV_CLOSED;
	case MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT:
		return QPN_CONN_EV_TIMEWAIT_EXIT;
	default:
		return QPN_CONN_EV_ERROR;
	}
}

unsigned
emu_active_poll(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max)
{
	if (ctx->data_path && !ctx->side_passive)
		/* No server lcore in this process: execute our doorbells here (the server process's
		 * service may run them too; the device serialises). */
		for (mlx5_qpn_dev *d : ctx->devs)
			mlx5_qpn_dev_service_run(d);
	ev_queue<mini_ev> &q = g_emu.mine[lcore];
	if (q.empty()) {
		q.clear();
		take_events(node_of(ctx, lcore), q.evs);
	}
	unsigned n = 0;
	for (; n < max && !q.empty(); q.at++) {
		const mini_ev &m = q.evs[q.at];
		qpn_conn_event_type t = ev_type(m.type);
		if (t == QPN_CONN_EV_REQUEST || t == QPN_CONN_EV_ERROR)
			continue; /* not of the active side */
		ev[n++] = qpn_conn_event{.type = t, .reason = m.reason, .conn = m.conn_id};
	}
	if (ctx->data_path && n < max)
		n += emu_dc_send_completions(ctx, lcore, ev + n, max - n);
	return n;
}

/* ---- passive side: one agent per peer, each peer's driven by its server's lcore ---- */

int
emu_accept(run_ctx *, unsigned node, uint32_t conn, uint32_t qpn)
{
	return mlx5_qpn_cm_accept(g_emu.servers[node]->cm, conn, qpn, nullptr, 0,
				  mlx5_qpn_clock_ns());
}

void
emu_reject(run_ctx *, unsigned node, uint32_t conn, uint16_t reason)
{
	mlx5_qpn_cm_reject(g_emu.servers[node]->cm, conn, reason, nullptr, 0, mlx5_qpn_clock_ns());
}

void
emu_passive_release(run_ctx *, unsigned, uint32_t)
{
}

/* The events of every node of server SERVER in one round, then its DCTs' receives. */
void
passive_round(run_ctx *ctx, unsigned server, std::vector<qpn_conn_event> &out)
{
	uint64_t now = mlx5_qpn_clock_ns();
	for (unsigned i = server; i < g_emu.servers.size(); i += ctx->nb_servers) {
		mlx5_qpn_cm *cm = g_emu.servers[i]->cm;
		/* No tick first: the poll handles each frame at its send time, after the timers
		 * due by then, and ticks at now last. A tick at now first would end a timewait
		 * before a REQ sent inside it was looked at (a stale REQ let through). */
		if (mlx5_qpn_cm_poll(cm, now) < 0) {
			out.push_back(
				qpn_conn_event{.type = QPN_CONN_EV_ERROR, .node = i, .conn = ~0u});
			continue;
		}
		mlx5_qpn_cm_event e;
		while (mlx5_qpn_cm_poll_event(cm, &e) == 0) {
			qpn_conn_event x{.type = ev_type(e.type),
					 .reason = e.reason,
					 .node = i,
					 .conn = e.conn_id};
			if (x.type == QPN_CONN_EV_ERROR)
				continue; /* an event the engines do not use */
			mlx5_qpn_cm_conn_info ci;
			x.timewait = (x.type == QPN_CONN_EV_CLOSED ||
				      x.type == QPN_CONN_EV_REJECTED) &&
				     mlx5_qpn_cm_conn_get(cm, e.conn_id, &ci) == 0 &&
				     ci.state == MLX5_QPN_CM_STATE_TIMEWAIT;
			out.push_back(x);
		}
	}
	if (ctx->data_path)
		emu_dc_receives(ctx, server, out);
}

unsigned
emu_passive_poll(run_ctx *ctx, unsigned server, qpn_conn_event *ev, unsigned max)
{
	ev_queue<qpn_conn_event> &q = g_emu.passive[server];
	if (q.empty()) {
		q.clear();
		passive_round(ctx, server, q.evs);
	}
	unsigned n = 0;
	for (; n < max && !q.empty(); q.at++)
		ev[n++] = q.evs[q.at];
	return n;
}

} /* namespace */

const qpn_conn_ops conn_emu_ops = {
	.name = "emulated CM fabric",
	.peer_in_process = true,
	.passive_split = true,
	.setup = emu_setup,
	.teardown = emu_teardown,
	.totals = emu_totals,
	.active =
		{
			.start = emu_start,
			.send = emu_dc_send,
			.flush = emu_dc_flush,
			.disconnect = emu_disconnect,
			.release = emu_active_release,
			.poll = emu_active_poll,
		},
	.passive =
		{
			.accept = emu_accept,
			.reject = emu_reject,
			.release = emu_passive_release,
			.poll = emu_passive_poll,
		},
};
