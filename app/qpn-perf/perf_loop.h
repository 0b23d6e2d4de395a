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
 * called through the PLT for a shared library, as ours is) and every peer pays the same loop.
 */

#include <stdint.h>
#include <type_traits>

#include <rte_branch_prediction.h>

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
	.run_pairs = perf_loops<Ops>::pairs, .run_burst = perf_loops<Ops>::burst

#endif /* QPN_PERF_LOOP_H */
