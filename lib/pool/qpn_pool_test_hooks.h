/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_POOL_TEST_HOOKS_H
#define QPN_POOL_TEST_HOOKS_H

/*
 * Test-only seams of the pool. Not installed and not part of the API: they exist so that tests
 * can reproduce, deterministically, races and time spans that a test could otherwise only hope
 * to hit (hours of uptime, a free landing inside a failing bulk allocation, a process dying in
 * the middle of a range removal).
 *
 * They are compiled in only where QPN_POOL_TEST_HOOKS is defined, which lib/pool/meson.build
 * does in a build with the test suite (-Dtests=true): a library built without the tests has
 * none of them (no hook load on a slow path, no clock offset, no other remote drain order), and
 * the QPN_TEST_* macros below compile to nothing. The declarations stay visible either way; only
 * a program built with the tests may use them.
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
	/* drain_remote() applies queued frees in the order of their cells, not by the freer's
	 * count: a test measures both orders side by side, under the same load, instead of
	 * holding the sorted one to a fixed figure that load moves. */
	std::atomic<bool> remote_cell_order{false};
	/* A remote free queued its entry and has not marked the slot queued yet
	 * (RemoteQueue::mark_queued()): a test runs another free of the QPN there, in flight at
	 * the same time. */
	std::atomic<void (*)()> remote_queued{nullptr};
	/* An owner found a thief holding its cache and is about to wait for it to let go. */
	std::atomic<void (*)()> thief_wait{nullptr};
	/* Barriers a thief issued, by scope (detail::Scope: this process, expedited global, grace
	 * period), counted on the slow path that issues them; per process. */
	std::atomic<uint64_t> barriers[3]{};
};

extern TestHooks g_test_hooks;

} /* namespace qpn */

/* Call hook `name` of g_test_hooks with the arguments, if a test set it. QPN_TEST_HOOK_HOT: on
 * a path the compiler is to lay out for the hook's absence (QPN_TEST_HOOK_RLX: loaded relaxed,
 * where an acquire load would order the path's own loads). QPN_TEST_COUNT: count in a counter of
 * g_test_hooks; QPN_TEST_FLAG: a flag of g_test_hooks (false without hooks). */
#ifdef QPN_POOL_TEST_HOOKS
#define QPN_TEST_UNLIKELY_(x) __builtin_expect(!!(x), 0)
#define QPN_TEST_HOOK_IF(cond, mo, name, ...)                                                      \
	do {                                                                                       \
		auto qpn_hook_ = ::qpn::g_test_hooks.name.load(mo);                                \
		if (cond(qpn_hook_ != nullptr))                                                    \
			qpn_hook_(__VA_ARGS__);                                                    \
	} while (0)
#define QPN_TEST_HOOK(name, ...) QPN_TEST_HOOK_IF(, std::memory_order_acquire, name, __VA_ARGS__)
#define QPN_TEST_HOOK_HOT(name, ...)                                                               \
	QPN_TEST_HOOK_IF(QPN_TEST_UNLIKELY_, std::memory_order_acquire, name, __VA_ARGS__)
#define QPN_TEST_HOOK_RLX(name, ...)                                                               \
	QPN_TEST_HOOK_IF(QPN_TEST_UNLIKELY_, std::memory_order_relaxed, name, __VA_ARGS__)
#define QPN_TEST_COUNT(counter) ::qpn::g_test_hooks.counter.fetch_add(1, std::memory_order_relaxed)
#define QPN_TEST_FLAG(flag)     ::qpn::g_test_hooks.flag.load(std::memory_order_relaxed)
#else
#define QPN_TEST_HOOK(name, ...)                                                                   \
	do {                                                                                       \
	} while (0)
#define QPN_TEST_HOOK_HOT(name, ...) QPN_TEST_HOOK(name)
#define QPN_TEST_HOOK_RLX(name, ...) QPN_TEST_HOOK(name)
#define QPN_TEST_COUNT(counter)      ((void)0)
#define QPN_TEST_FLAG(flag)          false
#endif

#endif /* QPN_POOL_TEST_HOOKS_H */
