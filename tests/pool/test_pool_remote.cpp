/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Frees from a thread other than the allocating one. The owner frees with a
 * plain store; another thread queues the free for the allocating cache, whose holder applies it
 * on its next call, or empties the queue itself when the owner is idle or gone. The queued free
 * marks the slot, so a second free is refused at its call, from any thread; only two frees in
 * flight at once may both return 0: the pool releases the QPN once and counts the other as
 * refused_async.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <rte_pause.h>

#include "pool_test_util.h"
#include "qpn_pool_internal.h"
#include "qpn_pool_test_hooks.h"

namespace {

/* A thread that allocates n QPNs, publishes them, and then waits (idle, alive) until told to
 * make one more pool call, then to exit. */
class Holder {
public:
	Holder(struct mlx5_qpn_pool *p, unsigned n) : p_(p)
	{
		t_ = std::thread([this, n] {
			for (unsigned i = 0; i < n; i++) {
				uint32_t q;
				if (mlx5_qpn_pool_alloc(p_, &q) == 0)
					qpns_.push_back(q);
			}
			ready_.store(1);
			while (step_.load() == 0)
				std::this_thread::yield();
			uint32_t q;
			if (step_.load() == 1 && mlx5_qpn_pool_alloc(p_, &q) == 0) /* any call */
				mlx5_qpn_pool_free(p_, q);
			done_.store(1);
			while (step_.load() != 2)
				std::this_thread::yield();
		});
		while (ready_.load() == 0)
			std::this_thread::yield();
	}
	~Holder() { exit(); }
	const std::vector<uint32_t> &qpns() const { return qpns_; }
	void call()
	{
		step_.store(1);
		while (done_.load() == 0)
			std::this_thread::yield();
	}
	void exit()
	{
		if (t_.joinable()) {
			step_.store(2);
			t_.join();
		}
	}

private:
	struct mlx5_qpn_pool *p_;
	std::thread t_;
	std::vector<uint32_t> qpns_;
	std::atomic<int> ready_{0}, step_{0}, done_{0};
};

/* Every QPN of the pool comes back, each once (nothing lost, nothing released twice). */
void
expect_all_back(struct mlx5_qpn_pool *p, size_t n)
{
	std::set<uint32_t> got;
	uint32_t x;
	while (mlx5_qpn_pool_alloc(p, &x) == 0)
		EXPECT_TRUE(got.insert(x).second) << "QPN handed out twice: " << x;
	EXPECT_EQ(got.size(), n);
	for (uint32_t y : got)
		ASSERT_EQ(mlx5_qpn_pool_free(p, y), 0);
}

/* A pool of `cap` QPNs from 0x100 and a Holder thread with n of them; this thread frees them. */
struct RemoteCase {
	RemoteCase(uint32_t cap, uint32_t cache, uint64_t quar, unsigned n)
	    : tp(cap, cache, quar), added(mlx5_qpn_pool_range_add(tp.get(), 0x100, cap)),
	      h(tp.get(), n)
	{
	}
	void free_all(size_t n)
	{
		ASSERT_EQ(added, 0);
		ASSERT_EQ(h.qpns().size(), n);
		for (uint32_t q : h.qpns())
			EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
	}
	TestPool tp;
	int added;
	Holder h;
};

/* The one cache that served allocations (the pool's first user). */
const qpn::Cache *
cache_that_allocated(struct mlx5_qpn_pool *p)
{
	const qpn::Cache *found = nullptr;
	for (uint32_t i = 0; i < p->nb_caches; i++)
		if (p->caches[i].alloc_seq.load() != 0) {
			EXPECT_EQ(found, nullptr) << "two caches allocated";
			found = &p->caches[i];
		}
	return found;
}

} /* namespace */

/*
 * An inline call announces itself by making its cache's sequence word odd with a plain
 * increment, before it looks at the gate: a thief that held the cache and counted into that
 * word could lose a count or leave it odd (the owner then looks busy for ever). The thief's
 * counts go to the pool: the owner's words stay as the owner left them, the totals exact.
 */
