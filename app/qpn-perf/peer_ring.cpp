/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "ring": a multi-producer/multi-consumer rte_ring of 4-byte QPNs (the rte_ring_*_elem
 * API). It is the simplest shared lock-free FIFO in DPDK; a FIFO also spreads reuse over the
 * whole range, which is what a timewait-aware allocator without a clock would do.
 */

#include <cerrno>
#include <cstdio>

#include <rte_errno.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "perf_loop.h"

namespace {

struct ring_ops {
	using ctx = struct rte_ring;
	using token = uint32_t;

	static int alloc(ctx *r, token *t) { return rte_ring_dequeue_elem(r, t, sizeof(*t)); }
	static int free(ctx *r, token t) { return rte_ring_enqueue_elem(r, &t, sizeof(t)); }
	static int alloc_bulk(ctx *r, token *t, unsigned int n)
	{
		return rte_ring_dequeue_bulk_elem(r, t, sizeof(*t), n, nullptr) == n ? 0 : -ENOENT;
	}
	static int free_bulk(ctx *r, const token *t, unsigned int n)
	{
		return rte_ring_enqueue_bulk_elem(r, t, sizeof(*t), n, nullptr) == n ? 0 : -ENOBUFS;
	}
	static uint32_t qpn(token t) { return t; }
};

int
ring_setup(const struct perf_cfg *cfg, void **ctx)
{
	char name[RTE_RING_NAMESIZE];
	struct rte_ring *r;

	snprintf(name, sizeof(name), "perf_rg%u", cfg->seq);
	/* RING_F_EXACT_SZ: room for exactly the range, like the other peers. */
	r = rte_ring_create_elem(name, sizeof(uint32_t), cfg->range, SOCKET_ID_ANY,
				 RING_F_EXACT_SZ);
	if (r == nullptr)
		return -rte_errno;
	for (uint32_t i = 0; i < cfg->range; i++) {
		uint32_t q = cfg->first + i;

		if (rte_ring_enqueue_elem(r, &q, sizeof(q)) != 0) {
			rte_ring_free(r);
			return -ENOBUFS;
		}
	}
	*ctx = r;
	return 0;
}

void
ring_teardown(void *p)
{
	rte_ring_free(static_cast<struct rte_ring *>(p));
}

} // namespace

const struct perf_peer perf_peer_ring = {
	.name = "ring",
	.desc = "rte_ring MP/MC of uint32 QPNs (elem API), FIFO reuse",
	.flags = PERF_F_SCALING | PERF_F_HEAP_MEM,
	.setup = ring_setup,
	PERF_PEER_LOOPS(ring_ops),
	.lcore_fini = nullptr,
	.footprint = nullptr,
	.stats_json = nullptr,
	.teardown = ring_teardown,
};
