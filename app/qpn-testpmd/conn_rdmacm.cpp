/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections on hardware (conn.h): the CM is the kernel's, reached through librdmacm, which the
 * app loads itself (rdmacm_glue.h). Connections use port space RDMA_PS_TCP with no QP on the
 * cm_id (an external QP): the QPN presented to the peer is conn_param.qp_num = the engine's
 * reserved QPN. The active side (dci-reconnect, churn) connects to --hw-peer=IP:PORT: address
 * and route resolution, REQ; after the REP it gets RDMA_CM_EVENT_CONNECT_RESPONSE and completes
 * with rdma_establish() (sending the RTU). The passive side (dct-accept) listens on
 * --hw-bind:--hw-port and answers each request as the engine says.
 *
 * The passive side (the listener, the requests' cm_ids) is in conn_rdmacm_passive.cpp; what the
 * two files share, in rdmacm_conn.h.
 *
 * What happens on each event is decided by rdmacm_fsm_step() (rdmacm_fsm.h, unit-tested); this
 * file carries the decisions out. Before a QPN is presented, the route (active) or the request
 * (passive) must go through the probed device: its QPNs are unique on that device only (on a
 * dual-port ConnectX each port has its own GUID and QPN space: the GUID and the port are
 * compared). The REQ and the REP carry private data (rdmacm_fsm.h): the DCT number and DC key
 * of the side that sends it (the passive side's DCT in the REP; the active side has DCIs only,
 * so its REQ carries 0). After the REP, the active side routes its DC sends by the connection's
 * resolved AV and sends --msgs-per-conn messages to the named DCT; the passive side reads them
 * (rdmacm_dc.h).
 *
 * Edges. RDMA_CM_EVENT_ADDR_CHANGE fails the connections of the ids it comes on (with their
 * reason) and makes the listener bind its address again; a VF without a node GUID is told
 * apart by its port's GIDs (rdmacm_identify); a connection's DC sends go to the DCT its own REP
 * named and stop once it is no longer established (rdmacm_send_gate).
 *
 * Each client lcore has an event channel of its own and the passive side one more, all
 * non-blocking, so the engines poll them as they poll the emulated fabric and --duration holds
 * on an idle server. Each event is copied and acknowledged before it is acted on: rdma_destroy_id
 * waits for the acknowledgement of every event of its id.
 *
 * ONLY ON A CONNECTX: no RDMA device exists where this was written; it compiles, its decisions
 * are unit-tested (tests/app/test_rdmacm_fsm.cpp), and without a device the probe refuses
 * first (devtools/hw-check.sh runs it on a ConnectX).
 */
#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <string>
#include <vector>

#include "rdmacm_addr.h"
#include "rdmacm_conn.h"
#include "rdmacm_dc.h"
#include "rdmacm_fsm.h"
#include "rdmacm_glue.h"
#include "testpmd.h"

namespace rcm {

rdmacm_state_all g_rc;
run_ctx *g_ctx;

/* An event channel whose rdma_get_cm_event() answers EAGAIN instead of blocking. */
rdma_event_channel *
channel_create()
{
	rdma_event_channel *ch = g_rc.g->create_event_channel();
	if (ch == nullptr)
		return nullptr;
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		g_rc.g->destroy_event_channel(ch);
		return nullptr;
	}
	return ch;
}

uint32_t
conn_of(rdma_cm_id *id)
{
	return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(id->context) - 1);
}

void
destroy(rdma_cm_id **id)
{
	if (*id != nullptr)
		g_rc.g->destroy_id(*id);
	*id = nullptr;
}

void
rc_teardown(run_ctx *)
{
	const rdmacm_glue *g = g_rc.g;
	if (g == nullptr)
		return;
	rcdc_teardown(nullptr);
	for (unsigned lc = 0; lc < RTE_MAX_LCORE; lc++) {
		if (g_rc.conns[lc] != nullptr)
			for (unsigned i = 0; i < kLcoreConns; i++)
				destroy(&g_rc.conns[lc][i].id);
		delete[] g_rc.conns[lc];
		g_rc.conns[lc] = nullptr;
		if (g_rc.ch[lc] != nullptr)
			g->destroy_event_channel(g_rc.ch[lc]);
		g_rc.ch[lc] = nullptr;
	}
	for (cm_conn &c : g_rc.pconns)
		destroy(&c.id);
	g_rc.pconns.clear();
	destroy(&g_rc.listen_id);
	if (g_rc.pch != nullptr)
		g->destroy_event_channel(g_rc.pch);
	g_rc.pch = nullptr;
}