TEST(PoolRemote, AThiefCountsInThePoolNeverInTheOwnersSequenceWords)
{
	RemoteCase rc(256, 16, 0, 100);
	const qpn::Cache *c = cache_that_allocated(rc.tp.get());
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(c->alloc_seq.load(), 200u) << "two per alloc";
	rc.free_all(100); /* the queue holds 8: the rest is applied by us, holding its cache */
	EXPECT_EQ(c->free_seq.load(), 0u) << "the thief wrote the owner's word";
	struct mlx5_qpn_pool_stats st = pool_stats(rc.tp.get());
	EXPECT_EQ(st.allocs, 100u);
	EXPECT_EQ(st.frees, 100u);
	EXPECT_EQ(st.in_use, 0u);
	rc.h.call(); /* applies what is still queued, then one alloc and free of its own */
	EXPECT_EQ(c->alloc_seq.load() % 2, 0u);
	EXPECT_EQ(c->free_seq.load() % 2, 0u);
	st = pool_stats(rc.tp.get());
	EXPECT_EQ(st.allocs, 101u);
	EXPECT_EQ(st.frees, 101u);
	EXPECT_EQ(st.in_use, 0u);
}

/*
 * The race itself: the owner runs inline pairs and hands batches of QPNs to a freer, whose
 * queue fills, so it holds the owner's cache whenever it finds the owner between two calls.
 * The test counts every alloc and free it made; the pool's counters must agree exactly.
 */
TEST(PoolRemote, OwnerAndThiefCountsStayExactUnderRace)
{
	constexpr unsigned kRounds = 3000, kBatch = 24;
	TestPool tp(4096, 32, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 4096), 0);
	std::mutex m;
	std::vector<uint32_t> handed;
	std::atomic<bool> done{false};
	std::atomic<uint64_t> allocs{0}, frees{0}, failures{0};
	std::thread freer([&] {
		std::vector<uint32_t> mine;
		for (;;) {
			bool last = done.load();
			{
				std::lock_guard<std::mutex> g(m);
				mine.swap(handed);
			}
			for (uint32_t q : mine) {
				if (mlx5_qpn_pool_free(tp.get(), q) == 0)
					frees.fetch_add(1);
				else
					failures.fetch_add(1);
			}
			mine.clear();
			if (last)
				break;
			std::this_thread::yield();
		}
	});
	std::thread owner([&] {
		for (unsigned r = 0; r < kRounds; r++) {
			std::vector<uint32_t> batch;
			for (unsigned i = 0; i < kBatch; i++) {
				uint32_t q;
				if (mlx5_qpn_pool_alloc(tp.get(), &q) != 0)
					continue; /* the freer is behind: fine */
				allocs.fetch_add(1);
				batch.push_back(q);
				/* an inline pair between: the window the thief must respect */
				if (mlx5_qpn_pool_alloc(tp.get(), &q) == 0) {
					allocs.fetch_add(1);
					if (mlx5_qpn_pool_free(tp.get(), q) == 0)
						frees.fetch_add(1);
					else
						failures.fetch_add(1);
				}
			}
			std::lock_guard<std::mutex> g(m);
			handed.insert(handed.end(), batch.begin(), batch.end());
		}
		done.store(true);
		/* keep calling until the freer is done, so queued frees are applied */
		uint32_t q;
		while (frees.load() < allocs.load() && failures.load() == 0)
			if (mlx5_qpn_pool_alloc(tp.get(), &q) == 0) {
				allocs.fetch_add(1);
				if (mlx5_qpn_pool_free(tp.get(), q) == 0)
					frees.fetch_add(1);
			}
	});
	owner.join();
	freer.join();
	EXPECT_EQ(failures.load(), 0u);
	EXPECT_EQ(frees.load(), allocs.load());
	struct mlx5_qpn_pool_stats st = pool_stats(tp.get());
	EXPECT_EQ(st.allocs, allocs.load());
	EXPECT_EQ(st.frees, frees.load());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.refused_async, 0u);
	EXPECT_GT(tp.get()->bypass_frees.load(), 0u) << "the freer never applied a queue itself";
	for (uint32_t i = 0; i < tp.get()->nb_caches; i++) {
		EXPECT_EQ(tp.get()->caches[i].alloc_seq.load() % 2, 0u) << "cache " << i;
		EXPECT_EQ(tp.get()->caches[i].free_seq.load() % 2, 0u) << "cache " << i;
	}
}

