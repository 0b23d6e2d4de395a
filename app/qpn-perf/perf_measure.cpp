/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's measurements: the heap bytes per QPN, the self-check of every peer, one timed run,
 * calibration and running a peer hook on every lcore.
 */
#include "perf_app.h"

unsigned int perf_seq;
double perf_load_at_start = -1;

/* Bytes allocated in the DPDK heaps of all sockets (memzones included). */
uint64_t
perf_heap_allocated()
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats st;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
			sum += st.heap_allocsz_bytes;
	}
	return sum;
}

struct perf_cfg
perf_make_cfg(const struct perf_opts *o, uint32_t range)
{
	struct perf_cfg cfg = {};

	cfg.first = kPerfFirstQpn;
	cfg.range = range;
	cfg.cache = o->cache;
	cfg.quarantine_ns = o->quarantine_us * 1000;
	cfg.burst = o->burst;
	cfg.block_log = o->block_log;
	cfg.seq = perf_seq++;
	return cfg;
}

/*
 * Memory: for peers that live in the DPDK heap, the heap grows by fixed + per_qpn * range at
 * setup. Setting up a second instance at half the range separates the two terms.
 */
void
perf_measure_memory(const struct perf_opts *o, perf_state *s, uint64_t full_delta)
{
	if (s->peer->flags & PERF_F_HEAP_MEM) {
		struct perf_cfg half = perf_make_cfg(o, s->range / 2);
		uint64_t before = perf_heap_allocated();
		void *ctx = nullptr;

		if (s->peer->setup(&half, &ctx) != 0)
			return;
		uint64_t after = perf_heap_allocated();
		uint64_t half_delta = after > before ? after - before : 0;

		s->peer->teardown(ctx);
		s->mem.valid = true;
		s->mem.method = "dpdk-heap-delta";
		s->mem.total_bytes = full_delta;
		s->mem.bytes_per_qpn = ((double)full_delta - (double)half_delta) /
				       (double)(s->range - s->range / 2);
		s->mem.fixed_bytes = (double)full_delta - s->mem.bytes_per_qpn * s->range;
	} else if (s->peer->footprint != nullptr) {
		/*
		 * Self-accounted, called after the timed runs: the most the peer held (its memory
		 * grows with use), all of it counted per QPN.
		 */
		s->mem.valid = true;
		s->mem.method = "self-accounted";
		s->mem.total_bytes = s->peer->footprint(s->ctx);
		s->mem.bytes_per_qpn = (double)s->mem.total_bytes / s->range;
		s->mem.fixed_bytes = 0;
	}
}

/*
 * Untimed check through the generic hooks: a batch of allocations must be distinct and in the
 * range, every free must succeed, and a peer that claims to check must refuse a double free.
 */
bool
perf_self_check(const struct perf_opts *, perf_state *s)
{
	unsigned int k = std::min<uint32_t>(1024, s->range / (2 * rte_lcore_count()));
	std::vector<uint64_t> tokens(k);
	std::vector<uint8_t> seen(s->range);
	std::set<uint32_t> own;
	uint32_t qpn;
	uint64_t tok;
	int ret;

	for (unsigned int i = 0; i < k; i++) {
		ret = s->peer->alloc(s->ctx, &qpn, &tokens[i]);
		if (ret != 0) {
			s->error = "self-check: alloc " + std::to_string(i) +
				   " failed: " + strerror(-ret);
			return false;
		}
		if (s->peer->flags & PERF_F_OWN_RANGE) {
			/* A device's own ranges: distinct and 24-bit is all that can be asked. */
			if (qpn > 0xFFFFFF || !own.insert(qpn).second) {
				s->error = "self-check: QPN " + std::to_string(qpn) +
					   " not 24-bit or handed out twice";
				return false;
			}
			continue;
		}
		if (qpn < kPerfFirstQpn || qpn - kPerfFirstQpn >= s->range ||
		    seen[qpn - kPerfFirstQpn]) {
			s->error = "self-check: QPN " + std::to_string(qpn) +
				   " out of range or handed out twice";
			return false;
		}
		seen[qpn - kPerfFirstQpn] = 1;
	}
	for (unsigned int i = 0; i < k; i++) {
		ret = s->peer->free(s->ctx, tokens[i]);
		if (ret != 0) {
			s->error = std::string("self-check: free failed: ") + strerror(-ret);
			return false;
		}
	}
	if (s->peer->flags & PERF_F_CHECKS) {
		/* Free the last QPN again: it must be refused and change nothing. */
		ret = s->peer->free(s->ctx, tokens[k - 1]);
		s->refuses_double_free = ret == -EINVAL;
		if (!s->refuses_double_free) {
			s->error = "self-check: a double free was not refused with -EINVAL";
			return false;
		}
		/* And the peer still works. */
		if (s->peer->alloc(s->ctx, &qpn, &tok) != 0 || s->peer->free(s->ctx, tok) != 0) {
			s->error = "self-check: alloc/free failed after a refused double free";
			return false;
		}
	}
	return true;
}

