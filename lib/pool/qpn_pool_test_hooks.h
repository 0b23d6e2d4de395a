/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_POOL_TEST_HOOKS_H
#define QPN_POOL_TEST_HOOKS_H

/*
 * Test-only seams of the pool. Not installed and not part of the API: they exist so that tests
 * can reproduce, deterministically, races and time spans that a test could otherwise only hope
 * to hit (hours of uptime, a free landing inside a failing bulk allocation, a process dying in
 * the middle of a range removal). Each costs nothing on the fast path: the clock offset is one
 * relaxed load added to a clock read, the hooks are tested on slow paths only.
 */

#include <atomic>
#include <cstdint>

namespace qpn {

/*
 * Added to CLOCK_MONOTONIC by the pool's clock (and by mlx5_qpn_clock_ns()). A test moves the
 * clock forward by hours, or one epoch back to play a thread that read the clock earlier. It is
 * per process (a fork()ed child inherits the value of the moment).
 */
void test_clock_offset_set(int64_t offset_ns);
int64_t test_clock_offset_get();

struct TestHooks {
	/* alloc_bulk() failed after taking `got` QPNs and is about to give them back. */
	std::atomic<void (*)(const uint32_t *qpns, unsigned int got)> bulk_rollback{nullptr};
	/* alloc_bulk() served from the cache has taken n slots (indices, not QPNs) unpublished and
	 * is about to publish them. */
	std::atomic<void (*)(const uint32_t *slots, unsigned int n)> bulk_taken{nullptr};
	/* An out-of-line free (link_freed()) counted the free and has not linked the QPN into its
	 * chain yet. */
	std::atomic<void (*)()> free_counted{nullptr};
	/* nothing_anywhere() (the -ENOSPC verdict) made its first read and goes on to the rest. */
	std::atomic<void (*)()> verdict_scan{nullptr};
	/* drain() took an expired bucket and has not pushed it to the free stack yet. */
	std::atomic<void (*)()> drain_holding{nullptr};
	/* range_remove() reached `stage` (see RemoveStage in qpn_pool_range.cpp). */
	std::atomic<void (*)(int stage)> remove_stage{nullptr};
	/* drain_remote() applies queued frees in the order of their cells, as it did before it
	 * sorted them by the freer's count: a test measures both orders side by side, under the
	 * same load, instead of holding the sorted one to a fixed figure that load moves. */
	std::atomic<bool> remote_cell_order{false};
	/* An owner found a thief holding its cache and is about to wait for it to let go. */
	std::atomic<void (*)()> thief_wait{nullptr};
	/* Barriers a thief issued, by scope (detail::Scope: this process, expedited global, grace
	 * period), counted on the slow path that issues them; per process. */
	std::atomic<uint64_t> barriers[3]{};
};

extern TestHooks g_test_hooks;

} /* namespace qpn */

#endif /* QPN_POOL_TEST_HOOKS_H */