TEST(PoolRemote, FreeFromAnotherThreadIsAppliedByTheOwnersNextCall)
{
	RemoteCase rc(64, 8, 0, 4);
	rc.free_all(4);
	TestPool &tp = rc.tp;
	Holder &h = rc.h;
	/* A QPN that was never allocated is refused at once. */
	EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), 0x100 + 63), -EINVAL);
	h.call();
	struct mlx5_qpn_pool_stats st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.refused_async, 0u);
	for (uint32_t q : h.qpns()) {
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(tp.get(), q, nullptr), 0);
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), -EINVAL) << "already freed";
	}
}

/*
 * A free from another thread waits in the owner's queue until the owner's next call, yet a second
 * free of the QPN is refused at its call: by the same thread or a third one, with free() or
 * free_gen(). (Both returned 0 and the second was refused only when the owner applied the queue,
 * counted in refused_async.)
 */
TEST(PoolRemote, ASecondFreeOfAQueuedQpnIsRefusedAtTheCall)
{
	TestPool tp(64, 8, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	mlx5_qpn_pool *p = tp.get();
	Holder h(p, 2);
	const uint32_t a = h.qpns().at(0), b = h.qpns().at(1);
	uint32_t ga = 0, gb = 0;
	ASSERT_EQ(mlx5_qpn_pool_qpn_state(p, a, &ga), 1);
	ASSERT_EQ(mlx5_qpn_pool_qpn_state(p, b, &gb), 1);
	/* a: freed here, then again here and from a third thread. */
	ASSERT_EQ(mlx5_qpn_pool_free(p, a), 0);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(p, a, nullptr), 1) << "queued: the owner is idle";
	EXPECT_EQ(mlx5_qpn_pool_free(p, a), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(p, a, ga), -EINVAL);
	std::thread([&] {
		EXPECT_EQ(mlx5_qpn_pool_free(p, a), -EINVAL);
		EXPECT_EQ(mlx5_qpn_pool_free_gen(p, a, ga), -EINVAL);
	}).join();
	/* b: freed by a third thread with its generation, then again here. */
	std::thread([&] { EXPECT_EQ(mlx5_qpn_pool_free_gen(p, b, gb), 0); }).join();
	EXPECT_EQ(mlx5_qpn_pool_free_gen(p, b, gb), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free(p, b), -EINVAL);
	EXPECT_EQ(pool_stats(p).refused_frees, 6u);
	h.call(); /* applies the queue */
	struct mlx5_qpn_pool_stats st = pool_stats(p);
	EXPECT_EQ(st.refused_async, 0u);
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(mlx5_qpn_pool_free(p, a), -EINVAL);
	h.exit();
	expect_all_back(p, 64); /* each released once */
}

/*
 * free_gen() with the generation of a hand-out that was freed already is refused at its call:
 * while the free it repeats waits in the owner's queue (it returned 0), and once the owner has
 * applied it and got the QPN back with the next generation. The owner's own late free too.
 */
TEST(PoolRemote, FreeGenOfAStaleGenerationIsRefusedAtTheCall)
{
	TestPool tp(64, 8, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	mlx5_qpn_pool *p = tp.get();
	uint32_t q = 0, g = 0;
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(p, &q, &g), 0); /* this thread owns it */
	auto other = [&](uint32_t gen) {
		int rc = 0;
		std::thread([&] { rc = mlx5_qpn_pool_free_gen(p, q, gen); }).join();
		return rc;
	};
	EXPECT_EQ(other(g), 0); /* queued for this thread */
	EXPECT_EQ(other(g), -EINVAL) << "a stale generation, the first free still queued";
	uint32_t again = 0, g2 = 0;
	ASSERT_EQ(mlx5_qpn_pool_alloc_gen(p, &again, &g2), 0); /* applies it; LIFO: q again */
	ASSERT_EQ(again, q);
	EXPECT_EQ(g2, (g + 1) & MLX5_QPN_POOL_SLOT_GEN_MASK);
	EXPECT_EQ(other(g), -EINVAL) << "a stale generation, the QPN handed out again";
	EXPECT_EQ(mlx5_qpn_pool_free_gen(p, q, g), -EINVAL);
	EXPECT_EQ(other(g2), 0);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(p, q, g2), -EINVAL) << "the owner's free after another's";
	struct mlx5_qpn_pool_stats st = pool_stats(p);
	EXPECT_EQ(st.refused_async, 0u);
	EXPECT_EQ(st.in_use, 0u);
}