/*
 * The order a peer hands out its QPNs in, untimed: what the next loop of pairs will walk
 * through. Ours keeps one 8-byte slot word per QPN, so QPNs 512 apart are a 4 KB page of slots
 * apart; a pool whose past scattered its free batches changes page far
 * more often than the range's size divided by 512. The QPNs are freed at once (with a
 * quarantine they go back to it, as after any hold).
 */
void
perf_order(perf_state *s)
{
	uint32_t k = std::min<uint32_t>(kPerfOrderQpns, s->range / 4);
	std::vector<uint64_t> tokens;
	uint32_t prev = 0, adjacent = 0, pages = 0, got = 0;

	tokens.reserve(k);
	for (uint32_t i = 0; i < k; i++) {
		uint32_t qpn;
		uint64_t tok;

		if (s->peer->alloc(s->ctx, &qpn, &tok) != 0)
			break;
		tokens.push_back(tok);
		if (got++ != 0) {
			adjacent += static_cast<unsigned int>(qpn == prev + 1 || qpn + 1 == prev);
			pages += static_cast<unsigned int>((qpn >> 9) != (prev >> 9));
		}
		prev = qpn;
	}
	for (uint64_t tok : tokens)
		s->peer->free(s->ctx, tok);
	s->order_qpns = got;
	s->order_adjacent_pct.push_back(got > 1 ? 100.0 * adjacent / (got - 1) : 0);
	s->order_pages.push_back(pages);
}

void
perf_run_once(const struct perf_opts *o, perf_state *s, perf_phase ph, uint64_t n,
	      perf_loop_res *res)
{
	*res = {};
	switch (ph) {
	case PH_PAIR:
	case PH_AGED:
		s->peer->run_pairs(s->ctx, n, res);
		break;
	case PH_BURST:
		s->peer->run_burst(s->ctx, n, o->burst, res);
		break;
	case PH_HOLD:
		s->peer->run_hold(s->ctx, n, std::min<uint32_t>(o->hold, s->range / 4), res);
		break;
	default:
		s->peer->run_storm(s->ctx, n, o->storm, o->idle_us, res);
		break;
	}
}

/* Wall time of the loop in TSC cycles, or the loop's own figure when it times itself. */
perf_timed
perf_time_once(const struct perf_opts *o, perf_state *s, perf_phase ph, uint64_t n)
{
	perf_timed t = {};
	uint64_t t0 = rte_rdtsc_precise();

	perf_run_once(o, s, ph, n, &t.res);
	t.cycles = rte_rdtsc_precise() - t0;
	if (t.res.cycles != 0)
		t.cycles = t.res.cycles;
	return t;
}

double
perf_cycles_to_ns(double cycles)
{
	return cycles * 1e9 / (double)rte_get_tsc_hz();
}

/* Ops per timed run so that one run takes about the budget; at least 1000 ops. */
uint64_t
perf_calibrate_n(const struct perf_opts *o, double ns_per_op)
{
	double n = (double)o->budget_ms * 1e6 / std::max(ns_per_op, 0.1);
	uint64_t k = (uint64_t)std::min(n, (double)o->iterations);

	return std::max<uint64_t>(k, 1000);
}

/*
 * Run a peer hook on every lcore (main included), one after the other. The launch and the wait
 * order the hook with what the main lcore does before and after, but inside DPDK, where
 * ThreadSanitizer cannot see it (config/tsan.supp): the two atomics say the same in a way it can
 * (a hook flushing a worker's cache, then the main lcore freeing the pool, is not a race).
 */
struct perf_hook_job {
	void (*fn)(void *);
	void *ctx;
	std::atomic<unsigned> go{0};
	std::atomic<unsigned> done{0};
};

static int
perf_hook_worker(void *arg)
{
	auto *h = static_cast<perf_hook_job *>(arg);

	(void)h->go.load(std::memory_order_acquire);
	h->fn(h->ctx);
	h->done.fetch_add(1, std::memory_order_release);
	return 0;
}

void
perf_on_all_lcores(void (*fn)(void *), void *ctx)
{
	perf_hook_job h;
	unsigned int lcore;

	h.fn = fn;
	h.ctx = ctx;
	fn(ctx);
	RTE_LCORE_FOREACH_WORKER(lcore)
	{
		h.go.fetch_add(1, std::memory_order_release);
		if (rte_eal_remote_launch(perf_hook_worker, &h, lcore) == 0) {
			rte_eal_wait_lcore(lcore);
			(void)h.done.load(std::memory_order_acquire);
		}
	}
}
