/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The range table: adding and removing ranges (range_lock held), the sorted index under its
 * seqlock, and the QPN <-> slot lookups that miss the cache's hint.
 */
#include <cerrno>

#include "qpn_pool_ops.h"
#include "qpn_pool_test_hooks.h"

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

QPN_COLD bool
RangeMap::qpn_to_slot_slow(uint32_t qpn, uint32_t *slot_out, std::atomic<uint32_t> *hint) const
{
	uint32_t n;
	/* Binary search of the sorted index under its seqlock (ranges are added rarely). */
	for (;;) {
		uint32_t s1 = p_->sorted_seq.load(acq);
		if (s1 & 1)
			continue;
		n = p_->nb_sorted.load(acq);
		uint32_t nr = p_->nb_ranges.load(acq);
		uint32_t lo = 0, hi = n, found = UINT32_MAX;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			/* acquire: keeps the closing seq load below after every index load */
			uint32_t ri = p_->sorted[mid].load(acq);
			if (ri >= nr) { /* torn read: the seqlock check below retries */
				break;
			}
			const Range &r = p_->ranges[ri];
			uint32_t f = r.first.load(acq);
			if (qpn < f)
				hi = mid;
			else if (qpn - f >= r.count.load(acq))
				lo = mid + 1;
			else {
				found = ri;
				break;
			}
		}
		if (p_->sorted_seq.load(rlx) != s1)
			continue;
		if (found == UINT32_MAX)
			return false;
		if (hint != nullptr)
			hint->store(found, rlx);
		const Range &r = p_->ranges[found];
		*slot_out = r.base.load(rlx) + (qpn - r.first.load(rlx));
		return true;
	}
}

QPN_COLD uint32_t
RangeMap::slot_to_qpn_slow(uint32_t s, std::atomic<uint32_t> *hint) const
{
	/* The live range whose slot region holds s. A linear scan: regions of removed ranges are
	 * taken again by later ranges, so bases are not ordered by index (slow path only). */
	uint32_t n = p_->nb_ranges.load(acq);
	for (uint32_t i = 0; i < n; i++) {
		const Range &r = p_->ranges[i];
		uint32_t b = r.base.load(acq);
		if (s - b < r.count.load(acq)) {
			if (hint != nullptr)
				hint->store(i, rlx);
			return r.first.load(rlx) + (s - b);
		}
	}
	return kNil; /* not reached: an allocated slot belongs to a live range */
}

} /* namespace qpn::detail */

/* Insert entry ri into the sorted index (range_lock held), under the seqlock. */
static void
sorted_insert(mlx5_qpn_pool *p, uint32_t ri, uint32_t first)
{
	uint32_t n = p->nb_sorted.load(rlx);
	/* acq_rel: the index stores below cannot move above the odd sequence number; release
	 * stores: a reader that sees a new index entry also sees the odd number, and retries. */
	p->sorted_seq.fetch_add(1, acq_rel);
	uint32_t pos = n;
	while (pos > 0 && p->ranges[p->sorted[pos - 1].load(rlx)].first.load(rlx) > first) {
		p->sorted[pos].store(p->sorted[pos - 1].load(rlx), rel);
		pos--;
	}
	p->sorted[pos].store(static_cast<uint16_t>(ri), rel);
	p->nb_sorted.store(n + 1, rel);
	p->sorted_seq.fetch_add(1, rel);
}

/* Take entry ri out of the sorted index (range_lock held), under the seqlock. */
static void
sorted_remove(mlx5_qpn_pool *p, uint32_t ri)
{
	uint32_t n = p->nb_sorted.load(rlx);
	p->sorted_seq.fetch_add(1, acq_rel);
	uint32_t pos = 0;
	while (pos < n && p->sorted[pos].load(rlx) != ri)
		pos++;
	for (; pos + 1 < n; pos++)
		p->sorted[pos].store(p->sorted[pos + 1].load(rlx), rel);
	p->nb_sorted.store(n - 1, rel);
	p->sorted_seq.fetch_add(1, rel);
}

