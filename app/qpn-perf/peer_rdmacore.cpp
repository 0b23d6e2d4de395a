/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "rdmacore": a model of rdma-core's mlx5dv_reserved_qpn_alloc()/_dealloc(), written
 * from the facts in BRIEF §2 (not from its code):
 *   - one pthread mutex per device context, held across the whole operation;
 *   - QPNs come from blocks of 2^g reserved from the firmware; alloc takes the next QPN of the
 *     newest block with a forward-only cursor and reserves a new block when that one is used up;
 *   - dealloc scans the list of blocks linearly for the QPN's block, refuses a QPN that is not
 *     handed out (EINVAL), and destroys a block once every one of its QPNs was handed out and
 *     returned;
 *   - no per-thread cache, no bulk call (a burst is a loop of single calls), no timewait delay.
 * The firmware command (CREATE/DESTROY_GENERAL_OBJECT) is modelled as taking a free block slot
 * of the range, i.e. as free of cost: the model is a lower bound of the real library's cost,
 * which adds a firmware round trip every 2^g allocations.
 */

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <pthread.h>

#include <rte_common.h>

#include "perf_loop.h"
#include "json_writer.h"

namespace {

struct rc_block {
	struct rc_block *next;
	uint32_t base;       /* first QPN */
	uint32_t slot;       /* index of the block in the range ("firmware object") */
	uint32_t next_avail; /* forward-only cursor */
	uint32_t nb_freed;   /* QPNs returned */
	uint64_t used[];     /* bit set: handed out and not yet returned */
};

struct rc_ctx {
	pthread_mutex_t lock;
	struct rc_block *blocks; /* oldest first: new blocks are appended */
	struct rc_block *newest; /* where alloc takes QPNs; NULL when a new block is needed */
	uint32_t first, log, size, nb_slots, slot_cursor;
	uint8_t *slot_used; /* the "firmware": which blocks of the range are reserved */
	uint64_t live_bytes, peak_bytes;
	uint64_t created, destroyed, max_scan;
};

inline size_t
rc_block_bytes(const struct rc_ctx *c)
{
	return sizeof(struct rc_block) + (c->size + 63) / 64 * sizeof(uint64_t);
}

/* "Firmware" reservation of 2^g QPNs; caller holds the lock, as rdma-core does. */
struct rc_block *
rc_block_create(struct rc_ctx *c)
{
	struct rc_block *b, **pp;
	uint32_t s = UINT32_MAX;

	for (uint32_t k = 0; k < c->nb_slots; k++) {
		uint32_t i = (c->slot_cursor + k) % c->nb_slots;

		if (!c->slot_used[i]) {
			s = i;
			break;
		}
	}
	if (s == UINT32_MAX)
		return nullptr;
	b = static_cast<struct rc_block *>(calloc(1, rc_block_bytes(c)));
	if (b == nullptr)
		return nullptr;
	c->slot_used[s] = 1;
	c->slot_cursor = (s + 1) % c->nb_slots;
	b->slot = s;
	b->base = c->first + (s << c->log);
	/* Append: the list is in creation order. */
	pp = &c->blocks;
	while (*pp != nullptr)
		pp = &(*pp)->next;
	*pp = b;
	c->live_bytes += rc_block_bytes(c);
	c->peak_bytes = RTE_MAX(c->peak_bytes, c->live_bytes);
	c->created++;
	return b;
}

int
rc_alloc(struct rc_ctx *c, uint32_t *qpn)
{
	struct rc_block *b;
	uint32_t i;

	pthread_mutex_lock(&c->lock);
	if (c->newest == nullptr || c->newest->next_avail == c->size) {
		c->newest = rc_block_create(c);
		if (c->newest == nullptr) {
			pthread_mutex_unlock(&c->lock);
			return -ENOMEM;
		}
	}
	b = c->newest;
	i = b->next_avail++;
	b->used[i / 64] |= UINT64_C(1) << (i % 64);
	*qpn = b->base + i;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int
rc_dealloc(struct rc_ctx *c, uint32_t qpn)
{
	struct rc_block **pp;
	uint64_t scan = 0;
	int ret = -EINVAL;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->blocks; *pp != nullptr; pp = &(*pp)->next) {
		struct rc_block *b = *pp;
		uint32_t i = qpn - b->base; /* wraps when below: caught by the bound */
		uint64_t bit = UINT64_C(1) << (i % 64);

		scan++;
		if (i >= c->size)
			continue;
		if (!(b->used[i / 64] & bit))
			break; /* not handed out: double free or never allocated */
		b->used[i / 64] &= ~bit;
		b->nb_freed++;
		ret = 0;
		if (b->nb_freed == c->size) {
			/* Every QPN was handed out and returned: destroy the object. */
			*pp = b->next;
			if (c->newest == b)
				c->newest = nullptr;
			c->slot_used[b->slot] = 0;
			c->live_bytes -= rc_block_bytes(c);
			c->destroyed++;
			::free(b);
		}
		break;
	}
	if (scan > c->max_scan)
		c->max_scan = scan;
	pthread_mutex_unlock(&c->lock);
	return ret;
}

struct rc_ops {
	using ctx = rc_ctx;
	using token = uint32_t;

