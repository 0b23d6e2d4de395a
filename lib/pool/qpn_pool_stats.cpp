/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: summing the per-cache counters, the stats_reset() baseline, and the dump.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "qpn_pool_ops.h"

using namespace qpn;
using namespace qpn::detail;

extern "C" {

static EventCounters
sum_events(const mlx5_qpn_pool *p, uint64_t *allocs, uint64_t *frees, uint64_t *quarantined,
	   uint32_t *claimed)
{
	EventCounters e{};
	uint64_t a = p->bypass_allocs.load(rlx), f = p->bypass_frees.load(rlx);
	uint64_t q = p->bypass_quarantined.load(rlx);
	uint32_t cl = 0;
	e.refused = p->bypass_refused.load(rlx);
	for (uint32_t i = 0; i < p->nb_caches; i++) {
		const Cache &c = p->caches[i];
		const uint64_t ca = seq_count(c.alloc_seq.load(rlx));
		const uint64_t cf = seq_count(c.free_seq.load(rlx));
		a += ca;
		f += cf;
		/* With a quarantine every free of a cache is quarantined (not counted twice). */
		if (p->quarantine_ns != 0)
			q += cf;
		/* An alloc served by the cache is one that was not a miss; a miss that failed
		 * (enospc, eagain) is no alloc. Derived here so that alloc bumps one counter less. */
		uint64_t tried = ca + c.enospc.load(rlx) + c.eagain.load(rlx);
		uint64_t missed = c.misses.load(rlx);
		e.hits += tried > missed ? tried - missed : 0; /* a rolled-back bulk: no alloc */
		e.misses += c.misses.load(rlx);
		e.refills += c.refills.load(rlx);
		e.flushes += c.flushes.load(rlx);
		e.steals += c.steals.load(rlx);
		e.refused += c.refused.load(rlx);
		e.enospc += c.enospc.load(rlx);
		e.eagain += c.eagain.load(rlx);
		e.refused_async += c.refused_async.load(rlx);
		/* Frees queued for this cache's holder have returned 0: count them as frees now
		 * (the rare one refused when applied comes back into in_use then). */
		for (const auto &q : c.rq)
			f += static_cast<unsigned long>(q.load(rlx) != 0);
		cl += static_cast<unsigned int>(c.owner.load(rlx) != 0);
	}
	*allocs = a;
	*frees = f;
	*quarantined = q;
	*claimed = cl;
	return e;
}

int
mlx5_qpn_pool_stats_get(struct mlx5_qpn_pool *p, struct mlx5_qpn_pool_stats *st)
{
	if (!valid_pool(p) || st == nullptr)
		return -EINVAL;
	uint64_t a, f, q;
	uint32_t cl;
	EventCounters e = sum_events(p, &a, &f, &q, &cl);
	const EventBase &bb = p->stats_base;
	const EventCounters b = {bb.hits.load(rlx),         bb.misses.load(rlx),
				 bb.refills.load(rlx),      bb.flushes.load(rlx),
				 bb.steals.load(rlx),       bb.refused.load(rlx),
				 bb.enospc.load(rlx),       bb.eagain.load(rlx),
				 bb.refused_async.load(rlx)};
	memset(st, 0, sizeof(*st));
	st->capacity = p->live_slots.load(acq);
	/* A process killed between a slot update and its counter bump skews these by one call
	 * until the reclaim that takes its QPNs back sets them from its census: never below
	 * zero meanwhile. */
	st->in_use = a > f ? a - f : 0;
	uint64_t rel_q = p->released.load(rlx);
	st->in_quarantine = q > rel_q ? q - rel_q : 0;
	uint64_t busy = st->in_use + st->in_quarantine;
	st->free = st->capacity > busy ? st->capacity - busy : 0;
	st->allocs = a;
	st->frees = f;
	st->cache_hits = e.hits - b.hits;
	st->cache_misses = e.misses - b.misses;
	st->refills = e.refills - b.refills;
	st->flushes = e.flushes - b.flushes;
	st->steals = e.steals - b.steals;
	st->refused_frees = e.refused - b.refused;
	st->enospc = e.enospc - b.enospc;
	st->eagain = e.eagain - b.eagain;
	st->refused_async = e.refused_async - b.refused_async;
	st->nb_ranges = p->nb_ranges.load(acq);
	st->nb_caches = cl;
	st->dead_processes = p->dead_processes.load(rlx);
	st->reclaimed = p->reclaimed.load(rlx);
	return 0;
}

} /* extern "C" */

