/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared free stack: a Treiber stack of batches with an ABA-tagged head (free_top).
 */
#include "qpn_pool_ops.h"

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

/* Mark [head..tail] (count long, linked by next) as a batch: head.aux = tail, tail.aux = count. */
void
FreeStack::chain_write_batch(uint32_t head, uint32_t tail, uint32_t count)
{
	auto &hs = slot(head);
	hs.store(slot_with_aux(hs.load(rlx), tail), rlx);
	if (tail != head) {
		auto &ts = slot(tail);
		ts.store(slot_with_aux(ts.load(rlx), count), rlx);
	}
}

/*
 * Push a chain of whole batches [head .. last_tail] onto the free stack. The release CAS
 * publishes every slot word written before it.
 */
void
FreeStack::push_free(uint32_t head, uint32_t last_tail)
{
	auto &ts = slot(last_tail);
	uint64_t top = p_->free_top.load(rlx);
	for (;;) {
		ts.store(slot_with_next(ts.load(rlx), head_idx(top)), rlx);
		uint64_t nt = head_make(head, (head_tag(top) + 1) & kTagMask);
		if (p_->free_top.compare_exchange_weak(top, nt, sc, rlx))
			return;
	}
}

/*
 * Pop one batch. Reading the head's and tail's words races with other poppers (the batch may be
 * taken and reused meanwhile): such reads give garbage that is bounds-checked, and the tagged CAS
 * then fails, so garbage is never acted upon.
 */
bool
FreeStack::pop_free(Chain &into)
{
	uint64_t top = p_->free_top.load(acq);
	uint32_t cap = p_->capacity;
	for (;;) {
		uint32_t h = head_idx(top);
		if (h == kNil)
			return false;
		uint64_t hw = slot(h).load(rlx);
		uint32_t t = slot_aux(hw);
		if (t >= cap) {
			top = p_->free_top.load(acq);
			continue;
		}
		uint64_t tw = t == h ? hw : slot(t).load(rlx);
		uint32_t cnt = t == h ? 1 : slot_aux(tw);
		uint64_t nt = head_make(slot_next(tw), (head_tag(top) + 1) & kTagMask);
		if (p_->free_top.compare_exchange_weak(top, nt, sc, acq)) {
			into.head.store(h, rlx);
			into.tail.store(t, rlx);
			into.count.store(cnt, rlx);
			return true;
		}
	}
}

} /* namespace qpn::detail */
