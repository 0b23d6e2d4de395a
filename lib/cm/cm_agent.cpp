/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM agent's life cycle and queries: create and destroy, listen and unlisten, the outbox
 * (no transport), the event queue, connection and pair look-ups, statistics.
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
#include <ctime>
#include <new>
#include <sys/random.h>
#include <unistd.h>

RTE_LOG_REGISTER(mlx5_qpn_cm_logtype, mlx5_qpn.cm, INFO);

namespace cm_impl {

uint32_t (*comm_id_operand_test_hook)() = nullptr;

namespace {

/*
 * The agent's comm-id operand. Linux's CM XORs a random operand, drawn once, into every local
 * comm id for this reason: the ids of a node that crashed and came back (same GUID) must not
 * be its previous life's, or the peer takes the new REQs for duplicates of connections it still
 * remembers. Without the kernel's entropy (getrandom() refused), the pid and the clock differ
 * between two incarnations too.
 */
uint32_t
draw_id_operand()
{
	if (comm_id_operand_test_hook != nullptr)
		return comm_id_operand_test_hook();
	uint32_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == ssize_t(sizeof(r)))
		return r;
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t(getpid()) << 32) ^ uint64_t(ts.tv_sec) * 1000000000ull ^
		     uint64_t(ts.tv_nsec);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return uint32_t(x);
}

} // namespace

} // namespace cm_impl

using namespace cm_impl;

extern "C" {

struct mlx5_qpn_cm *
mlx5_qpn_cm_create(const struct mlx5_qpn_cm_params *p)
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
	auto *cm = new (std::nothrow) mlx5_qpn_cm();
	if (cm == nullptr) {
		rte_errno = ENOMEM;
		return nullptr;
	}
	std::snprintf(cm->name, sizeof(cm->name), "%s", p->name != nullptr ? p->name : "cm");
	cm->params = *p;
	cm->params.name = cm->name;
	cm->params.transport = nullptr;
	if (p->transport != nullptr) {
		cm->tp = *p->transport;
		cm->has_tp = true;
	}
	cm->max_conns = p->max_conns;
	cm->id_operand = draw_id_operand();
	uint32_t dflt = std::max(64u, 2 * p->max_conns);
	bool ok = true;
	/* Faulted in ahead, as the tables below (table_alloc: one mmap with MAP_POPULATE). A
	 * connection holds its slot through timewait, so with a 1 s timewait the data path walks
	 * into ~connections/s fresh slots during the first second, ~320 bytes each: lazily mapped,
	 * that was a first-touch fault (~34 us here) every dozen connections, on the lcores being
	 * measured (~half the page faults of a 1 s timewait run of dci-reconnect). Populating in
	 * one call costs a fraction of that, once, at create (touching the pages one by one, or a
	 * value-initialising new[], cost ~2.5 s at each qpn-testpmd start). */
	cm->conns = static_cast<Conn *>(table_alloc(p->max_conns, sizeof(Conn)));
	cm->free_slots = new (std::nothrow) uint32_t[p->max_conns];
	ok = (cm->conns != nullptr) && (cm->free_slots != nullptr);
	ok = ok && cm->pairs.init(p->max_conns) && cm->rids.init(p->max_conns);
	/* The cursor starts at 0: the first tick walks the wheel once to the caller's clock. */
	ok = ok && cm->timers.init(p->max_conns, 0);
	ok = ok && cm->events.init(p->event_queue_size ? p->event_queue_size : dflt);
	ok = ok && (cm->has_tp || cm->outbox.init(p->outbox_size ? p->outbox_size : dflt));
	if (!ok) {
		CM_LOG(ERR, "%s: cannot allocate %u connections", cm->name, p->max_conns);
		mlx5_qpn_cm_destroy(cm);
		rte_errno = ENOMEM;
		return nullptr;
	}
	/* Pop order = slot order: the lowest slots are reused first (compact tables). */
	for (uint32_t i = 0; i < p->max_conns; i++)
		cm->free_slots[i] = p->max_conns - 1 - i;
	cm->nb_free = p->max_conns;
	return cm;
}

void
mlx5_qpn_cm_destroy(struct mlx5_qpn_cm *cm)
{
	if (cm == nullptr)
		return;
	end_malformed_burst(cm);
	cm->pairs.fini();
	cm->rids.fini();
	cm->timers.fini();
	cm->events.fini();
	cm->outbox.fini();
	table_free(cm->conns, cm->max_conns, sizeof(Conn));
	delete[] cm->free_slots;
	delete cm;
}

int
mlx5_qpn_cm_listen(struct mlx5_qpn_cm *cm, uint64_t service_id)
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

int
mlx5_qpn_cm_unlisten(struct mlx5_qpn_cm *cm, uint64_t service_id)
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

int
mlx5_qpn_cm_output(struct mlx5_qpn_cm *cm, uint64_t *dst_guid, void *buf, size_t size)
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

int
mlx5_qpn_cm_poll_event(struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_event *ev)
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

int
mlx5_qpn_cm_conn_get(const struct mlx5_qpn_cm *cm, uint32_t conn_id,
		     struct mlx5_qpn_cm_conn_info *info)
{
	if (cm == nullptr || info == nullptr)
		return -EINVAL;
	const Conn *c = lookup(const_cast<mlx5_qpn_cm *>(cm), conn_id);
	if (c == nullptr)
		return -ENOENT;
	std::memset(info, 0, sizeof(*info));
	info->state = c->state;
	info->active = static_cast<uint8_t>(c->active);
	info->pair_in_table = static_cast<uint8_t>(c->pair_in_table);
	info->remote_guid = c->remote_guid;
	info->remote_comm_id = c->remote_comm_id;
	info->local_qpn = c->local_qpn;
	info->remote_qpn = c->remote_qpn;
	info->service_id = c->service_id;
	info->timer_ns = c->timer_ns;
	info->timewait_ms = c->state == MLX5_QPN_CM_STATE_TIMEWAIT ?
				    c->timewait_ms :
				    mlx5_qpn_cm_timewait_ms(c->packet_life_time, c->peer_ack_delay);
	return 0;
}

int
mlx5_qpn_cm_pair_held(const struct mlx5_qpn_cm *cm, uint64_t remote_guid, uint32_t remote_qpn)
{
	if (cm == nullptr)
		return -EINVAL;
	int slot = cm->pairs.find(remote_guid, remote_qpn);
	if (slot < 0)
		return 0;
	return cm->conns[slot].state == MLX5_QPN_CM_STATE_TIMEWAIT ? 2 : 1;
}

int
mlx5_qpn_cm_stats_get(const struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_stats *stats)
{
	if (cm == nullptr || stats == nullptr)
		return -EINVAL;
	*stats = cm->stats;
	return 0;
}

} // extern "C"
