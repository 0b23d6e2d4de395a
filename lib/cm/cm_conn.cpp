/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM agent: active and passive connection state machines, the stale-connection check on
 * the (remote GUID, remote QPN) table, retransmission timers and timewait.
 *
 * Behaviour follows Linux's drivers/infiniband/core/cm.c where IBA leaves a choice:
 * - REQ handling order: duplicate (same remote comm id) first, then stale pair, then listener;
 * - a stale REQ/REP gets REJ STALE_CONN and the connection holding the pair gets a DREQ;
 * - a REJ with reason TIMEOUT or STALE_CONN puts the rejected connection into timewait, any
 *   other reason frees it at once;
 * - a DREQ for no connection is answered with a DREP, a DREQ in timewait gets the DREP again;
 * - a duplicate REP (our RTU was lost) gets the RTU again.
 * Simplifications: the consumer's REP-received and DREQ-received steps are automatic (RTU and
 * DREP are sent by the agent), there are no LAP/APR/SIDR messages and no alternate paths.
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
#include <new>

RTE_LOG_REGISTER(mlx5_qpn_cm_logtype, mlx5_qpn.cm, INFO);

using cm_impl::Conn;
using cm_impl::iba_time_ns;

namespace {

constexpr uint32_t kSlotBits = 16;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1;
constexpr unsigned kBurst = 32;

unsigned type_index(uint8_t type) { return unsigned(type - MLX5_QPN_CM_MSG_REQ) & 7u; }

Conn *lookup(mlx5_qpn_cm *cm, uint32_t comm_id)
{
	uint32_t slot1 = comm_id & kSlotMask;
	if (slot1 == 0 || slot1 > cm->max_conns)
		return nullptr;
	Conn *c = &cm->conns[slot1 - 1];
	return c->comm_id == comm_id ? c : nullptr;
}

uint32_t slot_of(const mlx5_qpn_cm *cm, const Conn *c) { return uint32_t(c - cm->conns); }

Conn *alloc_conn(mlx5_qpn_cm *cm)
{
	if (cm->nb_free == 0)
		return nullptr;
	uint32_t slot = cm->free_slots[--cm->nb_free];
	Conn *c = &cm->conns[slot];
	uint16_t gen = uint16_t(c->gen + 1);
	std::memset(static_cast<void *>(c), 0, offsetof(Conn, last));
	/* Generation in the high bits: a late frame for a reused slot does not match. */
	c->gen = gen == 0 ? 1 : gen;
	c->comm_id = (uint32_t(c->gen) << kSlotBits) | (slot + 1);
	cm->high_water = std::max(cm->high_water, slot + 1);
	cm->stats.conns++;
	return c;
}

void pair_remove(mlx5_qpn_cm *cm, Conn *c)
{
	if (!c->pair_in_table)
		return;
	cm->pairs.erase(c->remote_guid, c->remote_qpn);
	c->pair_in_table = false;
	cm->stats.pairs = cm->pairs.size();
}

void pair_insert(mlx5_qpn_cm *cm, Conn *c)
{
	cm->pairs.insert(c->remote_guid, c->remote_qpn, slot_of(cm, c));
	c->pair_in_table = true;
	cm->stats.pairs = cm->pairs.size();
}

void rid_remove(mlx5_qpn_cm *cm, Conn *c)
{
	if (!c->rid_in_table)
		return;
	cm->rids.erase(c->remote_guid, c->remote_comm_id);
	c->rid_in_table = false;
}

void free_conn(mlx5_qpn_cm *cm, Conn *c)
{
	pair_remove(cm, c);
	rid_remove(cm, c);
	if (c->state == MLX5_QPN_CM_STATE_TIMEWAIT)
		cm->stats.timewait_entries--;
	c->comm_id = 0;
	c->state = MLX5_QPN_CM_STATE_IDLE;
	c->timer_ns = 0;
	cm->free_slots[cm->nb_free++] = slot_of(cm, c);
	cm->stats.conns--;
}

void push_event(mlx5_qpn_cm *cm, uint32_t type, const Conn *c, uint16_t reason,
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
	ev->private_data_len = msg ? msg->private_data_len : 0;
	if (ev->private_data_len != 0)
		std::memcpy(ev->private_data, msg->private_data, ev->private_data_len);
}

/* Hand an encoded frame to the transport or the outbox. */
int transmit(mlx5_qpn_cm *cm, uint64_t dst, const uint8_t *frame, uint16_t len)
{
	int rc;
	if (cm->has_tp) {
		rc = cm->tp.send(cm->tp.ctx, dst, frame, len);
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
int send_msg(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t dst, Conn *keep)
{
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	if (len < 0) {
		/* Only reachable by an internal bug: every caller builds valid fields. */
		CM_LOG(ERR, "%s: cannot encode %s: %d", cm->name, mlx5_qpn_cm_msg_name(m.type), len);
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

mlx5_qpn_cm_msg base_msg(const mlx5_qpn_cm *cm, uint8_t type, const Conn *c)
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

void set_pd(mlx5_qpn_cm_msg &m, const void *pd, uint8_t len)
{
	m.private_data_len = len;
	if (len != 0)
		std::memcpy(m.private_data, pd, len);
}

/* REJ for a frame that has no connection here: the ids are the received ones, swapped. */
void send_rej_to(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &rx, uint16_t reason, uint8_t ref)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REJ, nullptr);
	m.local_comm_id = rx.remote_comm_id;
	m.remote_comm_id = rx.local_comm_id;
	m.reason = reason;
	m.msg_ref = ref;
	send_msg(cm, m, rx.src_guid, nullptr);
}

void send_rej(mlx5_qpn_cm *cm, Conn *c, uint16_t reason, uint8_t ref, const void *pd = nullptr,
	      uint8_t pd_len = 0)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_REJ, c);
	m.reason = reason;
	m.msg_ref = ref;
	set_pd(m, pd, pd_len);
	send_msg(cm, m, c->remote_guid, nullptr);
}

void arm(Conn *c, uint64_t now_ns)
{
	c->retries = 0;
	c->timer_ns = now_ns + c->wait_ns;
}

void enter_timewait(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns)
{
	rid_remove(cm, c);
	/* Live policy: the pair is free for a new connection as soon as this one stops. */
	if (cm->params.policy == MLX5_QPN_CM_POLICY_LIVE)
		pair_remove(cm, c);
	c->state = MLX5_QPN_CM_STATE_TIMEWAIT;
	c->timewait_ms = mlx5_qpn_cm_timewait_ms(c->packet_life_time, c->peer_ack_delay);
	c->timer_ns = now_ns + uint64_t(c->timewait_ms) * 1000000u;
	if (c->timer_ns == 0)
		c->timer_ns = 1; /* 0 means "no timer" */
	cm->stats.timewait_entered++;
	cm->stats.timewait_entries++;
}

int send_dreq(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns)
{
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_DREQ, c);
	m.qpn = c->remote_qpn;
	int rc = send_msg(cm, m, c->remote_guid, c);
	/* A lost DREQ is retransmitted by the timer like any other, so the state moves anyway. */
	c->state = MLX5_QPN_CM_STATE_DREQ_SENT;
	arm(c, now_ns);
	return rc;
}

