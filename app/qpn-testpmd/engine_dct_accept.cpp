/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `dct-accept` engine: the passive side. Each peer (--peers) is a DC target behind a CM
 * node of its own; for every REQ it takes a reserved QPN and accepts with it (REP), as
 * rdma-core's DC-over-CM test does, waits for the RTU, receives the SENDs on its DCT, answers
 * the DREQ and gives the QPN back when its timewait ends. The peers are split among the server
 * lcores (--server-lcores): each server's connections, counters and histograms are its own, so
 * its lcore (a server lcore, or a client lcore that co-polls it) takes no lock. In one process
 * the active side it
 * needs to have something to accept is dci-reconnect's body, run as the peer; the summary reports
 * the server's steps (alloc, REP->RTU, release) and counts its completed connections; its
 * pool_share is every pool call's cycles over the TSC spent in the passive rounds.
 */
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include <rte_cycles.h>

#include "testpmd.h"

namespace {

struct server_conn {
	uint32_t qpn;
	uint64_t t_acc;    /* accept (REP) sent */
	uint64_t t_alloc0; /* REQ seen, alloc started */
	uint64_t t_end;    /* CLOSED seen (0: not completed) */
	bool established;
};

/* Each server's open connections by (node, connection id). Only the lcore that drives the
 * server touches its map, and the main lcore before launch and after every lcore returned. */
using conn_map = std::unordered_map<uint64_t, server_conn>;
conn_map g_conns[kMaxServerLcores];

uint64_t
conn_key(unsigned node, uint32_t conn)
{
	return (uint64_t(node) << 32) | conn;
}

/* The passive side gives its QPN back when its own timewait ends, not at CLOSED: the active side
 * entered timewait later (when the DREP arrived) and, under the strict policy, holds (server
 * GUID, server QPN) until then; the pool's quarantine then covers that difference (a hold of one
 * timewait from CLOSED is stale: tests/cm/test_cm_qpn_hold.cpp). The cycle is counted from the
 * REQ to CLOSED (plus the release call). */
void
server_release(run_ctx *ctx, lcore_stats &st, server_conn &sc, bool completed)
{
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
	st.pool_cycles += t1 - t0;
	if (completed)
		st.hist[STEP_CYCLE].record(sc.t_end - sc.t_alloc0 + (t1 - t0));
}

/* A REQ: a reserved QPN of our own for the REP, or a REJ when there is none. */
void
on_request(run_ctx *ctx, unsigned server, const qpn_conn_event &ev)
{
	const qpn_conn_passive_ops &cn = ctx->conn->passive;
	lcore_stats &st = ctx->srv[server];
	server_conn sc{};
	sc.t_alloc0 = rte_rdtsc();
	int rc = mlx5_qpn_reserved_alloc(ctx->dev, &sc.qpn);
	uint64_t t1 = rte_rdtsc();
	st.pool_cycles += t1 - sc.t_alloc0; /* a refused alloc is pool time too */
	if (rc != 0) {
		count_alloc_failure(st, rc);
		cn.reject(ctx, ev.node, ev.conn, MLX5_QPN_CM_REJ_NO_RESOURCES);
		cn.release(ctx, ev.node, ev.conn);
		return;
	}
	st.allocs.fetch_add(1, std::memory_order_relaxed);
	st.hist[STEP_ALLOC].record(t1 - sc.t_alloc0);
	rc = cn.accept(ctx, ev.node, ev.conn, sc.qpn);
	sc.t_acc = rte_rdtsc();
	if (rc != 0) {
		APP_LOG(ERR, "server: accept: %s", strerror(-rc));
		st.errors.fetch_add(1, std::memory_order_relaxed);
		cn.reject(ctx, ev.node, ev.conn, MLX5_QPN_CM_REJ_NO_RESOURCES);
		cn.release(ctx, ev.node, ev.conn);
		server_release(ctx, st, sc, false);
		return;
	}
	g_conns[server][conn_key(ev.node, ev.conn)] = sc;
}

/* The connection is over for us: its QPN back to the pool, the connection released. */
void
finish(run_ctx *ctx, unsigned server, const qpn_conn_event &ev, conn_map::iterator it)
{
	server_release(ctx, ctx->srv[server], it->second, it->second.t_end != 0);
	ctx->conn->passive.release(ctx, ev.node, ev.conn);
	g_conns[server].erase(it);
}

void
on_event(run_ctx *ctx, unsigned server, const qpn_conn_event &ev)
{
	lcore_stats &st = ctx->srv[server];
	conn_map &conns = g_conns[server];
	switch (ev.type) {
	case QPN_CONN_EV_REQUEST:
		on_request(ctx, server, ev);
		break;
	case QPN_CONN_EV_ESTABLISHED: {
		auto it = conns.find(conn_key(ev.node, ev.conn));
		if (it != conns.end() && !it->second.established) {
			it->second.established = true;
			st.hist[STEP_RTU].record(rte_rdtsc() - it->second.t_acc);
		}
		break;
	}
	case QPN_CONN_EV_REJECTED:
	case QPN_CONN_EV_CLOSED: {
		if (ev.type == QPN_CONN_EV_REJECTED)
			count_rej(st, ev.reason);
		auto it = conns.find(conn_key(ev.node, ev.conn));
		if (it == conns.end())
			break;
		server_conn &sc = it->second;
		if (ev.type == QPN_CONN_EV_CLOSED && sc.established) {
			sc.t_end = rte_rdtsc();
			st.ops.fetch_add(1, std::memory_order_relaxed);
		}
		if (!ev.timewait)
			finish(ctx, server, ev, it); /* else released at TIMEWAIT_EXIT */
		break;
	}
	case QPN_CONN_EV_TIMEWAIT_EXIT: {
		auto it = conns.find(conn_key(ev.node, ev.conn));
		if (it != conns.end())
			finish(ctx, server, ev, it);
		break;
	}
	case QPN_CONN_EV_COMPLETION:
		/* A SEND received on a DCT. */
		if (ev.error)
			st.cqe_errors.fetch_add(1, std::memory_order_relaxed);
		else
			st.recvs.fetch_add(1, std::memory_order_relaxed);
		break;
	case QPN_CONN_EV_ERROR:
		st.errors.fetch_add(1, std::memory_order_relaxed);
		if (ev.why != nullptr)
			APP_LOG(ERR, "connection 0x%x failed: %s", ev.conn, ev.why);
		break;
	}
}

/* One round of server SERVER's peers. Its TSC is the server's busy time: pool_share is the
 * pool calls' cycles over it (per-connection cycles overlap, and dividing by their sum
 * understated the pool's share of the lcore's time several times). */
unsigned
dcta_poll(run_ctx *ctx, unsigned server)
{
	const uint64_t t_begin = rte_rdtsc();
	qpn_conn_event ev[kPollBurst];
	unsigned n, total = 0;
	do { /* a full burst: more may be waiting, and a round takes them all */
		n = ctx->conn->passive.poll(ctx, server, ev, kPollBurst);
		for (unsigned i = 0; i < n; i++)
			on_event(ctx, server, ev[i]);
		total += n;
	} while (n == kPollBurst);
	ctx->srv[server].cycle_cycles += rte_rdtsc() - t_begin;
	return total;
}

int
dcta_begin(run_ctx *)
{
	for (auto &m : g_conns)
		m.clear();
	return 0;
}

/* Connections still open at the end: give their QPNs back. */
void
dcta_end(run_ctx *ctx)
{
	for (auto &m : g_conns) {
		for (auto &kv : m)
			mlx5_qpn_reserved_dealloc(ctx->dev, kv.second.qpn);
		m.clear();
	}
}

} /* namespace */

const qpn_engine engine_dct_accept = {
	.name = "dct-accept",
	.help = "passive side: per REQ a reserved QPN in the REP, RTU, receives on the DCT, DREP, "
		"release after timewait",
	.uses_cm = true,
	.passive_side = true,
	.begin = dcta_begin,
	.end = dcta_end,
	.lcore_run = nullptr,
	.passive_poll = dcta_poll,
	.peer = &engine_dci_reconnect,
};
