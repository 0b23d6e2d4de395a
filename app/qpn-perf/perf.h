/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_PERF_H
#define QPN_PERF_H

/**
 * @file
 * qpn-perf: one benchmark peer = one table of hooks, in the way testpmd has one table per
 * forwarding engine.
 *
 * Every peer hands out 24-bit QPNs from the same range [cfg.first, cfg.first + cfg.range).
 * It describes its operations once, as a small struct of static inline functions (the "ops",
 * see perf_loop.h), and perf_loop.h turns them into the timed loops. So all peers run the very
 * same loop shape, each with its own operations inlined into it, and the generic hooks
 * (alloc/free through a function pointer) are used only for the untimed self-check.
 */

#include <cstddef>
#include <cstdint>

#include <rte_log.h>

struct json_writer;

/** Largest bulk size the loops support. */
#define PERF_MAX_BURST 256

/** Parameters common to all peers. */
struct perf_cfg {
	uint32_t first;         /**< first QPN of the range */
	uint32_t range;         /**< QPNs in the range */
	uint32_t cache;         /**< per-lcore cache size (for peers that have one) */
	uint64_t quarantine_ns; /**< quarantine of the "ours with quarantine" peer */
	unsigned int burst;     /**< bulk size of the burst loop */
	unsigned int block_log; /**< rdma-core model: log2 of the QPNs in one block */
	unsigned int seq;       /**< unique number for DPDK object names */
};

/** What a timed loop reports besides its time. */
struct perf_loop_res {
	uint64_t ops;      /**< alloc+free pairs completed */
	uint64_t failures; /**< allocations that failed (the pair was skipped) */
	uint64_t cycles;   /**< loops that time themselves (storm): TSC cycles measured, else 0 */
};

/*
 * Latency histogram in TSC cycles, log-linear: values below 8 have a bucket each, above that
 * every power of two is cut into 8 buckets (at most 12.5 % wide), up to 2^42 cycles.
 */
#define PERF_HIST_SUB     8
#define PERF_HIST_BUCKETS (PERF_HIST_SUB * 41)

struct perf_hist {
	uint64_t count[PERF_HIST_BUCKETS];
	uint64_t n, sum, max;
	uint64_t min;
};

static inline unsigned int
perf_hist_index(uint64_t v)
{
	unsigned int e, idx;

	if (v < PERF_HIST_SUB)
		return (unsigned int)v;
	e = 63 - (unsigned int)__builtin_clzll(v); /* >= 3 */
	idx = (e - 2) * PERF_HIST_SUB + (unsigned int)((v >> (e - 3)) & (PERF_HIST_SUB - 1));
	return idx < PERF_HIST_BUCKETS ? idx : PERF_HIST_BUCKETS - 1;
}

/** Exclusive upper bound, in cycles, of bucket idx. */
static inline uint64_t
perf_hist_upper(unsigned int idx)
{
	unsigned int e = idx / PERF_HIST_SUB + 2, sub = idx % PERF_HIST_SUB;

	if (idx < PERF_HIST_SUB)
		return idx + 1;
	return (uint64_t)(PERF_HIST_SUB + sub + 1) << (e - 3);
}

static inline void
perf_hist_add(struct perf_hist *h, uint64_t v)
{
	h->count[perf_hist_index(v)]++;
	h->n++;
	h->sum += v;
	h->max = v > h->max ? v : h->max;
	h->min = v < h->min ? v : h->min;
}

struct rte_ring;

/** Peer flags. */
#define PERF_F_SCALING   (1u << 0) /**< may run on several lcores at once on one context */
#define PERF_F_HEAP_MEM  (1u << 1) /**< memory is all in the DPDK heap: measure it by delta */
#define PERF_F_CHECKS    (1u << 2) /**< refuses a double free (checked by the self-check) */
#define PERF_F_OWN_RANGE (1u << 3) /**< QPNs come from a device's own ranges, not cfg.first */
#define PERF_F_LOCAL     (1u << 4) /**< a QPN must be freed by the lcore that took it */
#define PERF_F_EAL_ONLY  (1u << 5) /**< works on EAL lcores only (no non-EAL threads) */

/** Hooks of one peer. */
struct perf_peer {
	const char *name; /**< short name, used by --only and as JSON key */
	const char *desc; /**< one line: what it models */
	unsigned int flags;
	/** Create the peer's context, filled with all QPNs of the range. 0 or negative errno. */
	int (*setup)(const struct perf_cfg *cfg, void **ctx);
	/** Generic alloc, for the self-check: 0 and *qpn / *token, or negative errno. */
	int (*alloc)(void *ctx, uint32_t *qpn, uint64_t *token);
	/** Generic free of what alloc returned. 0 or negative errno. */
	int (*free)(void *ctx, uint64_t token);
	/** Timed loop: n alloc+free pairs on the calling lcore. */
	void (*run_pairs)(void *ctx, uint64_t n, struct perf_loop_res *res);
	/** Timed loop: n QPNs allocated and freed in bulks of `burst`. */
	void (*run_burst)(void *ctx, uint64_t n, unsigned int burst, struct perf_loop_res *res);
	/** Timed loop: k QPNs held live; each of n steps takes one and frees the oldest. */
	void (*run_hold)(void *ctx, uint64_t n, unsigned int k, struct perf_loop_res *res);
	/** Self-timed loop: storms of s allocs then s frees, each after idle_us of sleep. */
	void (*run_storm)(void *ctx, uint64_t n, unsigned int s, unsigned int idle_us,
			  struct perf_loop_res *res);
	/** Latency loop: n pairs, each alloc and each free timed alone into the histograms. */
	void (*run_lat)(void *ctx, uint64_t n, struct perf_hist *alloc, struct perf_hist *free,
			struct perf_loop_res *res);
	/** Cross-lcore: take n QPNs and pass their tokens through ring r (single producer). */
	void (*run_produce)(void *ctx, uint64_t n, struct rte_ring *r, struct perf_loop_res *res);
	/** Cross-lcore: free n tokens taken from ring r (single consumer). */
	void (*run_consume)(void *ctx, uint64_t n, struct rte_ring *r, struct perf_loop_res *res);
	/** Optional: called on every lcore that ran the peer, before teardown. */
	void (*lcore_fini)(void *ctx);
	/** Optional: bytes the peer holds outside the DPDK heap (self-accounted). */
	uint64_t (*footprint)(void *ctx);
	/** Optional: write peer-specific counters as JSON members (see json.h). */
	void (*stats_json)(void *ctx, struct json_writer *js);
	/** Destroy the context. */
	void (*teardown)(void *ctx);
};

extern const struct perf_peer perf_peer_floor;
extern const struct perf_peer perf_peer_floor_inl;
extern const struct perf_peer perf_peer_mempool;
extern const struct perf_peer perf_peer_mempool_packed;
extern const struct perf_peer perf_peer_ring;
extern const struct perf_peer perf_peer_stack;
extern const struct perf_peer perf_peer_rdmacore;
extern const struct perf_peer perf_peer_rdmavt;
extern const struct perf_peer perf_peer_qpnpool;
extern const struct perf_peer perf_peer_qpnpool_q;
extern const struct perf_peer perf_peer_qpndev;

/** Log type of the benchmark (mlx5_qpn.perf). */
extern int perf_logtype;

/** One readable log line of the benchmark. */
#define PERF_LOG(level, fmt, ...)                                                                  \
	rte_log(RTE_LOG_##level, perf_logtype, "qpn-perf: " fmt "\n", ##__VA_ARGS__)

#endif /* QPN_PERF_H */
