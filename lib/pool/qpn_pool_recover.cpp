/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Crash recovery: detecting dead processes, the stop-the-world reclaim and its audit of the pool.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdlib>
#include <new>

#include <csignal>
#include <sched.h>
#include <unistd.h>

#include <rte_pause.h>

#include "qpn_pool_ops.h"
#include "qpn_pool_proc.h"

using namespace qpn;
using namespace qpn::detail;

namespace {

constexpr uint64_t kDeadCheckNs = 50 * 1000 * 1000; /* automatic death checks: 20 per second */
constexpr uint64_t kStwWaitNs = 500 * 1000 * 1000;  /* longest a reclaim waits for live threads */

/* Visited-slot bitmap of an audit. */
struct Marks {
	uint64_t *bits;
	uint32_t n;
	bool mark(uint32_t s)
	{
		if (s >= n || (bits[s / 64] >> (s % 64)) & 1)
			return false;
		bits[s / 64] |= 1ull << (s % 64);
		return true;
	}
	bool marked(uint32_t s) const { return s < n && (((bits[s / 64] >> (s % 64)) & 1) != 0u); }
};

} // namespace

namespace qpn::detail {

/* ---- crash recovery ------------------------------------------------------------------------- */

/*
 * A process that dies leaves behind whatever it held: QPNs in use (their slots name it as
 * holder), its caches (claimed, maybe marked busy mid-call), and any chain it was moving between
 * two homes at the instant of death (a popped batch, a drained bucket, the free stack held by
 * range_remove, a slot freed but not yet linked). Rather than repair each of those windows, a
 * reclaim stops the world and audits the pool:
 *
 * 1. it takes the range lock (a robust mutex: a holder that died hands it over with EOWNERDEAD),
 *    so no range is added or removed and no other reclaim runs;
 * 2. it sets `stw` and holds every cache like a thief (membarrier, then each live owner's `busy`
 *    must read 0), and waits until no live process is inside a cacheless call (`busy` of its
 *    process entry). Now no live thread is moving anything; the dead ones never will;
 * 3. it marks every slot reachable from a live home (free stack, buckets, live caches), walking
 *    defensively (indices bounded, nothing visited twice, at most nb_slots steps);
 * 4. every slot of a live range that is not marked and not in use by a live holder is stranded:
 *    in use by a dead holder, or in quarantine -> quarantine, stamped now (after the death was
 *    noticed, so nothing the dead let go comes back before the quarantine: invariant 5); free (it
 *    left quarantine before, or was never handed out) -> the free stack. A slot is collected
 *    once, so nothing is doubled (invariant 1) and nothing stays stranded (invariant 4).
 * 5. dead caches are emptied and unclaimed, dead process entries cleared, counters fixed, and the
 *    world released.
 * The fast paths pay nothing for this: alloc writes the holder into the slot word it writes
 * anyway, and a cache held by the reclaimer is bypassed exactly as one held by a thief.
 */

/* `plus1` is a process index + 1 from a `collecting` or `steal` word: is that process dead? */
bool
Recovery::holder_dead(uint32_t plus1) const
{
	if (plus1 == 0 || plus1 - 1 >= kMaxProcs)
		return false;
	uint64_t id = p_->procs[plus1 - 1].ident.load(acq);
	return id != 0 && proc_dead(id);
}

/* Rate-limited, pool-wide: is some process of the table dead? Then reclaim (without blocking). */
QPN_COLD bool
Recovery::maybe_reclaim(Cache *self)
{
	const uint64_t now = real_ns();
	uint64_t next = p_->next_check_ns.load(rlx);
	if (now < next && p_->need_audit.load(acq) == 0)
		return false;
	if (!p_->next_check_ns.compare_exchange_strong(next, now + kDeadCheckNs, rlx, rlx))
		return false; /* another thread checks now */
	bool any = p_->need_audit.load(acq) != 0;
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs && !any; i++) {
		uint64_t id = p_->procs[i].ident.load(acq);
		any = id != 0 && id != me && proc_dead(id);
	}
	return any && reclaim(self, false) > 0;
}

