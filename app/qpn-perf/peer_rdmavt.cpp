/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer "rdmavt": a model of the Linux rdmavt alloc_qpn() bitmap allocator, written from the
 * facts in BRIEF §2 (not from the kernel's code):
 *   - the next available QPN after the last one handed out, stepping by incr (1 here:
 *     qpn_inc = 1, no QoS shift), found with an atomic test-and-set on each probed bit;
 *   - the bitmap is split in pages of 4 KiB allocated lazily on first use;
 *   - at the top of the range the search wraps to the bottom; a full sweep without a free bit
 *     is -ENOMEM;
 *   - free clears the bit atomically (the model also reports a bit that was already clear as
 *     -EINVAL, which the kernel does not check).
 * SMI/GSI QPs 0/1, reserved ranges and the AIP prefix are not on the measured path and are
 * left out. "last" is shared by all threads (written without a lock, as in the kernel), so
 * there is no per-thread state and no quarantine beyond the FIFO-like order of a sweep.
 */

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <new>

#include "perf_loop.h"
#include "json_writer.h"

namespace {

constexpr uint32_t kRvPageBytes = 4096;
constexpr uint32_t kRvBitsPerPage = kRvPageBytes * 8;
constexpr uint32_t kRvWordsPerPage = kRvPageBytes / sizeof(uint64_t);

struct rv_ctx {
	std::atomic<uint32_t> last; /* offset of the last QPN handed out */
	uint32_t first, range, incr, nb_pages;
	std::atomic<uint64_t> pages_allocated;
	std::atomic<std::atomic<uint64_t> *> *pages;
};

/* The page holding bit `off`, allocated on first use; two threads may race, one wins. */
std::atomic<uint64_t> *
rv_page(struct rv_ctx *c, uint32_t page)
{
	std::atomic<uint64_t> *p = c->pages[page].load(std::memory_order_acquire);
	std::atomic<uint64_t> *fresh, *expected = nullptr;

	if (likely(p != nullptr))
		return p;
	fresh = static_cast<std::atomic<uint64_t> *>(calloc(kRvWordsPerPage, sizeof(*fresh)));
	if (fresh == nullptr)
		return nullptr;
	if (c->pages[page].compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
		c->pages_allocated.fetch_add(1, std::memory_order_relaxed);
		return fresh;
	}
	::free(fresh);
	return expected;
}

int
rv_alloc(struct rv_ctx *c, uint32_t *qpn)
{
	uint32_t off = c->last.load(std::memory_order_relaxed) + c->incr;

	for (uint64_t probed = 0; probed < c->range;) {
		std::atomic<uint64_t> *map;

		if (off >= c->range)
			off = 0; /* wrap to the bottom */
		map = rv_page(c, off / kRvBitsPerPage);
		if (unlikely(map == nullptr))
			return -ENOMEM;
		/* Probe the rest of this page. */
		for (uint32_t bit = off % kRvBitsPerPage; bit < kRvBitsPerPage && off < c->range;
		     bit += c->incr, off += c->incr, probed += c->incr) {
			uint64_t mask = UINT64_C(1) << (bit % 64);

			if (!(map[bit / 64].fetch_or(mask, std::memory_order_acq_rel) & mask)) {
				c->last.store(off, std::memory_order_relaxed);
				*qpn = c->first + off;
				return 0;
			}
		}
	}
	return -ENOMEM;
}

int
rv_free(struct rv_ctx *c, uint32_t qpn)
{
	uint32_t off = qpn - c->first; /* wraps when below: caught by the bound */
	std::atomic<uint64_t> *map;
	uint64_t mask;

	if (off >= c->range)
		return -EINVAL;
	map = c->pages[off / kRvBitsPerPage].load(std::memory_order_acquire);
	if (map == nullptr)
		return -EINVAL;
	mask = UINT64_C(1) << (off % 64);
	if (!(map[(off % kRvBitsPerPage) / 64].fetch_and(~mask, std::memory_order_acq_rel) & mask))
		return -EINVAL;
	return 0;
}

struct rv_ops {
	using ctx = rv_ctx;
	using token = uint32_t;

	static int alloc(ctx *c, token *t) { return rv_alloc(c, t); }
	static int free(ctx *c, token t) { return rv_free(c, t); }
	/* The kernel has no bulk call: a burst is a loop of single calls. */
	static int alloc_bulk(ctx *c, token *t, unsigned int n)
	{
		for (unsigned int i = 0; i < n; i++) {
			int ret = rv_alloc(c, &t[i]);

			if (ret != 0) {
				while (i-- > 0)
					rv_free(c, t[i]);
				return ret;
			}
		}
		return 0;
	}
	static int free_bulk(ctx *c, const token *t, unsigned int n)
	{
		int ret = 0;

		for (unsigned int i = 0; i < n; i++)
			if (rv_free(c, t[i]) != 0)
				ret = -EINVAL;
		return ret;
	}
	static uint32_t qpn(token t) { return t; }
};

void
rv_teardown(void *p)
{
	struct rv_ctx *c = static_cast<struct rv_ctx *>(p);

	if (c == nullptr)
		return;
	for (uint32_t i = 0; c->pages != nullptr && i < c->nb_pages; i++)
		::free(c->pages[i].load());
	::free(c->pages);
	c->~rv_ctx();
	::free(c);
}

int
rv_setup(const struct perf_cfg *cfg, void **ctx)
{
	void *mem = calloc(1, sizeof(struct rv_ctx));
	struct rv_ctx *c;

	if (mem == nullptr)
		return -ENOMEM;
	c = new (mem) rv_ctx();
	c->first = cfg->first;
	c->range = cfg->range;
	c->incr = 1;
	/* Start so that the first QPN handed out is the bottom of the range. */
	c->last.store(cfg->range - 1);
	c->nb_pages = (cfg->range + kRvBitsPerPage - 1) / kRvBitsPerPage;
	c->pages = static_cast<std::atomic<std::atomic<uint64_t> *> *>(
		calloc(c->nb_pages, sizeof(*c->pages)));
	if (c->pages == nullptr) {
		rv_teardown(c);
		return -ENOMEM;
	}
	*ctx = c;
	return 0;
}

uint64_t
rv_footprint(void *p)
{
	struct rv_ctx *c = static_cast<struct rv_ctx *>(p);

	return sizeof(*c) + c->nb_pages * sizeof(*c->pages) +
	       c->pages_allocated.load() * kRvPageBytes;
}

void
rv_stats_json(void *p, struct json_writer *js)
{
	struct rv_ctx *c = static_cast<struct rv_ctx *>(p);

	js->kv("bitmap_pages", c->pages_allocated.load());
	js->kv("last_offset", (uint64_t)c->last.load());
}

} // namespace

const struct perf_peer perf_peer_rdmavt = {
	.name = "rdmavt",
	.desc = "model of rdmavt alloc_qpn: next after last, atomic test-and-set on a lazy bitmap",
	.flags = PERF_F_SCALING | PERF_F_CHECKS,
	.setup = rv_setup,
	PERF_PEER_LOOPS(rv_ops),
	.lcore_fini = nullptr,
	.footprint = rv_footprint,
	.stats_json = rv_stats_json,
	.teardown = rv_teardown,
};