/*
 * Two frees of one QPN in flight at once, the contract's one exception: the second free runs
 * where the first has queued its entry and not yet marked the slot (test hook remote_queued).
 * Either the first takes its entry back and is refused, or, when the owner applied the queue
 * meanwhile, both return 0 and the entry that lost is counted in refused_async. The QPN is
 * released once either way.
 */
namespace {
std::atomic<int> g_race_armed;
std::function<void()> g_race_second;
} /* namespace */

TEST(PoolRemote, TwoFreesInFlightAtOnceReleaseTheQpnOnce)
{
	for (bool owner_applies : {false, true}) {
		SCOPED_TRACE(owner_applies ? "the owner applies the queue in between" :
					     "the queue waits");
		TestPool tp(64, 8, 0);
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
		mlx5_qpn_pool *p = tp.get();
		Holder h(p, 1);
		const uint32_t q = h.qpns().at(0);
		int second = 1;
		g_race_second = [&] {
			std::thread([&] { second = mlx5_qpn_pool_free(p, q); }).join();
			if (owner_applies)
				h.call();
		};
		g_race_armed = 1;
		qpn::g_test_hooks.remote_queued.store(+[] {
			if (g_race_armed.exchange(0) == 1)
				g_race_second();
		});
		const int first = mlx5_qpn_pool_free(p, q);
		qpn::g_test_hooks.remote_queued.store(nullptr);
		EXPECT_EQ(second, 0);
		EXPECT_EQ(first, owner_applies ? 0 : -EINVAL);
		if (!owner_applies)
			h.call();
		struct mlx5_qpn_pool_stats st = pool_stats(p);
		EXPECT_EQ(st.refused_async, owner_applies ? 1u : 0u);
		EXPECT_EQ(st.in_use, 0u);
		h.exit();
		expect_all_back(p, 64);
	}
}

/* More frees than the queue holds while the owner is idle: the freer empties the queue itself
 * (holding the idle owner's cache), and nothing is lost. */
TEST(PoolRemote, FullQueueOfAnIdleOwnerIsAppliedByTheFreer)
{
	RemoteCase rc(256, 16, 0, 100);
	rc.free_all(100);
	rc.h.call();
	rc.h.exit();
	TestPool &tp = rc.tp;
	struct mlx5_qpn_pool_stats st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.refused_async, 0u);
	expect_all_back(tp.get(), 256);
}

/* The allocating thread has exited: its cache is unclaimed, nobody would apply a queue, so the
 * freer releases the QPN itself. */
TEST(PoolRemote, FreeAfterTheAllocatingThreadExited)
{
	TestPool tp(64, 8, 1000);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	Holder h(tp.get(), 10);
	std::vector<uint32_t> q = h.qpns();
	h.exit();
	for (uint32_t x : q)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), x), 0);
	EXPECT_EQ(pool_stats(tp.get()).in_use, 0u);
	for (uint32_t x : q)
		EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), x), -EINVAL);
}

/* Two threads free each other's QPNs at full speed, each queue filling while its owner frees
 * into the other's: no deadlock, nothing lost, nothing doubled. */