/*
 * Stale check for a new (remote GUID, remote QPN): true if another connection holds the pair.
 * A live holder is disconnected, as the peer evidently reuses its QPN and the old connection
 * can no longer be valid (Linux: ib_send_cm_dreq() on the holder in cm_req/rep_handler()).
 */
bool stale_pair(mlx5_qpn_cm *cm, uint64_t guid, uint32_t qpn, uint64_t now_ns)
{
	int slot = cm->pairs.find(guid, qpn);
	if (slot < 0)
		return false;
	Conn *holder = &cm->conns[slot];
	cm->stats.stale_rejects++;
	CM_LOG(DEBUG, "%s: stale pair (0x%016" PRIx64 ", 0x%06x) held by conn 0x%08x in %s",
	       cm->name, guid, qpn, holder->comm_id, mlx5_qpn_cm_state_name(holder->state));
	if (holder->state == MLX5_QPN_CM_STATE_ESTABLISHED) {
		send_dreq(cm, holder, now_ns);
		cm->stats.stale_dreqs++;
	}
	return true;
}

bool listening(const mlx5_qpn_cm *cm, uint64_t service_id)
{
	for (uint32_t i = 0; i < cm->nb_services; i++)
		if (cm->services[i] == service_id)
			return true;
	return false;
}

void unexpected(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, const Conn *c)
{
	cm->stats.unexpected++;
	CM_LOG(DEBUG, "%s: unexpected %s for conn 0x%08x in %s", cm->name,
	       mlx5_qpn_cm_msg_name(m.type), m.remote_comm_id,
	       c ? mlx5_qpn_cm_state_name(c->state) : "no connection");
}

