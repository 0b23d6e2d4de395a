/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_SIM_DC_H
#define MLX5_QPN_SIM_DC_H

/*
 * Internal: the DC data path of the emulated device — tables of CQs, DCIs and DCTs and a queue
 * arena, all inside the device's shared memory (SimShm), and the "firmware" that executes send
 * WQEs. Every function here runs under the device mutex (its callers in sim/ take it). The
 * application side (post, ring, poll, receive posting) touches only the queue memory handed out
 * at create (SQ ring, CQ ring, SRQ WQEs and buffers, doorbell records, UAR register), as with a
 * real HCA; the one call in is the execution step (dc_execute), which the DC layer's CQ poll
 * runs in place of the HCA's own progress.
 *
 * Cross-process ordering: the application publishes a doorbell record (send or SRQ) with release
 * order and the device reads it with acquire; the device publishes each CQE's op_own byte with
 * release and the poller reads it with acquire; CQ consumer indices go back the same way.
 */

#include <cstddef>
#include <cstdint>

#include "mlx5_qpn_prm_wqe.h"

namespace mlx5_qpn_sim {

constexpr uint32_t kDcMaxCq = 4096;
constexpr uint32_t kDcMaxDci = 4096;
constexpr uint32_t kDcMaxDct = 4096;
constexpr uint32_t kDcPage = 4096;
constexpr uint64_t kDcArena = uint64_t(64) << 20; /* sparse: pages exist once touched */
constexpr uint32_t kDcNbPages = uint32_t(kDcArena / kDcPage);
constexpr uint32_t kDcLogCqMax = 16;
constexpr uint32_t kDcLogSqMax = 12;
/* Send queues hold 8 BBs per WQE (the largest DC SEND is 6): a full queue of the largest WQEs
 * fits, so "full" is decided by the WQE count alone. */
constexpr uint32_t kDcSqBbShift = 3;
/*
 * A DCT receives through an SRQ, as a ConnectX's does: a linked list of 2^kDcSrqLogWqes receive
 * WQEs of kDcSrqStride bytes (common/mlx5_qpn_prm_wqe.h) that the DC layer writes and posts, and
 * one receive buffer of kDcRxStride bytes per WQE, registered for that DCT alone. Both live in
 * the DCT's pages of the arena: WQEs first, then the buffers, so a DCI of any process delivers.
 * kDcRxHold is what the DC layer keeps readable (mlx5_qpn_dc_dct_info::rx_slots): 64 held, one
 * spare, the other 191 posted.
 */
constexpr uint32_t kDcSrqLogWqes = 8;
constexpr uint32_t kDcSrqWqes = uint32_t(1) << kDcSrqLogWqes;
constexpr uint32_t kDcSrqStride = 32;
constexpr uint32_t kDcRxHold = 64;
constexpr uint32_t kDcRxStride = 256;
constexpr uint32_t kDcRxBufOff = kDcSrqWqes * kDcSrqStride;
constexpr uint64_t kDcDctBytes = kDcRxBufOff + uint64_t(kDcSrqWqes) * kDcRxStride;
constexpr uint32_t kDcExecBudgetPerDci = 64;
constexpr uint32_t kDcExecBudget = 8192;

struct alignas(64) SimDcCq {
	uint32_t live;
	uint16_t owner;
	uint8_t log_depth;
	uint8_t rsvd;
	uint32_t gen;
	uint32_t refs; /* QPs that complete on it */
	uint32_t page;
	uint32_t npages;
	uint32_t pi;                   /* producer index (device only) */
	alignas(64) uint32_t dbrec[2]; /* written by the poller: [0] consumer index, be32 */
};

struct alignas(64) SimDcDci {
	uint32_t live;
	uint16_t owner;
	uint8_t err; /* in error: later WQEs are flushed */
	uint8_t log_bbs;
	uint32_t gen;
	uint32_t qpn;
	uint32_t cq;
	uint32_t page;
	uint32_t npages;
	uint32_t exec_bb;    /* next BB the device executes (device only) */
	uint32_t active_pos; /* index in SimDc::active */
	uint32_t uar;        /* UAR page whose register it rings */
	/* The WQE at exec_bb got no answer (its DCT is unknown, refused the DC key, or the packet
	 * was lost by dc_err_every): it waits for its retries to run out, which takes until a
	 * later execution pass than lost_pass, then completes with 0x15. */
	uint32_t lost_pass;
	uint8_t lost;
	uint8_t rsvd8[3];
	alignas(64) uint32_t dbrec[2]; /* written by the poster: [1] send counter, be32 */
};

struct alignas(64) SimDcDct {
	uint32_t live;
	uint16_t owner;
	uint16_t rsvd;
	uint32_t gen;
	uint32_t number;
	uint32_t cq;
	uint32_t page;
	uint32_t npages;
	uint64_t dc_key;
	/* The receive buffers' region as registered by the owner: an address in ITS mapping
	 * (what its WQEs name) and the key its WQEs must carry; the device translates an address
	 * to an arena offset as an MR does. */
	uint64_t buf_va;
	uint32_t lkey;
	uint16_t srq_head;  /* next WQE the device takes (device only) */
	uint16_t srq_taken; /* WQEs taken so far (device only), against srq_dbrec's count */
	alignas(64) uint32_t srq_dbrec[2]; /* written by the poster: [0] WQEs posted, be32 */
};

struct SimDcCounters {
	uint64_t wqes;      /* WQEs executed (good or error) */
	uint64_t delivered; /* SENDs delivered to a DCT */
	uint64_t err_cqes;  /* error CQEs written (flushes included) */
	uint64_t stalls;    /* executions postponed for a full CQ */
	uint64_t sends;   /* well-formed SENDs of DCIs not in ERR, first attempts (dc_err_every) */
	uint64_t dropped; /* SENDs nobody answered (unknown DCT, wrong key, injected loss) */
	uint64_t key_violations; /* of those, a DCT's DC key refused */
	uint64_t faults;         /* of those, lost by dc_err_every */
	uint64_t resets;         /* DCIs moved back through RESET (dci_reset) */
	uint64_t rnr;            /* SENDs that found no receive WQE posted and wait */
	uint32_t cqs, dcis, dcts;
	uint32_t rsvd;
};

struct SimDc {
	uint64_t page_bits[kDcNbPages / 64];
	uint32_t nb_active; /* live DCIs, listed in active[] (atomic read by idle checks) */
	uint32_t pass;      /* execution passes (dc_execute calls): the clock of time-outs */
	SimDcCounters ctr;
	uint16_t active[kDcMaxDci];
	SimDcCq cq[kDcMaxCq];
	SimDcDci dci[kDcMaxDci];
	SimDcDct dct[kDcMaxDct];
};

/* Returns the DCT table index of DCT number dctn, or -1. */
using DctLookup = int (*)(void *ctx, uint32_t dctn);

inline uint8_t *
dc_page_ptr(uint8_t *arena, uint32_t page)
{
	return arena + size_t(page) * kDcPage;
}

/* The shapes of table entries (what another process may have written is checked before it is
 * indexed with): a queue of n pages from first lies inside the arena and holds `bytes`. */
inline bool
dc_pages_ok(uint32_t first, uint32_t n, uint64_t bytes)
{
	return first < kDcNbPages && n <= kDcNbPages - first && uint64_t(n) * kDcPage >= bytes;
}

inline bool
dc_cq_ok(const SimDcCq &c)
{
	return c.log_depth >= 1 && c.log_depth <= kDcLogCqMax &&
	       dc_pages_ok(c.page, c.npages, uint64_t(MLX5_QPN_CQE_SIZE) << c.log_depth);
}

inline bool
dc_dci_ok(const SimDcDci &d)
{
	return d.cq < kDcMaxCq && d.log_bbs <= kDcLogSqMax + kDcSqBbShift &&
	       dc_pages_ok(d.page, d.npages, uint64_t(MLX5_QPN_SEND_WQE_BB) << d.log_bbs);
}

inline bool
dc_dct_ok(const SimDcDct &t)
{
	return t.cq < kDcMaxCq && dc_pages_ok(t.page, t.npages, kDcDctBytes);
}

/* Create; return 0 and the table index, or -ENOMEM (no slot or no arena room), -EINVAL. */
int dc_cq_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t log_depth,
		 uint32_t *idx);