/* The device's name; with P, what a cm_id's device is compared with (rdmacm_identify): its
 * GUID and port, and its port's GIDs when the GUID is 0 (a VF without one). */
std::string
dev_ident(mlx5_qpn_dev *dev, rdmacm_probed *p)
{
	mlx5_qpn_dev_info info{};
	if (mlx5_qpn_dev_info_get(dev, &info) != 0)
		return "";
	if (p != nullptr) {
		*p = rdmacm_probed{};
		p->guid = info.node_guid;
		p->port = info.port;
		if (p->guid == 0)
			p->nb_gids = rdmacm_port_gids("/sys", info.name, info.port, p->gids,
						      kRdmacmMaxGids);
	}
	return info.name;
}

/* The listener's address: --hw-bind, else the device's (doc/guides/app_reference.md §8). */
int
source_addr(run_ctx *ctx, bool required)
{
	std::string why, name = dev_ident(ctx->dev);
	g_rc.src.sin_family = AF_INET;
	if (!ctx->cfg->hw_bind.empty())
		return rdmacm_parse_ipv4(ctx->cfg->hw_bind, &g_rc.src.sin_addr, &why) ? 0 : -EINVAL;
	if (rdmacm_netdev_ipv4(name, &g_rc.src.sin_addr, &why) || !required)
		return 0;
	fprintf(stderr, "qpn-testpmd: no address to listen on: %s; give --hw-bind=IP\n",
		why.c_str());
	return -EADDRNOTAVAIL;
}

int
active_setup(run_ctx *ctx)
{
	std::string why;
	if (!rdmacm_parse_peer(ctx->cfg->hw_peer, &g_rc.dst, &why)) {
		fprintf(stderr, "qpn-testpmd: hardware mode needs --hw-peer=IPv4:PORT (the passive "
				"qpn-testpmd)\n");
		return -EINVAL;
	}
	if (!ctx->cfg->hw_bind.empty() && source_addr(ctx, false) != 0)
		return -EINVAL;
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		if (!ctx->role[lc].client)
			continue;
		dev_ident(ctx->devs[ctx->role[lc].dev], &g_rc.dev[lc]);
		g_rc.ch[lc] = channel_create();
		g_rc.conns[lc] = new (std::nothrow) cm_conn[kLcoreConns]();
		if (g_rc.ch[lc] == nullptr || g_rc.conns[lc] == nullptr) {
			fprintf(stderr,
				"qpn-testpmd: cannot create a librdmacm event channel: %s\n",
				strerror(errno));
			return -ENOMEM;
		}
	}
	ctx->nb_peers = 1;
	return 0;
}

int
rc_setup(run_ctx *ctx)
{
	g_rc.g = rdmacm_glue_get();
	g_ctx = ctx;
	if (g_rc.g == nullptr) {
		fprintf(stderr, "qpn-testpmd: hardware mode needs librdmacm: %s\n",
			rdmacm_glue_error());
		return -ENOTSUP;
	}
	printf("qpn-testpmd: hardware mode (librdmacm, RDMA_PS_TCP, conn_param.qp_num = reserved "
	       "QPN, DC sends to the DCT the REP names)\n");
	ctx->nb_peers = 0;
	g_rc.closed.store(false, std::memory_order_relaxed);
	int rc = 0;
	if (ctx->side_passive)
		rc = passive_setup(ctx);
	if (rc == 0 && ctx->side_active)
		rc = active_setup(ctx);
	if (rc == 0)
		rc = rcdc_setup(ctx);
	if (rc != 0)
		rc_teardown(ctx);
	return rc;
}

/* The kernel's CM keeps its own counters: none are visible here. */
qpn_conn_totals
rc_totals(run_ctx *)
{
	return qpn_conn_totals{};
}

/* ---- carrying out the state machine's decisions ---- */

/* The device check (GUID and port) and, on a request or a REP, the private data. false: one
 * line printed for the first refusal (later ones are counted only: a misrouted peer would
 * flood the log). */
