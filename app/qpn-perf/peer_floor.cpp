/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "floor": a per-lcore array used as a stack of QPNs. Nothing shared, nothing checked: the
 * least any allocator can cost, the yardstick for "ours within 3x of the floor" (benchmark guide).
 *
 * Honesty: pop and push are noinline functions, so each operation is a real call (as a call
 * into our shared library is) and the compiler cannot cancel a pop against the following push
 * of the same value; the loop's perf_sink() makes the QPN a live value.
 *
 * Peer "floor-inl": the same array with pop and push inlined into the loop, the floor for an
 * allocator whose fast path is inline in its header (as rte_mempool's is). The slot index and
 * the array go through memory (volatile top), so the pop and the push cannot fold into nothing.
 */

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <rte_common.h>
#include <rte_lcore.h>

#include "perf_loop.h"

namespace {

struct floor_lcore {
	uint32_t *slots;
	uint32_t top;
	uint32_t cap;
} __rte_cache_aligned;

struct floor_ctx {
	struct floor_lcore lc[RTE_MAX_LCORE];
	uint64_t bytes;
};

/* Slot of the caller; a non-EAL thread has none and shares nothing with us. */
inline struct floor_lcore *
floor_me(struct floor_ctx *c)
{
	unsigned int id = rte_lcore_id();

	return id < RTE_MAX_LCORE ? &c->lc[id] : nullptr;
}

__attribute__((noinline)) int
floor_pop(struct floor_lcore *l, uint32_t *qpn)
{
	if (unlikely(l->top == 0))
		return -ENOSPC;
	*qpn = l->slots[--l->top];
	return 0;
}

__attribute__((noinline)) int
floor_push(struct floor_lcore *l, uint32_t qpn)
{
	if (unlikely(l->top == l->cap))
		return -ENOSPC;
	l->slots[l->top++] = qpn;
	return 0;
}

__attribute__((noinline)) int
floor_pop_bulk(struct floor_lcore *l, uint32_t *qpns, unsigned int n)
{
	if (unlikely(l->top < n))
		return -ENOSPC;
	l->top -= n;
	memcpy(qpns, &l->slots[l->top], n * sizeof(*qpns));
	return 0;
}

__attribute__((noinline)) int
floor_push_bulk(struct floor_lcore *l, const uint32_t *qpns, unsigned int n)
{
	if (unlikely(l->cap - l->top < n))
		return -ENOSPC;
	memcpy(&l->slots[l->top], qpns, n * sizeof(*qpns));
	l->top += n;
	return 0;
}

struct floor_ops {
	using ctx = floor_ctx;
	using token = uint32_t;

	static int alloc(ctx *c, token *t)
	{
		struct floor_lcore *l = floor_me(c);

		return l != nullptr ? floor_pop(l, t) : -EINVAL;
	}
	static int free(ctx *c, token t)
	{
		struct floor_lcore *l = floor_me(c);

		return l != nullptr ? floor_push(l, t) : -EINVAL;
	}
	static int alloc_bulk(ctx *c, token *t, unsigned int n)
	{
		struct floor_lcore *l = floor_me(c);

		return l != nullptr ? floor_pop_bulk(l, t, n) : -EINVAL;
	}
	static int free_bulk(ctx *c, const token *t, unsigned int n)
	{
		struct floor_lcore *l = floor_me(c);

		return l != nullptr ? floor_push_bulk(l, t, n) : -EINVAL;
	}
	static uint32_t qpn(token t) { return t; }
};

/* Inline floor: the lcore's stack touched in place; `top` re-read and written every time. */
struct floor_inl_ops {
	using ctx = floor_ctx;
	using token = uint32_t;

	static inline int alloc(ctx *c, token *t)
	{
		struct floor_lcore *l = floor_me(c);
		volatile uint32_t *top = l != nullptr ? &l->top : nullptr;

		if (unlikely(top == nullptr || *top == 0))
			return -ENOSPC;
		*top = *top - 1;
		*t = l->slots[*top];
		return 0;
	}
	static inline int free(ctx *c, token t)
	{
		struct floor_lcore *l = floor_me(c);
		volatile uint32_t *top = l != nullptr ? &l->top : nullptr;

		if (unlikely(top == nullptr || *top == l->cap))
			return -ENOSPC;
		l->slots[*top] = t;
		*top = *top + 1;
		return 0;
	}
	static inline int alloc_bulk(ctx *c, token *t, unsigned int n)
	{
		struct floor_lcore *l = floor_me(c);

		if (unlikely(l == nullptr || l->top < n))
			return -ENOSPC;
		l->top -= n;
		memcpy(t, &l->slots[l->top], n * sizeof(*t));
		return 0;
	}
	static inline int free_bulk(ctx *c, const token *t, unsigned int n)
	{
		struct floor_lcore *l = floor_me(c);

		if (unlikely(l == nullptr || l->cap - l->top < n))
			return -ENOSPC;
		memcpy(&l->slots[l->top], t, n * sizeof(*t));
		l->top += n;
		return 0;
	}
	static uint32_t qpn(token t) { return t; }
};

void
floor_teardown(void *p)
{
	struct floor_ctx *c = static_cast<struct floor_ctx *>(p);

	if (c == nullptr)
		return;
	for (auto &l : c->lc)
		::free(l.slots);
	::free(c);
}

/*
 * Each enabled lcore gets an equal slice of the range (so the lcores never share a QPN), in
 * an array as large as the slice.
 */
int
floor_setup(const struct perf_cfg *cfg, void **ctx)
{
	struct floor_ctx *c;
	unsigned int lcore, nb = rte_lcore_count(), i = 0;

	c = static_cast<struct floor_ctx *>(
		aligned_alloc(RTE_CACHE_LINE_SIZE,
			      RTE_ALIGN_CEIL(sizeof(*c), RTE_CACHE_LINE_SIZE)));
	if (c == nullptr)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->bytes = sizeof(*c);
	RTE_LCORE_FOREACH(lcore)
	{
		uint32_t slice = cfg->range / nb, first = cfg->first + i * slice;
		struct floor_lcore *l = &c->lc[lcore];

		l->slots = static_cast<uint32_t *>(calloc(slice, sizeof(uint32_t)));
		if (l->slots == nullptr) {
			floor_teardown(c);
			return -ENOMEM;
		}
		c->bytes += (uint64_t)slice * sizeof(uint32_t);
		l->cap = slice;
		/* Pushed highest first so that the first pops hand out the lowest QPNs. */
		for (uint32_t k = 0; k < slice; k++)
			l->slots[l->top++] = first + slice - 1 - k;
		i++;
	}
	*ctx = c;
	return 0;
}

uint64_t
floor_footprint(void *p)
{
	return static_cast<struct floor_ctx *>(p)->bytes;
}

} // namespace

const struct perf_peer perf_peer_floor = {
	.name = "floor",
	.desc = "floor, out-of-line: per-lcore array push/pop through noinline calls",
	.flags = PERF_F_SCALING | PERF_F_LOCAL | PERF_F_EAL_ONLY,
	.setup = floor_setup,
	PERF_PEER_LOOPS(floor_ops),
	.lcore_fini = nullptr,
	.footprint = floor_footprint,
	.stats_json = nullptr,
	.teardown = floor_teardown,
};

const struct perf_peer perf_peer_floor_inl = {
	.name = "floor-inl",
	.desc = "floor, inline: per-lcore array push/pop inlined into the loop",
	.flags = PERF_F_SCALING | PERF_F_LOCAL | PERF_F_EAL_ONLY,
	.setup = floor_setup,
	PERF_PEER_LOOPS(floor_inl_ops),
	.lcore_fini = nullptr,
	.footprint = floor_footprint,
	.stats_json = nullptr,
	.teardown = floor_teardown,
};