/* Connection a received frame addresses, checked against its sender. */
Conn *peer_conn(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m)
{
	Conn *c = lookup(cm, m.remote_comm_id);
	if (c == nullptr || c->remote_guid != m.src_guid)
		return nullptr;
	/* Once the peer's comm id is known, it must match (IBA: INVALID_COMM_INSTANCE). */
	if (c->remote_comm_id != 0 && m.local_comm_id != 0 && c->remote_comm_id != m.local_comm_id)
		return nullptr;
	return c;
}

void on_req(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	int dup = cm->rids.find(m.src_guid, m.local_comm_id);
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
	c->timer_ns = now_ns + c->wait_ns * (c->max_retries + 2u);
	pair_insert(cm, c);
	cm->rids.insert(c->remote_guid, c->remote_comm_id, slot_of(cm, c));
	c->rid_in_table = true;
	push_event(cm, MLX5_QPN_CM_EVENT_REQ, c, 0, &m);
}

void on_rep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
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
	c->timer_ns = 0;
	cm->stats.established++;
	push_event(cm, MLX5_QPN_CM_EVENT_ESTABLISHED, c, 0, &m);
}

void on_rtu(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m)
{
	Conn *c = peer_conn(cm, m);
	if (c == nullptr || c->active || c->state != MLX5_QPN_CM_STATE_REP_SENT) {
		unexpected(cm, m, c);
		return;
	}
	c->state = MLX5_QPN_CM_STATE_ESTABLISHED;
	c->timer_ns = 0;
	cm->stats.established++;
	push_event(cm, MLX5_QPN_CM_EVENT_ESTABLISHED, c, 0, &m);
}

void on_rej(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
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

void on_mra(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
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
	c->timer_ns = now_ns + iba_time_ns(m.service_timeout) + c->wait_ns;
}

void on_dreq(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
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
	case MLX5_QPN_CM_STATE_REP_SENT:    /* our REP got through but the RTU was lost */
	case MLX5_QPN_CM_STATE_ESTABLISHED:
	case MLX5_QPN_CM_STATE_DREQ_SENT:   /* both sides disconnect at once */
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

void on_drep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns)
{
	Conn *c = peer_conn(cm, m);
	if (c == nullptr || c->state != MLX5_QPN_CM_STATE_DREQ_SENT) {
		unexpected(cm, m, c);
		return;
	}
	enter_timewait(cm, c, now_ns);
	push_event(cm, MLX5_QPN_CM_EVENT_DISCONNECTED, c, 0, &m);
}

void end_malformed_burst(mlx5_qpn_cm *cm)
{
	if (cm->mal_burst && cm->mal_suppressed != 0)
		CM_LOG(WARNING, "%s: %" PRIu64 " more malformed frames dropped", cm->name,
		       cm->mal_suppressed);
	cm->mal_burst = false;
	cm->mal_suppressed = 0;
}

void malformed(mlx5_qpn_cm *cm, int rc, size_t len, uint64_t now_ns)
{
	cm->stats.malformed++;
	/* One line per burst: a flood of garbage must not flood the log too. */
	if (cm->mal_burst && now_ns - cm->mal_burst_start < 1000000000ull) {
		cm->mal_suppressed++;
		return;
	}
	end_malformed_burst(cm);
	CM_LOG(WARNING, "%s: dropped malformed frame of %zu bytes: %s", cm->name, len,
	       rc == -EBADMSG ? "truncated or bad length"
	       : rc == -EPROTO ? "bad magic, version or type"
	       : rc == -ERANGE ? "field out of range"
			       : "sender mismatch");
	cm->mal_burst = true;
	cm->mal_burst_start = now_ns;
}

Conn *conn_arg(mlx5_qpn_cm *cm, uint32_t conn_id, int *rc)
{
	Conn *c = cm ? lookup(cm, conn_id) : nullptr;
	*rc = cm == nullptr ? -EINVAL : c == nullptr ? -ENOENT : 0;
	return c;
}

bool pd_ok(const void *pd, uint8_t len, uint8_t type)
{
	return (pd != nullptr || len == 0) && len <= mlx5_qpn_cm_private_data_max(type);
}

} // namespace

