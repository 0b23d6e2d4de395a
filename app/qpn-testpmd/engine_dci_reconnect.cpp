/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `dci-reconnect` engine: the active side. Per connection, on every client lcore: reserved
 * QPN alloc -> REQ/REP/RTU with that QPN -> --msgs-per-conn SENDs from the lcore's DCI to the
 * peer's DCT -> their completions -> DREQ/DREP -> the QPN released into the quarantine; then
 * the slot reconnects with a fresh QPN. With --allocator=rdma-core the QPN comes from the
 * device's own one-QPN allocator (mlx5_qpn_dev_fw_qpn_alloc: rdma-core's algorithm, no
 * quarantine) and goes back to it at once. --inflight connections are open at once per lcore, to
 * --peers DC targets in turn. The summary reports the client's steps. Without a data path (DC
 * calls answer -EOPNOTSUPP, or hardware) the send step is skipped and the CM + QPN cycle still
 * runs. In one process the passive side is dct-accept's body.
 *
 * This file holds the active body for every engine that runs it (engine_active.h): churn brings
 * its own pattern, dct-accept uses it as its peer.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rte_cycles.h>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "engine_active.h"

namespace {

constexpr uint64_t kDrainNs = 3'000'000'000ull; /* longest wait for open connections at stop */

enum slot_state { S_IDLE, S_CONNECTING, S_SENDING, S_DISCONNECTING };

struct slot {
	slot_state state = S_IDLE;
	uint32_t qpn = 0;
	bool owns_qpn = false;
	bool has_conn = false; /* started: the connection is to be released */
	bool peer_closed = false;
	bool abort = false;  /* disconnect without sending */
	bool failed = false; /* a send of it completed in error (or flushed): no cycle counted */
	uint32_t conn_id = 0;
	unsigned peer = 0;
	unsigned msgs = 0;
	unsigned posted = 0, done = 0;
	uint64_t t0 = 0, pool = 0, t_conn = 0, t_send = 0, t_disc = 0;
};

struct active_loop {
	run_ctx *ctx;
	unsigned lcore;
	const active_pattern &pat;
	const qpn_conn_active_ops &cn;
	lcore_stats &st;
	mlx5_qpn_dev *dev;
	/* --allocator=rdma-core: the device's own one-QPN allocator, no quarantine. */
	const bool fw;
	uint64_t quota; /* connections to start (0: unlimited) */
	uint64_t started = 0;
	unsigned rr = 0;
	uint64_t synd_logged = 0; /* syndromes whose failure was logged (synd_slot() bits) */
	slot slots[kMaxSlots];
	unsigned active_slots;

	active_loop(run_ctx *c, unsigned lc, const active_pattern &p)
	    : ctx(c), lcore(lc), pat(p), cn(c->conn->active), st(c->lc[lc]),
	      dev(c->devs[c->role[lc].dev]), fw(c->alloc_fw)
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
		if (s.has_conn)
			cn.release(ctx, lcore, s.conn_id);
		uint64_t t1 = rte_rdtsc();
		if (s.owns_qpn) {
			uint64_t t0 = rte_rdtsc();
			int rc = fw ? mlx5_qpn_dev_fw_qpn_free(dev, s.qpn) :
				      mlx5_qpn_reserved_dealloc(dev, s.qpn);
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
		st.pool_cycles += s.pool;
		if (completed) {
			st.hist[STEP_CYCLE].record(t1 - s.t0);
			st.ops.fetch_add(1, std::memory_order_relaxed);
		}
		s = slot{};
	}

