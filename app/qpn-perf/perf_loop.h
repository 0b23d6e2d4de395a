/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_PERF_LOOP_H
#define QPN_PERF_LOOP_H

/**
 * @file
 * The timed loops, one template for every peer.
 *
 * A peer describes its operations as a struct `Ops` with:
 *   - `using ctx = ...;` its context type, `using token = ...;` what alloc hands back (a QPN,
 *     or a pointer for rte_mempool / rte_stack whose elements carry the QPN);
 *   - `static int alloc(ctx *, token *)`, `static int free(ctx *, token)`,
 *     `static int alloc_bulk(ctx *, token *, unsigned)`, `static int free_bulk(ctx *,
 *     const token *, unsigned)` returning 0 or a negative errno;
 *   - `static uint32_t qpn(token)`.
 * PERF_PEER_LOOPS(Ops) instantiates the loops in the peer's own translation unit, so the
 * operations are inlined exactly as an application would get them from the peer's header (or
 * called through the PLT for a shared library's out-of-line part) and every peer pays the same
 * loop.
 */

#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <unistd.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "perf.h"

/*
 * Consume a value so that the compiler must produce it, without touching memory: an empty asm
 * that claims to read it. It costs nothing at run time and is the same for every peer.
 */
static inline void
perf_sink(uint32_t v)
{
	asm volatile("" : : "r"(v));
}