extern "C" {

struct mlx5_qpn_cm *mlx5_qpn_cm_create(const struct mlx5_qpn_cm_params *p)
{
	if (p == nullptr || p->node_guid == 0 || p->max_conns == 0 ||
	    p->max_conns > MLX5_QPN_CM_MAX_CONNS ||
	    (p->policy != MLX5_QPN_CM_POLICY_LIVE && p->policy != MLX5_QPN_CM_POLICY_STRICT) ||
	    p->packet_life_time > 31 || p->ack_delay > 31 || p->cm_response_timeout > 31 ||
	    p->max_cm_retries > 15 ||
	    (p->name != nullptr && std::strlen(p->name) > MLX5_QPN_CM_NAMESIZE) ||
	    (p->transport != nullptr && (p->transport->send == nullptr))) {
		CM_LOG(ERR, "create: invalid parameters");
		rte_errno = EINVAL;
		return nullptr;
	}
	auto *cm = static_cast<mlx5_qpn_cm *>(std::calloc(1, sizeof(mlx5_qpn_cm)));
	if (cm == nullptr) {
		rte_errno = ENOMEM;
		return nullptr;
	}
	std::snprintf(cm->name, sizeof(cm->name), "%s", p->name ? p->name : "cm");
	cm->params = *p;
	cm->params.name = cm->name;
	cm->params.transport = nullptr;
	if (p->transport != nullptr) {
		cm->tp = *p->transport;
		cm->has_tp = true;
	}
	cm->max_conns = p->max_conns;
	uint32_t dflt = std::max(64u, 2 * p->max_conns);
	bool ok = true;
	cm->conns = static_cast<Conn *>(std::calloc(p->max_conns, sizeof(Conn)));
	cm->free_slots = static_cast<uint32_t *>(std::calloc(p->max_conns, sizeof(uint32_t)));
	ok = cm->conns && cm->free_slots;
	ok = ok && cm->pairs.init(p->max_conns) && cm->rids.init(p->max_conns);
	ok = ok && cm->events.init(p->event_queue_size ? p->event_queue_size : dflt);
	ok = ok && (cm->has_tp || cm->outbox.init(p->outbox_size ? p->outbox_size : dflt));
	if (!ok) {
		CM_LOG(ERR, "%s: cannot allocate %u connections", cm->name, p->max_conns);
		mlx5_qpn_cm_destroy(cm);
		rte_errno = ENOMEM;
		return nullptr;
	}
	/* Pop order = slot order, which keeps high_water (the tick scan) low. */
	for (uint32_t i = 0; i < p->max_conns; i++)
		cm->free_slots[i] = p->max_conns - 1 - i;
	cm->nb_free = p->max_conns;
	return cm;
}

void mlx5_qpn_cm_destroy(struct mlx5_qpn_cm *cm)
{
	if (cm == nullptr)
		return;
	end_malformed_burst(cm);
	cm->pairs.fini();
	cm->rids.fini();
	cm->events.fini();
	cm->outbox.fini();
	std::free(cm->conns);
	std::free(cm->free_slots);
	std::free(cm);
}

int mlx5_qpn_cm_listen(struct mlx5_qpn_cm *cm, uint64_t service_id)
{
	if (cm == nullptr)
		return -EINVAL;
	if (listening(cm, service_id))
		return -EEXIST;
	if (cm->nb_services == mlx5_qpn_cm::kMaxServices)
		return -ENOSPC;
	cm->services[cm->nb_services++] = service_id;
	return 0;
}

int mlx5_qpn_cm_unlisten(struct mlx5_qpn_cm *cm, uint64_t service_id)
{
	if (cm == nullptr)
		return -EINVAL;
	for (uint32_t i = 0; i < cm->nb_services; i++) {
		if (cm->services[i] == service_id) {
			cm->services[i] = cm->services[--cm->nb_services];
			return 0;
		}
	}
	return -ENOENT;
}

int mlx5_qpn_cm_connect(struct mlx5_qpn_cm *cm, uint64_t remote_guid, uint64_t service_id,
			uint32_t local_qpn, const void *pd, uint8_t pd_len, uint64_t now_ns,
			uint32_t *conn_id)
{
	if (cm == nullptr || conn_id == nullptr || remote_guid == 0 ||
	    local_qpn > MLX5_QPN_CM_QPN_MAX || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REQ))
		return -EINVAL;
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
	arm(c, now_ns);
	*conn_id = c->comm_id;
	return 0;
}

int mlx5_qpn_cm_accept(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint32_t local_qpn,
		       const void *pd, uint8_t pd_len, uint64_t now_ns)
{
	if (local_qpn > MLX5_QPN_CM_QPN_MAX || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REP))
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
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
	arm(c, now_ns);
	return 0;
}

