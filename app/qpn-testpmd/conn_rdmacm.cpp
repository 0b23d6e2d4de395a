/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections on hardware (conn.h): the CM is the kernel's, reached through librdmacm via the
 * driver's dlopen glue. Connections use port space RDMA_PS_TCP with no QP on the cm_id (an
 * external QP): the QPN presented to the peer is conn_param.qp_num = the engine's reserved QPN.
 * The active side (dci-reconnect, churn) connects to --hw-peer=IP:PORT: address and route
 * resolution, REQ; after the REP it gets RDMA_CM_EVENT_CONNECT_RESPONSE and completes with
 * rdma_establish() (sending the RTU). The passive side (dct-accept) listens on --hw-port and
 * answers each request as the engine says. The peer is another host, so a run has one side.
 *
 * Each client lcore has an event channel of its own and the passive side one more, all
 * non-blocking, so the engines poll them as they poll the emulated fabric.
 *
 * UNTESTED ON HARDWARE: no RDMA device exists where this was written; it compiles, and without
 * a device the probe refuses first. No data is sent (the project drives no mlx5dv DC QPs).
 */
#include <arpa/inet.h>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <string>
#include <vector>

#include "hw/mlx5_qpn_glue.h"
#include "opt_num.h"
#include "testpmd.h"