int dc_dci_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t qpn,
		  uint32_t cq, uint32_t log_bbs, uint32_t uar, uint32_t *idx);
/* A DCT's receive buffers are registered at buf_va (their address in the owner's mapping)
 * under lkey; its SRQ starts with nothing posted. */
int dc_dct_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t number,
		  uint32_t cq, uint64_t dc_key, uint32_t lkey, uint32_t *idx);
/* Destroy; -EINVAL if it is not (owner, gen)'s; a CQ still used by QPs: -EBUSY. */
int dc_cq_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen);
int dc_dci_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen);
int dc_dct_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen);
/* Free everything an owner slot holds (its QPNs are records: sim_segment.cpp frees those). */
void dc_owner_release(SimDc *dc, uint16_t owner);
/* After a process died inside a command: rebuild the page bitmap, the active list, the refs. */
void dc_rebuild(SimDc *dc);
/*
 * Are the tables consistent (checked once at attach; what changes afterwards is bounds-checked
 * where it is used): every live entry's queue inside the arena and large enough for its ring,
 * its CQ index inside the CQ table, its owner below max_owner, a DCI's UAR below nb_uars, the
 * active list inside the DCI table.
 */
bool dc_valid(const SimDc *dc, uint32_t max_owner, uint32_t nb_uars);
/* Move a DCI of owner through RESET back to RTS: out of ERR, nothing lost, its queue at BB 0
 * and its doorbell record zeroed. -EINVAL if it is not (owner, gen)'s. */
int dc_dci_reset(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen);
/* Execute rung WQEs of every live DCI (bounded), one pass. err_every != 0: every err_every-th
 * SEND is lost (dc_err_every). Returns WQEs executed. */
int dc_execute(SimDc *dc, uint8_t *arena, DctLookup lookup, void *ctx, uint32_t err_every);

} // namespace mlx5_qpn_sim

#endif
