/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM agent's timers, ordered by deadline (not installed): a hashed timing wheel.
 *
 * Why a wheel of our own and not DPDK's rte_timer: an agent is driven by one thread at a time
 * and its timers are one per connection slot, armed and cancelled on almost every message
 * (REQ, REP, DREQ, timewait), so arm and cancel must be O(1) and allocation-free. rte_timer
 * needs rte_timer_subsystem_init() and rte_timer_manage() on the arming lcore, keeps its own
 * per-lcore skip lists (O(log n) arm) with locking for cross-lcore timers the agent never has,
 * and runs a callback per timer where the agent wants to walk its expired connections itself.
 * A min-heap would be O(log n) per arm as well. The wheel keeps the model's exactness because
 * a slot is only where a timer is looked at, never when it fires: a timer fires on the first
 * expire call whose `now` is >= its exact deadline (never earlier, never later than that call),
 * whatever the slot width.
 *
 * Layout: kSlots lists of timer ids, slot = (deadline >> kShift) % kSlots (one slot ~1.05 ms,
 * one turn ~4.3 s). A timer more than one turn ahead waits in its slot and is skipped (its
 * deadline is compared) until its turn comes. The cursor is the tick (now >> kShift) walked up
 * to; a deadline already behind the cursor is filed in the cursor's slot so the next expire
 * sees it. Ids are 0 .. capacity - 1 (the agent's connection slots); each id has at most one
 * timer: arming an armed id moves it.
 *
 * Cost: arm and cancel O(1); expire O(slots walked since the last call + timers in them). The
 * cursor's own slot is not rescanned while `now` is below the earliest deadline known there.
 * Not thread-safe: the owner of the agent calls it.
 */
#ifndef MLX5_QPN_CM_TIMER_WHEEL_H
#define MLX5_QPN_CM_TIMER_WHEEL_H

#include <cstdint>

namespace cm_impl {

class TimerWheel {
public:
	static constexpr unsigned kShift = 20; /* slot width 2^20 ns (~1.05 ms) */
	static constexpr uint32_t kSlots = 4096;
	static constexpr uint32_t kNil = UINT32_MAX;

	/* Room for ids 0 .. capacity - 1; cursor at now_ns. false: no memory (nothing held). */
	bool init(uint32_t capacity, uint64_t now_ns);
	void fini();
	/* Arm (or move) the timer of @p id to fire at @p deadline_ns. */
	void arm(uint32_t id, uint64_t deadline_ns);
	/* Disarm; nothing if not armed. */
	void cancel(uint32_t id);
	bool armed(uint32_t id) const { return node_[id].where != kNil; }
	uint64_t deadline(uint32_t id) const { return node_[id].deadline; }
	/* Armed timers (expired ones not yet taken included). */
	uint32_t size() const { return count_; }
	/*
	 * Take one timer whose deadline is <= @p now_ns (it is disarmed), or kNil when none is.
	 * Call until kNil to take every due timer; between calls the caller may arm and cancel any
	 * id (one taken may be armed again). Timers of one slot come out in no particular order;
	 * those of different slots in slot order, except after a jump of a turn or more (then in
	 * no particular order). @p now_ns may go backwards (nothing more is due then).
	 */
	uint32_t take_due(uint64_t now_ns);

private:
	static constexpr uint32_t kDue = kSlots; /* list index of the due list */
	void link(uint32_t list, uint32_t id);
	void append_due(uint32_t id); /* at the due list's tail: slot order is kept */
	void unlink(uint32_t id);
	/* Move the timers of slot @p s with deadline <= now to the due list; min of the rest. */
	uint64_t collect(uint32_t s, uint64_t now_ns);

	/* One id's timer, all in one cache line: with a 1 s timewait an agent holds hundreds of
	 * thousands of timers, an id is armed again ~1 s after it was last touched, and its
	 * links, list and deadline in four arrays cost four cache misses where this costs one. */
	struct alignas(32) Node {
		uint32_t next, prev;
		uint32_t where; /* its list: a slot, kDue, or kNil (not armed) */
		uint64_t deadline;
	};
	uint32_t *head_ = nullptr; /* kSlots + 1 list heads (the last one: the due list) */
	Node *node_ = nullptr;     /* per id */
	uint32_t due_tail_ = kNil;
	uint32_t cap_ = 0, count_ = 0;
	uint64_t cursor_ = 0;   /* tick walked up to: slots of earlier ticks hold no due timer */
	uint64_t slot_min_ = 0; /* lower bound of the deadlines in the cursor's slot */
};

} // namespace cm_impl

#endif /* MLX5_QPN_CM_TIMER_WHEEL_H */
