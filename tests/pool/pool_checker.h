/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_POOL_CHECKER_H
#define QPN_TEST_POOL_CHECKER_H

/*
 * An independent checker of the QPN pool's invariants (BRIEF §4, 1-4). It keeps its own record
 * of who holds each QPN and when it was released, on its own clock reads, and never looks at the
 * pool's counters. Callers report around their pool calls:
 *
 *   before free:  checker.on_release(qpn)   (records the release time, clears the owner)
 *   after alloc:  checker.on_acquire(qpn)   (claims the owner, checks the quarantine)
 *
 * Release times are read before the pool call and acquire times after it, so a measured gap is
 * never shorter than the real one: the checker can miss a violation shorter than the slack, but
 * never reports one that did not happen.
 *
 * Double frees (the contract of mlx5_qpn_pool_free()): every free call of a hand-out, first or
 * repeated, is logged (free_begin() before the call, free_end() after it, with the hand-out's
 * number from on_acquire() and the call's result); check_frees() then reports a free accepted
 * (0) for a hand-out that another accepted free of it had left before this one began. Two frees
 * of one hand-out may both be accepted only when both were in flight at once. The same slack
 * holds: a measured call contains the real one, so calls that did not overlap may be measured
 * overlapping (a missed violation), never the reverse.
 */

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

class PoolChecker {
public:
	/* ranges: the [first, count) ranges given to the pool; quarantine_ns: the promised time. */
	PoolChecker(const std::vector<std::pair<uint32_t, uint32_t>> &ranges,
		    uint64_t quarantine_ns);

	/* @return the hand-out's number (1 for the QPN's first, then 2, ...): free_end()'s key. */
	uint64_t on_acquire(uint32_t qpn);
	void on_release(uint32_t qpn);
	/* A held QPN passed to the calling thread (which may then release it). */
	void on_handover(uint32_t qpn);
	/* Invariant 4: after everything was released and the quarantine passed, `got` QPNs could be
	 * allocated (each reported through on_acquire). */
	void on_drain_complete(uint64_t got);

	/* The clock of a free call's start, read before the pool call. */
	static uint64_t free_begin();
	/* A free call of hand-out `hand_out` of qpn, begun at begin_ns, returned rc. */
	void on_free_end(uint32_t qpn, uint64_t hand_out, uint64_t begin_ns, int rc);
	/* Report every hand-out freed twice by calls that were not in flight at once. */
	void check_frees();

	uint64_t capacity() const { return capacity_; }
	uint64_t violations() const { return violations_.load(); }
	std::vector<std::string> messages() const;

private:
	struct Entry {
		std::atomic<uint64_t> owner{0};       /* 0: nobody; else a per-thread token */
		std::atomic<uint64_t> released_ns{0}; /* 0: never released */
		std::atomic<uint64_t> hand_outs{0};   /* on_acquire() calls so far */
	};
	struct FreeCall {
		uint32_t qpn;
		uint64_t hand_out, begin_ns, end_ns;
		int rc;
	};
	void violation(const std::string &msg);

	std::unordered_map<uint32_t, uint32_t>
		index_; /* qpn -> entry; read-only after construction */
	std::vector<Entry> entries_;
	uint64_t quarantine_ns_;
	uint64_t capacity_ = 0;
	std::atomic<uint64_t> violations_{0};
	mutable std::mutex msg_mutex_;
	std::vector<std::string> messages_;
	std::mutex free_mutex_;
	std::vector<FreeCall> frees_;
};

#endif
