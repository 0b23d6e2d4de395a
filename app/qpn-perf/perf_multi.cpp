/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's multi-runner runs: k EAL lcores at once (the scaling curve and each lcore's solo
 * figure), k non-EAL threads at once, and the cross-lcore pair (alloc on one lcore, free on
 * another through an SPSC ring). Every runner warms up, meets the others at a start line, runs
 * n operations and reports its own TSC interval; throughput is all operations over the span
 * from the first start to the last end.
 */
#include <pthread.h>

#include <rte_ring.h>

#include "perf_app.h"

namespace {

constexpr unsigned int kPerfMaxSlots = RTE_MAX_LCORE;

enum perf_role { ROLE_PAIRS, ROLE_PRODUCE, ROLE_CONSUME };

struct perf_slot {
	perf_role role;
	uint64_t t0, t1, ops, fails;
};

struct perf_mjob {
	perf_state *s;
	uint64_t n, warm;
	struct rte_ring *ring;
	bool fini_after; /* non-EAL threads: hand the thread's cache back before it exits */
	uint64_t limit;  /* TSC cycles a runner may run before it stops early */
	std::atomic<unsigned int> ready{0};
	std::atomic<unsigned int> total{0};
	std::atomic<bool> go{false};
	std::vector<perf_slot> slot;
};

struct perf_marg {
	perf_mjob *j;
	unsigned int idx;
};

/*
 * The timed part of one runner, in chunks: a runner preempted on an oversubscribed machine
 * (a lock holder, an rte_ring enqueuer between its reservation and its commit) can stall the
 * others for whole time slices, so every runner stops at the time limit and counts what it did.
 */
constexpr uint64_t kPerfChunk = 64;

void
perf_slot_run(perf_mjob *j, perf_slot &sl, perf_loop_res *out)
{
	const struct perf_peer *p = j->s->peer;
	uint64_t stop_at = rte_rdtsc() + j->limit, done = 0;

	*out = {};
	if (sl.role == ROLE_CONSUME) {
		/* Until the producer's count or its stop mark. */
		p->run_consume(j->s->ctx, j->n, j->ring, out);
		return;
	}
	while (done < j->n) {
		uint64_t c = std::min(kPerfChunk, j->n - done);
		perf_loop_res r = {};

		if (sl.role == ROLE_PAIRS)
			p->run_pairs(j->s->ctx, c, &r);
		else
			p->run_produce(j->s->ctx, c, j->ring, &r);
		out->ops += r.ops;
		out->failures += r.failures;
		done += c;
		if (r.ops < c && sl.role == ROLE_PRODUCE)
			break; /* it gave up and sent its stop mark */
		if (rte_rdtsc() > stop_at)
			break;
	}
	if (sl.role == ROLE_PRODUCE && done < j->n) {
		uint64_t v = UINT64_MAX; /* perf_loops<>::kPerfStop */

		while (rte_ring_sp_enqueue_elem(j->ring, &v, sizeof(v)) != 0)
			rte_pause();
	}
}

/* Warm-up as pairs on every runner (caches filled, quarantine in steady state), time-bound. */
void
perf_slot_warm(perf_mjob *j, perf_loop_res *warm)
{
	uint64_t stop_at = rte_rdtsc() + j->limit / 4;

	*warm = {};
	for (uint64_t done = 0; done < j->warm && rte_rdtsc() < stop_at; done += kPerfChunk) {
		perf_loop_res r = {};

		j->s->peer->run_pairs(j->s->ctx, kPerfChunk, &r);
		warm->failures += r.failures;
	}
}

void
perf_slot_body(perf_mjob *j, unsigned int idx)
{
	perf_slot &sl = j->slot[idx];
	perf_loop_res warm = {}, res = {};

	perf_slot_warm(j, &warm);
	j->ready.fetch_add(1, std::memory_order_acq_rel);
	while (!j->go.load(std::memory_order_acquire))
		rte_pause();
	uint64_t t0 = rte_rdtsc_precise();

	perf_slot_run(j, sl, &res);
	uint64_t t1 = rte_rdtsc_precise();

	if (j->fini_after && j->s->peer->lcore_fini != nullptr)
		j->s->peer->lcore_fini(j->s->ctx);
	sl.t0 = t0;
	sl.t1 = t1;
	sl.ops = res.ops;
	sl.fails = res.failures + warm.failures;
}

int
perf_lcore_entry(void *arg)
{
	auto *a = static_cast<perf_marg *>(arg);

	perf_slot_body(a->j, a->idx);
	return 0;
}

void *
perf_thread_entry(void *arg)
{
	auto *a = static_cast<perf_marg *>(arg);

	perf_slot_body(a->j, a->idx);
	return nullptr;
}

} // namespace

uint64_t perf_multi_limit_ms = 2000;

/* The job's parameters; in cross mode a producer, a consumer and the ring between them.
 * @return false if the ring cannot be made. */
