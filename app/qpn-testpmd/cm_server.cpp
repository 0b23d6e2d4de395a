/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM engines' passive side: every server agent, the DCTs' CQs and the doorbell service,
 * polled by one lcore.
 */
#include "cm_glue.h"

void count_rej(lcore_stats &st, uint16_t reason)
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

void server_poll(run_ctx *ctx)
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
