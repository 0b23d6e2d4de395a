/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared quarantine: a ring of time buckets, each a stack of sealed batches tagged with the
 * epoch of its newest member; sealing a cache's open chain, draining expired buckets to the free
 * stack, and the next release time.
 */
#include <cerrno>
#include <climits>

#include "qpn_pool_ops.h"
#include "qpn_pool_test_hooks.h"

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

/*
 * Put a sealed batch (all members released before `stamp`) into the bucket of its epoch. The
 * bucket's epoch only grows, so a batch pushed into a bucket that still holds an older epoch
 * (or that was already recycled for a newer one) is released late, never early.
 */
void
Quarantine::push_quarantine(uint32_t head, uint32_t tail, uint64_t stamp)
{
	uint64_t e = (stamp > p_->t0_ns ? (stamp - p_->t0_ns) / p_->epoch_ns : 0) & kTagMask;
	auto &b = p_->bucket[e % kBuckets];
	auto &ts = slot(tail);
	uint64_t h = b.load(rlx);
	for (;;) {
		/* Keep the newer of the two epochs (40-bit, compared modulo 2^40). */
		uint64_t be = head_tag(h);
		bool newer = ((e - be) & kTagMask) < (kTagMask >> 1);
		uint64_t ne = (head_idx(h) == kNil || newer) ? e : be;
		ts.store(slot_with_next(ts.load(rlx), head_idx(h)), rlx);
		if (b.compare_exchange_weak(h, head_make(head, ne), rel, rlx))
			return;
	}
}

/*
 * When a bucket tagged with (40-bit) epoch `tag` may be released, for a drainer whose clock read
 * gave `now`. The full epoch is rebuilt as the one with these 40 bits nearest to now's epoch
 * (within [-2^39, 2^39) epochs), so it is never earlier than the real one:
 * - a batch sealed *after* the drainer read its clock carries an epoch newer than now's. It must
 *   read as "not yet", never as 2^40 epochs old: that reading would release such a bucket at
 *   once, and its 64-bit product would wrap into an arbitrary time;
 * - a real epoch is never 2^39 epochs ahead of a clock read (centuries at the smallest epoch), so
 *   the largest value with these bits below now_e + 2^39 is at least the real epoch;
 * - a bucket left for more than 2^39 epochs (6 days at the 1 us minimum) reads too late, not early.
 * The result saturates at UINT64_MAX instead of wrapping.
 */
uint64_t
Quarantine::bucket_expiry(uint64_t tag, uint64_t now) const
{
	const uint64_t now_e = now > p_->t0_ns ? (now - p_->t0_ns) / p_->epoch_ns : 0;
	const uint64_t ahead = (tag - now_e) & kTagMask;
	const uint64_t back = kTagMask + 1 - ahead;
	uint64_t full;
	if (ahead <= (kTagMask >> 1) || back > now_e)
		full = now_e + ahead; /* now or later (a negative epoch cannot be: later too) */
	else
		full = now_e - back;
	uint64_t t;
	if (__builtin_mul_overflow(full + 1, p_->epoch_ns, &t) ||
	    __builtin_add_overflow(t, p_->t0_ns, &t) ||
	    __builtin_add_overflow(t, p_->quarantine_ns, &t))
		return UINT64_MAX;
	return t;
}

/*
 * Move every expired bucket to the free stack. A bucket of epoch e holds only QPNs released
 * before (e + 1) * epoch_ns: it may go once now >= t0 + (e + 1) * epoch_ns + quarantine.
 * O(batches), not O(QPNs): the slot words are not rewritten (they stay kQuarantine until alloc
 * or a reclaim writes them), so the drain touches two cold lines per batch, not one per QPN.
 * Returns the number of QPNs released.
 */
uint64_t
Quarantine::drain(uint64_t now)
{
	uint64_t total = 0;
	for (auto &b : p_->bucket) {
		uint64_t h = b.load(acq);
		while (head_idx(h) != kNil) {
			if (now < bucket_expiry(head_tag(h), now))
				break;
			/* In transit from before the bucket looks empty until after the free stack
			 * has the chain (see nothing_anywhere()). */
			p_->transit.fetch_add(1, sc);
			if (!b.compare_exchange_weak(h, head_make(kNil, head_tag(h)), sc, acq)) {
				p_->transit.fetch_sub(1, sc);
				continue;
			}
			QPN_TEST_HOOK(drain_holding);
			/* Walk the chain batch by batch (head -> tail -> next head: two loads per
			 * batch, none per slot) to count it and find its last tail. The slot words
			 * keep kQuarantine: a slot is free because of its home (the free stack, then
			 * a cache's ready/spare), and alloc rewrites the whole word anyway (§2.1). */
			uint32_t head = head_idx(h), cur = head, last = head;
			uint64_t n = 0;
			while (cur != kNil) {
				uint32_t t = slot_aux(slot(cur).load(rlx));
				uint64_t tw = slot(t).load(rlx);
				n += t == cur ? 1 : slot_aux(tw);
				last = t;
				cur = slot_next(tw);
			}
			push_free(head, last);
			p_->transit.fetch_sub(1, sc);
			total += n;
			break;
		}
	}
	if (total != 0)
		p_->released.fetch_add(total, rlx);
	return total;
}

bool
Quarantine::quarantine_next(uint64_t *when) const
{
	bool any = false;
	uint64_t best = UINT64_MAX;
	const uint64_t now = now_ns();
	for (const auto &b : p_->bucket) {
		uint64_t h = b.load(sc);
		if (head_idx(h) == kNil)
			continue;
		uint64_t exp = bucket_expiry(head_tag(h), now);
		best = exp < best ? exp : best;
		any = true;
	}
	/* Released QPNs not yet sealed into a bucket get their stamp no earlier than now. */
	for (uint32_t i = 0; i < p_->nb_caches; i++) {
		if (p_->caches[i].open.count.load(sc) != 0) {
			uint64_t exp = now + p_->quarantine_ns;
			best = exp < best ? exp : best;
			any = true;
			break;
		}
	}
	if (any)
		*when = best;
	return any;
}

/* Seal a cache's open chain: stamp it now (after every release in it) and hand it to the
 * shared quarantine. */
void
Quarantine::seal(Chain &open, uint64_t stamp)
{
	uint32_t n = open.count.load(rlx);
	if (n == 0)
		return;
	uint32_t h = open.head.load(rlx), t = open.tail.load(rlx);
	chain_write_batch(h, t, n);
	push_quarantine(h, t, stamp);
	open.count.store(0, rlx);
	open.head.store(kNil, rlx);
	open.tail.store(kNil, rlx);
}

} /* namespace qpn::detail */

extern "C" {

int
mlx5_qpn_pool_next_release(struct mlx5_qpn_pool *p, uint64_t *when_ns)
{
	if (!valid_pool(p) || when_ns == nullptr)
		return -EINVAL;
	return Pool(p).quarantine_next(when_ns) ? 0 : -ENOENT;
}

int
mlx5_qpn_pool_drain(struct mlx5_qpn_pool *p)
{
	if (!valid_pool(p))
		return -EINVAL;
	if (p->quarantine_ns == 0)
		return 0;
	Pool pool(p);
	Bypass b(pool);
	uint64_t n = pool.drain(now_ns());
	return n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
}

} /* extern "C" */
