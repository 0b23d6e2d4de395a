/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM engines' active side: the connection slots of one client lcore (connect, send over
 * the DCI, disconnect, release) and the lcore body of the CM engines (cm_lcore_run).
 */
#include "cm_glue.h"

namespace {

enum slot_state { S_IDLE, S_CONNECTING, S_SENDING, S_DISCONNECTING };

struct slot {
	slot_state state = S_IDLE;
	uint32_t qpn = 0;
	bool owns_qpn = false;
	bool peer_closed = false;
	bool abort = false;        /* churn: disconnect without sending */
	uint32_t conn_id = 0;
	unsigned peer = 0;
	unsigned msgs = 0;
	unsigned posted = 0, done = 0;
	uint64_t t0 = 0, pool = 0, t_conn = 0, t_send = 0, t_disc = 0;
};

struct xorshift {
	uint64_t s;
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

struct client_loop {
	run_ctx *ctx;
	unsigned lcore;
	const client_mode &mode;
	lcore_stats &st;
	client_node *node;
	mlx5_qpn_dev *dev;
	dc_lcore *dc;
	uint64_t quota; /* connections to start (0: unlimited) */
	uint64_t started = 0;
	unsigned rr = 0;
	slot slots[kMaxSlots];
	unsigned active_slots;
	xorshift rng;
	std::vector<mini_ev> evs;

	client_loop(run_ctx *c, unsigned lc, const client_mode &m)
		: ctx(c), lcore(lc), mode(m), st(c->lc[lc]),
		  node(c->cm->clients[c->role[lc].dev]), dev(c->devs[c->role[lc].dev]),
		  dc(&c->cm->dcl[lc]), rng{c->cfg->seed * 0x9E3779B97F4A7C15ull + lc + 1}
	{
		const run_config &cfg = *ctx->cfg;
		active_slots = std::min(std::max(cfg.inflight, cfg.force_shared_qpn ? 2u : 1u),
					kMaxSlots);
		quota = 0;
		if (cfg.connections != 0) {
			quota = cfg.connections / ctx->nb_clients;
			if (ctx->role[lc].client_idx < cfg.connections % ctx->nb_clients)
				quota++;
			if (quota == 0)
				quota = UINT64_MAX; /* nothing to do: mark as finished below */
		}
	}

	void release(slot &s, bool completed)
	{
		uint64_t t1 = rte_rdtsc();
		if (s.owns_qpn) {
			uint64_t t0 = rte_rdtsc();
			int rc = mlx5_qpn_reserved_dealloc(dev, s.qpn);
			t1 = rte_rdtsc();
			if (rc == 0) {
				st.hist[STEP_RELEASE].record(t1 - t0);
				st.frees.fetch_add(1, std::memory_order_relaxed);
				s.pool += t1 - t0;
			} else {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(ERR, "lcore %u: release of QPN 0x%x: %s", lcore, s.qpn,
					strerror(-rc));
			}
		}
		if (completed) {
			st.hist[STEP_CYCLE].record(t1 - s.t0);
			st.pool_cycles += s.pool;
			st.cycle_cycles += t1 - s.t0;
			st.ops.fetch_add(1, std::memory_order_relaxed);
		}
		s = slot{};
	}

	void disconnect(slot &s)
	{
		node->lock.lock();
		int rc = mlx5_qpn_cm_disconnect(node->cm, s.conn_id, mlx5_qpn_clock_ns());
		node->lock.unlock();
		s.t_disc = rte_rdtsc();
		if (rc != 0) {
			/* The peer closed it meanwhile (its DISCONNECTED event is on its way). */
			s.peer_closed = true;
		}
		s.state = S_DISCONNECTING;
	}

	/* Connection usable: send, or close right away without a data path. */
	void established(slot &s)
	{
		uint64_t now = rte_rdtsc();
		st.hist[STEP_REQ_REP].record(now - s.t_conn);
		if (!ctx->data_path || s.msgs == 0 || s.abort) {
			disconnect(s);
			return;
		}
		s.state = S_SENDING;
		s.t_send = now;
		post_more(s);
		if (s.msgs == 0)
			disconnect(s);
	}

	/* Post what is left of a slot's sends (the send queue may have been full). */
	void post_more(slot &s)
	{
		const uint32_t dctn = ctx->cm->dcdev[ctx->role[lcore].dev].dctn[s.peer];
		const uint64_t key = ctx->cm->peer_key[s.peer];
		uint8_t payload[64];
		memset(payload, 0x5a, sizeof(payload));
		unsigned idx = static_cast<unsigned>(&s - slots);
		unsigned before = s.posted;
		while (s.posted < s.msgs) {
			uint64_t wr_id = (uint64_t(idx) << 32) | s.posted;
			int rc = mlx5_qpn_dci_post_send(dc->dci, dctn, key, payload, sizeof(payload),
							wr_id);
			if (rc == -ENOBUFS)
				break; /* send queue full: post the rest after completions */
			if (rc != 0) {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(ERR, "lcore %u: post_send: %s", lcore, strerror(-rc));
				s.msgs = s.posted;
				break;
			}
			s.posted++;
			st.sends.fetch_add(1, std::memory_order_relaxed);
		}
		if (s.posted != before)
			mlx5_qpn_dci_ring(dc->dci);
	}