TEST(PoolRemote, CrossFreesBothWaysDoNotDeadlock)
{
	constexpr unsigned kN = 2000;
	TestPool tp(2 * kN + 64, 16, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 2 * kN + 64), 0);
	std::vector<uint32_t> a(kN), b(kN);
	std::atomic<int> allocated{0}, go{0};
	auto body = [&](std::vector<uint32_t> &mine, std::vector<uint32_t> &theirs) {
		for (auto &q : mine)
			ASSERT_EQ(mlx5_qpn_pool_alloc(tp.get(), &q), 0);
		allocated.fetch_add(1);
		while (allocated.load() < 2)
			std::this_thread::yield();
		for (uint32_t q : theirs)
			EXPECT_EQ(mlx5_qpn_pool_free(tp.get(), q), 0);
		go.fetch_add(1);
		while (go.load() < 2) { /* keep calling: apply what the other queued for us */
			uint32_t x;
			if (mlx5_qpn_pool_alloc(tp.get(), &x) == 0)
				mlx5_qpn_pool_free(tp.get(), x);
		}
		mlx5_qpn_pool_cache_flush(tp.get());
	};
	std::thread t1([&] { body(a, b); });
	std::thread t2([&] { body(b, a); });
	t1.join();
	t2.join();
	struct mlx5_qpn_pool_stats st = pool_stats(tp.get());
	EXPECT_EQ(st.in_use, 0u);
	EXPECT_EQ(st.refused_async, 0u);
	EXPECT_EQ(st.free, 2 * kN + 64);
}

/*
 * Queued frees are applied in the order they were made, whatever cells they sit in. A freer
 * takes the first empty cell, so once the queue has been full and the owner empties cells while
 * the freer fills them, cell order is not free order. Applied in cell order, runs of QPNs came
 * back shuffled, and with a quarantine the shuffle compounded pass after pass (a cross-lcore
 * producer and consumer: 2-32 % of neighbouring QPNs adjacent after 2 million frees, 99 % at
 * the start). Here the cells are filled out of order by hand: entries of eight frees made in
 * hand-out order, the later ones in the lower cells. Applied, the owner's chain must be what
 * its own frees in that order would have made (no quarantine: LIFO, the last freed first).
 */
TEST(PoolRemote, QueuedFreesAreAppliedInTheOrderTheyWereMade)
{
	TestPool tp(64, 16, 0);
	ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 64), 0);
	mlx5_qpn_pool *p = tp.get();
	uint32_t q[8];
	for (auto &x : q)
		ASSERT_EQ(mlx5_qpn_pool_alloc(p, &x), 0);
	const qpn::Cache *owner = cache_that_allocated(p);
	ASSERT_NE(owner, nullptr);
	auto &cache = const_cast<qpn::Cache &>(*owner);
	const uint32_t base = p->ranges[0].base.load(), first = p->ranges[0].first.load();
	auto *slots = reinterpret_cast<std::atomic<uint64_t> *>(p + 1);
	/* Free k (k = 0..7, q[k]) sits in cell (5 * k + 3) % 8; the freer's count wraps between
	 * the fourth and the fifth. */
	const uint32_t seq0 = qpn::kRqSeqMask - 3;
	for (uint32_t k = 0; k < 8; k++) {
		const uint32_t s = base + (q[k] - first);
		const uint32_t gen = qpn::slot_gen(slots[s].load());
		cache.rq[(5 * k + 3) % 8].store(qpn::rq_make(s, gen, seq0 + k));
	}
	cache.gate.fetch_or(qpn::kGateRemote);
	uint32_t again[8];
	for (auto &x : again)
		ASSERT_EQ(mlx5_qpn_pool_alloc(p, &x), 0);
	for (uint32_t k = 0; k < 8; k++)
		EXPECT_EQ(again[k], q[7 - k]) << "hand-out " << k;
	EXPECT_EQ(pool_stats(p).refused_async, 0u);
}

/*
 * The same through the quarantine, with real threads: a producer allocates and hands each QPN
 * through a ring to a consumer that frees it (the cross-lcore pattern of qpn-perf), on a pool
 * small enough that every QPN goes round some 24 times. Each pass the consumer frees in the
 * order the producer allocated, the producer allocates in the order its chains were built from
 * those frees: any shuffle in applying them compounds. Returns how many of the neighbouring
 * QPNs in the consumer's last kTail frees were adjacent, in percent (-1: the run failed).
 */