bool
check(const cm_target &t, const cm_input &in)
{
	std::string why;
	rdma_cm_id *id = t.c->id;
	bool has_dev = id->verbs != nullptr;
	uint64_t guid = has_dev ? g_rc.g->get_device_guid(id->verbs->device) : 0;
	bool ok = rdmacm_identify(has_dev, guid, id->port_num, id->route.addr.addr.ibaddr.sgid.raw,
				  *t.dev, &why);
	rdmacm_pdata pd;
	if (ok && in.event != RDMA_CM_EVENT_ROUTE_RESOLVED)
		ok = rdmacm_pdata_get(in.pdata, in.pdata_len, &pd, &why) == 0;
	if (ok && in.event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		/* A request: the DCT its REP will name (made at the first); a REP: the DCT this
		 * connection sends to (the lcore's DCI and route made at its first). */
		ok = t.passive ? rdmacm_pdata_check(pd, false, &why) &&
					 rcdc_passive_request(t.ctx, id, &why) == 0 :
				 rcdc_active_peer(t.ctx, t.lcore, pd, id, &why) == 0;
		if (ok && !t.passive)
			t.c->peer = pd;
	}
	if (!ok && g_rc.refusals.fetch_add(1, std::memory_order_relaxed) == 0)
		fprintf(stderr, "qpn-testpmd: connection refused: %s\n", why.c_str());
	return ok;
}

/* The REQ's and the REP's parameters: the reserved QPN is what the peer's CM sees; the private
 * data (in PD) carries this side's DCT number and DC key (rcdc_local). */
rdma_conn_param
conn_param(bool passive, uint32_t qpn, uint8_t *pd)
{
	rdma_conn_param p{};
	p.private_data = pd;
	p.private_data_len = uint8_t(rdmacm_pdata_put(rcdc_local(passive), pd));
	p.qp_num = qpn;
	p.responder_resources = 1;
	p.initiator_depth = 1;
	return p;
}

int
send_req(rdma_cm_id *id, uint32_t qpn)
{
	uint8_t pd[kRdmacmPdataLen];
	rdma_conn_param p = conn_param(false, qpn, pd);
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	return g_rc.g->connect(id, &p);
}

/* Carry out one fallible action; false: it failed (the input for the state machine in *fail). */
bool
act(uint16_t a, const cm_target &t, const cm_input &in, int *fail)
{
	const rdmacm_glue *g = g_rc.g;
	*fail = RC_IN_CALL_FAILED;
	switch (a) {
	case RC_ACT_RESOLVE_ROUTE:
		return g->resolve_route(t.c->id, kTimeoutMs) == 0;
	case RC_ACT_CHECK:
		*fail = RC_IN_REFUSED;
		if (check(t, in))
			return true;
		if (!t.passive && in.event == RDMA_CM_EVENT_CONNECT_RESPONSE)
			g->reject(t.c->id, nullptr, 0); /* the REP is answered with a REJ */
		return false;
	case RC_ACT_CONNECT:
		return send_req(t.c->id, t.c->qpn) == 0;
	case RC_ACT_ESTABLISH:
		return g->establish(t.c->id) == 0;
	case RC_ACT_REJECT:
		g->reject(t.c->id, nullptr, 0);
		return true;
	case RC_ACT_DESTROY_ID:
		destroy(&t.c->id);
		return true;
	case RC_ACT_CLOSE:
		if (!g_rc.closed.exchange(true, std::memory_order_relaxed))
			fprintf(stderr, "qpn-testpmd: the RDMA device was removed\n");
		return true;
	default:
		return true;
	}
}

qpn_conn_event
event_for(const cm_target &t, qpn_conn_event_type type, uint16_t reason, int input)
{
	qpn_conn_event e{};
	e.type = type;
	e.reason = reason;
	e.node = t.node;
	e.conn = t.conn;
	if (type == QPN_CONN_EV_ERROR)
		e.why = rdmacm_fail_reason(input);
	return e;
}

/* Feed INPUT to T's state machine and carry out the step; the engine's events go to EV (room
 * for 2). A failed action feeds its failure input instead of the rest of the step. */
unsigned
feed(const cm_target &t, const cm_input &in, int input, int status, qpn_conn_event *ev)
{
	rdmacm_step s = rdmacm_fsm_step(t.passive, t.c->st, input, status);
	t.c->st = s.next;
	for (uint16_t a = 1; a != 0 && a <= RC_ACT_CLOSE; a = uint16_t(a << 1)) {
		int fail;
		if ((s.actions & a) != 0 && !act(a, t, in, &fail))
			return feed(t, in, fail, 0, ev);
	}
	unsigned n = 0;
	if ((s.actions & RC_ACT_DELIVER) != 0)
		ev[n++] = event_for(t, s.deliver, s.reason, input);
	qpn_conn_event_type more[2];
	for (unsigned i = 0, m = rdmacm_engine_events(t.passive, s.actions, more); i < m; i++)
		ev[n++] = event_for(t, more[i], 0, input);
	return n;
}