	void on_cqes()
	{
		mlx5_qpn_wc wc[32];
		int n = mlx5_qpn_cq_poll(dc->cq, wc, 32);
		for (int i = 0; i < n; i++) {
			unsigned idx = static_cast<unsigned>(wc[i].wr_id >> 32);
			st.cqes.fetch_add(1, std::memory_order_relaxed);
			if (wc[i].syndrome != 0 || wc[i].opcode == MLX5_QPN_CQE_REQ_ERR)
				st.cqe_errors.fetch_add(1, std::memory_order_relaxed);
			if (idx >= kMaxSlots || slots[idx].state != S_SENDING)
				continue;
			slot &s = slots[idx];
			s.done++;
			if (s.posted < s.msgs)
				post_more(s);
			if (s.done >= s.msgs) {
				st.hist[STEP_SEND_CQE].record(rte_rdtsc() - s.t_send);
				if (s.peer_closed)
					release(s, false);
				else
					disconnect(s);
			}
		}
	}

	slot *find(uint32_t conn_id)
	{
		for (unsigned i = 0; i < kMaxSlots; i++)
			if (slots[i].state != S_IDLE && slots[i].conn_id == conn_id)
				return &slots[i];
		return nullptr;
	}

	void on_event(const mini_ev &ev)
	{
		slot *s = find(ev.conn_id);
		if (s == nullptr)
			return;
		switch (ev.type) {
		case MLX5_QPN_CM_EVENT_ESTABLISHED:
			if (s->state == S_CONNECTING)
				established(*s);
			break;
		case MLX5_QPN_CM_EVENT_REJECTED:
			/* Count it, release the QPN, go on: a stale reject must not stall the run. */
			count_rej(st, ev.reason);
			release(*s, false);
			break;
		case MLX5_QPN_CM_EVENT_DISCONNECTED:
			if (s->state == S_DISCONNECTING && !s->peer_closed) {
				st.hist[STEP_DREQ_DREP].record(rte_rdtsc() - s->t_disc);
				release(*s, true);
			} else if (s->state == S_SENDING && s->done < s->posted) {
				/* Closed by the peer (e.g. its stale-connection DREQ) while sends are
				 * in flight: wait for their completions, then release. */
				st.peer_disc.fetch_add(1, std::memory_order_relaxed);
				s->peer_closed = true;
			} else {
				st.peer_disc.fetch_add(1, std::memory_order_relaxed);
				release(*s, false);
			}
			break;
		default:
			break;
		}
	}

	/* Start a connection on an idle slot. @return false when it should wait (no QPN now). */
	bool start(slot &s)
	{
		const run_config &cfg = *ctx->cfg;
		unsigned idx = static_cast<unsigned>(&s - slots);
		s = slot{};
		const unsigned nb_peers = static_cast<unsigned>(ctx->cm->peer_guid.size());
		s.peer = mode.churn ? rng.below(nb_peers) : (rr++ % nb_peers);
		s.msgs = cfg.msgs_per_conn;
		if (mode.churn) {
			s.msgs = rng.below(2 * cfg.msgs_per_conn + 1);
			s.abort = rng.below(8) == 0;
		}
		s.t0 = rte_rdtsc();
		/* Negative control: odd slots borrow the QPN of the slot before them while it is
		 * open, so two connections of this node present one QPN to one peer at once. */
		if (cfg.force_shared_qpn && (idx & 1) && slots[idx - 1].state != S_IDLE &&
		    slots[idx - 1].owns_qpn) {
			s.qpn = slots[idx - 1].qpn;
			s.peer = slots[idx - 1].peer;
			s.owns_qpn = false;
		} else {
			int rc = mlx5_qpn_reserved_alloc(dev, &s.qpn);
			uint64_t t1 = rte_rdtsc();
			if (rc != 0) {
				(rc == -EAGAIN ? st.eagain : rc == -ENOSPC ? st.enospc : st.errors)
					.fetch_add(1, std::memory_order_relaxed);
				if (rc != -EAGAIN && rc != -ENOSPC)
					APP_LOG(ERR, "lcore %u: alloc: %s", lcore, strerror(-rc));
				s = slot{};
				return false;
			}
			st.hist[STEP_ALLOC].record(t1 - s.t0);
			st.allocs.fetch_add(1, std::memory_order_relaxed);
			s.pool = t1 - s.t0;
			s.owns_qpn = true;
		}
		node->lock.lock();
		s.t_conn = rte_rdtsc();
		int rc = mlx5_qpn_cm_connect(node->cm, ctx->cm->peer_guid[s.peer], kServiceId,
					     s.qpn, nullptr, 0, mlx5_qpn_clock_ns(), &s.conn_id);
		if (rc == 0)
			node->owner[s.conn_id] = lcore;
		node->lock.unlock();
		if (rc != 0) {
			(rc == -ENOSPC || rc == -ENOBUFS ? st.cm_busy : st.errors)
				.fetch_add(1, std::memory_order_relaxed);
			if (rc != -ENOSPC && rc != -ENOBUFS)
				APP_LOG(ERR, "lcore %u: connect: %s", lcore, strerror(-rc));
			release(s, false);
			return false;
		}
		s.state = S_CONNECTING;
		started++;
		return true;
	}