/* A cacheless caller found a reclaim in progress: wait (bounded checks of the reclaimer). */
QPN_COLD void
Recovery::wait_stw()
{
	for (uint32_t i = 1;; i++) {
		uint64_t holder = p_->stw.load(acq);
		if (holder == 0)
			return;
		rte_pause();
		if ((i & 4095) == 0 && proc_dead(holder))
			reclaim(nullptr,
				true); /* its lock comes back EOWNERDEAD: we finish the job */
		if ((i & 4095) == 0)
			sched_yield();
	}
}
/* Lock the range table. A holder that died leaves it to us, with the pool to audit. */
bool
lock_ranges(mlx5_qpn_pool *p, bool block, bool *owner_died)
{
	int rc = block ? pthread_mutex_lock(&p->range_lock) : pthread_mutex_trylock(&p->range_lock);
	*owner_died = false;
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&p->range_lock);
		p->need_audit.store(1, rel);
		*owner_died = true;
		POOL_LOG(WARNING, "pool %s: a process died holding the range lock", p->name);
		return true;
	}
	return rc == 0;
}

int
Recovery::reclaim(Cache *self, bool block)
{
	bool died;
	if (!lock_ranges(p_, block, &died))
		return 0; /* another thread is at it (or a range call is running): it will do */
	int rc = reclaim_locked(self);
	pthread_mutex_unlock(&p_->range_lock);
	return rc;
}

/*
 * One reclaim, range lock held: the steps of the comment above, each a member, over the state
 * they share (who is dead, which caches are held, the marks, the census, the collected chains).
 * It lives on the reclaimer's stack; nothing of it is in shared memory.
 */
namespace {

class Reclaim {
public:
	Reclaim(Recovery &pool, Cache *self)
	    : pool_(pool), p_(pool.p_), self_(self), me_(proc_self_ident()), nc_(p_->nb_caches)
	{
	}
	int run();

private:
	bool find_dead();
	bool now_dead(uint32_t proc);
	/* 2. Stop the world. */
	void hold_caches();
	bool hold_one(Cache &v, uint32_t i);
	template <class Inside>
	bool wait_out(Inside inside, const char *what, uint32_t i, uint32_t proc);
	void wait_threads();
	/* 3. Mark what live homes hold. */
	uint64_t walk_batches(uint32_t b);
	uint64_t walk_chain(const Chain &c);
	void mark_homes();
	/* 4. Sweep. */
	void collect(uint32_t s, uint64_t w, bool to_free);
	void flush(bool to_free);
	void sweep_range(const Range &r);
	void sweep();
	/* 5. Release the world. */
	void release_caches();
	void forget_dead();
	void rebuild_sorted();
	int finish();

	/* A chain the sweep collects into (one to the free stack, one to the quarantine). */
	struct Collected {
		uint32_t head = kNil, tail = kNil, n = 0;
	};

	Recovery &pool_;
	mlx5_qpn_pool *const p_;
	Cache *const self_;
	const uint64_t me_;
	const uint32_t nc_;
	uint32_t thief_ = kAnyThief;
	bool dead_[kMaxProcs] = {};
	unsigned nd_ = 0;
	bool held_[MLX5_QPN_MAX_CACHES] = {};
	bool cdead_[MLX5_QPN_MAX_CACHES] = {};
	/* A live owner's cache that a thief died inside: its chains may already be partly in the
	 * free stack, so they are not a home; the owner keeps the (emptied) cache. */
	bool tainted_[MLX5_QPN_MAX_CACHES] = {};
	Scope scope_ = Scope::kProcess; /* the widest barrier the live owners need */
	int rc_ = 0;
	uint64_t deadline_ = 0;
	uint32_t ns_ = 0;
	Marks m_{nullptr, 0}; /* reachable from a live home */
	/* The census: QPNs in a quarantine home, and in use by the living. */
	uint64_t recovered_ = 0, inuse_ = 0, census_q_ = 0, census_inuse_ = 0;
	Collected free_, quar_;
	uint64_t stamp_ = 0;
};

/* Who is dead now; false if nobody is and no audit is owed (nothing to do). */
bool
Reclaim::find_dead()
{
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		uint64_t id = p_->procs[i].ident.load(acq);
		dead_[i] = id != 0 && id != me_ && proc_dead(id);
		nd_ += static_cast<unsigned int>(dead_[i]);
	}
	return nd_ != 0 || p_->need_audit.load(acq) != 0;
}

/* A process killed just before this reclaim may die only while it runs (SIGKILL is delivered
 * asynchronously): one found dead later joins the dead; it cannot come back. */