int mlx5_qpn_cm_reject(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint16_t reason,
		       const void *pd, uint8_t pd_len, uint64_t now_ns)
{
	if (!mlx5_qpn_cm_rej_reason_valid(reason) || !pd_ok(pd, pd_len, MLX5_QPN_CM_MSG_REJ))
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
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

int mlx5_qpn_cm_mra(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint8_t service_timeout,
		    uint64_t now_ns)
{
	if (service_timeout > 31)
		return -EINVAL;
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	if (c->state != MLX5_QPN_CM_STATE_REQ_RCVD)
		return -EPERM;
	mlx5_qpn_cm_msg m = base_msg(cm, MLX5_QPN_CM_MSG_MRA, c);
	m.msg_ref = MLX5_QPN_CM_REF_REQ;
	m.service_timeout = service_timeout;
	rc = send_msg(cm, m, c->remote_guid, c);
	if (rc == 0) {
		c->mra_sent = true;
		c->timer_ns = now_ns + iba_time_ns(service_timeout) +
			      c->wait_ns * (c->max_retries + 2u);
	}
	return rc;
}

int mlx5_qpn_cm_disconnect(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint64_t now_ns)
{
	int rc;
	Conn *c = conn_arg(cm, conn_id, &rc);
	if (c == nullptr)
		return rc;
	if (c->state != MLX5_QPN_CM_STATE_ESTABLISHED)
		return -EPERM;
	send_dreq(cm, c, now_ns);
	return 0;
}

int mlx5_qpn_cm_input(struct mlx5_qpn_cm *cm, const void *frame, size_t len, uint64_t now_ns)
{
	if (cm == nullptr || frame == nullptr)
		return -EINVAL;
	mlx5_qpn_cm_msg m;
	int rc = mlx5_qpn_cm_msg_decode(frame, len, &m);
	if (rc != 0) {
		malformed(cm, rc, len, now_ns);
		return rc;
	}
	end_malformed_burst(cm);
	cm->stats.rx[type_index(m.type)]++;
	switch (m.type) {
	case MLX5_QPN_CM_MSG_REQ:
		on_req(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_REP:
		on_rep(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_RTU:
		on_rtu(cm, m);
		break;
	case MLX5_QPN_CM_MSG_REJ:
		on_rej(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_MRA:
		on_mra(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		on_dreq(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_DREP:
		on_drep(cm, m, now_ns);
		break;
	default:
		break;
	}
	return 0;
}

int mlx5_qpn_cm_tick(struct mlx5_qpn_cm *cm, uint64_t now_ns)
{
	if (cm == nullptr)
		return -EINVAL;
	int fired = 0;
	for (uint32_t i = 0; i < cm->high_water; i++) {
		Conn *c = &cm->conns[i];
		if (c->comm_id == 0 || c->timer_ns == 0 || now_ns < c->timer_ns)
			continue;
		fired++;
		if (c->state == MLX5_QPN_CM_STATE_TIMEWAIT) {
			cm->stats.timewait_exited++;
			push_event(cm, MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT, c, 0, nullptr);
			free_conn(cm, c);
			continue;
		}
		if (c->state == MLX5_QPN_CM_STATE_REQ_RCVD) {
			/* The consumer never answered; the requester has given up long ago. */
			cm->stats.timeouts++;
			push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, MLX5_QPN_CM_REJ_TIMEOUT, nullptr);
			free_conn(cm, c);
			continue;
		}
		if (c->retries < c->max_retries && c->last_len != 0) {
			c->retries++;
			cm->stats.retransmits++;
			transmit(cm, c->remote_guid, c->last, c->last_len);
			c->timer_ns = now_ns + c->wait_ns;
			continue;
		}
		cm->stats.timeouts++;
		switch (c->state) {
		case MLX5_QPN_CM_STATE_REQ_SENT:
			/* Tell the passive side, which may hold a connection for our REQ. */
			send_rej(cm, c, MLX5_QPN_CM_REJ_TIMEOUT, MLX5_QPN_CM_REF_REP);
			push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, MLX5_QPN_CM_REJ_TIMEOUT,
				   nullptr);
			free_conn(cm, c);
			break;
		case MLX5_QPN_CM_STATE_REP_SENT:
			/* The requester may have our REP and use our QPN: keep it in timewait. */
			send_rej(cm, c, MLX5_QPN_CM_REJ_TIMEOUT, MLX5_QPN_CM_REF_OTHER);
			push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, MLX5_QPN_CM_REJ_TIMEOUT,
				   nullptr);
			enter_timewait(cm, c, now_ns);
			break;
		case MLX5_QPN_CM_STATE_DREQ_SENT:
			enter_timewait(cm, c, now_ns);
			push_event(cm, MLX5_QPN_CM_EVENT_DISCONNECTED, c, 0, nullptr);
			break;
		default:
			c->timer_ns = 0;
			break;
		}
	}
	/* Shrink the scan range past freed slots at its end. */
	while (cm->high_water > 0 && cm->conns[cm->high_water - 1].comm_id == 0)
		cm->high_water--;
	return fired;
}

int mlx5_qpn_cm_poll(struct mlx5_qpn_cm *cm, uint64_t now_ns)
{
	if (cm == nullptr)
		return -EINVAL;
	if (!cm->has_tp || cm->tp.recv_burst == nullptr)
		return -ENOTSUP;
	int n = cm->tp.recv_burst(cm->tp.ctx, cm->rx_burst, kBurst);
	if (n < 0)
		return n;
	n = std::min<int>(n, int(kBurst));
	for (int i = 0; i < n; i++) {
		const mlx5_qpn_cm_frame &f = cm->rx_burst[i];
		size_t len = std::min<size_t>(f.len, sizeof(f.data));
		/* The transport knows the real sender: a frame claiming another GUID is dropped. */
		if (len >= 16 && f.src_guid != 0) {
			uint64_t claimed = 0;
			for (int b = 0; b < 8; b++)
				claimed = (claimed << 8) | f.data[8 + b];
			if (claimed != f.src_guid) {
				malformed(cm, -EACCES, len, now_ns);
				continue;
			}
		}
		mlx5_qpn_cm_input(cm, f.data, len, now_ns);
	}
	mlx5_qpn_cm_tick(cm, now_ns);
	return n;
}

int mlx5_qpn_cm_output(struct mlx5_qpn_cm *cm, uint64_t *dst_guid, void *buf, size_t size)
{
	if (cm == nullptr || dst_guid == nullptr || buf == nullptr)
		return -EINVAL;
	const cm_impl::OutFrame *o = cm->outbox.front();
	if (o == nullptr)
		return -EAGAIN;
	if (size < o->len)
		return -ENOSPC;
	*dst_guid = o->dst;
	std::memcpy(buf, o->data, o->len);
	int len = o->len;
	cm->outbox.pop();
	return len;
}

int mlx5_qpn_cm_poll_event(struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_event *ev)
{
	if (cm == nullptr || ev == nullptr)
		return -EINVAL;
	const mlx5_qpn_cm_event *e = cm->events.front();
	if (e == nullptr)
		return -EAGAIN;
	*ev = *e;
	cm->events.pop();
	if (cm->events.empty())
		cm->ev_drop_logged = false;
	return 0;
}

int mlx5_qpn_cm_conn_get(const struct mlx5_qpn_cm *cm, uint32_t conn_id,
			  struct mlx5_qpn_cm_conn_info *info)
{
	if (cm == nullptr || info == nullptr)
		return -EINVAL;
	const Conn *c = lookup(const_cast<mlx5_qpn_cm *>(cm), conn_id);
	if (c == nullptr)
		return -ENOENT;
	std::memset(info, 0, sizeof(*info));
	info->state = c->state;
	info->active = c->active;
	info->pair_in_table = c->pair_in_table;
	info->remote_guid = c->remote_guid;
	info->remote_comm_id = c->remote_comm_id;
	info->local_qpn = c->local_qpn;
	info->remote_qpn = c->remote_qpn;
	info->service_id = c->service_id;
	info->timer_ns = c->timer_ns;
	info->timewait_ms = c->state == MLX5_QPN_CM_STATE_TIMEWAIT
				    ? c->timewait_ms
				    : mlx5_qpn_cm_timewait_ms(c->packet_life_time, c->peer_ack_delay);
	return 0;
}

int mlx5_qpn_cm_pair_held(const struct mlx5_qpn_cm *cm, uint64_t remote_guid,
			  uint32_t remote_qpn)
{
	if (cm == nullptr)
		return -EINVAL;
	int slot = cm->pairs.find(remote_guid, remote_qpn);
	if (slot < 0)
		return 0;
	return cm->conns[slot].state == MLX5_QPN_CM_STATE_TIMEWAIT ? 2 : 1;
}

int mlx5_qpn_cm_stats_get(const struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_stats *stats)
{
	if (cm == nullptr || stats == nullptr)
		return -EINVAL;
	*stats = cm->stats;
	return 0;
}

} // extern "C"
