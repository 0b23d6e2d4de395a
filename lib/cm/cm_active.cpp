/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The active side of the CM state machine: connect (REQ, REQ_SENT), the REP (RTU, ESTABLISHED;
 * STALE_CONN when the peer's (GUID, QPN) is held here), and a received MRA, which extends the
 * wait of either side once per exchange.
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

void
on_rep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	Conn *c = lookup(cm, m.remote_comm_id);
	if (c == nullptr) {
		unexpected(cm, m, nullptr);
		send_rej_to(cm, m, MLX5_QPN_CM_REJ_INVALID_COMM_ID, MLX5_QPN_CM_REF_REP);
		return;
	}
	if (!c->active || c->remote_guid != m.src_guid) {
		unexpected(cm, m, c);
		return;
	}
	if (c->state == MLX5_QPN_CM_STATE_ESTABLISHED && m.local_comm_id == c->remote_comm_id) {
		/* Our RTU was lost: send it again. */
		cm->stats.duplicates++;
		mlx5_qpn_cm_msg rtu = base_msg(cm, MLX5_QPN_CM_MSG_RTU, c);
		send_msg(cm, rtu, c->remote_guid, nullptr);
		return;
	}
	if (c->state != MLX5_QPN_CM_STATE_REQ_SENT ||
	    (c->remote_comm_id != 0 && c->remote_comm_id != m.local_comm_id)) {
		unexpected(cm, m, c);
		return;
	}
	c->remote_comm_id = m.local_comm_id;
	c->remote_qpn = m.qpn;
	c->peer_ack_delay = m.ack_delay;
	if (stale_pair(cm, m.src_guid, m.qpn, now_ns)) {
		send_rej(cm, c, MLX5_QPN_CM_REJ_STALE_CONN, MLX5_QPN_CM_REF_REP);
		push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, MLX5_QPN_CM_REJ_STALE_CONN, nullptr);
		free_conn(cm, c);
		return;
	}
	pair_insert(cm, c);
	mlx5_qpn_cm_msg rtu = base_msg(cm, MLX5_QPN_CM_MSG_RTU, c);
	send_msg(cm, rtu, c->remote_guid, nullptr);
	c->state = MLX5_QPN_CM_STATE_ESTABLISHED;
	set_timer(cm, c, 0);
	cm->stats.established++;
	push_event(cm, MLX5_QPN_CM_EVENT_ESTABLISHED, c, 0, &m);
}

void
on_mra(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	Conn *c = peer_conn(cm, m);
	bool ok = c != nullptr &&
		  ((c->state == MLX5_QPN_CM_STATE_REQ_SENT && m.msg_ref == MLX5_QPN_CM_REF_REQ) ||
		   (c->state == MLX5_QPN_CM_STATE_REP_SENT && m.msg_ref == MLX5_QPN_CM_REF_REP));
	if (!ok) {
		unexpected(cm, m, c);
		return;
	}
	if (c->mra_rcvd) {
		/* Linux honours one MRA per exchange (MRA_*_RCVD state): repeats would let a peer
		 * answering our retransmissions with MRAs keep us waiting for ever. */
		cm->stats.duplicates++;
		return;
	}
	c->mra_rcvd = true;
	cm->stats.mra_rx++;
	if (c->remote_comm_id == 0)
		c->remote_comm_id = m.local_comm_id;
	/* The peer needs service_timeout more; the response still has to travel back. */
	c->retries = 0;
	set_timer(cm, c, now_ns + iba_time_ns(m.service_timeout) + c->wait_ns);
}

} // namespace cm_impl

using namespace cm_impl;

extern "C" {

int
mlx5_qpn_cm_connect(struct mlx5_qpn_cm *cm, uint64_t remote_guid, uint64_t service_id,
		    uint32_t local_qpn, const void *pd, uint8_t pd_len, uint64_t now_ns,
		    uint32_t *conn_id)
{
	if (cm == nullptr || conn_id == nullptr || remote_guid == 0 ||
	    local_qpn > MLX5_QPN_CM_QPN_MAX || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REQ))
		return -EINVAL;
	cm->now_ns = now_ns;
	Conn *c = alloc_conn(cm);
	if (c == nullptr)
		return -ENOSPC;
	c->active = true;
	c->remote_guid = remote_guid;
	c->local_qpn = local_qpn;
	c->service_id = service_id;
	c->packet_life_time = cm->params.packet_life_time;
	/* Until the REP tells us the peer's ACK delay, assume ours (same fabric, same HCAs). */
	c->peer_ack_delay = cm->params.ack_delay;
	c->max_retries = cm->params.max_cm_retries;
	c->wait_ns = iba_time_ns(cm->params.cm_response_timeout);
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REQ, c);
	m.service_id = service_id;
	m.qpn = local_qpn;
	m.packet_life_time = cm->params.packet_life_time;
	m.ack_delay = cm->params.ack_delay;
	m.cm_response_timeout = cm->params.cm_response_timeout;
	m.max_cm_retries = cm->params.max_cm_retries;
	set_pd(m, pd, pd_len);
	int rc = send_msg(cm, m, remote_guid, c);
	if (rc != 0) {
		free_conn(cm, c);
		return rc;
	}
	c->state = MLX5_QPN_CM_STATE_REQ_SENT;
	arm(cm, c, now_ns);
	*conn_id = c->comm_id;
	return 0;
}

} // extern "C"
