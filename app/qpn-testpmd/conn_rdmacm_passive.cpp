/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The passive side of qpn-testpmd's librdmacm connections (rdmacm_conn.h): the listener on the
 * probed device's address (bound again after an RDMA_CM_EVENT_ADDR_CHANGE on it), one
 * connection per request's cm_id, the DCT's receives. ONLY ON A CONNECTX (conn_rdmacm.cpp).
 */
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>

#include "rdmacm_conn.h"
#include "rdmacm_dc.h"

namespace rcm {

/* The listener on the source address and --hw-port (again after an ADDR_CHANGE on it). */
int
listen_on(run_ctx *ctx)
{
	const rdmacm_glue *g = g_rc.g;
	int rc = source_addr(ctx, true);
	if (rc != 0)
		return rc;
	sockaddr_in sa = g_rc.src;
	sa.sin_port = htons(static_cast<uint16_t>(ctx->cfg->hw_port));
	if (g->create_id(g_rc.pch, &g_rc.listen_id, nullptr, RDMA_PS_TCP) != 0 ||
	    g->bind_addr(g_rc.listen_id, (sockaddr *)&sa) != 0 ||
	    g->listen(g_rc.listen_id, 64) != 0) {
		rc = errno > 0 ? -errno : -EIO;
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
		fprintf(stderr, "qpn-testpmd: cannot listen on %s:%u: %s\n", ip, ctx->cfg->hw_port,
			strerror(-rc));
		destroy(&g_rc.listen_id);
		return rc;
	}
	return 0;
}

int
passive_setup(run_ctx *ctx)
{
	dev_ident(ctx->dev, &g_rc.pdev);
	g_rc.pconns.reserve(1024);
	g_rc.pch = channel_create();
	if (g_rc.pch == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot create a librdmacm event channel: %s\n",
			strerror(errno));
		return -ENOMEM;
	}
	return listen_on(ctx);
}

cm_target
passive_target(uint32_t conn)
{
	return cm_target{true, &g_rc.pconns[conn], conn, 0, &g_rc.pdev, 0, g_ctx};
}

int
rc_accept(run_ctx *, unsigned, uint32_t conn, uint32_t qpn)
{
	cm_conn &c = g_rc.pconns[conn];
	uint8_t pd[kRdmacmPdataLen];
	rdma_conn_param p = conn_param(true, qpn, pd);
	int rc = c.st != RC_ST_REQUESTED ? -ENOTCONN : g_rc.g->accept(c.id, &p) == 0 ? 0 : -errno;
	c.st = rdmacm_fsm_step(true, c.st, RC_IN_ACCEPT, rc).next;
	return rc;
}

void
rc_reject(run_ctx *, unsigned, uint32_t conn, uint16_t)
{
	qpn_conn_event ev[2];
	feed(passive_target(conn), cm_input{}, RC_IN_REJECT, 0, ev);
}

void
rc_passive_release(run_ctx *, unsigned, uint32_t conn)
{
	qpn_conn_event ev[2];
	feed(passive_target(conn), cm_input{}, RC_IN_RELEASE, 0, ev);
}

/* A connection id for a new request's cm_id: a free one, or one more. */
uint32_t
passive_add(rdma_cm_id *id)
{
	uint32_t i = 0;
	while (i < g_rc.pconns.size() && g_rc.pconns[i].id != nullptr)
		i++;
	if (i == g_rc.pconns.size())
		g_rc.pconns.push_back(cm_conn{});
	g_rc.pconns[i] = cm_conn{id, 0, RC_ST_FREE, {}};
	id->context = reinterpret_cast<void *>(uintptr_t(i) + 1);
	return i;
}

/* An event of the listener itself: a device removal ends the run's passive side; an address
 * change makes the listener bind its address again (one line). Returns the engine's events. */
unsigned
listener_event(const cm_input &in, qpn_conn_event *out)
{
	if (in.event == RDMA_CM_EVENT_ADDR_CHANGE) {
		destroy(&g_rc.listen_id);
		int rc = listen_on(g_ctx);
		fprintf(stderr, "qpn-testpmd: the listener's address changed: %s\n",
			rc == 0 ? "listening again" : "no longer listening (see the line above)");
		if (rc == 0)
			return 0;
		out[0] = qpn_conn_event{.type = QPN_CONN_EV_ERROR,
					.conn = UINT32_MAX,
					.why = rdmacm_fail_reason(in.event)};
		return 1;
	}
	if (in.event != RDMA_CM_EVENT_DEVICE_REMOVAL)
		return 0;
	int fail;
	cm_conn lc{in.id, 0, RC_ST_FREE, {}};
	act(RC_ACT_CLOSE, cm_target{true, &lc, 0, 0, &g_rc.pdev, 0, g_ctx}, in, &fail);
	out[0] = qpn_conn_event{.type = QPN_CONN_EV_ERROR,
				.conn = UINT32_MAX,
				.why = rdmacm_fail_reason(in.event)};
	return 1;
}

unsigned
rc_passive_poll(run_ctx *, unsigned, qpn_conn_event *ev, unsigned max)
{
	unsigned n = rcdc_passive_receives(ev, max);
	return n + drain(g_rc.pch, ev + n, max - n, [](const cm_input &in, qpn_conn_event *out) {
		       if (in.id == g_rc.listen_id)
			       return listener_event(in, out);
		       uint32_t conn = in.event == RDMA_CM_EVENT_CONNECT_REQUEST ?
					       passive_add(in.id) :
					       conn_of(in.id);
		       if (conn >= g_rc.pconns.size() || g_rc.pconns[conn].id != in.id)
			       return 0u;
		       return feed(passive_target(conn), in, in.event, in.status, out);
	       });
}

} /* namespace rcm */
