/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hardware mode (--qpn-dev=ib=...): the CM is the kernel's, reached through librdmacm via the
 * driver's dlopen glue. Connections use port space RDMA_PS_TCP with no QP on the cm_id (an
 * external QP): the QPN presented to the peer is conn_param.qp_num = a reserved QPN of the
 * device. The active side (dci-reconnect, churn) connects to --hw-peer=IP:PORT; after the REP it
 * gets RDMA_CM_EVENT_CONNECT_RESPONSE and completes with rdma_establish() (sending the RTU),
 * then disconnects and releases the QPN into the quarantine. The passive side (dct-accept)
 * listens on --hw-port and accepts every request with a reserved QPN of its own.
 *
 * UNTESTED ON HARDWARE: no RDMA device exists where this was written; it compiles, and without
 * a device the probe refuses first. No data is sent (the project drives no mlx5dv DC QPs).
 */
#include <arpa/inet.h>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <netinet/in.h>
#include <string>

#include <rte_cycles.h>

#include "hw/mlx5_qpn_glue.h"
#include "opt_num.h"
#include "testpmd.h"

bool dev_is_hw(struct mlx5_qpn_dev *dev)
{
	struct mlx5_qpn_dev_info info;
	return mlx5_qpn_dev_info_get(dev, &info) == 0 && info.backend != nullptr &&
	       strcmp(info.backend, "hw") == 0;
}

namespace {

constexpr int kTimeoutMs = 2000;

/* Wait for the next event on the channel; returns its type (and status), or -1. */
int next_event(const mlx5_qpn_glue *g, rdma_event_channel *ch, rdma_cm_id **id, int *status,
	       rdma_cm_event **keep)
{
	rdma_cm_event *ev = nullptr;
	if (g->cm_get_cm_event(ch, &ev) != 0)
		return -1;
	int type = ev->event;
	if (status != nullptr)
		*status = ev->status;
	if (id != nullptr)
		*id = ev->id;
	if (keep != nullptr) {
		*keep = ev; /* caller acks */
		return type;
	}
	g->cm_ack_cm_event(ev);
	return type;
}

bool parse_peer(const std::string &s, sockaddr_in *sa, std::string *why)
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

/* One active connection cycle. 0, or a negative errno; *rej gets a REJ status. */
int client_cycle(run_ctx *ctx, const mlx5_qpn_glue *g, const sockaddr_in &dst, lcore_stats &st)
{
	rdma_event_channel *ch = g->cm_create_event_channel();
	if (ch == nullptr)
		return -errno;
	rdma_cm_id *id = nullptr;
	int rc = 0, status = 0;
	uint32_t qpn = 0;
	bool have_qpn = false;
	uint64_t t0 = rte_rdtsc(), t1, pool = 0;
	if (g->cm_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
		rc = -errno;
		goto out;
	}
	rc = mlx5_qpn_reserved_alloc(ctx->dev, &qpn);
	t1 = rte_rdtsc();
	if (rc != 0)
		goto out;
	have_qpn = true;
	st.hist[STEP_ALLOC].record(t1 - t0);
	pool += t1 - t0;
	if (g->cm_resolve_addr(id, nullptr, (sockaddr *)&dst, kTimeoutMs) != 0 ||
	    next_event(g, ch, nullptr, &status, nullptr) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    g->cm_resolve_route(id, kTimeoutMs) != 0 ||
	    next_event(g, ch, nullptr, &status, nullptr) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		rc = -EHOSTUNREACH;
		goto out;
	}
	{
		rdma_conn_param p{};
		p.qp_num = qpn;         /* the reserved QPN is what the peer's CM sees */
		p.responder_resources = 1;
		p.initiator_depth = 1;
		p.retry_count = 7;
		p.rnr_retry_count = 7;
		uint64_t tc = rte_rdtsc();
		if (g->cm_connect(id, &p) != 0) {
			rc = -errno;
			goto out;
		}
		int type = next_event(g, ch, nullptr, &status, nullptr);
		if (type == RDMA_CM_EVENT_REJECTED) {
			if (status > 0 && status < MLX5_QPN_CM_REJ_REASON_SLOTS)
				st.rej[status].fetch_add(1, std::memory_order_relaxed);
			if (status == MLX5_QPN_CM_REJ_STALE_CONN)
				st.stale_rejects.fetch_add(1, std::memory_order_relaxed);
			rc = -ECONNREFUSED;
			goto out;
		}
		/* No QP on the id: the REP comes as CONNECT_RESPONSE; establish sends the RTU. */
		if (type != RDMA_CM_EVENT_CONNECT_RESPONSE || g->cm_establish(id) != 0) {
			rc = -EPROTO;
			goto out;
		}
		st.hist[STEP_REQ_REP].record(rte_rdtsc() - tc);
		uint64_t td = rte_rdtsc();
		g->cm_disconnect(id);
		while ((type = next_event(g, ch, nullptr, &status, nullptr)) >= 0 &&
		       type != RDMA_CM_EVENT_DISCONNECTED)
			;
		st.hist[STEP_DREQ_DREP].record(rte_rdtsc() - td);
	}
out:
	if (id != nullptr)
		g->cm_destroy_id(id);
	g->cm_destroy_event_channel(ch);
	if (have_qpn) {
		uint64_t r0 = rte_rdtsc();
		if (mlx5_qpn_reserved_dealloc(ctx->dev, qpn) == 0) {
			uint64_t r1 = rte_rdtsc();
			st.hist[STEP_RELEASE].record(r1 - r0);
			pool += r1 - r0;
			if (rc == 0) {
				st.hist[STEP_CYCLE].record(r1 - t0);
				st.pool_cycles += pool;
				st.cycle_cycles += r1 - t0;
				st.ops.fetch_add(1, std::memory_order_relaxed);
			}
		}
	}
	return rc;
}

int server_run(run_ctx *ctx, const mlx5_qpn_glue *g, lcore_stats &st, uint64_t deadline)
{
	rdma_event_channel *ch = g->cm_create_event_channel();
	if (ch == nullptr)
		return -errno;
	rdma_cm_id *listen_id = nullptr;
	int rc = 0;
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(static_cast<uint16_t>(ctx->cfg->hw_port));
	if (g->cm_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP) != 0 ||
	    g->cm_bind_addr(listen_id, (sockaddr *)&sa) != 0 || g->cm_listen(listen_id, 64) != 0) {
		rc = -errno;
		fprintf(stderr, "qpn-testpmd: cannot listen on port %u: %s\n", ctx->cfg->hw_port,
			strerror(-rc));
	}
	while (rc == 0 && rte_rdtsc() < deadline) {
		rdma_cm_id *id = nullptr;
		rdma_cm_event *ev = nullptr;
		int status = 0;
		int type = next_event(g, ch, &id, &status, &ev);
		if (type < 0)
			break;
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			uint32_t qpn;
			if (mlx5_qpn_reserved_alloc(ctx->dev, &qpn) != 0) {
				g->cm_reject(id, nullptr, 0);
			} else {
				rdma_conn_param p{};
				p.qp_num = qpn;
				p.responder_resources = 1;
				p.initiator_depth = 1;
				id->context = reinterpret_cast<void *>(uintptr_t(qpn) + 1);
				if (g->cm_accept(id, &p) != 0)
					mlx5_qpn_reserved_dealloc(ctx->dev, qpn);
				else
					st.allocs.fetch_add(1, std::memory_order_relaxed);
			}
		} else if (type == RDMA_CM_EVENT_DISCONNECTED) {
			uintptr_t q = reinterpret_cast<uintptr_t>(id->context);
			if (q != 0 && mlx5_qpn_reserved_dealloc(ctx->dev, uint32_t(q - 1)) == 0)
				st.ops.fetch_add(1, std::memory_order_relaxed);
			g->cm_ack_cm_event(ev);
			g->cm_destroy_id(id);
			continue;
		}
		g->cm_ack_cm_event(ev);
	}
	if (listen_id != nullptr)
		g->cm_destroy_id(listen_id);
	g->cm_destroy_event_channel(ch);
	return rc;
}

} /* namespace */