	/* Poll the shared agent and collect this lcore's events. */
	void poll_agent()
	{
		node->lock.lock();
		uint64_t now = mlx5_qpn_clock_ns();
		mlx5_qpn_cm_tick(node->cm, now);
		mlx5_qpn_cm_poll(node->cm, now);
		mlx5_qpn_cm_event ev;
		while (mlx5_qpn_cm_poll_event(node->cm, &ev) == 0) {
			auto it = node->owner.find(ev.conn_id);
			if (it == node->owner.end())
				continue;
			unsigned owner = it->second;
			if (ev.type == MLX5_QPN_CM_EVENT_REJECTED ||
			    ev.type == MLX5_QPN_CM_EVENT_DISCONNECTED ||
			    ev.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT)
				node->owner.erase(it); /* nothing more for the lcore after these */
			if (ev.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT)
				continue;
			node->pending[owner].push_back(
				mini_ev{ev.type, ev.conn_id, ev.remote_qpn, ev.reason});
		}
		evs.swap(node->pending[lcore]);
		node->pending[lcore].clear();
		node->lock.unlock();
	}

	unsigned open_slots() const
	{
		unsigned n = 0;
		for (const slot &s : slots)
			n += s.state != S_IDLE;
		return n;
	}

	void run()
	{
		const bool server = ctx->role[lcore].server;
		uint64_t drain_deadline = 0;
		unsigned storm = 0;
		for (;;) {
			bool stopping = ctx->stop.load(std::memory_order_relaxed) ||
					(quota != 0 && started >= quota);
			if (stopping && drain_deadline == 0)
				drain_deadline = mlx5_qpn_clock_ns() + kDrainNs;
			if (server)
				server_poll(ctx);
			else if (ctx->data_path && !ctx->cfg->role_server())
				/* No server lcore in this process: execute our doorbells here (the
				 * server process's service may run them too; the device serialises). */
				for (mlx5_qpn_dev *d : ctx->devs)
					mlx5_qpn_dev_service_run(d);
			poll_agent();
			for (const mini_ev &ev : evs)
				on_event(ev);
			evs.clear();
			if (ctx->data_path) {
				on_cqes();
				/* Sends that found the send queue full (storms): post them now. */
				for (slot &s : slots)
					if (s.state == S_SENDING && s.posted < s.msgs)
						post_more(s);
			}
			if (!stopping) {
				unsigned limit = active_slots;
				if (mode.churn) {
					/* Reconnect storms: every 512 connections, all slots at once
					 * for the next 128. */
					if (storm == 0 && rng.below(512) == 0)
						storm = 128;
					if (storm > 0)
						limit = kMaxSlots;
				}
				for (unsigned i = 0; i < limit; i++) {
					if (slots[i].state != S_IDLE)
						continue;
					if (quota != 0 && started >= quota)
						break;
					if (!start(slots[i]))
						break;
					if (storm > 0)
						storm--;
				}
				if (mode.churn && rng.below(64) == 0) {
					/* A burst of bare alloc/free mixed in (no connection). */
					uint32_t q[8];
					if (mlx5_qpn_reserved_alloc_bulk(dev, q, 8) == 0)
						mlx5_qpn_reserved_dealloc_bulk(dev, q, 8);
				}
			} else if (open_slots() == 0 || mlx5_qpn_clock_ns() > drain_deadline) {
				break;
			}
		}
		/* Anything still open at the drain deadline: forget it, give the QPN back. */
		for (slot &s : slots)
			if (s.state != S_IDLE) {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(WARNING, "lcore %u: connection 0x%x still open at stop", lcore,
					s.conn_id);
				release(s, false);
			}
	}
};

} // namespace

int cm_lcore_run(run_ctx *ctx, unsigned lcore, const client_mode &mode)
{
	const lcore_role &r = ctx->role[lcore];
	if (r.client) {
		client_loop *cl = new client_loop(ctx, lcore, mode);
		cl->run();
		delete cl;
		ctx->clients_running.fetch_sub(1, std::memory_order_acq_rel);
		/* A co-polling client serves the passive side until every client is done. */
		if (r.server)
			while (ctx->clients_running.load(std::memory_order_acquire) != 0)
				server_poll(ctx);
		else
			mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(ctx->devs[r.dev]));
		return 0;
	}
	if (r.server) {
		/* A server process has no clients: it serves until the run is stopped. */
		const bool alone = !ctx->cfg->role_client();
		while (ctx->clients_running.load(std::memory_order_acquire) != 0 ||
		       (alone && !ctx->stop.load(std::memory_order_acquire)))
			server_poll(ctx);
		/* The last frames (DREPs already sent) need no answer; done. */
		server_poll(ctx);
	}
	return 0;
}