bool
Reclaim::now_dead(uint32_t proc)
{
	if (proc >= kMaxProcs)
		return false;
	if (dead_[proc])
		return true;
	uint64_t id = p_->procs[proc].ident.load(acq);
	if (id == 0 || id == me_ || !proc_dead(id))
		return false;
	dead_[proc] = true;
	nd_++;
	return true;
}

/* Hold cache i like a thief. A thief that died holding it hands it over; a live one finishes
 * soon. False (rc_ set) if it stays held past the deadline. */
bool
Reclaim::hold_one(Cache &v, uint32_t i)
{
	for (;;) {
		if (hold_gate(v, thief_, acq_rel))
			return true;
		uint32_t g = v.gate.load(acq), e = g & kGateThief;
		if (e != kAnyThief && e != 0 && now_dead(e - 1) &&
		    v.gate.compare_exchange_strong(g, (g & kGateRemote) | thief_, acq_rel, acq)) {
			tainted_[i] = true;
			return true;
		}
		if (real_ns() > deadline_) {
			POOL_LOG(WARNING, "pool %s: reclaim: cache %u stays held by thief %u",
				 p_->name, i, e);
			rc_ = -EAGAIN;
			return false;
		}
		sched_yield();
	}
}

/* Hold every cache but ours, noting which owners are dead, then fence the live owners. */
void
Reclaim::hold_caches()
{
	int32_t mine = my_proc(p_);
	thief_ = mine >= 0 ? static_cast<uint32_t>(mine) + 1 : kAnyThief;
	deadline_ = real_ns() + kStwWaitNs;
	p_->stw.store(me_, sc);
	for (uint32_t i = 0; i < nc_ && rc_ == 0; i++) {
		Cache &v = p_->caches[i];
		if (&v == self_)
			continue;
		uint64_t owner = v.owner.load(acq);
		uint32_t op = static_cast<uint32_t>(owner >> 44);
		if (owner != 0 && op != 0 && op - 1 < kMaxProcs)
			cdead_[i] = dead_[op - 1];
		else if (owner != 0 && op == 0) /* no table entry: the pid alone */
			cdead_[i] = kill(static_cast<pid_t>(owner_pid(owner)), 0) != 0 &&
				    errno == ESRCH;
		if (!hold_one(v, i))
			break;
		held_[i] = true;
		if (owner != 0 && !cdead_[i])
			scope_ = std::max(scope_, fence_scope(p_, owner));
	}
	if (rc_ == 0 && !heavy_barrier(scope_)) {
		POOL_LOG(WARNING, "pool %s: reclaim: no membarrier", p_->name);
		rc_ = -EAGAIN; /* cannot prove the live owners are outside */
	}
}

/* Wait for a live thread to leave the pool; true if its process turned out dead instead. */
template <class Inside>
bool
Reclaim::wait_out(Inside inside, const char *what, uint32_t i, uint32_t proc)
{
	while (rc_ == 0 && inside()) {
		if (now_dead(proc))
			return true;
		if (real_ns() > deadline_) {
			POOL_LOG(WARNING, "pool %s: reclaim: %s %u stays busy", p_->name, what, i);
			rc_ = -EAGAIN;
		} else {
			sched_yield();
		}
	}
	return false;
}

/* Wait until no live thread is inside a held cache or a cacheless call. */
void
Reclaim::wait_threads()
{
	for (uint32_t i = 0; i < nc_ && rc_ == 0; i++) {
		uint32_t op = static_cast<uint32_t>(p_->caches[i].owner.load(acq) >> 44);
		const Cache &v = p_->caches[i];
		if (held_[i] && !cdead_[i] &&
		    wait_out([&v] { return !outside(v); }, "cache", i, op - 1))
			cdead_[i] = true;
	}
	for (uint32_t i = 0; i < kMaxProcs && rc_ == 0; i++)
		if (!dead_[i])
			wait_out([this, i] { return p_->procs[i].busy.load(sc) != 0; }, "process",
				 i, i);
	wait_out([this] { return p_->anon_busy.load(sc) != 0; }, "anonymous", 0, kMaxProcs);
	/* Caches of processes found dead while waiting (after their own cache was looked at). */
	for (uint32_t i = 0; i < nc_ && rc_ == 0; i++) {
		uint32_t op = static_cast<uint32_t>(p_->caches[i].owner.load(acq) >> 44);
		if (held_[i] && op != 0 && op - 1 < kMaxProcs && dead_[op - 1])
			cdead_[i] = true;
	}
}