namespace {

constexpr int kTimeoutMs = 2000;
constexpr unsigned kLcoreConns = 64; /* an active lcore's slots (engine_active.h kMaxSlots) */

struct active_conn {
	rdma_cm_id *id;
	uint32_t qpn;
};

struct rdmacm_state {
	const mlx5_qpn_glue *g = nullptr;
	sockaddr_in dst{};
	rdma_event_channel *ch[RTE_MAX_LCORE] = {}; /* per client lcore */
	active_conn *conns[RTE_MAX_LCORE] = {};     /* kLcoreConns per client lcore */
	rdma_event_channel *pch = nullptr;          /* the passive side's */
	rdma_cm_id *listen_id = nullptr;
	std::vector<rdma_cm_id *> pconns; /* the passive side's, by conn id */
};

rdmacm_state g_rc;

bool
parse_peer(const std::string &s, sockaddr_in *sa, std::string *why)
{
	size_t colon = s.rfind(':');
	if (colon == std::string::npos) {
		*why = "expected IPv4:PORT";
		return false;
	}
	std::string host = s.substr(0, colon);
	uint64_t port;
	if (!opt_num_u64(s.c_str() + colon + 1, 1, 65535, &port, why)) {
		*why = "port: " + *why;
		return false;
	}
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(static_cast<uint16_t>(port));
	if (inet_pton(AF_INET, host.c_str(), &sa->sin_addr) != 1) {
		*why = "expected IPv4:PORT (a dotted IPv4 address)";
		return false;
	}
	return true;
}

/* An event channel whose rdma_get_cm_event() answers EAGAIN instead of blocking. */
rdma_event_channel *
channel_create()
{
	rdma_event_channel *ch = g_rc.g->cm_create_event_channel();
	if (ch == nullptr)
		return nullptr;
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		g_rc.g->cm_destroy_event_channel(ch);
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
rc_teardown(run_ctx *)
{
	const mlx5_qpn_glue *g = g_rc.g;
	if (g == nullptr)
		return;
	for (unsigned lc = 0; lc < RTE_MAX_LCORE; lc++) {
		if (g_rc.conns[lc] != nullptr)
			for (unsigned i = 0; i < kLcoreConns; i++)
				if (g_rc.conns[lc][i].id != nullptr)
					g->cm_destroy_id(g_rc.conns[lc][i].id);
		delete[] g_rc.conns[lc];
		g_rc.conns[lc] = nullptr;
		if (g_rc.ch[lc] != nullptr)
			g->cm_destroy_event_channel(g_rc.ch[lc]);
		g_rc.ch[lc] = nullptr;
	}
	for (rdma_cm_id *id : g_rc.pconns)
		if (id != nullptr)
			g->cm_destroy_id(id);
	g_rc.pconns.clear();
	if (g_rc.listen_id != nullptr)
		g->cm_destroy_id(g_rc.listen_id);
	g_rc.listen_id = nullptr;
	if (g_rc.pch != nullptr)
		g->cm_destroy_event_channel(g_rc.pch);
	g_rc.pch = nullptr;
}

int
passive_setup(run_ctx *ctx)
{
	const mlx5_qpn_glue *g = g_rc.g;
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(static_cast<uint16_t>(ctx->cfg->hw_port));
	g_rc.pch = channel_create();
	if (g_rc.pch == nullptr ||
	    g->cm_create_id(g_rc.pch, &g_rc.listen_id, nullptr, RDMA_PS_TCP) != 0 ||
	    g->cm_bind_addr(g_rc.listen_id, (sockaddr *)&sa) != 0 ||
	    g->cm_listen(g_rc.listen_id, 64) != 0) {
		int rc = -errno;
		fprintf(stderr, "qpn-testpmd: cannot listen on port %u: %s\n", ctx->cfg->hw_port,
			strerror(-rc));
		return rc;
	}
	return 0;
}

int
active_setup(run_ctx *ctx)
{
	std::string why;
	if (!parse_peer(ctx->cfg->hw_peer, &g_rc.dst, &why)) {
		fprintf(stderr, "qpn-testpmd: hardware mode needs --hw-peer=IPv4:PORT (the passive "
				"qpn-testpmd)\n");
		return -EINVAL;
	}
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		if (!ctx->role[lc].client)
			continue;
		g_rc.ch[lc] = channel_create();
		g_rc.conns[lc] = new (std::nothrow) active_conn[kLcoreConns]();
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
	g_rc.g = mlx5_qpn_glue_cm_get();
	if (g_rc.g == nullptr) {
		fprintf(stderr, "qpn-testpmd: hardware mode needs librdmacm: %s\n",
			mlx5_qpn_glue_cm_error());
		return -ENOTSUP;
	}
	printf("qpn-testpmd: hardware mode (librdmacm, RDMA_PS_TCP, conn_param.qp_num = reserved "
	       "QPN); untested on hardware\n");
	ctx->data_path = false;
	ctx->data_path_note = "hardware: no DC QPs are driven";
	ctx->nb_peers = 0;
	int rc = 0;
	if (ctx->side_passive)
		rc = passive_setup(ctx);
	if (rc == 0 && ctx->side_active)
		rc = active_setup(ctx);
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

/* ---- active side ---- */

int
rc_start(run_ctx *, unsigned lcore, unsigned, uint32_t qpn, uint32_t *conn)
{
	const mlx5_qpn_glue *g = g_rc.g;
	active_conn *c = g_rc.conns[lcore];
	unsigned i = 0;
	while (i < kLcoreConns && c[i].id != nullptr)
		i++;
	if (i == kLcoreConns)
		return -ENOBUFS;
	rdma_cm_id *id = nullptr;
	if (g->cm_create_id(g_rc.ch[lcore], &id, reinterpret_cast<void *>(uintptr_t(i) + 1),
			    RDMA_PS_TCP) != 0)
		return -errno;
	/* ADDR_RESOLVED -> resolve the route; ROUTE_RESOLVED -> the REQ (rc_active_poll). */
	if (g->cm_resolve_addr(id, nullptr, (sockaddr *)&g_rc.dst, kTimeoutMs) != 0) {
		int rc = -errno;
		g->cm_destroy_id(id);
		return rc;
	}
	c[i] = active_conn{id, qpn};
	*conn = i;
	return 0;
}

int
rc_send(run_ctx *, unsigned, unsigned, uint64_t)
{
	return -EOPNOTSUPP;
}

void
rc_flush(run_ctx *, unsigned)
{
}

int
rc_disconnect(run_ctx *, unsigned lcore, uint32_t conn)
{
	return g_rc.g->cm_disconnect(g_rc.conns[lcore][conn].id) == 0 ? 0 : -errno;
}

void
rc_active_release(run_ctx *, unsigned lcore, uint32_t conn)
{
	active_conn &c = g_rc.conns[lcore][conn];
	if (c.id != nullptr)
		g_rc.g->cm_destroy_id(c.id);
	c = active_conn{};
}

/* The REQ, once the route is known: the reserved QPN is what the peer's CM sees. */
int
send_req(rdma_cm_id *id, uint32_t qpn)
{
	rdma_conn_param p{};
	p.qp_num = qpn;
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	return g_rc.g->cm_connect(id, &p);
}

/* A REJ's status is the IB CM reason; anything else is counted under no reason. */
uint16_t
rej_reason(int status)
{
	return status > 0 && status < MLX5_QPN_CM_REJ_REASON_SLOTS ? uint16_t(status) : UINT16_MAX;
}

/* Up to MAX events of channel CH, each translated by XLATE (false: nothing for the engine) and
 * acknowledged right away, so that a release may destroy its cm_id. */
template <typename F>
unsigned
drain(rdma_event_channel *ch, qpn_conn_event *ev, unsigned max, F xlate)
{
	unsigned n = 0;
	rdma_cm_event *e;
	while (n < max && g_rc.g->cm_get_cm_event(ch, &e) == 0) {
		ev[n] = qpn_conn_event{.type = QPN_CONN_EV_ERROR};
		if (xlate(e, &ev[n]))
			n++;
		g_rc.g->cm_ack_cm_event(e);
	}
	return n;
}

unsigned
rc_active_poll(run_ctx *, unsigned lcore, qpn_conn_event *ev, unsigned max)
{
	const mlx5_qpn_glue *g = g_rc.g;
	return drain(g_rc.ch[lcore], ev, max, [g, lcore](rdma_cm_event *e, qpn_conn_event *x) {
		x->conn = conn_of(e->id);
		switch (e->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			return g->cm_resolve_route(e->id, kTimeoutMs) != 0;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			return send_req(e->id, g_rc.conns[lcore][x->conn].qpn) != 0;
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			/* No QP on the id: the REP comes as CONNECT_RESPONSE; establish sends the
			 * RTU. */
			if (g->cm_establish(e->id) == 0)
				x->type = QPN_CONN_EV_ESTABLISHED;
			return true;
		case RDMA_CM_EVENT_REJECTED:
			x->type = QPN_CONN_EV_REJECTED;
			x->reason = rej_reason(e->status);
			return true;
		case RDMA_CM_EVENT_DISCONNECTED:
			x->type = QPN_CONN_EV_CLOSED;
			return true;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			return true;
		default:
			return false;
		}
	});
}

/* ---- passive side ---- */

int
rc_accept(run_ctx *, unsigned, uint32_t conn, uint32_t qpn)
{
	rdma_conn_param p{};
	p.qp_num = qpn;
	p.responder_resources = 1;
	p.initiator_depth = 1;
	return g_rc.g->cm_accept(g_rc.pconns[conn], &p) == 0 ? 0 : -errno;
}

void
rc_reject(run_ctx *, unsigned, uint32_t conn, uint16_t)
{
	g_rc.g->cm_reject(g_rc.pconns[conn], nullptr, 0);
}

void
rc_passive_release(run_ctx *, unsigned, uint32_t conn)
{
	if (g_rc.pconns[conn] != nullptr)
		g_rc.g->cm_destroy_id(g_rc.pconns[conn]);
	g_rc.pconns[conn] = nullptr;
}

/* A connection id for a new request's cm_id: a free one, or one more. */
uint32_t
passive_add(rdma_cm_id *id)
{
	uint32_t i = 0;
	while (i < g_rc.pconns.size() && g_rc.pconns[i] != nullptr)
		i++;
	if (i == g_rc.pconns.size())
		g_rc.pconns.push_back(nullptr);
	g_rc.pconns[i] = id;
	id->context = reinterpret_cast<void *>(uintptr_t(i) + 1);
	return i;
}

unsigned
rc_passive_poll(run_ctx *, qpn_conn_event *ev, unsigned max)
{
	return drain(g_rc.pch, ev, max, [](rdma_cm_event *e, qpn_conn_event *x) {
		switch (e->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			x->type = QPN_CONN_EV_REQUEST;
			x->conn = passive_add(e->id);
			return true;
		case RDMA_CM_EVENT_ESTABLISHED:
			x->type = QPN_CONN_EV_ESTABLISHED;
			break;
		case RDMA_CM_EVENT_REJECTED:
			x->type = QPN_CONN_EV_REJECTED;
			x->reason = rej_reason(e->status);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			x->type = QPN_CONN_EV_CLOSED; /* the kernel keeps the timewait */
			break;
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			break;
		default:
			return false;
		}
		x->conn = conn_of(e->id);
		return true;
	});
}

} /* namespace */

bool
hw_peer_valid(const std::string &s, std::string *why)
{
	sockaddr_in sa;
	return parse_peer(s, &sa, why);
}

const qpn_conn_ops conn_rdmacm_ops = {
	.name = "librdmacm",
	.peer_in_process = false,
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
