/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Time in the CM agent: the response timer (arm), timewait (enter_timewait, whose length is
 * mlx5_qpn_cm_timewait_ms() of the connection's packet life time and the peer's ACK delay) and
 * the tick that retransmits, times out and ends timewait.
 *
 * Every connection has at most one timer (Conn::timer_ns, mirrored in the agent's TimerWheel,
 * cm_timer_wheel.h). The tick takes only the timers that are due from the wheel, so its cost
 * follows the timers that fire, not the connections held: with a 1 s timewait an agent holds
 * ~connections/s x 1 s slots in timewait, which a scan of the table visited on every poll.
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
arm(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns)
{
	c->retries = 0;
	set_timer(cm, c, now_ns + c->wait_ns);
}

void
enter_timewait(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns)
{
	rid_remove(cm, c);
	/* Live policy: the pair is free for a new connection as soon as this one stops. */
	if (cm->params.policy == MLX5_QPN_CM_POLICY_LIVE)
		pair_remove(cm, c);
	c->state = MLX5_QPN_CM_STATE_TIMEWAIT;
	c->timewait_ms = mlx5_qpn_cm_timewait_ms(c->packet_life_time, c->peer_ack_delay);
	uint64_t end = now_ns + uint64_t(c->timewait_ms) * 1000000u;
	set_timer(cm, c, end == 0 ? 1 : end); /* 0 means "no timer" */
	cm->stats.timewait_entered++;
	cm->stats.timewait_entries++;
}

} // namespace cm_impl

using namespace cm_impl;

extern "C" {

int
mlx5_qpn_cm_tick(struct mlx5_qpn_cm *cm, uint64_t now_ns)
{
	if (cm == nullptr)
		return -EINVAL;
	cm->now_ns = now_ns; /* the time retransmissions and REJs are sent at */
	int fired = 0;
	uint32_t slot;
	while ((slot = cm->timers.take_due(now_ns)) != TimerWheel::kNil) {
		Conn *c = &cm->conns[slot];
		c->timer_ns = 0; /* taken: disarmed; the cases below arm it again if they must */
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
			push_event(cm, MLX5_QPN_CM_EVENT_REJECTED, c, MLX5_QPN_CM_REJ_TIMEOUT,
				   nullptr);
			free_conn(cm, c);
			continue;
		}
		if (c->retries < c->max_retries && c->last_len != 0) {
			c->retries++;
			cm->stats.retransmits++;
			transmit(cm, c->remote_guid, c->last, c->last_len);
			set_timer(cm, c, now_ns + c->wait_ns);
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
			break;
		}
	}
	return fired;
}

} // extern "C"