	static int alloc(ctx *c, token *t) { return rc_alloc(c, t); }
	static int free(ctx *c, token t) { return rc_dealloc(c, t); }
	static int alloc_bulk(ctx *c, token *t, unsigned int n)
	{
		for (unsigned int i = 0; i < n; i++) {
			int ret = rc_alloc(c, &t[i]);

			if (ret != 0) {
				while (i-- > 0)
					rc_dealloc(c, t[i]);
				return ret;
			}
		}
		return 0;
	}
	static int free_bulk(ctx *c, const token *t, unsigned int n)
	{
		int ret = 0;

		for (unsigned int i = 0; i < n; i++)
			if (rc_dealloc(c, t[i]) != 0)
				ret = -EINVAL;
		return ret;
	}
	static uint32_t qpn(token t) { return t; }
};

void
rc_teardown(void *p)
{
	struct rc_ctx *c = static_cast<struct rc_ctx *>(p);

	if (c == nullptr)
		return;
	while (c->blocks != nullptr) {
		struct rc_block *b = c->blocks;

		c->blocks = b->next;
		::free(b);
	}
	::free(c->slot_used);
	pthread_mutex_destroy(&c->lock);
	::free(c);
}

int
rc_setup(const struct perf_cfg *cfg, void **ctx)
{
	struct rc_ctx *c;

	if (cfg->block_log > 20 || (cfg->range >> cfg->block_log) < 2) {
		PERF_LOG(ERR, "rdmacore model: range %u holds fewer than 2 blocks of 2^%u",
			 cfg->range, cfg->block_log);
		return -EINVAL;
	}
	c = static_cast<struct rc_ctx *>(calloc(1, sizeof(*c)));
	if (c == nullptr)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, nullptr);
	c->first = cfg->first;
	c->log = cfg->block_log;
	c->size = 1u << cfg->block_log;
	c->nb_slots = cfg->range >> cfg->block_log;
	c->slot_used = static_cast<uint8_t *>(calloc(c->nb_slots, 1));
	if (c->slot_used == nullptr) {
		rc_teardown(c);
		return -ENOMEM;
	}
	*ctx = c;
	return 0;
}

/* What the library held at most: the context and its live blocks (the slot table is the
 * model's stand-in for the firmware and not counted). */
uint64_t
rc_footprint(void *p)
{
	struct rc_ctx *c = static_cast<struct rc_ctx *>(p);

	return sizeof(*c) + c->peak_bytes;
}

void
rc_stats_json(void *p, struct json_writer *js)
{
	struct rc_ctx *c = static_cast<struct rc_ctx *>(p);

	js->kv("block_qpns", (uint64_t)c->size);
	js->kv("blocks_created", c->created);
	js->kv("blocks_destroyed", c->destroyed);
	js->kv("max_blocks_scanned", c->max_scan);
	js->kv("peak_block_bytes", c->peak_bytes);
}

} // namespace

const struct perf_peer perf_peer_rdmacore = {
	.name = "rdmacore",
	.desc = "model of rdma-core mlx5dv_reserved_qpn_alloc: one mutex, blocks of 2^g, "
		"linear scan on dealloc",
	.flags = PERF_F_SCALING | PERF_F_CHECKS,
	.setup = rc_setup,
	PERF_PEER_LOOPS(rc_ops),
	.lcore_fini = nullptr,
	.footprint = rc_footprint,
	.stats_json = rc_stats_json,
	.teardown = rc_teardown,
};