/*
 * At the end of a reclaim, with the world stopped: make in_use and in_quarantine what its census
 * of the slots found. The counters are sums of steps that a process killed in a call may have
 * taken or not (a free counted but not yet linked into `open`, then quarantined again by the
 * sweep; a hand-out not counted yet): what the dead left is corrected here, once, through the
 * two shared counters stats read (frees and quarantined), instead of guessed window by window.
 * Queued remote frees count as frees (sum_events()), so the QPNs they name are in use for the
 * census but not for the counters.
 */
void
qpn::detail::Recovery::fix_counters(uint64_t in_use, uint64_t in_quarantine)
{
	uint64_t a, f, q;
	uint32_t cl;
	sum_events(p_, &a, &f, &q, &cl);
	for (uint32_t i = 0; i < p_->nb_caches; i++)
		for (const auto &e : p_->caches[i].rq)
			in_use -= static_cast<unsigned long>(e.load(rlx) != 0);
	/* Modulo 2^64: a correction may be negative. */
	p_->bypass_frees.fetch_add((a - f) - in_use, rlx);
	p_->bypass_quarantined.fetch_add(in_quarantine - (q - p_->released.load(rlx)), rlx);
}

extern "C" {

void
mlx5_qpn_pool_stats_reset(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return;
	uint64_t a, f, q;
	uint32_t cl;
	EventCounters e = sum_events(p, &a, &f, &q, &cl);
	EventBase &b = p->stats_base;
	b.hits.store(e.hits, rlx);
	b.misses.store(e.misses, rlx);
	b.refills.store(e.refills, rlx);
	b.flushes.store(e.flushes, rlx);
	b.steals.store(e.steals, rlx);
	b.refused.store(e.refused, rlx);
	b.enospc.store(e.enospc, rlx);
	b.eagain.store(e.eagain, rlx);
	b.refused_async.store(e.refused_async, rlx);
}

void
mlx5_qpn_pool_dump(FILE *f, struct mlx5_qpn_pool *p)
{
	if (f == nullptr)
		return;
	if (!valid_pool(p)) {
		fprintf(f, "qpn pool <invalid>\n");
		return;
	}
	struct mlx5_qpn_pool_stats st;
	mlx5_qpn_pool_stats_get(p, &st);
	fprintf(f,
		"qpn pool %s: capacity %" PRIu64 " QPNs (in the ranges it holds now; at most %u, "
		"its slots), cache %u, quarantine %" PRIu64 " us, socket %d\n",
		p->name, st.capacity, p->capacity, p->batch, p->quarantine_ns / 1000, p->socket_id);
	uint32_t n = p->nb_ranges.load(acq);
	for (uint32_t i = 0; i < n; i++) {
		if (n > 8 && i == 4) { /* keep the dump short: first four and last three */
			fprintf(f, "  ... %u more ranges ...\n", n - 7);
			i = n - 4;
			continue;
		}
		const Range &r = p->ranges[i];
		uint32_t c = r.count.load(rlx), rf = r.first.load(rlx);
		if (c == 0)
			fprintf(f, "  range %u: removed (was [0x%06x, +%u])\n", i, rf,
				r.size.load(rlx));
		else
			fprintf(f, "  range %u: [0x%06x, 0x%06x] (%u QPNs)\n", i, rf, rf + c - 1,
				c);
	}
	fprintf(f, "  in_use %" PRIu64 " in_quarantine %" PRIu64 " free %" PRIu64 "\n", st.in_use,
		st.in_quarantine, st.free);
	fprintf(f,
		"  allocs %" PRIu64 " frees %" PRIu64 " hits %" PRIu64 " misses %" PRIu64
		" refills %" PRIu64 " flushes %" PRIu64 " steals %" PRIu64 "\n",
		st.allocs, st.frees, st.cache_hits, st.cache_misses, st.refills, st.flushes,
		st.steals);
	fprintf(f,
		"  refused_frees %" PRIu64 " (after return %" PRIu64 ") enospc %" PRIu64
		" eagain %" PRIu64 " caches %u\n",
		st.refused_frees, st.refused_async, st.enospc, st.eagain, st.nb_caches);
}

} /* extern "C" */