	void disconnect(slot &s)
	{
		int rc = cn.disconnect(ctx, lcore, s.conn_id);
		s.t_disc = rte_rdtsc();
		if (rc != 0) {
			/* The peer closed it meanwhile (its CLOSED event is on its way). */
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
		sends_done(s);
	}

	/* Every send of a SENDING slot completed (or none more will be posted): close it. */
	void sends_done(slot &s)
	{
		if (s.state != S_SENDING || s.done < s.posted || s.posted < s.msgs)
			return;
		if (!s.failed && s.posted != 0)
			st.hist[STEP_SEND_CQE].record(rte_rdtsc() - s.t_send);
		if (s.peer_closed)
			release(s, false);
		else
			disconnect(s);
	}

	/* Post what is left of a slot's sends (the send queue may have been full). */
	void post_more(slot &s)
	{
		unsigned idx = static_cast<unsigned>(&s - slots);
		unsigned before = s.posted;
		while (s.posted < s.msgs) {
			uint64_t wr_id = (uint64_t(idx) << 32) | s.posted;
			int rc = cn.send(ctx, lcore, s.conn_id, s.peer, wr_id);
			if (rc == -ENOBUFS || rc == -EAGAIN)
				break; /* queue full, or the DCI recovering: post after completions */
			if (rc == -ENOTCONN) {
				/* The connection closed under its sends (the peer's DREQ): the
				 * rest go nowhere, and its CLOSED event ends it. */
				s.msgs = s.posted;
				break;
			}
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
			cn.flush(ctx, lcore);
	}

	/* A send of slot S completed in error: the connection fails with the syndrome's reason
	 * (once; its other sends still complete, flushed). A flushed completion is the DCI's
	 * earlier error reaching this connection, not a new error. */
	void send_failed(slot &s, uint8_t syndrome)
	{
		const bool flushed = syndrome == MLX5_QPN_SYND_WR_FLUSH;
		(flushed ? st.cqe_flushed : st.cqe_errors).fetch_add(1, std::memory_order_relaxed);
		if (s.failed || s.state != S_SENDING)
			return;
		s.failed = true;
		s.msgs = s.posted; /* nothing more for a failed connection */
		st.conn_failed[synd_slot(syndrome)].fetch_add(1, std::memory_order_relaxed);
		/* One line per syndrome and lcore: a fabric that drops sends would flood the log;
		 * the summary counts every one. */
		const uint64_t bit = 1ull << synd_slot(syndrome);
		if (!flushed && (synd_logged & bit) == 0) {
			synd_logged |= bit;
			APP_LOG(ERR,
				"lcore %u: connection 0x%x failed: DC send: %s (syndrome 0x%02x; "
				"later ones are counted in the summary)",
				lcore, s.conn_id, mlx5_qpn_wc_syndrome_str(syndrome), syndrome);
		}
	}

	void on_completion(const qpn_conn_event &ev)
	{
		unsigned idx = static_cast<unsigned>(ev.wr_id >> 32);
		st.cqes.fetch_add(1, std::memory_order_relaxed);
		slot *s = idx < kMaxSlots ? &slots[idx] : nullptr;
		if (ev.error) {
			if (s != nullptr)
				send_failed(*s, ev.syndrome);
			else
				st.cqe_errors.fetch_add(1, std::memory_order_relaxed);
		}
		if (s == nullptr || s->state != S_SENDING)
			return;
		s->done++;
		if (s->posted < s->msgs)
			post_more(*s);
		sends_done(*s);
	}

	slot *find(uint32_t conn_id)
	{
		for (unsigned i = 0; i < kMaxSlots; i++)
			if (slots[i].state != S_IDLE && slots[i].conn_id == conn_id)
				return &slots[i];
		return nullptr;
	}

	void on_event(const qpn_conn_event &ev)
	{
		if (ev.type == QPN_CONN_EV_COMPLETION) {
			on_completion(ev);
			return;
		}
		slot *s = find(ev.conn);
		if (s == nullptr)
			return;
		switch (ev.type) {
		case QPN_CONN_EV_ESTABLISHED:
			if (s->state == S_CONNECTING)
				established(*s);
			break;
		case QPN_CONN_EV_REJECTED:
			/* Count it, release the QPN, go on: a stale reject must not stall the run. */
			count_rej(st, ev.reason);
			release(*s, false);
			break;
		case QPN_CONN_EV_CLOSED:
			if (s->state == S_DISCONNECTING && !s->peer_closed) {
				st.hist[STEP_DREQ_DREP].record(rte_rdtsc() - s->t_disc);
				release(*s, !s->failed);
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
		case QPN_CONN_EV_ERROR:
			st.errors.fetch_add(1, std::memory_order_relaxed);
			APP_LOG(ERR, "lcore %u: connection 0x%x failed: %s", lcore, s->conn_id,
				ev.why != nullptr ? ev.why : "CM error");
			release(*s, false);
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
		active_plan plan{.peer = rr++ % ctx->nb_peers,
				 .msgs = cfg.msgs_per_conn,
				 .abort = false};
		if (pat.plan != nullptr)
			pat.plan(pat.priv, ctx, &plan);
		s.peer = plan.peer;
		s.msgs = plan.msgs;
		s.abort = plan.abort;
		s.t0 = rte_rdtsc();
		/* Negative control: odd slots borrow the QPN of the slot before them while it is
		 * open, so two connections of this node present one QPN to one peer at once. */
		if (cfg.force_shared_qpn && (idx & 1) && slots[idx - 1].state != S_IDLE &&
		    slots[idx - 1].owns_qpn) {
			s.qpn = slots[idx - 1].qpn;
			s.peer = slots[idx - 1].peer;
			s.owns_qpn = false;
		} else {
			int rc = fw ? mlx5_qpn_dev_fw_qpn_alloc(dev, &s.qpn) :
				      mlx5_qpn_reserved_alloc(dev, &s.qpn);
			uint64_t t1 = rte_rdtsc();
			if (rc == -ENOMEM && fw)
				rc = -ENOSPC; /* the device's space is full: a wait, as the pool's */
			if (rc != 0) {
				st.pool_cycles += t1 - s.t0; /* a refused alloc is pool time too */
				if (count_alloc_failure(st, rc))
					APP_LOG(ERR, "lcore %u: alloc: %s", lcore, strerror(-rc));
				s = slot{};
				return false;
			}
			st.hist[STEP_ALLOC].record(t1 - s.t0);
			st.allocs.fetch_add(1, std::memory_order_relaxed);
			s.pool = t1 - s.t0;
			s.owns_qpn = true;
		}
		s.t_conn = rte_rdtsc();
		int rc = cn.start(ctx, lcore, s.peer, s.qpn, &s.conn_id);
		if (rc != 0) {
			(rc == -ENOSPC || rc == -ENOBUFS ? st.cm_busy : st.errors)
				.fetch_add(1, std::memory_order_relaxed);
			if (rc != -ENOSPC && rc != -ENOBUFS)
				APP_LOG(ERR, "lcore %u: connect: %s", lcore, strerror(-rc));
			release(s, false);
			return false;
		}
		s.has_conn = true;
		s.state = S_CONNECTING;
		started++;
		return true;
	}

	unsigned open_slots() const
	{
		unsigned n = 0;
		for (const slot &s : slots)
			n += static_cast<unsigned int>(s.state != S_IDLE);
		return n;
	}

	/* Serve the passive side when this lcore co-polls it: its pool calls (the server's QPNs)
	 * are this worker's time too, so they count in the worker's pool share. */
	void serve()
	{
		if (!ctx->role[lcore].server)
			return;
		/* Its server's counters are written by this lcore alone. */
		const uint64_t &srv_pool = ctx->srv[ctx->role[lcore].server_idx].pool_cycles;
		const uint64_t before = srv_pool;
		run_serve(ctx, lcore);
		st.pool_cycles += srv_pool - before;
	}

	void run()
	{
		const uint64_t t_begin = rte_rdtsc();
		uint64_t drain_deadline = 0;
		qpn_conn_event evs[kPollBurst];
		for (;;) {
			bool stopping = ctx->stop.load(std::memory_order_relaxed) ||
					(quota != 0 && started >= quota);
			if (stopping && drain_deadline == 0)
				drain_deadline = mlx5_qpn_clock_ns() + kDrainNs;
			serve();
			unsigned n;
			do { /* a full burst: more may be waiting, and a round takes them all */
				n = cn.poll(ctx, lcore, evs, kPollBurst);
				for (unsigned i = 0; i < n; i++)
					on_event(evs[i]);
			} while (n == kPollBurst);
			if (ctx->data_path)
				/* Sends that found the send queue full (storms): post them now. */
				for (slot &s : slots)
					if (s.state == S_SENDING && s.posted < s.msgs)
						post_more(s);
			if (!stopping) {
				unsigned limit = pat.slots != nullptr ?
							 pat.slots(pat.priv, active_slots) :
							 active_slots;
				for (unsigned i = 0; i < limit; i++) {
					if (slots[i].state != S_IDLE)
						continue;
					if (quota != 0 && started >= quota)
						break;
					if (!start(slots[i]))
						break;
					if (pat.started != nullptr)
						pat.started(pat.priv);
				}
				if (pat.round != nullptr)
					pat.round(pat.priv, dev);
			} else if (open_slots() == 0 || mlx5_qpn_clock_ns() > drain_deadline) {
				break;
			}
		}
		/* Anything still open at the drain deadline: forget it, give the QPN back. */
		for (slot &s : slots)
			if (s.state != S_IDLE) {
				st.errors.fetch_add(1, std::memory_order_relaxed);
				APP_LOG(WARNING, "lcore %u: connection 0x%x still open at stop",
					lcore, s.conn_id);
				release(s, false);
			}
		/* pool_share = the pool calls' cycles over the worker's busy TSC (this loop): the
		 * connection cycles overlap (--inflight), and dividing by their sum understated the
		 * pool's share of the lcore's time several times. */
		st.cycle_cycles += rte_rdtsc() - t_begin;
	}
};

int
dcir_lcore_run(run_ctx *ctx, unsigned lcore)
{
	return active_lcore_run(ctx, lcore, active_pattern{});
}

} /* namespace */

int
active_lcore_run(run_ctx *ctx, unsigned lcore, const active_pattern &pat)
{
	/* Heap, not stack: 64 slots and the loop's state are a few KiB. */
	active_loop *l = new active_loop(ctx, lcore, pat);
	l->run();
	delete l;
	return 0;
}

const qpn_engine engine_dci_reconnect = {
	.name = "dci-reconnect",
	.help = "active side: per connection QPN alloc, REQ/REP/RTU, sends + completions, DREQ/DREP, "
		"release into quarantine",
	.uses_cm = true,
	.passive_side = false,
	.begin = nullptr,
	.end = nullptr,
	.lcore_run = dcir_lcore_run,
	.passive_poll = nullptr,
	.peer = &engine_dct_accept,
};