extern "C" {

int
mlx5_qpn_pool_range_add(struct mlx5_qpn_pool *p, uint32_t first, uint32_t count)
{
	/* The last QPN must be below 0xFFFFFF: that one is the multicast QPN, never a connection's. */
	if (!valid_pool(p) || count == 0 || first >= MLX5_QPN_MAX || count > MLX5_QPN_MAX - first)
		return -EINVAL;
	Pool pool(p);
	bool died;
	lock_ranges(p, true, &died);
	if (died)
		pool.reclaim_locked(nullptr);
	uint32_t n = p->nb_ranges.load(rlx);
	const uint64_t now = now_ns();
	const uint64_t grace = p->quarantine_ns > kRegionGraceNs ? p->quarantine_ns :
								   kRegionGraceNs;
	uint32_t reuse = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		const Range &r = p->ranges[i];
		uint32_t rf = r.first.load(rlx), rc = r.count.load(rlx);
		if (rc != 0 && first < rf + rc && rf < first + count) {
			pthread_mutex_unlock(&p->range_lock);
			POOL_LOG(ERR, "pool %s: range [0x%x, +%u) overlaps [0x%x, +%u)", p->name,
				 first, count, rf, rc);
			return -EINVAL;
		}
		/* A removed entry of the same size, past its grace period: take it and its slots. */
		uint64_t rem = r.removed_ns.load(rlx);
		if (rc == 0 && rem != 0 && reuse == UINT32_MAX && r.size.load(rlx) == count &&
		    now - rem >= grace)
			reuse = i;
	}
	uint32_t ri, base;
	if (reuse != UINT32_MAX) {
		ri = reuse;
		base = p->ranges[ri].base.load(rlx);
	} else {
		ri = n;
		base = p->nb_slots.load(rlx);
		if (n == MLX5_QPN_MAX_RANGES || count > p->capacity - base) {
			pthread_mutex_unlock(&p->range_lock);
			POOL_LOG(
				ERR,
				"pool %s: no room for %u more QPNs (%u of %u slots used, %u ranges)",
				p->name, count, base, p->capacity, n);
			return -ENOSPC;
		}
	}
	/* Lay the new slots out as batches of the cache size, linked into one chain. */
	for (uint32_t i = 0; i < count; i++) {
		uint32_t s = base + i;
		uint32_t bstart = i - i % p->batch;
		uint32_t bend = bstart + p->batch < count ? bstart + p->batch :
							    count; /* exclusive */
		uint32_t next = i + 1 < count ? s + 1 : kNil;
		uint32_t aux = kNil;
		if (i == bstart)
			aux = base + bend - 1; /* head: its tail */
		else if (i == bend - 1)
			aux = bend - bstart; /* tail: the length */
		pool.slot(s).store(slot_make(next, aux, kFree, 0), rlx);
	}
	Range &r = p->ranges[ri];
	r.first.store(first, rlx);
	r.base.store(base, rlx);
	r.size.store(count, rlx);
	r.removed_ns.store(0, rlx);
	r.count.store(count, rel); /* last: the entry matches nothing until now */
	if (ri == n) {
		p->nb_slots.store(base + count, rel);
		p->nb_ranges.store(n + 1, rel);
	}
	p->live_slots.fetch_add(count, rel);
	sorted_insert(p, ri, first);
	pthread_mutex_unlock(&p->range_lock);
	pool.push_free(base, base + count - 1);
	return 0;
}

} /* extern "C" */

namespace {

/* Points of range_remove() where a test can stop it (test hook remove_stage). */
enum RemoveStage { kStageHolding = 1, kStageRetiring = 2 };

void
remove_stage([[maybe_unused]] int stage)
{
	QPN_TEST_HOOK(remove_stage, stage);
}

/* The live range that starts at `first`, or UINT32_MAX. Range lock held. */
uint32_t
find_live_range(const mlx5_qpn_pool *p, uint32_t first)
{
	uint32_t n = p->nb_ranges.load(rlx), ri = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++)
		if (p->ranges[i].count.load(rlx) != 0 && p->ranges[i].first.load(rlx) == first)
			ri = i;
	return ri;
}

/*
 * Hold the whole free stack privately while it is examined: allocations that find the shared
 * pool empty meanwhile wait for `collecting` to clear (see refill()), so none fails for want of
 * QPNs that are only being looked at. Returns the stack's first batch.
 */
uint32_t
hold_free_stack(mlx5_qpn_pool *p)
{
	int32_t me = my_proc(p);
	p->collecting.store(me >= 0 ? static_cast<uint32_t>(me) + 1 : kAnyThief, rel);
	uint64_t top = p->free_top.load(acq);
	while (!p->free_top.compare_exchange_weak(top,
						  head_make(kNil, (head_tag(top) + 1) & kTagMask),
						  acq_rel, acq))
		;
	return head_idx(top);
}

/* Pass 1: how many of the slots [base, base + cnt) the batches from `head` on hold. */
uint32_t
count_held(const Pool &pool, uint32_t head, uint32_t base, uint32_t cnt)
{
	uint32_t found = 0;
	for (uint32_t b = head; b != kNil;) {
		uint32_t t = slot_aux(pool.slot(b).load(rlx));
		for (uint32_t s = b;;) {
			uint64_t w = pool.slot(s).load(rlx);
			found += static_cast<unsigned int>(s - base < cnt);
			if (s == t)
				break;
			s = slot_next(w);
		}
		b = slot_next(pool.slot(t).load(rlx));
	}
	return found;
}