static int
cross_thread_adjacent_percent(bool cell_order)
{
	constexpr uint64_t kQ = 1000 * 1000 * 1000ull;
	constexpr uint32_t kN = 1 << 14, kRing = 1024, kOps = 400000, kTail = 20000;
	/* Threads inherit the EAL main thread's single CPU: give each its own. */
	auto on_cpu = [](int cpu) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	};
	TestPool tp(kN, 256, kQ);
	if (mlx5_qpn_pool_range_add(tp.get(), 0x1000, kN) != 0)
		return -1;
	qpn::g_test_hooks.remote_cell_order.store(cell_order);
	const int64_t saved = qpn::test_clock_offset_get();
	std::vector<std::atomic<uint32_t>> ring(kRing);
	std::atomic<uint64_t> head{0}, tail{0};
	std::atomic<bool> failed{false};
	std::vector<uint32_t> freed;
	freed.reserve(kOps);
	std::thread producer([&] {
		on_cpu(0);
		for (uint32_t i = 0; i < kOps && !failed; i++) {
			uint32_t q = 0;
			int rc;
			/* Everything in quarantine: move the clock past it. */
			while ((rc = mlx5_qpn_pool_alloc(tp.get(), &q)) == -EAGAIN)
				qpn::test_clock_offset_set(qpn::test_clock_offset_get() +
							   static_cast<int64_t>(2 * kQ));
			if (rc != 0) {
				failed = true;
				break;
			}
			while (tail.load() - head.load() >= kRing)
				rte_pause(); /* both spin, as lcores do: the queue fills and drains at once */
			ring[tail.load() % kRing].store(q);
			tail.fetch_add(1);
		}
	});
	std::thread consumer([&] {
		on_cpu(1);
		for (uint32_t i = 0; i < kOps && !failed; i++) {
			while (head.load() == tail.load() && !failed)
				rte_pause();
			if (failed)
				break;
			const uint32_t q = ring[head.load() % kRing].load();
			head.fetch_add(1);
			freed.push_back(q);
			if (mlx5_qpn_pool_free(tp.get(), q) != 0)
				failed = true;
		}
	});
	producer.join();
	consumer.join();
	qpn::g_test_hooks.remote_cell_order.store(false);
	qpn::test_clock_offset_set(saved);
	if (failed || freed.size() != kOps || pool_stats(tp.get()).in_use != 0)
		return -1;
	uint32_t adjacent = 0;
	for (size_t i = kOps - kTail + 1; i < kOps; i++)
		adjacent += freed[i] == freed[i - 1] + 1 || freed[i] + 1 == freed[i - 1];
	return static_cast<int>(adjacent * 100 / kTail);
}

/*
 * Applying queued frees in the freer's order keeps the runs; in cell order they were shuffled.
 * How much survives depends on how the two threads are scheduled, which the test does not
 * control (quiet machine: 97.5-99.3 % in the freer's order, 33-67 % in cell order; with the
 * pool's stress test running beside it, 84 % in the freer's order; under ThreadSanitizer 99 and
 * 96 %): so both orders run here, alternately, under the same load, and the freer's order must
 * keep clearly more, and most (best of up to two runs each). Without the sorting both are cell order
 * and the test fails.
 */
TEST(PoolRemote, CrossThreadFreesKeepTheirRunsThroughTheQuarantine)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		GTEST_SKIP() << "needs two CPUs: the race is between two running threads";
	int sorted = -1, cells = -1;
	for (int round = 0; round < 2; round++) {
		const int c = cross_thread_adjacent_percent(true);
		ASSERT_GE(c, 0) << "cell order: the run failed";
		/* Under ThreadSanitizer the two threads often miss each other at the queue (72 and
		 * 96 % kept in cell order): then there is no shuffle to compare against. */
		if (c >= 85)
			GTEST_SKIP()
				<< "cell order kept " << c
				<< " % adjacent: this scheduling made no shuffle to compare against";
		const int s = cross_thread_adjacent_percent(false);
		ASSERT_GE(s, 0) << "freer's order: the run failed";
		sorted = std::max(sorted, s);
		cells = std::max(cells, c);
		if (sorted >= 85 && sorted >= cells + 15)
			break; /* a second round could only lower the margin (seconds under TSan) */
	}
	std::printf(
		"adjacent (best of up to two runs): %d %% in the freer's order, %d %% in cell order\n",
		sorted, cells);
	EXPECT_GE(sorted, cells + 15) << "adjacent: " << sorted << " % in the freer's order, "
				      << cells << " % in cell order";
	/* The margin alone passed 2 of 5 runs with both in cell order (cell order varies 46-73 %
	 * from run to run); the freer's order keeps 94-99 %, 97-98 % beside the stress test. */
	EXPECT_GE(sorted, 85) << "adjacent in the freer's order";
}