/* Mark the batches of a stack from b on; returns the slots it marked. */
uint64_t
Reclaim::walk_batches(uint32_t b)
{
	uint64_t n = 0;
	for (uint32_t steps = 0; b != kNil && steps <= ns_;) {
		if (b >= ns_)
			return n;
		uint32_t t = slot_aux(pool_.slot(b).load(acq));
		for (uint32_t s = b;; steps++) {
			if (!m_.mark(s) || steps > ns_)
				return n; /* out of bounds or a loop: stop, the sweep decides */
			n++;
			if (s == t)
				break;
			s = slot_next(pool_.slot(s).load(acq));
		}
		b = slot_next(pool_.slot(t).load(acq));
	}
	return n;
}

uint64_t
Reclaim::walk_chain(const Chain &c)
{
	uint64_t n = 0;
	uint32_t s = c.head.load(acq);
	for (uint32_t k = c.count.load(acq); k != 0 && m_.mark(s); k--, n++)
		s = slot_next(pool_.slot(s).load(acq));
	return n;
}

/* Mark every slot a live home reaches, counting those in quarantine (for the counters). */
void
Reclaim::mark_homes()
{
	walk_batches(head_idx(p_->free_top.load(acq)));
	for (auto &b : p_->bucket)
		census_q_ += walk_batches(head_idx(b.load(acq)));
	for (uint32_t i = 0; i < nc_; i++) {
		if (cdead_[i] || tainted_[i])
			continue;
		const Cache &v = p_->caches[i];
		walk_chain(v.ready);
		walk_chain(v.spare);
		census_q_ += walk_chain(v.open);
	}
}

/* Give a collected chain to its home: the free stack, or the quarantine stamped now. */
void
Reclaim::flush(bool to_free)
{
	Collected &c = to_free ? free_ : quar_;
	if (c.n != 0) {
		pool_.chain_write_batch(c.head, c.tail, c.n);
		if (to_free)
			pool_.push_free(c.head, c.tail);
		else
			pool_.push_quarantine(c.head, c.tail, stamp_);
	}
	c = Collected{};
}

void
Reclaim::collect(uint32_t s, uint64_t w, bool to_free)
{
	to_free |= p_->quarantine_ns == 0;
	Collected &c = to_free ? free_ : quar_;
	pool_.slot(s).store(slot_make(c.head, kNil, to_free ? kFree : kQuarantine, slot_gen(w)),
			    rlx);
	if (c.n == 0)
		c.tail = s;
	c.head = s;
	recovered_++;
	census_q_ += static_cast<unsigned long>(!to_free);
	if (++c.n == p_->batch)
		flush(to_free);
}

/* Collect the range's slots that nobody alive holds or can reach. */
void
Reclaim::sweep_range(const Range &r)
{
	const uint32_t base = r.base.load(acq), cnt = r.count.load(acq);
	for (uint32_t s = base; cnt != 0 && s < base + cnt && s < ns_; s++) {
		uint64_t w = pool_.slot(s).load(acq);
		uint64_t st = slot_state(w);
		if (st == kInUse) {
			uint32_t hd = slot_aux(w) & kHolderMask;
			bool unpublished = (slot_aux(w) & kUnpublished) != 0;
			if (hd >= kMaxProcs || !dead_[hd]) {
				/* A bulk's unpublished QPN is not counted yet. */
				census_inuse_ += static_cast<unsigned long>(!unpublished);
				continue;
			}
			inuse_ += static_cast<unsigned long>(!unpublished);
			collect(s, w, unpublished); /* a bulk's QPN was never handed out */
		} else if (!m_.marked(s)) {
			collect(s, w, st != kQuarantine);
		}
	}
}

/* 3. and 4.: mark, then sweep the live ranges. */
void
Reclaim::sweep()
{
	ns_ = p_->nb_slots.load(acq);
	m_ = Marks{new (std::nothrow) uint64_t[ns_ / 64 + 1](), ns_};
	if (m_.bits == nullptr) {
		rc_ = -ENOMEM;
		return;
	}
	mark_homes();
	stamp_ = now_ns(); /* after the deaths were noticed */
	const uint32_t nr = p_->nb_ranges.load(acq);
	for (uint32_t ri = 0; ri < nr; ri++)
		sweep_range(p_->ranges[ri]);
	flush(true);
	flush(false);
	delete[] m_.bits;
}