/* ---- active side ---- */

cm_target
active_target(unsigned lcore, uint32_t conn)
{
	return cm_target{false, &g_rc.conns[lcore][conn], conn, 0, &g_rc.dev[lcore], lcore, g_ctx};
}

int
rc_start(run_ctx *, unsigned lcore, unsigned, uint32_t qpn, uint32_t *conn)
{
	const rdmacm_glue *g = g_rc.g;
	cm_conn *c = g_rc.conns[lcore];
	unsigned i = 0;
	while (i < kLcoreConns && c[i].id != nullptr)
		i++;
	if (i == kLcoreConns)
		return -ENOBUFS;
	rdma_cm_id *id = nullptr;
	if (g->create_id(g_rc.ch[lcore], &id, reinterpret_cast<void *>(uintptr_t(i) + 1),
			 RDMA_PS_TCP) != 0)
		return -errno;
	/* From the probed device's address when known: the source picks the device. */
	sockaddr *src = g_rc.src.sin_addr.s_addr != 0 ? (sockaddr *)&g_rc.src : nullptr;
	if (g->resolve_addr(id, src, (sockaddr *)&g_rc.dst, kTimeoutMs) != 0) {
		int rc = -errno;
		g->destroy_id(id);
		return rc;
	}
	c[i] = cm_conn{id, qpn, RC_ST_FREE, {}};
	c[i].st = rdmacm_fsm_step(false, RC_ST_FREE, RC_IN_START, 0).next;
	*conn = i;
	return 0;
}

int
rc_send(run_ctx *, unsigned lcore, uint32_t conn, unsigned, uint64_t wr_id)
{
	/* The DCI sends for a connection only while its CM connection holds. */
	if (conn >= kLcoreConns)
		return -ENOTCONN;
	const cm_conn &c = g_rc.conns[lcore][conn];
	int rc = rdmacm_send_gate(c.st, c.peer);
	return rc != 0 ? rc : rcdc_active_send(lcore, c.peer, wr_id);
}

void
rc_flush(run_ctx *, unsigned lcore)
{
	rcdc_active_flush(lcore);
}

int
rc_disconnect(run_ctx *, unsigned lcore, uint32_t conn)
{
	cm_conn &c = g_rc.conns[lcore][conn];
	int rc = g_rc.g->disconnect(c.id) == 0 ? 0 : -errno;
	c.st = rdmacm_fsm_step(false, c.st, RC_IN_DISCONNECT, rc).next;
	return rc;
}

void
rc_active_release(run_ctx *, unsigned lcore, uint32_t conn)
{
	qpn_conn_event ev[2];
	feed(active_target(lcore, conn), cm_input{}, RC_IN_RELEASE, 0, ev);
	g_rc.conns[lcore][conn] = cm_conn{};
}

unsigned
rc_active_poll(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max)
{
	unsigned n =
		drain(g_rc.ch[lcore], ev, max, [lcore](const cm_input &in, qpn_conn_event *out) {
			uint32_t conn = conn_of(in.id);
			if (conn >= kLcoreConns || g_rc.conns[lcore][conn].id != in.id)
				return 0u;
			return feed(active_target(lcore, conn), in, in.event, in.status, out);
		});
	return n + rcdc_active_completions(ctx, lcore, ev + n, max - n);
}

} /* namespace rcm */

using namespace rcm;

/* The option checks (options_table.cpp) share the parsers of the runner. */
bool
hw_peer_valid(const std::string &s, std::string *why)
{
	sockaddr_in sa;
	return rdmacm_parse_peer(s, &sa, why);
}

bool
hw_bind_valid(const std::string &s, std::string *why)
{
	in_addr a;
	return rdmacm_parse_ipv4(s, &a, why);
}

const qpn_conn_ops conn_rdmacm_ops = {
	.name = "librdmacm",
	.peer_in_process = false,
	/* One listener and one event channel carry every passive connection: one lcore. */
	.passive_split = false,
	.setup = rc_setup,
	.teardown = rc_teardown,
	.totals = rc_totals,
	.active =
		{
			.start = rc_start,
			.send = rc_send,
			.flush = rc_flush,
			.disconnect = rc_disconnect,
			.release = rc_active_release,
			.poll = rc_active_poll,
		},
	.passive =
		{
			.accept = rc_accept,
			.reject = rc_reject,
			.release = rc_passive_release,
			.poll = rc_passive_poll,
		},
};
