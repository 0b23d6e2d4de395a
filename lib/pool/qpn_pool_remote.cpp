/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Frees that do not go through the caller's own cache (design_pool.md §4).
 *
 * An in-use slot names the cache that handed it out, and only the thread that holds that cache
 * writes it with plain stores: its owner inside a call, or a thief that holds it. That is what
 * lets the owner free with a plain load and store. Any other thread that frees such a QPN checks
 * it (not allocated, or freed already: -EINVAL at once), queues (slot, generation) in the naming
 * cache's remote queue `rq`, and then marks the slot kQueued by CAS: every later free of the QPN,
 * from any thread, sees the mark and is refused at its call, although the cache's holder applies
 * the queued free only when it next enters the pool (after checking it again). The CAS fails only
 * when another free of the QPN ran at the same time; the freer then takes its entry back and
 * returns -EINVAL, or, if a holder took the entry first, returns 0 and the holder applied it or
 * refused it as the loser of the race (counted in `refused_async`, not returned). So two frees
 * both return 0 only when both were in flight at once. A slot handed out without a cache names
 * none and is freed by CAS, by anyone.
 */

#include <cerrno>

#include <sched.h>
#include <unistd.h>

#include <rte_pause.h>

#include "qpn_pool_ops.h"

namespace qpn::detail {

/* Cacheless hand-out: any thread may free it, and the CAS out of kInUse decides a race. */
QPN_COLD int
Pool::free_shared(Cache *c, uint32_t s, uint64_t w, bool check_gen, uint32_t gen)
{
	if (c != nullptr)
		return link_freed<true>(*c, s, w, check_gen, gen, true);
	const bool quar = p_->quarantine_ns != 0;
	auto &sw = slot(s);
	for (;;) {
		uint64_t nw = slot_make(kNil, s, quar ? kQuarantine : kFree, slot_gen(w));
		if (sw.compare_exchange_weak(w, nw, acq_rel, rlx))
			break;
		if (!freeable(w, check_gen, gen) || slot_next(w) != kNil)
			return -EINVAL;
	}
	if (quar) {
		push_quarantine(s, s, now_ns());
		p_->bypass_quarantined.fetch_add(1, rlx);
	} else {
		push_free(s, s);
	}
	p_->bypass_frees.fetch_add(1, rlx);
	return 0;
}

bool
RemoteQueue::remote_empty(const Cache &v) const
{
	for (const auto &q : v.rq)
		if (q.load(acq) != 0)
			return false;
	return true;
}

/*
 * Apply the queued frees of cache c; the caller holds c. Each entry is checked again: the slot
 * must still be in use, named by c, with the generation the remote freer saw (a free that lost a
 * race, or a QPN handed out again since, is refused and counted). Its kQueued mark is not
 * required: the freer sets it after the entry, and the freed word the apply stores clears it.
 */
QPN_COLD void
RemoteQueue::drain_remote(Cache &c, bool own)
{
	/* Cleared before the scan: an entry queued after the scan passed it sets the flag again. */
	c.gate.fetch_and(~kGateRemote, acq_rel);
	const uint32_t me = cache_index(&c), ns = p_->nb_slots.load(acq);
	/*
	 * Applied in the order they were made, not in the order of their cells. A freer takes the
	 * first empty cell, so once the queue has been full and we empty cells while it fills them,
	 * the cells no longer follow its frees. Applied in cell order, a run of QPNs freed in
	 * hand-out order went into the chain shuffled and came out of it (and of the quarantine)
	 * that way, and with the quarantine the shuffle compounded pass after pass. In the freer's
	 * order the chain is what the owner's own frees would have made.
	 */
	uint64_t got[kRemoteEntries];
	unsigned n = 0;
	const bool cell_order = QPN_TEST_FLAG(remote_cell_order);
	for (auto &q : c.rq) {
		if (q.load(rlx) == 0)
			continue;
		const uint64_t e = q.exchange(0, acq);
		if (e == 0)
			continue;
		unsigned i = n++; /* insertion: at most 8 */
		for (; i > 0 && !cell_order && rq_before(e, got[i - 1]); i--)
			got[i] = got[i - 1];
		got[i] = e;
	}
	for (unsigned k = 0; k < n; k++) {
		const uint32_t s = rq_slot(got[k]);
		uint64_t w = s < ns ? slot(s).load(rlx) : 0;
		if (s < ns && applicable(w, rq_gen(got[k]), me))
			link_freed<false>(c, s, w, false, 0, own);
		else
			bump(c.refused_async);
	}
	if (n != 0)
		c.open_remote.store(1, rlx); /* seal_at_refill() */
}

/*
 * Hold cache v as a thief: its owner (if any) is outside the pool and stays out until we store
 * go (release_gate). An unclaimed cache needs no barrier: a thread that claims it afterwards
 * reads `gate` (sequentially consistent, in bind_cache) and bypasses it while we hold it.
 */
bool
RemoteQueue::try_hold(Cache &v)
{
	int32_t me = my_proc(p_);
	const uint32_t thief = me >= 0 ? static_cast<uint32_t>(me) + 1 : kAnyThief;
	if (!hold_gate(v, thief, sc))
		return false;
	uint64_t owner = v.owner.load(sc);
	if (owner == 0)
		return true;
	if (heavy_barrier(fence_scope(p_, owner)) && outside(v))
		return true;
	release_gate(v);
	return false;
}

/* Nobody owns v but its remote queue has entries: apply them and give the QPNs back, so that
 * none is stranded in an unclaimed cache. */
void
RemoteQueue::rescue(Cache &v)
{
	for (unsigned spins = 0; v.owner.load(sc) == 0 && !remote_empty(v); spins++) {
		if (try_hold(v)) {
			drain_remote(v, false);
			if (v.owner.load(rlx) == 0)
				flush_cache(v);
			release_gate(v);
			continue; /* look again: an entry may have come in after the drain */
		}
		if (spins > 64)
			sched_yield();
		else
			rte_pause();
	}
}

/*
 * Mark slot s (word w, checked freeable) queued, so that every later free of it is refused at
 * its call. After the entry is queued: a freer that dies in between leaves a free that is
 * applied, not a QPN that nobody may free. Relaxed: a free that comes after ours (in
 * happens-before) reads this word or a later one; the entry carries everything the holder needs.
 * The CAS fails only if the word changed since our check: another free of the QPN ran at the
 * same time as ours (it marked the slot, or the holder released the QPN: our entry or another).
 */
bool
RemoteQueue::mark_queued(uint32_t s, uint64_t w)
{
	return slot(s).compare_exchange_strong(w, slot_with_aux(w, slot_aux(w) | kQueued), rlx,
					       rlx);
}

/*
 * Our free lost a race (mark_queued() failed). Take our entry e back out of cell q if it is
 * still there: the other free is the one, ours is refused at the call. If a holder took the
 * entry first, it applied it or refused it (refused_async): the two frees were in flight at
 * once, and ours returns 0, the contract's one exception.
 */
int
RemoteQueue::withdraw(std::atomic<uint64_t> &q, uint64_t e)
{
	return q.compare_exchange_strong(e, 0, rlx, rlx) ? -EINVAL : 0;
}

/*
 * Free slot s (word w: freeable, named by another cache). Queue it for that cache's holder and
 * mark the slot queued. When the queue is full, hold the cache as a thief (its owner outside the
 * pool) and apply its queue and this free ourselves; meanwhile apply our own queue, since its
 * owner may be waiting for room in it just as we wait for room in its.
 */
QPN_COLD int
RemoteQueue::free_remote(Cache *self, uint32_t s, uint64_t w)
{
	if (slot_next(w) >= p_->nb_caches)
		return -EINVAL; /* not a cache index: not a slot we handed out */
	Cache &x = p_->caches[slot_next(w)];
	const uint64_t e = rq_make(s, slot_gen(w), t_caches.rq_seq++);
	for (unsigned spins = 0;; spins++) {
		for (auto &q : x.rq) {
			uint64_t z = 0;
			if (q.load(rlx) != 0 || !q.compare_exchange_strong(z, e, sc, rlx))
				continue;
			QPN_TEST_HOOK(remote_queued);
			if (!mark_queued(s, w))
				return withdraw(q, e);
			x.gate.fetch_or(kGateRemote, rel);
			/* Its owner released it meanwhile (sequentially consistent with the release
			 * in release_cache(), which looks at the queue after it): nobody drains it. */
			if (x.owner.load(sc) == 0)
				rescue(x);
			return 0;
		}
		if ((spins & 15) == 15 && try_hold(x)) {
			drain_remote(x, false);
			uint64_t now = slot(s).load(rlx);
			int rc = -EINVAL;
			if (freeable(now, true, slot_gen(w)) && slot_next(now) == slot_next(w)) {
				rc = link_freed<false>(x, s, now, false, 0, false);
				x.open_remote.store(1, rlx);
			}
			if (x.owner.load(rlx) == 0)
				flush_cache(x);
			release_gate(x);
			return rc;
		}
		if (self != nullptr)
			drain_remote(*self, true);
		if (spins > 64)
			sched_yield();
		else
			rte_pause();
	}
}

} /* namespace qpn::detail */
