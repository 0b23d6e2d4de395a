/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hashed timing wheel of the CM agent (cm_timer_wheel.h: why a wheel, and its contract).
 */
#include "cm_timer_wheel.h"

#include <algorithm>
#include <new>

namespace cm_impl {

bool
TimerWheel::init(uint32_t capacity, uint64_t now_ns)
{
	head_ = new (std::nothrow) uint32_t[kSlots + 1];
	node_ = new (std::nothrow) Node[capacity];
	if (head_ == nullptr || node_ == nullptr) {
		fini();
		return false;
	}
	std::fill(head_, head_ + kSlots + 1, kNil);
	/* Touch every page now, not on the data path (see table_alloc() in cm_internal.h). */
	std::fill(node_, node_ + capacity, Node{kNil, kNil, kNil, 0});
	cap_ = capacity;
	count_ = 0;
	due_tail_ = kNil;
	cursor_ = now_ns >> kShift;
	slot_min_ = UINT64_MAX;
	return true;
}

void
TimerWheel::fini()
{
	delete[] head_;
	delete[] node_;
	head_ = nullptr;
	node_ = nullptr;
	cap_ = count_ = 0;
}

void
TimerWheel::link(uint32_t list, uint32_t id)
{
	uint32_t h = head_[list];
	node_[id].next = h;
	node_[id].prev = kNil;
	if (h != kNil)
		node_[h].prev = id;
	head_[list] = id;
	node_[id].where = list;
	count_++;
}

void
TimerWheel::append_due(uint32_t id)
{
	node_[id].next = kNil;
	node_[id].prev = due_tail_;
	if (due_tail_ != kNil)
		node_[due_tail_].next = id;
	else
		head_[kDue] = id;
	due_tail_ = id;
	node_[id].where = kDue;
	count_++;
}

void
TimerWheel::unlink(uint32_t id)
{
	uint32_t n = node_[id].next, p = node_[id].prev;
	if (node_[id].where == kDue && n == kNil)
		due_tail_ = p;
	if (p != kNil)
		node_[p].next = n;
	else
		head_[node_[id].where] = n;
	if (n != kNil)
		node_[n].prev = p;
	node_[id].where = kNil;
	count_--;
}

void
TimerWheel::arm(uint32_t id, uint64_t deadline_ns)
{
	if (node_[id].where != kNil)
		unlink(id);
	node_[id].deadline = deadline_ns;
	/* Behind the cursor: the cursor's slot, which the next take_due looks at first. */
	uint64_t tick = std::max(deadline_ns >> kShift, cursor_);
	uint32_t s = uint32_t(tick % kSlots);
	link(s, id);
	if (s == uint32_t(cursor_ % kSlots))
		slot_min_ = std::min(slot_min_, deadline_ns);
}

void
TimerWheel::cancel(uint32_t id)
{
	/* slot_min_ stays a lower bound: at worst one needless scan of the cursor's slot. */
	if (node_[id].where != kNil)
		unlink(id);
}

uint64_t
TimerWheel::collect(uint32_t s, uint64_t now_ns)
{
	uint64_t rest_min = UINT64_MAX;
	for (uint32_t id = head_[s]; id != kNil;) {
		uint32_t n = node_[id].next;
		if (node_[id].deadline <= now_ns) {
			unlink(id);
			append_due(id);
		} else {
			rest_min = std::min(rest_min, node_[id].deadline);
		}
		id = n;
	}
	return rest_min;
}

uint32_t
TimerWheel::take_due(uint64_t now_ns)
{
	if (head_[kDue] == kNil) {
		uint64_t target = now_ns >> kShift;
		if (target >= cursor_ + kSlots) {
			/* A turn or more since the last call: one pass over every slot finds every due
			 * timer; what stays has deadline > now, so tick >= target, in its own slot. */
			for (uint32_t s = 0; s < kSlots; s++)
				collect(s, now_ns);
			cursor_ = target;
			slot_min_ = collect(uint32_t(cursor_ % kSlots), now_ns);
		} else if (target > cursor_ || now_ns >= slot_min_) {
			/* Walk the ticks up to now's; earlier ticks' slots keep only later turns. */
			for (; cursor_ < target; cursor_++)
				if (head_[cursor_ % kSlots] != kNil)
					collect(uint32_t(cursor_ % kSlots), now_ns);
			slot_min_ = collect(uint32_t(cursor_ % kSlots), now_ns);
		}
	}
	uint32_t id = head_[kDue];
	if (id != kNil)
		unlink(id);
	return id;
}

} // namespace cm_impl