bool hw_peer_valid(const std::string &s, std::string *why)
{
	sockaddr_in sa;
	return parse_peer(s, &sa, why);
}

int hw_rdmacm_check(run_ctx *ctx)
{
	const mlx5_qpn_glue *g = mlx5_qpn_glue_cm_get();
	if (g == nullptr) {
		fprintf(stderr, "qpn-testpmd: hardware mode needs librdmacm: %s\n",
			mlx5_qpn_glue_cm_error());
		return -ENOTSUP;
	}
	const qpn_engine *e = engine_find(ctx->cfg->engine);
	lcore_stats &st = ctx->lc[rte_lcore_id()];
	const uint64_t start = rte_rdtsc();
	const uint64_t deadline =
		start + static_cast<uint64_t>(ctx->cfg->duration_s * static_cast<double>(ctx->tsc_hz));
	int rc = 0;
	printf("qpn-testpmd: hardware mode (librdmacm, RDMA_PS_TCP, conn_param.qp_num = reserved "
	       "QPN); untested on hardware\n");
	if (e != nullptr && e->passive_side) {
		rc = server_run(ctx, g, ctx->srv, deadline);
	} else {
		sockaddr_in dst;
		std::string why;
		if (!parse_peer(ctx->cfg->hw_peer, &dst, &why)) {
			fprintf(stderr, "qpn-testpmd: hardware mode needs --hw-peer=IPv4:PORT (the "
					"passive qpn-testpmd)\n");
			return -EINVAL;
		}
		uint64_t n = 0;
		while (rte_rdtsc() < deadline &&
		       (ctx->cfg->connections == 0 || n < ctx->cfg->connections)) {
			rc = client_cycle(ctx, g, dst, st);
			n++;
			if (rc != 0 && rc != -ECONNREFUSED) {
				fprintf(stderr, "qpn-testpmd: connection to %s: %s\n",
					ctx->cfg->hw_peer.c_str(), strerror(-rc));
				break;
			}
			rc = 0;
		}
	}
	ctx->run_secs = static_cast<double>(rte_rdtsc() - start) / static_cast<double>(ctx->tsc_hz);
	if (e != nullptr) {
		stats_summary(stdout, ctx, e);
		if (!ctx->cfg->json.empty())
			stats_json(ctx->cfg->json.c_str(), ctx, e);
	}
	return rc;
}
