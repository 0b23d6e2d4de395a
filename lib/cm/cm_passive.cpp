/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The passive side of the CM state machine: a received REQ (duplicate, stale, no listener, no
 * room, else REQ_RCVD and an event), the consumer's answer (accept: REP; reject: REJ; MRA),
 * and the RTU that establishes the connection.
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

namespace {

/*
 * A REQ whose (sender GUID, comm id) a connection here holds (set up or established: the id
 * leaves the table at timewait) is a retransmission only if it names the same QPN. A REQ naming
 * another QPN comes from a new incarnation of the sender (crashed, restarted with its GUID) that
 * drew an id its previous life used, while this side still remembers the old connection:
 * absorbing it as a duplicate would leave it unanswered until it times out. As IBA's CM does for
 * a REQ on a connection it can no longer trust (Linux: a REQ for a connection in timewait gets
 * REJ STALE_CONN in cm_dup_req_handler()), it is refused as stale, and the old connection, if
 * established, is sent a DREQ, as for a stale pair: it can no longer be valid, and its QPN comes
 * back after its timewait. True when the REQ was answered here.
 */
bool
stale_comm_id(mlx5_qpn_cm *cm, Conn *holder, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	if (holder->remote_qpn == m.qpn)
		return false;
	CM_LOG(DEBUG, "%s: REQ 0x%08x from 0x%016" PRIx64 " (QPN 0x%06x) names conn 0x%08x in %s",
	       cm->name, m.local_comm_id, m.src_guid, m.qpn, holder->comm_id,
	       mlx5_qpn_cm_state_name(holder->state));
	/* The REJ first: the requester learns at once. The holder's DREQ goes to the same node,
	 * whose new incarnation drops it (no connection with that QPN, as Linux does): its retries
	 * run out and the holder leaves through timewait. */
	send_rej_to(cm, m, MLX5_QPN_CM_REJ_STALE_CONN, MLX5_QPN_CM_REF_REQ);
	stale_holder(cm, holder, now_ns);
	return true;
}

} // namespace

void
on_req(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	int dup = cm->rids.find(m.src_guid, m.local_comm_id);
	if (dup >= 0 && stale_comm_id(cm, &cm->conns[dup], m, now_ns))
		return;
	if (dup >= 0) {
		/* Our answer was lost or is slow: repeat the REP or MRA, else just absorb it. */
		Conn *c = &cm->conns[dup];
		cm->stats.duplicates++;
		if ((c->state == MLX5_QPN_CM_STATE_REP_SENT ||
		     (c->state == MLX5_QPN_CM_STATE_REQ_RCVD && c->mra_sent)) &&
		    c->last_len != 0)
			transmit(cm, c->remote_guid, c->last, c->last_len);
		return;
	}
	if (stale_pair(cm, m.src_guid, m.qpn, now_ns)) {
		send_rej_to(cm, m, MLX5_QPN_CM_REJ_STALE_CONN, MLX5_QPN_CM_REF_REQ);
		return;
	}
	if (!listening(cm, m.service_id)) {
		send_rej_to(cm, m, MLX5_QPN_CM_REJ_INVALID_SERVICE_ID, MLX5_QPN_CM_REF_REQ);
		return;
	}
	/* The consumer must see the REQ, or nobody would ever answer it: refuse when full. */
	Conn *c = cm->events.full() ? nullptr : alloc_conn(cm);
	if (c == nullptr) {
		send_rej_to(cm, m, MLX5_QPN_CM_REJ_NO_RESOURCES, MLX5_QPN_CM_REF_REQ);
		return;
	}
	c->active = false;
	c->state = MLX5_QPN_CM_STATE_REQ_RCVD;
	c->remote_guid = m.src_guid;
	c->remote_comm_id = m.local_comm_id;
	c->remote_qpn = m.qpn;
	c->service_id = m.service_id;
	c->packet_life_time = m.packet_life_time;
	c->peer_ack_delay = m.ack_delay;
	c->max_retries = m.max_cm_retries;
	/* Wait for the RTU as long as the requester is prepared to wait for us (IBA). */
	c->wait_ns = iba_time_ns(m.cm_response_timeout);
	/* A consumer that never answers must not hold the slot and the pair for ever: once the
	 * requester has surely given up (all its attempts plus one), the REQ expires. */
	set_timer(cm, c, now_ns + c->wait_ns * (c->max_retries + 2u));
	pair_insert(cm, c);
	cm->rids.insert(c->remote_guid, c->remote_comm_id, slot_of(cm, c));
	c->rid_in_table = true;
	push_event(cm, MLX5_QPN_CM_EVENT_REQ, c, 0, &m);
}

void
on_rtu(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m)
{
	Conn *c = peer_conn(cm, m);
	if (c == nullptr || c->active || c->state != MLX5_QPN_CM_STATE_REP_SENT) {
		unexpected(cm, m, c);
		return;
	}
	c->state = MLX5_QPN_CM_STATE_ESTABLISHED;
	set_timer(cm, c, 0);
	cm->stats.established++;
	push_event(cm, MLX5_QPN_CM_EVENT_ESTABLISHED, c, 0, &m);
}

} // namespace cm_impl

using namespace cm_impl;

extern "C" {

int
mlx5_qpn_cm_accept(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint32_t local_qpn, const void *pd,
		   uint8_t pd_len, uint64_t now_ns)
{
	if (local_qpn > MLX5_QPN_CM_QPN_MAX || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REP))
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	cm->now_ns = now_ns;
	if (c->state != MLX5_QPN_CM_STATE_REQ_RCVD)
		return -EPERM;
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REP, c);
	m.qpn = local_qpn;
	m.ack_delay = cm->params.ack_delay;
	set_pd(m, pd, pd_len);
	rc = send_msg(cm, m, c->remote_guid, c);
	if (rc != 0)
		return rc;
	c->local_qpn = local_qpn;
	c->state = MLX5_QPN_CM_STATE_REP_SENT;
	arm(cm, c, now_ns);
	return 0;
}

int
mlx5_qpn_cm_reject(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint16_t reason, const void *pd,
		   uint8_t pd_len, uint64_t now_ns)
{
	if (!mlx5_qpn_cm_rej_reason_valid(reason) || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REJ))
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	cm->now_ns = now_ns;
	if (c->state == MLX5_QPN_CM_STATE_REQ_RCVD) {
		send_rej(cm, c, reason, MLX5_QPN_CM_REF_REQ, pd, pd_len);
		free_conn(cm, c);
		return 0;
	}
	if (c->state == MLX5_QPN_CM_STATE_REP_SENT) {
		/* The peer may already use our REP's QPN: wait out the timewait (Linux does). */
		send_rej(cm, c, reason, MLX5_QPN_CM_REF_OTHER, pd, pd_len);
		enter_timewait(cm, c, now_ns);
		return 0;
	}
	return -EPERM;
}

int
mlx5_qpn_cm_mra(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint8_t service_timeout, uint64_t now_ns)
{
	if (service_timeout > 31)
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	cm->now_ns = now_ns;
	if (c->state != MLX5_QPN_CM_STATE_REQ_RCVD)
		return -EPERM;
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_MRA, c);
	m.msg_ref = MLX5_QPN_CM_REF_REQ;
	m.service_timeout = service_timeout;
	rc = send_msg(cm, m, c->remote_guid, c);
	if (rc == 0) {
		c->mra_sent = true;
		set_timer(cm, c,
			  now_ns + iba_time_ns(service_timeout) +
				  c->wait_ns * (c->max_retries + 2u));
	}
	return rc;
}

} // extern "C"