/* The last tail of the batches from `head` on (head != kNil). */
uint32_t
last_tail(const Pool &pool, uint32_t head)
{
	uint32_t tail = kNil;
	for (uint32_t b = head; b != kNil;) {
		uint32_t t = slot_aux(pool.slot(b).load(rlx));
		tail = t;
		b = slot_next(pool.slot(t).load(rlx));
	}
	return tail;
}

/* Pass 2's output: the slots it keeps, linked again into batches of at most `batch`. */
struct Relinked {
	const Pool &pool;
	const uint32_t batch;
	uint32_t head = kNil, tail = kNil;     /* the batches made so far */
	uint32_t bh = kNil, bt = kNil, bn = 0; /* the batch being made */

	void add(uint32_t s)
	{
		if (bn == 0) {
			bh = s;
		} else {
			auto &ps = pool.slot(bt);
			ps.store(slot_with_next(ps.load(rlx), s), rlx);
		}
		bt = s;
		if (++bn == batch)
			close();
	}
	void close()
	{
		if (bn == 0)
			return;
		auto &hs = pool.slot(bh);
		hs.store(slot_with_aux(hs.load(rlx), bt), rlx);
		if (bt != bh) {
			auto &ts = pool.slot(bt);
			ts.store(slot_with_aux(ts.load(rlx), bn), rlx);
		}
		if (head == kNil) {
			head = bh;
		} else {
			auto &ps = pool.slot(tail);
			ps.store(slot_with_next(ps.load(rlx), bh), rlx);
		}
		tail = bt;
		bh = bt = kNil;
		bn = 0;
	}
};

/* Pass 2: retire the slots [base, base + cnt), relink everything else into `out`. */
void
retire_range(const Pool &pool, uint32_t head, uint32_t base, uint32_t cnt, Relinked &out)
{
	for (uint32_t b = head; b != kNil;) {
		uint32_t t = slot_aux(pool.slot(b).load(rlx));
		uint32_t next_batch = slot_next(pool.slot(t).load(rlx));
		for (uint32_t s = b;;) {
			uint64_t w = pool.slot(s).load(rlx);
			uint32_t nx = slot_next(w);
			if (s - base < cnt) {
				pool.slot(s).store(slot_make(kNil, kNil, kRetired, slot_gen(w)),
						   rlx);
				if (s == base)
					remove_stage(kStageRetiring);
			} else {
				out.add(s);
			}
			if (s == t)
				break;
			s = nx;
		}
		b = next_batch;
	}
	out.close();
}

} // namespace

extern "C" {

int
mlx5_qpn_pool_range_remove(struct mlx5_qpn_pool *p, uint32_t first)
{
	if (!valid_pool(p) || first > MLX5_QPN_MAX)
		return -EINVAL;
	Pool pool(p);
	bool died;
	lock_ranges(p, true, &died);
	if (died)
		pool.reclaim_locked(nullptr);
	const uint32_t ri = find_live_range(p, first);
	if (ri == UINT32_MAX) {
		pthread_mutex_unlock(&p->range_lock);
		return -ENOENT;
	}
	Range &r = p->ranges[ri];
	const uint32_t base = r.base.load(rlx), cnt = r.count.load(rlx);
	/* QPNs of the range left in idle caches go to the free stack first. */
	pool.steal(nullptr);
	const uint32_t head = hold_free_stack(p);
	remove_stage(kStageHolding);
	int rc = -EBUSY;
	uint32_t new_head = head, new_tail = kNil;
	if (count_held(pool, head, base, cnt) == cnt) {
		Relinked kept{pool, p->batch};
		retire_range(pool, head, base, cnt, kept);
		new_head = kept.head;
		new_tail = kept.tail;
		r.removed_ns.store(now_ns(), rlx);
		r.count.store(0, rel);
		p->live_slots.fetch_sub(cnt, rel);
		sorted_remove(p, ri);
		rc = 0;
	} else if (head != kNil) {
		new_tail = last_tail(pool, head); /* not all here: put the stack back as it was */
	}
	if (new_head != kNil)
		pool.push_free(new_head, new_tail);
	p->collecting.store(0, rel);
	pthread_mutex_unlock(&p->range_lock);
	if (rc == 0)
		POOL_LOG(DEBUG, "pool %s: range [0x%x, +%u) removed", p->name, first, cnt);
	return rc;
}

} /* extern "C" */