template <class Ops> struct perf_loops {
	using ctx_t = typename Ops::ctx;
	using tok_t = typename Ops::token;

	static uint64_t to_u64(tok_t t)
	{
		if constexpr (std::is_pointer_v<tok_t>)
			return (uint64_t)(uintptr_t)t;
		else
			return (uint64_t)t;
	}

	static tok_t from_u64(uint64_t v)
	{
		if constexpr (std::is_pointer_v<tok_t>)
			return reinterpret_cast<tok_t>((uintptr_t)v);
		else
			return (tok_t)v;
	}

	/* One alloc+free pair per iteration: the cost of a connection's QPN, steady state. */
	static void pairs(void *c, uint64_t n, struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		uint64_t fails = 0;

		for (uint64_t i = 0; i < n; i++) {
			tok_t t;

			if (unlikely(Ops::alloc(ctx, &t) != 0)) {
				fails++;
				continue;
			}
			perf_sink(Ops::qpn(t));
			if (unlikely(Ops::free(ctx, t) != 0))
				fails++;
		}
		res->ops = n - fails;
		res->failures = fails;
	}

	/* The same with bulks of b: n QPNs in total, each allocated and freed once. */
	static void burst(void *c, uint64_t n, unsigned int b, struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		tok_t t[PERF_MAX_BURST];
		uint64_t fails = 0, done = 0;

		if (b == 0 || b > PERF_MAX_BURST) {
			res->ops = 0;
			res->failures = n;
			return;
		}
		for (; done + b <= n; done += b) {
			if (unlikely(Ops::alloc_bulk(ctx, t, b) != 0)) {
				fails += b;
				continue;
			}
			perf_sink(Ops::qpn(t[0]) ^ Ops::qpn(t[b - 1]));
			if (unlikely(Ops::free_bulk(ctx, t, b) != 0))
				fails += b;
		}
		res->ops = done - fails;
		res->failures = fails;
	}

	/*
	 * Hold-and-release: k QPNs stay live (connections that last), each step takes a new one
	 * and frees the oldest, so a QPN comes back k steps after it left, not at once.
	 */
	static void hold(void *c, uint64_t n, unsigned int k, struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		tok_t *live = static_cast<tok_t *>(calloc(k ? k : 1, sizeof(tok_t)));
		uint64_t fails = 0, i;
		unsigned int have = 0, head = 0;

		if (live == nullptr || k == 0) {
			::free(live);
			*res = {0, n, 0};
			return;
		}
		for (; have < k; have++)
			if (Ops::alloc(ctx, &live[have]) != 0)
				break;
		for (i = 0; i < n && have > 0; i++) {
			tok_t t;

			if (unlikely(Ops::alloc(ctx, &t) != 0)) {
				fails++;
				continue;
			}
			perf_sink(Ops::qpn(t));
			if (unlikely(Ops::free(ctx, live[head]) != 0))
				fails++;
			live[head] = t;
			head = head + 1 == have ? 0 : head + 1;
		}
		for (unsigned int j = 0; j < have; j++)
			Ops::free(ctx, live[j]);
		::free(live);
		res->ops = i - fails;
		res->failures = fails + (n - i);
		res->cycles = 0;
	}

	/*
	 * Reconnect storm: the lcore sleeps idle_us (its caches go cold, other work runs), then
	 * s connections come at once (s allocs) and go (s frees). Only the storms are timed.
	 */
	static void storm(void *c, uint64_t n, unsigned int s, unsigned int idle_us,
			  struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		tok_t *t = static_cast<tok_t *>(calloc(s ? s : 1, sizeof(tok_t)));
		uint64_t fails = 0, done = 0, cycles = 0;

		if (t == nullptr || s == 0) {
			::free(t);
			*res = {0, n, 0};
			return;
		}
		for (; done < n; done += s) {
			unsigned int got = 0;

			if (idle_us > 0)
				usleep(idle_us);
			uint64_t t0 = rte_rdtsc_precise();

			for (unsigned int j = 0; j < s; j++)
				if (likely(Ops::alloc(ctx, &t[got]) == 0))
					got++;
			for (unsigned int j = 0; j < got; j++)
				if (unlikely(Ops::free(ctx, t[j]) != 0))
					fails++;
			cycles += rte_rdtsc_precise() - t0;
			fails += s - got;
		}
		::free(t);
		res->ops = done - fails;
		res->failures = fails;
		res->cycles = cycles;
	}

	/* Each operation timed alone: the distribution, not the mean (rdtsc's cost included). */
	static void lat(void *c, uint64_t n, struct perf_hist *ha, struct perf_hist *hf,
			struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		uint64_t fails = 0;

		for (uint64_t i = 0; i < n; i++) {
			tok_t t;
			uint64_t t0 = rte_rdtsc();
			int rc = Ops::alloc(ctx, &t);
			uint64_t t1 = rte_rdtsc();

			if (unlikely(rc != 0)) {
				fails++;
				continue;
			}
			perf_sink(Ops::qpn(t));
			perf_hist_add(ha, t1 - t0);
			t0 = rte_rdtsc();
			rc = Ops::free(ctx, t);
			t1 = rte_rdtsc();
			perf_hist_add(hf, t1 - t0);
			if (unlikely(rc != 0))
				fails++;
		}
		res->ops = n - fails;
		res->failures = fails;
		res->cycles = 0;
	}

	/*
	 * Cross-lcore producer: tokens go to the consumer through an SPSC ring of 8-byte slots.
	 * A producer that cannot allocate for long (the consumer's cache holds the range) gives
	 * up and sends kPerfStop so that the consumer does not wait for the rest.
	 */
	static constexpr uint64_t kPerfStop = UINT64_MAX;

	static void produce(void *c, uint64_t n, struct rte_ring *r, struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		uint64_t fails = 0, i;

		for (i = 0; i < n; i++) {
			tok_t t;
			uint64_t v;

			while (unlikely(Ops::alloc(ctx, &t) != 0) && fails < 10000000) {
				fails++;
				rte_pause();
			}
			if (fails >= 10000000)
				break;
			v = to_u64(t);
			while (rte_ring_sp_enqueue_elem(r, &v, sizeof(v)) != 0)
				rte_pause();
		}
		if (i < n) {
			uint64_t v = kPerfStop;

			while (rte_ring_sp_enqueue_elem(r, &v, sizeof(v)) != 0)
				rte_pause();
		}
		res->ops = i;
		res->failures = fails;
		res->cycles = 0;
	}

	static void consume(void *c, uint64_t n, struct rte_ring *r, struct perf_loop_res *res)
	{
		ctx_t *ctx = static_cast<ctx_t *>(c);
		uint64_t fails = 0, i;

		for (i = 0; i < n; i++) {
			uint64_t v;

			while (rte_ring_sc_dequeue_elem(r, &v, sizeof(v)) != 0)
				rte_pause();
			if (unlikely(v == kPerfStop))
				break;
			if (unlikely(Ops::free(ctx, from_u64(v)) != 0))
				fails++;
		}
		/* What the producer did not send is its own count, not a failure here. */
		res->ops = i - fails;
		res->failures = fails;
		res->cycles = 0;
	}

	static int alloc(void *c, uint32_t *qpn, uint64_t *token)
	{
		tok_t t;
		int ret = Ops::alloc(static_cast<ctx_t *>(c), &t);

		if (ret != 0)
			return ret;
		*qpn = Ops::qpn(t);
		*token = to_u64(t);
		return 0;
	}

	static int free(void *c, uint64_t token)
	{
		return Ops::free(static_cast<ctx_t *>(c), from_u64(token));
	}
};

/** Fill the generic and timed hooks of a struct perf_peer initialiser from Ops. */
#define PERF_PEER_LOOPS(Ops)                                                                       \
	.alloc = perf_loops<Ops>::alloc, .free = perf_loops<Ops>::free,                            \
	.run_pairs = perf_loops<Ops>::pairs, .run_burst = perf_loops<Ops>::burst,                  \
	.run_hold = perf_loops<Ops>::hold, .run_storm = perf_loops<Ops>::storm,                    \
	.run_lat = perf_loops<Ops>::lat, .run_produce = perf_loops<Ops>::produce,                  \
	.run_consume = perf_loops<Ops>::consume

#endif /* QPN_PERF_LOOP_H */