/*
 * An owner that finds a thief in its cache waits for it to let go (a hold is a membarrier and a
 * few slot writes) instead of working cacheless meanwhile: what it took cacheless came back
 * through the quarantine one QPN at a time, for good (qpn-perf's cross-lcore run: 3 000-8 000
 * such allocations per repetition, the quarantine pool's batches in runs of 1-10 QPNs after it).
 * The "thief" here is the test: it closes the gate, and lets go from the hook the owner calls as
 * it starts to wait.
 */
namespace {
std::atomic<uint32_t> *g_thief_gate;
std::atomic<int> g_thief_waits;

/* A pool whose cache this thread holds (one QPN taken), with a "thief" in it from the start:
 * `hook` runs where the owner starts to wait. */
struct ThiefInCache {
	TestPool tp{64, 16, 0};
	mlx5_qpn_pool *p = nullptr;
	qpn::Cache *cache = nullptr;
	uint32_t q = 0;
	uint64_t bypass = 0;

	explicit ThiefInCache(void (*hook)())
	{
		p = tp.get();
		EXPECT_EQ(mlx5_qpn_pool_range_add(p, 0x100, 64), 0);
		EXPECT_EQ(mlx5_qpn_pool_alloc(p, &q), 0);
		cache = const_cast<qpn::Cache *>(cache_that_allocated(p));
		if (cache == nullptr)
			return;
		bypass = p->bypass_allocs.load();
		g_thief_gate = &cache->gate;
		g_thief_waits = 0;
		qpn::g_test_hooks.thief_wait.store(hook);
		cache->gate.store(qpn::kAnyThief);
	}
	~ThiefInCache()
	{
		qpn::g_test_hooks.thief_wait.store(nullptr);
		if (cache != nullptr) {
			cache->gate.store(0);
			if (q != 0) { /* 0: the test freed it */
				EXPECT_EQ(mlx5_qpn_pool_free(p, q), 0);
			}
		}
	}
};
} /* namespace */

TEST(PoolRemote, AnOwnerWaitsForAThiefInsteadOfGoingCacheless)
{
	ThiefInCache t(+[] {
		g_thief_waits++;
		g_thief_gate->store(0); /* the thief lets go */
	});
	ASSERT_NE(t.cache, nullptr);
	const uint64_t hits = pool_stats(t.p).cache_hits;
	uint32_t q2;
	EXPECT_EQ(mlx5_qpn_pool_alloc(t.p, &q2), 0);
	EXPECT_EQ(g_thief_waits.load(), 1);
	EXPECT_EQ(t.p->bypass_allocs.load(), t.bypass) << "went cacheless";
	EXPECT_EQ(pool_stats(t.p).cache_hits, hits + 1);
	EXPECT_EQ(mlx5_qpn_pool_free(t.p, q2), 0);
}

/* A thief that does not let go (preempted, or dead until a reclaim) costs a bounded wait, then
 * the cacheless path as before; and right after such a wait no other: not a wait per call. */
TEST(PoolRemote, AThiefThatStaysCostsOneBoundedWait)
{
	ThiefInCache t(+[] { g_thief_waits++; });
	ASSERT_NE(t.cache, nullptr);
	uint32_t a, b;
	EXPECT_EQ(mlx5_qpn_pool_alloc(t.p, &a), 0);
	const auto after_first = std::chrono::steady_clock::now();
	EXPECT_EQ(mlx5_qpn_pool_alloc(t.p, &b), 0);
	const bool soon = std::chrono::steady_clock::now() - after_first <
			  std::chrono::microseconds(500);
	EXPECT_EQ(t.p->bypass_allocs.load(), t.bypass + 2) << "both served cacheless";
	if (soon) /* the back-off lasts 1 ms after a wait that timed out */
		EXPECT_EQ(g_thief_waits.load(), 1);
	else
		EXPECT_GE(g_thief_waits.load(), 1);
	t.cache->gate.store(0);
	for (uint32_t x : {a, b})
		EXPECT_EQ(mlx5_qpn_pool_free(t.p, x), 0);
}

