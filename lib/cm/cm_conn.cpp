/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connection slots of the CM agent and what every state machine uses: slot allocation and
 * generation-tagged comm ids, the (remote GUID, remote QPN) table with the stale-connection
 * check, the (remote GUID, remote comm id) table for duplicate REQs, the event queue, and
 * encoding and sending of messages (REJ included).
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

Conn *
alloc_conn(mlx5_qpn_cm *cm)
{
	if (cm->nb_free == 0)
		return nullptr;
	uint32_t slot = cm->free_slots[--cm->nb_free];
	Conn *c = &cm->conns[slot];
	uint16_t gen = c->gen;
	std::memset(static_cast<void *>(c), 0, offsetof(Conn, last));
	/* Generation in the high bits: a late frame for a reused slot does not match. The operand
	 * makes the id the agent's own; 0 means "no connection", so a generation that would give
	 * it is skipped (only one of the 4095 can). */
	do {
		gen = uint16_t((gen + 1u) & kGenMask);
		if (gen == 0)
			gen = 1;
		c->comm_id = ((uint32_t(gen) << kSlotBits) | (slot + 1)) ^ cm->id_operand;
	} while (c->comm_id == 0);
	c->gen = gen;
	cm->stats.conns++;
	return c;
}

void
pair_remove(mlx5_qpn_cm *cm, Conn *c)
{
	if (!c->pair_in_table)
		return;
	cm->pairs.erase(c->remote_guid, c->remote_qpn);
	c->pair_in_table = false;
	cm->stats.pairs = cm->pairs.size();
}

void
pair_insert(mlx5_qpn_cm *cm, Conn *c)
{
	cm->pairs.insert(c->remote_guid, c->remote_qpn, slot_of(cm, c));
	c->pair_in_table = true;
	cm->stats.pairs = cm->pairs.size();
}

void
rid_remove(mlx5_qpn_cm *cm, Conn *c)
{
	if (!c->rid_in_table)
		return;
	cm->rids.erase(c->remote_guid, c->remote_comm_id);
	c->rid_in_table = false;
}

void
free_conn(mlx5_qpn_cm *cm, Conn *c)
{
	pair_remove(cm, c);
	rid_remove(cm, c);
	if (c->state == MLX5_QPN_CM_STATE_TIMEWAIT)
		cm->stats.timewait_entries--;
	c->comm_id = 0;
	c->state = MLX5_QPN_CM_STATE_IDLE;
	set_timer(cm, c, 0);
	cm->free_slots[cm->nb_free++] = slot_of(cm, c);
	cm->stats.conns--;
}

void
push_event(mlx5_qpn_cm *cm, uint32_t type, const Conn *c, uint16_t reason,
	   const mlx5_qpn_cm_msg *msg)
{
	mlx5_qpn_cm_event *ev = cm->events.push_slot();
	if (ev == nullptr) {
		cm->stats.events_dropped++;
		if (!cm->ev_drop_logged) {
			CM_LOG(WARNING, "%s: event queue full, events dropped (poll events faster)",
			       cm->name);
			cm->ev_drop_logged = true;
		}
		return;
	}
	ev->type = type;
	ev->conn_id = c->comm_id;
	ev->remote_guid = c->remote_guid;
	ev->remote_qpn = c->remote_qpn;
	ev->local_qpn = c->local_qpn;
	ev->service_id = c->service_id;
	ev->reason = reason;
	ev->private_data_len = msg != nullptr ? msg->private_data_len : 0;
	if (ev->private_data_len != 0)
		std::memcpy(ev->private_data, msg->private_data, ev->private_data_len);
}

/* Hand an encoded frame to the transport or the outbox. */
int
transmit(mlx5_qpn_cm *cm, uint64_t dst, const uint8_t *frame, uint16_t len)
{
	int rc;
	if (cm->has_tp) {
		rc = cm->tp.send(cm->tp.ctx, dst, frame, len, cm->now_ns);
		if (rc > 0)
			rc = 0;
	} else {
		cm_impl::OutFrame *o = cm->outbox.push_slot();
		if (o == nullptr) {
			rc = -ENOBUFS;
		} else {
			o->dst = dst;
			o->len = len;
			std::memcpy(o->data, frame, len);
			rc = 0;
		}
	}
	if (rc != 0) {
		cm->stats.tx_errors++;
		return -ENOBUFS;
	}
	cm->stats.tx[type_index(frame[3])]++;
	return 0;
}

/*
 * Encode and send. With @p keep the frame is remembered in the connection for retransmission
 * (REQ, REP, DREQ) or for answering duplicates (MRA).
 */
