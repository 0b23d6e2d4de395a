/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Disconnection: DREQ (sent by the consumer or on a stale pair), a received DREQ (DREP, then
 * timewait) and DREP (timewait), and a received REJ, which ends a connection on either side.
 */
#include "cm_internal.h"

#include <rte_errno.h>
#include <rte_log.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cm_impl {

int
send_dreq(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_DREQ, c);
	m.qpn = c->remote_qpn;
	int rc = send_msg(cm, m, c->remote_guid, c);
	/* A lost DREQ is retransmitted by the timer like any other, so the state moves anyway. */
	c->state = MLX5_QPN_CM_STATE_DREQ_SENT;
	arm(cm, c, now_ns);
	return rc;
}

void
on_rej(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	cm->stats.rej_rx[m.reason]++;
	Conn *c;
	if (m.remote_comm_id != 0) {
		c = peer_conn(cm, m);
	} else {
		/* A requester that gave up before learning our id: find it by its own id. */
		int slot = cm->rids.find(m.src_guid, m.local_comm_id);
		c = slot < 0 ? nullptr : &cm->conns[slot];
	}
	if (c == nullptr) {
		unexpected(cm, m, nullptr);
		return;
	}
	/* Linux keeps a connection rejected for TIMEOUT or STALE_CONN in timewait. */
	bool tw = m.reason == MLX5_QPN_CM_REJ_TIMEOUT || m.reason == MLX5_QPN_CM_REJ_STALE_CONN;
	switch (c->state) {
	case MLX5_QPN_CM_STATE_REQ_SENT:
	case MLX5_QPN_CM_STATE_REQ_RCVD:
	case MLX5_QPN_CM_STATE_REP_SENT:
		push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, m.reason, &m);
		if (tw)
			enter_timewait(cm, c, now_ns);
		else
			free_conn(cm, c);
		return;
	case MLX5_QPN_CM_STATE_ESTABLISHED:
		/* The peer rejected after we thought the connection was up (e.g. its RTU check). */
		enter_timewait(cm, c, now_ns);
		push_event(cm, MLX5_QPN_CM_EVENT_DISCONNECTED, c, m.reason, &m);
		return;
	default:
		unexpected(cm, m, c);
		return;
	}
}

void
on_dreq(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	Conn *c = peer_conn(cm, m);
	if (c == nullptr || c->local_qpn != m.qpn) {
		/* IBA: answer a DREQ for an unknown connection, so the peer can leave DREQ_SENT. */
		unexpected(cm, m, c);
		if (c == nullptr) {
			mlx5_qpn_cm_msg drep = base_msg(cm, MLX5_QPN_CM_MSG_DREP, nullptr);
			drep.local_comm_id = m.remote_comm_id;
			drep.remote_comm_id = m.local_comm_id;
			send_msg(cm, drep, m.src_guid, nullptr);
		}
		return;
	}
	mlx5_qpn_cm_msg drep = base_msg(cm, MLX5_QPN_CM_MSG_DREP, c);
	switch (c->state) {
	case MLX5_QPN_CM_STATE_REP_SENT: /* our REP got through but the RTU was lost */
	case MLX5_QPN_CM_STATE_ESTABLISHED:
	case MLX5_QPN_CM_STATE_DREQ_SENT: /* both sides disconnect at once */
		send_msg(cm, drep, c->remote_guid, nullptr);
		enter_timewait(cm, c, now_ns);
		push_event(cm, MLX5_QPN_CM_EVENT_DISCONNECTED, c, 0, &m);
		return;
	case MLX5_QPN_CM_STATE_TIMEWAIT:
		/* Our DREP was lost. */
		cm->stats.duplicates++;
		send_msg(cm, drep, c->remote_guid, nullptr);
		return;
	default:
		unexpected(cm, m, c);
		return;
	}
}

void
on_drep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	Conn *c = peer_conn(cm, m);
	if (c == nullptr || c->state != MLX5_QPN_CM_STATE_DREQ_SENT) {
		unexpected(cm, m, c);
		return;
	}
	enter_timewait(cm, c, now_ns);
	push_event(cm, MLX5_QPN_CM_EVENT_DISCONNECTED, c, 0, &m);
}

} // namespace cm_impl

using namespace cm_impl;

extern "C" {

int
mlx5_qpn_cm_disconnect(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint64_t now_ns)
{
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	if (c->state != MLX5_QPN_CM_STATE_ESTABLISHED)
		return -EPERM;
	cm->now_ns = now_ns;
	send_dreq(cm, c, now_ns);
	return 0;
}

} // extern "C"
