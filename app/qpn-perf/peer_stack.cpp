/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "stack": DPDK's lock-free rte_stack (RTE_STACK_F_LF, 128-bit CAS on a list head) of
 * pointer-sized entries, each the QPN itself cast to a pointer (no element memory is needed).
 * It is the closest DPDK relative of our shared pool: lock-free, LIFO, no per-lcore cache.
 */

#include <cerrno>
#include <cstdio>

#include <rte_errno.h>
#include <rte_stack.h>

#include "perf_loop.h"

namespace {

struct stack_ops {
	using ctx = struct rte_stack;
	using token = void *;

	static int alloc(ctx *s, token *t) { return rte_stack_pop(s, t, 1) == 1 ? 0 : -ENOENT; }
	static int free(ctx *s, token t) { return rte_stack_push(s, &t, 1) == 1 ? 0 : -ENOBUFS; }
	static int alloc_bulk(ctx *s, token *t, unsigned int n)
	{
		return rte_stack_pop(s, t, n) == n ? 0 : -ENOENT;
	}
	static int free_bulk(ctx *s, const token *t, unsigned int n)
	{
		return rte_stack_push(s, t, n) == n ? 0 : -ENOBUFS;
	}
	static uint32_t qpn(token t) { return (uint32_t)(uintptr_t)t; }
};

int
stack_setup(const struct perf_cfg *cfg, void **ctx)
{
	char name[RTE_STACK_NAMESIZE];
	struct rte_stack *s;

	snprintf(name, sizeof(name), "perf_st%u", cfg->seq);
	s = rte_stack_create(name, cfg->range, SOCKET_ID_ANY, RTE_STACK_F_LF);
	if (s == nullptr)
		return -rte_errno;
	/* Highest first, so the first pops hand out the lowest QPNs. */
	for (uint32_t i = cfg->range; i-- > 0;) {
		void *e = (void *)(uintptr_t)(cfg->first + i);

		if (rte_stack_push(s, &e, 1) != 1) {
			rte_stack_free(s);
			return -ENOBUFS;
		}
	}
	*ctx = s;
	return 0;
}

void
stack_teardown(void *p)
{
	rte_stack_free(static_cast<struct rte_stack *>(p));
}

} // namespace

const struct perf_peer perf_peer_stack = {
	.name = "stack",
	.desc = "rte_stack lock-free (RTE_STACK_F_LF) of QPNs as pointers, LIFO",
	.flags = PERF_F_SCALING | PERF_F_HEAP_MEM,
	.setup = stack_setup,
	PERF_PEER_LOOPS(stack_ops),
	.lcore_fini = nullptr,
	.footprint = nullptr,
	.stats_json = nullptr,
	.teardown = stack_teardown,
};