int
send_msg(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t dst, Conn *keep)
{
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	if (len < 0) {
		/* Only reachable by an internal bug: every caller builds valid fields. */
		CM_LOG(ERR, "%s: cannot encode %s: %d", cm->name, mlx5_qpn_cm_msg_name(m.type),
		       len);
		return len;
	}
	if (keep != nullptr) {
		std::memcpy(keep->last, buf, size_t(len));
		keep->last_len = uint16_t(len);
	}
	if (m.type == MLX5_QPN_CM_MSG_REJ)
		cm->stats.rej_tx[m.reason]++;
	return transmit(cm, dst, buf, uint16_t(len));
}

mlx5_qpn_cm_msg
base_msg(const mlx5_qpn_cm *cm, uint8_t type, const Conn *c)
{
	mlx5_qpn_cm_msg m;
	std::memset(&m, 0, offsetof(mlx5_qpn_cm_msg, private_data));
	m.type = type;
	m.src_guid = cm->params.node_guid;
	if (c != nullptr) {
		m.local_comm_id = c->comm_id;
		m.remote_comm_id = c->remote_comm_id;
	}
	return m;
}

void
set_pd(mlx5_qpn_cm_msg &m, const void *pd, uint8_t len)
{
	m.private_data_len = len;
	if (len != 0)
		std::memcpy(m.private_data, pd, len);
}

/* REJ for a frame that has no connection here: the ids are the received ones, swapped. */
void
send_rej_to(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &rx, uint16_t reason, uint8_t ref)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REJ, nullptr);
	m.local_comm_id = rx.remote_comm_id;
	m.remote_comm_id = rx.local_comm_id;
	m.reason = reason;
	m.msg_ref = ref;
	send_msg(cm, m, rx.src_guid, nullptr);
}

void
send_rej(mlx5_qpn_cm *cm, Conn *c, uint16_t reason, uint8_t ref, const void *pd, uint8_t pd_len)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REJ, c);
	m.reason = reason;
	m.msg_ref = ref;
	set_pd(m, pd, pd_len);
	send_msg(cm, m, c->remote_guid, nullptr);
}

/*
 * Stale check for a new (remote GUID, remote QPN): true if another connection holds the pair.
 * A live holder is disconnected, as the peer evidently reuses its QPN and the old connection
 * can no longer be valid (Linux: ib_send_cm_dreq() on the holder in cm_req/rep_handler()).
 */
bool
stale_pair(mlx5_qpn_cm *cm, uint64_t guid, uint32_t qpn, uint64_t now_ns)
{
	int slot = cm->pairs.find(guid, qpn);
	if (slot < 0)
		return false;
	Conn *holder = &cm->conns[slot];
	CM_LOG(DEBUG, "%s: stale pair (0x%016" PRIx64 ", 0x%06x) held by conn 0x%08x in %s",
	       cm->name, guid, qpn, holder->comm_id, mlx5_qpn_cm_state_name(holder->state));
	stale_holder(cm, holder, now_ns);
	return true;
}

void
stale_holder(mlx5_qpn_cm *cm, Conn *holder, uint64_t now_ns)
{
	cm->stats.stale_rejects++;
	if (holder->state == MLX5_QPN_CM_STATE_ESTABLISHED) {
		send_dreq(cm, holder, now_ns);
		cm->stats.stale_dreqs++;
	}
}

bool
listening(const mlx5_qpn_cm *cm, uint64_t service_id)
{
	for (uint32_t i = 0; i < cm->nb_services; i++)
		if (cm->services[i] == service_id)
			return true;
	return false;
}

void
unexpected(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, const Conn *c)
{
	cm->stats.unexpected++;
	CM_LOG(DEBUG, "%s: unexpected %s for conn 0x%08x in %s", cm->name,
	       mlx5_qpn_cm_msg_name(m.type), m.remote_comm_id,
	       c ? mlx5_qpn_cm_state_name(c->state) : "no connection");
}

/* Connection a received frame addresses, checked against its sender. */
Conn *
peer_conn(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m)
{
	Conn *c = lookup(cm, m.remote_comm_id);
	if (c == nullptr || c->remote_guid != m.src_guid)
		return nullptr;
	/* Once the peer's comm id is known, it must match (IBA: INVALID_COMM_INSTANCE). */
	if (c->remote_comm_id != 0 && m.local_comm_id != 0 && c->remote_comm_id != m.local_comm_id)
		return nullptr;
	return c;
}

Conn *
conn_arg(mlx5_qpn_cm *cm, uint32_t conn_id, int *rc)
{
	Conn *c = cm != nullptr ? lookup(cm, conn_id) : nullptr;
	*rc = cm == nullptr ? -EINVAL : c == nullptr ? -ENOENT : 0;
	return c;
}

bool
pd_ok(const void *pd, uint8_t len, uint8_t type)
{
	return (pd != nullptr || len == 0) && len <= mlx5_qpn_cm_private_data_max(type);
}

} // namespace cm_impl