/*
 * The allocating thread frees a QPN twice while a thief holds its cache: it may not write the
 * slot meanwhile, so its free goes through its own remote queue, and the second is refused at
 * the call. (Both returned 0: "double free accepted 0.2-83 us after the first".)
 */
TEST(PoolRemote, AnOwnersDoubleFreeWhileAThiefHoldsItsCacheIsRefusedAtTheCall)
{
	ThiefInCache t(+[] { g_thief_waits++; }); /* the thief stays */
	ASSERT_NE(t.cache, nullptr);
	uint32_t g = 0;
	ASSERT_EQ(mlx5_qpn_pool_qpn_state(t.p, t.q, &g), 1);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(t.p, t.q, g), 0);
	EXPECT_EQ(mlx5_qpn_pool_qpn_state(t.p, t.q, nullptr), 1) << "queued";
	EXPECT_EQ(mlx5_qpn_pool_free(t.p, t.q), -EINVAL);
	EXPECT_EQ(mlx5_qpn_pool_free_gen(t.p, t.q, g), -EINVAL);
	t.cache->gate.fetch_and(qpn::kGateRemote); /* the thief lets go; the queued free stays */
	uint32_t x = 0;
	ASSERT_EQ(mlx5_qpn_pool_alloc(t.p, &x), 0); /* applies the queue */
	EXPECT_EQ(mlx5_qpn_pool_free(t.p, t.q), x == t.q ? 0 : -EINVAL);
	if (x != t.q) {
		EXPECT_EQ(mlx5_qpn_pool_free(t.p, x), 0);
	}
	t.q = 0;
	struct mlx5_qpn_pool_stats st = pool_stats(t.p);
	EXPECT_EQ(st.refused_async, 0u);
	EXPECT_EQ(st.in_use, 0u);
}

/*
 * A refill seals the cache's released QPNs, except frees taken from the remote queue: those
 * come as late as their freer is behind, by a lag that varies, and a refill cut them at a
 * different place at every pass through the quarantine (qpn-perf's cross-lcore run: 7-18 runs
 * per 8192 frees growing to 99-354 over one run; 37-67 and flat without the cut). Own frees,
 * in step with the batches, are still sealed at the refill.
 */
TEST(PoolRemote, ARefillSealsOwnFreesButNotQueuedOnes)
{
	constexpr uint32_t kBatch = 16;
	for (bool remote : {false, true}) {
		SCOPED_TRACE(remote ? "freed by another thread" : "freed by the owner");
		TestPool tp(256, kBatch, 1000 * 1000 * 1000ull);
		ASSERT_EQ(mlx5_qpn_pool_range_add(tp.get(), 0x100, 256), 0);
		mlx5_qpn_pool *p = tp.get();
		uint32_t q[kBatch];
		for (auto &x : q) /* the cache's whole first batch: the next alloc refills */
			ASSERT_EQ(mlx5_qpn_pool_alloc(p, &x), 0);
		auto &cache = const_cast<qpn::Cache &>(*cache_that_allocated(p));
		ASSERT_EQ(cache.ready.count.load(), 0u);
		auto free_five = [&] {
			for (int i = 0; i < 5; i++)
				EXPECT_EQ(mlx5_qpn_pool_free(p, q[i]), 0);
		};
		if (remote) {
			std::thread freer(free_five); /* queued in the owner's remote queue */
			freer.join();
		} else {
			free_five();
		}
		const uint64_t refills = pool_stats(p).refills;
		uint32_t more;
		ASSERT_EQ(mlx5_qpn_pool_alloc(p, &more), 0); /* applies the queue, then refills */
		EXPECT_EQ(pool_stats(p).refills, refills + 1);
		EXPECT_EQ(cache.open.count.load(), remote ? 5u : 0u);
		EXPECT_EQ(pool_stats(p).in_quarantine, 5u);
		EXPECT_EQ(mlx5_qpn_pool_free(p, more), 0);
		for (uint32_t i = 5; i < kBatch; i++)
			EXPECT_EQ(mlx5_qpn_pool_free(p, q[i]), 0);
	}
}