static bool
perf_mjob_init(perf_mjob &j, perf_state *s, perf_multi_mode mode, unsigned int k, uint64_t n)
{
	j.s = s;
	j.n = n;
	j.warm = std::clamp<uint64_t>(n / 8, 1000, 20000);
	j.ring = nullptr;
	j.fini_after = mode == PM_THREADS;
	j.limit = perf_multi_limit_ms * rte_get_tsc_hz() / 1000;
	j.slot.assign(k, perf_slot{ROLE_PAIRS, 0, 0, 0, 0});
	if (mode != PM_CROSS)
		return true;
	j.slot[0].role = ROLE_PRODUCE;
	j.slot[1].role = ROLE_CONSUME;
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), "perf_x%u", perf_seq++);
	/* Small enough that the QPNs in flight stay a sliver of the range. */
	j.ring = rte_ring_create_elem(name, sizeof(uint64_t), 1024, SOCKET_ID_ANY,
				      RING_F_SP_ENQ | RING_F_SC_DEQ);
	return j.ring != nullptr;
}

/* The runners wait for the start line; the main lcore, when it is one of them, warms up and
 * runs its own slot (main_idx, else -1). */
static void
perf_mjob_start(perf_mjob &j, unsigned int want, int main_idx)
{
	if (main_idx >= 0) {
		/* The main lcore is a runner too: it warms up, then opens the start line. */
		perf_loop_res warm = {};

		perf_slot_warm(&j, &warm);
		j.ready.fetch_add(1, std::memory_order_acq_rel);
		j.slot[main_idx].fails = warm.failures;
	}
	/* Not a runner itself (threads): wait without taking a CPU from them. */
	while (j.ready.load(std::memory_order_acquire) < want)
		if (main_idx < 0)
			usleep(50);
		else
			rte_pause();
	j.go.store(true, std::memory_order_release);
	if (main_idx >= 0) {
		perf_slot &sl = j.slot[main_idx];
		perf_loop_res res = {};

		sl.t0 = rte_rdtsc_precise();
		perf_slot_run(&j, sl, &res);
		sl.t1 = rte_rdtsc_precise();
		sl.ops = res.ops;
		sl.fails += res.failures;
	}
}

/* The point's figures from the slots: pairs per second over the span of all runners, and each
 * slot's ns per pair. */
static double
perf_mjob_point(const perf_mjob &j, unsigned int k, perf_point *pt)
{
	uint64_t start = UINT64_MAX, end = 0, ops = 0, fails = 0;

	if (pt->slot_ns.size() < k)
		pt->slot_ns.resize(k);
	for (unsigned int i = 0; i < k; i++) {
		const perf_slot &sl = j.slot[i];

		start = std::min(start, sl.t0);
		end = std::max(end, sl.t1);
		/* A cross pair moves one QPN: count the consumer's frees, the pairs completed. */
		if (sl.role != ROLE_PRODUCE)
			ops += sl.ops;
		fails += sl.fails;
		pt->slot_ns[i].push_back(
			sl.ops != 0 ? perf_cycles_to_ns((double)(sl.t1 - sl.t0) / sl.ops) : 0);
	}
	double mops = end > start ?
			      (double)ops * (double)rte_get_tsc_hz() / (double)(end - start) / 1e6 :
			      0;

	pt->mops.push_back(mops);
	pt->failures += fails;
	return mops;
}

double
perf_run_multi(perf_state *s, perf_multi_mode mode, const std::vector<unsigned int> &lc, uint64_t n,
	       perf_point *pt)
{
	unsigned int k = (unsigned int)lc.size(), main_lc = rte_get_main_lcore();
	perf_mjob j;
	std::vector<perf_marg> args(k);
	std::vector<pthread_t> tids(k);
	std::vector<bool> started(k, false);
	int main_idx = -1;
	bool launch_failed = false;

	if (k == 0 || k > kPerfMaxSlots || (mode == PM_CROSS && k != 2))
		return -1;
	if (!perf_mjob_init(j, s, mode, k, n))
		return -1;
	for (unsigned int i = 0; i < k; i++) {
		args[i] = {&j, i};
		if (mode != PM_THREADS && lc[i] == main_lc) {
			main_idx = (int)i;
			continue;
		}
		if (mode == PM_THREADS)
			started[i] = pthread_create(&tids[i], nullptr, perf_thread_entry,
						    &args[i]) == 0;
		else
			started[i] = rte_eal_remote_launch(perf_lcore_entry, &args[i], lc[i]) == 0;
		if (!started[i]) {
			launch_failed = true;
			break;
		}
	}
	if (!launch_failed)
		perf_mjob_start(j, k, main_idx);
	else /* Let the runners already waiting go, so that they can be joined. */
		j.go.store(true, std::memory_order_release);
	for (unsigned int i = 0; i < k; i++) {
		if (!started[i])
			continue;
		if (mode == PM_THREADS)
			pthread_join(tids[i], nullptr);
		else
			rte_eal_wait_lcore(lc[i]);
	}
	rte_ring_free(j.ring);
	if (launch_failed)
		return -1;
	return perf_mjob_point(j, k, pt);
}