/* Dead caches emptied and unclaimed, live ones given back. */
void
Reclaim::release_caches()
{
	for (uint32_t i = 0; i < nc_; i++) {
		if (!held_[i])
			continue;
		Cache &v = p_->caches[i];
		if (rc_ == 0 && cdead_[i]) {
			drop_chains(v);
			/* Its queued frees name slots the sweep collected (their holder is dead). */
			for (auto &q : v.rq)
				q.store(0, rlx);
			v.gate.fetch_and(kGateThief, rlx); /* nothing queued any more */
			v.busy.store(0, rlx);
			/* Died inside an inline call: that call counts as not made. */
			v.alloc_seq.store(v.alloc_seq.load(rlx) & ~1ull, rlx);
			v.free_seq.store(v.free_seq.load(rlx) & ~1ull, rlx);
			v.owner.store(0, rel);
		} else if (rc_ == 0 && tainted_[i]) {
			drop_chains(
				v); /* swept like a dead cache's; the live owner finds it empty */
		}
		release_gate(v);
	}
}

/* A range call died: its sorted-index update may be half done. Rebuild it. */
void
Reclaim::rebuild_sorted()
{
	uint32_t seq = p_->sorted_seq.load(rlx);
	p_->sorted_seq.store(seq | 1, sc);
	uint32_t k = 0;
	const uint32_t nr = p_->nb_ranges.load(acq);
	for (uint32_t ri = 0; ri < nr; ri++) {
		if (p_->ranges[ri].count.load(acq) == 0)
			continue;
		uint32_t f = p_->ranges[ri].first.load(rlx), pos = k++;
		while (pos > 0 && p_->ranges[p_->sorted[pos - 1].load(rlx)].first.load(rlx) > f) {
			p_->sorted[pos].store(p_->sorted[pos - 1].load(rlx), rel);
			pos--;
		}
		p_->sorted[pos].store(static_cast<uint16_t>(ri), rel);
	}
	p_->nb_sorted.store(k, rel);
	p_->sorted_seq.store((seq | 1) + 1, rel);
	p_->need_audit.store(0, rel);
}

/* Dead process entries cleared, the pool's books set right. */
void
Reclaim::forget_dead()
{
	for (uint32_t i = 0; i < kMaxProcs; i++)
		if (dead_[i]) {
			p_->procs[i].busy.store(0, rlx);
			p_->procs[i].fenced.store(0, rlx);
			p_->procs[i].ident.store(0, rel);
		}
	/* No live thread is between two homes now; what these still count is the dead's. */
	p_->transit.store(0, sc);
	p_->collecting.store(0, rel);
	if (p_->need_audit.load(acq) != 0)
		rebuild_sorted();
	pool_.fix_counters(census_inuse_, census_q_);
	p_->dead_processes.fetch_add(nd_, rlx);
	p_->reclaimed.fetch_add(recovered_, rlx);
}

/* 5. Release the world; returns the QPNs recovered, or the error. */
int
Reclaim::finish()
{
	release_caches();
	if (rc_ == 0)
		forget_dead();
	p_->stw.store(0, sc);
	if (rc_ == 0 && (nd_ != 0 || recovered_ != 0))
		POOL_LOG(INFO,
			 "pool %s: %u dead process(es), %" PRIu64 " QPNs recovered (%" PRIu64
			 " in use)",
			 p_->name, nd_, recovered_, inuse_);
	if (rc_ != 0)
		return rc_;
	return recovered_ > INT32_MAX ? INT32_MAX : static_cast<int>(recovered_);
}

int
Reclaim::run()
{
	if (!find_dead())
		return 0;
	hold_caches();
	wait_threads();
	if (rc_ == 0)
		sweep();
	return finish();
}

} // namespace

/* Range lock held. Returns the number of QPNs recovered, or -EAGAIN / -ENOMEM. */
int
Recovery::reclaim_locked(Cache *self)
{
	return Reclaim(*this, self).run();
}

} /* namespace qpn::detail */

extern "C" {

int
mlx5_qpn_pool_reclaim_dead(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return -EINVAL;
	return Pool(p).reclaim(nullptr, true);
}

} /* extern "C" */
