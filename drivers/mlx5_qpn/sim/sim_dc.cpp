/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DC data path: the "firmware" side. Tables and the queue arena live in
 * the device's shared memory; the device's commands (sim_dc_cmd.cpp; owner release and repair in
 * sim_segment.cpp and sim_fw.cpp) run all of this under the device mutex, which models the HCA
 * executing one thing at a time. See sim_dc.h.
 */
#include "sim_dc.h"
#include "mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_dc_ops.h"

#include <cerrno>
#include <cstring>

#include <atomic>

/* Everything below is shared memory, read by other processes without the device mutex. */
static_assert(std::atomic_ref<uint8_t>::is_always_lock_free, "lock-free in shared memory");
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free, "lock-free in shared memory");

namespace mlx5_qpn_sim {

static_assert(kDcSrqStride == MLX5_QPN_SRQ_WQE_MIN_STRIDE, "one data segment per receive WQE");
static_assert(kDcRxStride >= MLX5_QPN_WQE_MAX_INLINE, "a receive buffer holds any SEND");
static_assert(kDcSrqWqes >= 2 * kDcRxHold + 1, "the DC layer's held, spare and posted WQEs");

/* A receive WQE whose data segment names memory not registered for it (the PRM's local
 * protection error; rdma-core's MLX5_CQE_SYNDROME_LOCAL_PROT_ERR). */
constexpr uint8_t kSyndLocalProtErr = 0x04;

namespace {

bool
page_used(const SimDc *dc, uint32_t p)
{
	return ((dc->page_bits[p / 64] >> (p % 64)) & 1) != 0u;
}

/* A queue of n pages from first lies inside the arena and holds `bytes`. */
bool
pages_ok(uint32_t first, uint32_t n, uint64_t bytes)
{
	return first < kDcNbPages && n <= kDcNbPages - first && uint64_t(n) * kDcPage >= bytes;
}

bool
cq_ok(const SimDcCq &c)
{
	return c.log_depth >= 1 && c.log_depth <= kDcLogCqMax &&
	       pages_ok(c.page, c.npages, uint64_t(MLX5_QPN_CQE_SIZE) << c.log_depth);
}

bool
dci_ok(const SimDcDci &d)
{
	return d.cq < kDcMaxCq && d.log_bbs <= kDcLogSqMax + kDcSqBbShift &&
	       pages_ok(d.page, d.npages, uint64_t(MLX5_QPN_SEND_WQE_BB) << d.log_bbs);
}

bool
dct_ok(const SimDcDct &t)
{
	return t.cq < kDcMaxCq && pages_ok(t.page, t.npages, kDcDctBytes);
}

void
pages_mark(SimDc *dc, uint32_t first, uint32_t n, bool used)
{
	if (first >= kDcNbPages)
		return;
	if (n > kDcNbPages - first)
		n = kDcNbPages - first;
	for (uint32_t p = first; p < first + n; p++) {
		if (used)
			dc->page_bits[p / 64] |= uint64_t(1) << (p % 64);
		else
			dc->page_bits[p / 64] &= ~(uint64_t(1) << (p % 64));
	}
}

/* First fit over the page bitmap: creation is a slow-path firmware command. */
int
pages_alloc(SimDc *dc, uint8_t *arena, uint64_t bytes, uint32_t *first, uint32_t *n)
{
	uint32_t need = uint32_t((bytes + kDcPage - 1) / kDcPage);
	uint32_t run = 0;

	if (need == 0 || need > kDcNbPages)
		return -ENOMEM;
	for (uint32_t p = 0; p < kDcNbPages; p++) {
		if (dc->page_bits[p / 64] == ~uint64_t(0) && p % 64 == 0) {
			run = 0;
			p += 63;
			continue;
		}
		run = page_used(dc, p) ? 0 : run + 1;
		if (run == need) {
			uint32_t f = p + 1 - need;
			pages_mark(dc, f, need, true);
			memset(dc_page_ptr(arena, f), 0, size_t(need) * kDcPage);
			*first = f;
			*n = need;
			return 0;
		}
	}
	return -ENOMEM;
}

template <typename T>
int
slot_alloc(T *tab, uint32_t cap)
{
	for (uint32_t i = 0; i < cap; i++)
		if (!tab[i].live)
			return int(i);
	return -1;
}

void
active_remove(SimDc *dc, uint32_t idx)
{
	uint32_t pos = dc->dci[idx].active_pos;
	uint32_t last = dc->nb_active - 1;

	if (pos < dc->nb_active && dc->nb_active <= kDcMaxDci && dc->active[pos] == idx) {
		dc->active[pos] = dc->active[last];
		if (dc->active[pos] < kDcMaxDci)
			dc->dci[dc->active[pos]].active_pos = pos;
		std::atomic_ref<uint32_t>(dc->nb_active).store(last, std::memory_order_relaxed);
	}
}

uint32_t
cq_ci(const SimDcCq &cq)
{
	uint32_t be = std::atomic_ref<uint32_t>(const_cast<uint32_t &>(cq.dbrec[0]))
			      .load(std::memory_order_acquire);
	return rte_be_to_cpu_32(be) & 0xffffff;
}

uint32_t
cq_room(const SimDcCq &cq)
{
	uint32_t used = (cq.pi - cq_ci(cq)) & 0xffffff;
	uint32_t depth = uint32_t(1) << cq.log_depth;

	/* A consumer index ahead of the producer is a poller's bug: treat the CQ as full rather
	 * than overwrite CQEs it has not read. */
	return used > depth ? 0 : depth - used;
}

void
cqe_write(SimDc *dc, uint8_t *arena, SimDcCq &cq, const mlx5_qpn_cqe_fields &f0)
{
	uint32_t mask = (uint32_t(1) << cq.log_depth) - 1;
	uint8_t *cqe = dc_page_ptr(arena, cq.page) + size_t(cq.pi & mask) * MLX5_QPN_CQE_SIZE;
	mlx5_qpn_cqe_fields f = f0;

	f.owner = uint8_t((cq.pi >> cq.log_depth) & 1);
	uint8_t op_own = mlx5_qpn_cqe_fill(cqe, &f);
	std::atomic_ref<uint8_t>(cqe[MLX5_QPN_CQE_OFF_OP_OWN])
		.store(op_own, std::memory_order_release);
	cq.pi++;
	if (f.opcode == MLX5_QPN_PRM_CQE_REQ_ERR || f.opcode == MLX5_QPN_PRM_CQE_RESP_ERR)
		dc->ctr.err_cqes++;
}

void
req_err(SimDc *dc, uint8_t *arena, SimDcDci &d, SimDcCq &cq, uint16_t wqe_counter, uint8_t opcode,
	uint8_t synd)
{
	mlx5_qpn_cqe_fields f = {};
	f.opcode = MLX5_QPN_PRM_CQE_REQ_ERR;
	f.syndrome = synd;
	f.wqe_opcode = opcode;
	f.qpn = d.qpn;
	f.wqe_counter = wqe_counter;
	cqe_write(dc, arena, cq, f);
	/* As hardware: the QP moves to the error state; what follows is flushed. */
	d.err = 1;
}

/* Copy n BBs from BB index bb of the ring (wrapping) into out. */
void
sq_copy(const uint8_t *sq, uint32_t bb_mask, uint32_t bb, uint32_t n, uint8_t *out)
{
	for (uint32_t i = 0; i < n; i++)
		memcpy(out + size_t(i) * MLX5_QPN_SEND_WQE_BB,
		       sq + size_t((bb + i) & bb_mask) * MLX5_QPN_SEND_WQE_BB,
		       MLX5_QPN_SEND_WQE_BB);
}

/* The SRQ doorbell record's count of posted WQEs (the poster publishes it with release). */
uint16_t
srq_posted(const SimDcDct &t)
{
	uint32_t be =
		std::atomic_ref<uint32_t>(const_cast<uint32_t &>(t.srq_dbrec[MLX5_QPN_SRQ_DBR]))
			.load(std::memory_order_acquire);
	return uint16_t(rte_be_to_cpu_32(be));
}

/*
 * The receive buffer a data segment names, as an MR translates it: the key must be the DCT's and
 * [addr, addr + len) must fall inside its registered buffers (addr is in the owner's mapping);
 * the same bytes in this process's mapping of the arena, or NULL.
 */
uint8_t *
srq_buffer(uint8_t *arena, const SimDcDct &t, uint32_t lkey, uint64_t addr, uint32_t len)
{
	const uint64_t size = uint64_t(kDcSrqWqes) * kDcRxStride;
	if (lkey != t.lkey || addr < t.buf_va || addr - t.buf_va > size ||
	    len > size - (addr - t.buf_va))
		return nullptr;
	return dc_page_ptr(arena, t.page) + kDcRxBufOff + (addr - t.buf_va);
}

/*
 * The responder side of a SEND on a DCT, by the PRM's rule for an SRQ: the device takes the next
 * posted WQE along the list (head, then the WQE's next index). None posted: receiver not ready,
 * false, and the SEND waits for a later pass. Else the WQE's data segment is checked (the key
 * and range of the DCT's registered buffers, the length), the payload written through it, and a
 * responder CQE written whose wqe_counter is the WQE's index; a data segment the device cannot
 * use completes the WQE with RESP_ERR instead (the payload is dropped, the requester's WQE still
 * completes, as the strict fake rdma-core models it).
 */
bool
srq_deliver(SimDc *dc, uint8_t *arena, SimDcDct &t, SimDcCq &rcq, uint32_t src_qpn,
	    const uint8_t *data, uint32_t len)
{
	if (srq_posted(t) == t.srq_taken) {
		dc->ctr.rnr++;
		return false;
	}
	uint16_t idx = uint16_t(t.srq_head & (kDcSrqWqes - 1));
	const uint8_t *w = dc_page_ptr(arena, t.page) + size_t(idx) * kDcSrqStride;
	uint32_t cap = mlx5_qpn_get_be32(w + MLX5_QPN_SRQ_OFF_DSEG);
	uint32_t lkey = mlx5_qpn_get_be32(w + MLX5_QPN_SRQ_OFF_DSEG + 4);
	uint64_t addr = mlx5_qpn_get_be64(w + MLX5_QPN_SRQ_OFF_DSEG + 8);
	t.srq_head = mlx5_qpn_get_be16(w + MLX5_QPN_SRQ_OFF_NEXT);
	t.srq_taken++;
	uint8_t *buf = srq_buffer(arena, t, lkey, addr, len);
	mlx5_qpn_cqe_fields r = {};
	r.qpn = t.number;
	r.src_qpn = src_qpn;
	r.byte_cnt = len;
	r.wqe_counter = idx;
	if (len > cap || buf == nullptr) {
		r.opcode = MLX5_QPN_PRM_CQE_RESP_ERR;
		r.syndrome = len > cap ? MLX5_QPN_SYND_LOCAL_LENGTH_ERR : kSyndLocalProtErr;
		cqe_write(dc, arena, rcq, r);
		return true;
	}
	/* Another process reads the buffer once it has seen the CQE (released after this). */
	for (uint32_t i = 0; i < len; i++)
		std::atomic_ref<uint8_t>(buf[i]).store(data[i], std::memory_order_relaxed);
	r.opcode = MLX5_QPN_PRM_CQE_RESP_SEND;
	cqe_write(dc, arena, rcq, r);
	dc->ctr.delivered++;
	return true;
}

/*
 * A SEND nobody answers: an unknown DCT and a DCT whose DC key does not match both drop the
 * packet without a word (a ConnectX's DCT counts a key violation and answers nothing), and a
 * packet lost on the wire looks the same. The requester retransmits until its retries run out
 * and then completes the WQE with 0x15 (transport retry counter exceeded). Modelled time: the
 * retries run out on a later execution pass than this one, and the DCI's queue waits behind
 * the WQE until then (it sends nothing after it).
 */
void
send_lost(SimDc *dc, SimDcDci &d)
{
	d.lost = 1;
	d.lost_pass = dc->pass;
	dc->ctr.dropped++;
}

/* Execute up to budget WQEs of one DCI. */
int
dci_execute(SimDc *dc, uint8_t *arena, SimDcDci &d, DctLookup lookup, void *ctx, uint32_t budget,
	    uint32_t err_every)
{
	SimDcCq &cq = dc->cq[d.cq];
	uint32_t bb_mask = (uint32_t(1) << d.log_bbs) - 1;
	const uint8_t *sq = dc_page_ptr(arena, d.page);
	uint32_t db = rte_be_to_cpu_32(std::atomic_ref<uint32_t>(d.dbrec[MLX5_QPN_SND_DBR])
					       .load(std::memory_order_acquire));
	uint32_t pending = (db - d.exec_bb) & 0xffff;
	uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * MLX5_QPN_SEND_WQE_BB];
	int done = 0;

	if (pending > bb_mask + 1) {
		/* A doorbell record beyond anything the ring can hold: a broken poster. */
		if (!d.err && cq_room(cq) >= 1)
			req_err(dc, arena, d, cq, uint16_t(d.exec_bb), 0,
				MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
		d.lost = 0;
		d.exec_bb = db & 0xffff;
		return 1;
	}
	while (pending > 0 && uint32_t(done) < budget) {
		if (cq_room(cq) < 1) {
			dc->ctr.stalls++;
			break;
		}
		uint16_t idx = uint16_t(d.exec_bb);
		sq_copy(sq, bb_mask, d.exec_bb, 1, wqe);
		mlx5_qpn_wqe_fields f;
		mlx5_qpn_wqe_parse_ctrl(wqe, &f);
		uint32_t nbb = f.ds ? mlx5_qpn_wqe_bbs(f.ds) : 1;
		if (nbb > MLX5_QPN_WQE_MAX_BBS || nbb > pending)
			nbb = 1; /* unusable size: complete it in error as one BB */
		else if (nbb > 1)
			sq_copy(sq, bb_mask, d.exec_bb + 1, nbb - 1, wqe + MLX5_QPN_SEND_WQE_BB);
		if (d.err) {
			req_err(dc, arena, d, cq, idx, f.opcode, MLX5_QPN_SYND_WR_FLUSH_ERR);
		} else if (d.lost) {
			if (d.lost_pass == dc->pass)
				break; /* still retrying: its time-out comes on a later pass */
			d.lost = 0;
			req_err(dc, arena, d, cq, idx, f.opcode,
				MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
		} else {
			int synd = mlx5_qpn_wqe_parse_dc_send(wqe,
							      size_t(nbb) * MLX5_QPN_SEND_WQE_BB,
							      &f);
			uint32_t dctn = f.dqp_dct & 0xffffff;
			int t = synd ? -1 : lookup(ctx, dctn);
			bool fault = false;
			if (!synd) {
				dc->ctr.sends++;
				fault = err_every != 0 && dc->ctr.sends % err_every == 0;
			}
			if (synd) {
				req_err(dc, arena, d, cq, idx, f.opcode, uint8_t(synd));
			} else if (fault) {
				dc->ctr.faults++;
				send_lost(dc, d);
				break;
			} else if (t < 0 || t >= int(kDcMaxDct) || !dc->dct[t].live ||
				   !dct_ok(dc->dct[t]) || !cq_ok(dc->cq[dc->dct[t].cq])) {
				send_lost(dc, d);
				break;
			} else if (dc->dct[t].dc_key != f.dc_key) {
				dc->ctr.key_violations++;
				send_lost(dc, d);
				break;
			} else {
				SimDcDct &dt = dc->dct[t];
				SimDcCq &rcq = dc->cq[dt.cq];
				bool sig = (f.fm_ce_se & MLX5_QPN_WQE_CTRL_CQ_UPDATE) != 0;
				uint32_t need_r = (&rcq == &cq) ? 1 + (sig ? 1 : 0) : 1;
				if (cq_room(rcq) < need_r) {
					/* The receiver cannot take it now (receiver-not-ready): retry
					 * on a later pass, in order. */
					dc->ctr.stalls++;
					break;
				}
				/* The parse bounds it by MLX5_QPN_WQE_MAX_INLINE. */
				uint32_t len = f.inl_hdr & ~MLX5_QPN_INLINE_SEG;
				if (!srq_deliver(dc, arena, dt, rcq, d.qpn, f.data, len))
					break; /* RNR: retried on a later pass, in order */
				if (sig) {
					mlx5_qpn_cqe_fields q = {};
					q.opcode = MLX5_QPN_PRM_CQE_REQ;
					q.wqe_opcode = f.opcode;
					q.qpn = d.qpn;
					q.byte_cnt = len;
					q.wqe_counter = idx;
					cqe_write(dc, arena, cq, q);
				}
			}
		}
		d.exec_bb = (d.exec_bb + nbb) & 0xffff;
		pending -= nbb;
		dc->ctr.wqes++;
		done++;
	}
	return done;
}

} // namespace

uint8_t *
dc_page_ptr(uint8_t *arena, uint32_t page)
{
	return arena + size_t(page) * kDcPage;
}

int
dc_cq_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t log_depth,
	     uint32_t *idx)
{
	if (log_depth < 1 || log_depth > kDcLogCqMax)
		return -EINVAL;
	int i = slot_alloc(dc->cq, kDcMaxCq);
	if (i < 0)
		return -ENOMEM;
	SimDcCq &c = dc->cq[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, uint64_t(MLX5_QPN_CQE_SIZE) << log_depth, &first, &n);
	if (rc)
		return rc;
	uint8_t *ring = dc_page_ptr(arena, first);
	/* Every CQE starts invalid with owner 0: the first pass (owner 0) is not valid until the
	 * device writes a real opcode. */
	for (uint32_t k = 0; k < (uint32_t(1) << log_depth); k++)
		ring[size_t(k) * MLX5_QPN_CQE_SIZE + MLX5_QPN_CQE_OFF_OP_OWN] =
			uint8_t(MLX5_QPN_CQE_OPCODE_INVALID << 4);
	c.owner = owner;
	c.log_depth = uint8_t(log_depth);
	c.gen = gen;
	c.refs = 0;
	c.page = first;
	c.npages = n;
	c.pi = 0;
	c.dbrec[0] = c.dbrec[1] = 0;
	/* last: a crash before leaves nothing */
	std::atomic_ref<uint32_t>(c.live).store(1, std::memory_order_release);
	dc->ctr.cqs++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_dci_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t qpn, uint32_t cq,
	      uint32_t log_bbs, uint32_t uar, uint32_t *idx)
{
	if (cq >= kDcMaxCq || !dc->cq[cq].live || dc->cq[cq].owner != owner ||
	    log_bbs > kDcLogSqMax + kDcSqBbShift)
		return -EINVAL;
	int i = slot_alloc(dc->dci, kDcMaxDci);
	if (i < 0 || dc->nb_active >= kDcMaxDci)
		return -ENOMEM;
	SimDcDci &d = dc->dci[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, uint64_t(MLX5_QPN_SEND_WQE_BB) << log_bbs, &first, &n);
	if (rc)
		return rc;
	d.owner = owner;
	d.err = 0;
	d.log_bbs = uint8_t(log_bbs);
	d.gen = gen;
	d.qpn = qpn;
	d.cq = cq;
	d.page = first;
	d.npages = n;
	d.exec_bb = 0;
	d.lost = 0;
	d.lost_pass = 0;
	d.uar = uar;
	d.dbrec[0] = d.dbrec[1] = 0;
	d.active_pos = dc->nb_active;
	dc->active[dc->nb_active] = uint16_t(i);
	std::atomic_ref<uint32_t>(d.live).store(1, std::memory_order_release);
	std::atomic_ref<uint32_t>(dc->nb_active)
		.store(dc->nb_active + 1, std::memory_order_release);
	dc->cq[cq].refs++;
	dc->ctr.dcis++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_dct_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t number, uint32_t cq,
	      uint64_t dc_key, uint32_t lkey, uint32_t *idx)
{
	if (cq >= kDcMaxCq || !dc->cq[cq].live || dc->cq[cq].owner != owner)
		return -EINVAL;
	int i = slot_alloc(dc->dct, kDcMaxDct);
	if (i < 0)
		return -ENOMEM;
	SimDcDct &t = dc->dct[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, kDcDctBytes, &first, &n);
	if (rc)
		return rc;
	t.owner = owner;
	t.gen = gen;
	t.number = number;
	t.cq = cq;
	t.page = first;
	t.npages = n;
	t.dc_key = dc_key;
	/* The owner registers the buffers where its own mapping of the arena has them. */
	t.buf_va = uint64_t(uintptr_t(dc_page_ptr(arena, first) + kDcRxBufOff));
	t.lkey = lkey;
	t.srq_head = 0;
	t.srq_taken = 0;
	t.srq_dbrec[0] = t.srq_dbrec[1] = 0;
	std::atomic_ref<uint32_t>(t.live).store(1, std::memory_order_release);
	dc->cq[cq].refs++;
	dc->ctr.dcts++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_cq_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxCq || !dc->cq[idx].live || dc->cq[idx].owner != owner ||
	    dc->cq[idx].gen != gen)
		return -EINVAL;
	SimDcCq &c = dc->cq[idx];
	if (c.refs)
		return -EBUSY;
	std::atomic_ref<uint32_t>(c.live).store(0, std::memory_order_release);
	pages_mark(dc, c.page, c.npages, false);
	dc->ctr.cqs--;
	return 0;
}

int
dc_dci_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDci || !dc->dci[idx].live || dc->dci[idx].owner != owner ||
	    dc->dci[idx].gen != gen)
		return -EINVAL;
	SimDcDci &d = dc->dci[idx];
	active_remove(dc, idx);
	std::atomic_ref<uint32_t>(d.live).store(0, std::memory_order_release);
	pages_mark(dc, d.page, d.npages, false);
	if (d.cq < kDcMaxCq && dc->cq[d.cq].refs)
		dc->cq[d.cq].refs--;
	dc->ctr.dcis--;
	return 0;
}

int
dc_dct_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDct || !dc->dct[idx].live || dc->dct[idx].owner != owner ||
	    dc->dct[idx].gen != gen)
		return -EINVAL;
	SimDcDct &t = dc->dct[idx];
	std::atomic_ref<uint32_t>(t.live).store(0, std::memory_order_release);
	pages_mark(dc, t.page, t.npages, false);
	if (t.cq < kDcMaxCq && dc->cq[t.cq].refs)
		dc->cq[t.cq].refs--;
	dc->ctr.dcts--;
	return 0;
}

void
dc_owner_release(SimDc *dc, uint16_t owner)
{
	/* QPs first, so that their CQs have no users left. */
	for (uint32_t i = 0; i < kDcMaxDci; i++)
		if (dc->dci[i].live && dc->dci[i].owner == owner)
			dc_dci_destroy(dc, owner, i, dc->dci[i].gen);
	for (uint32_t i = 0; i < kDcMaxDct; i++)
		if (dc->dct[i].live && dc->dct[i].owner == owner)
			dc_dct_destroy(dc, owner, i, dc->dct[i].gen);
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		if (dc->cq[i].live && dc->cq[i].owner == owner) {
			dc->cq[i].refs =
				0; /* a QP of another owner on it is impossible (checked) */
			dc_cq_destroy(dc, owner, i, dc->cq[i].gen);
		}
	}
}

void
dc_rebuild(SimDc *dc)
{
	memset(dc->page_bits, 0, sizeof(dc->page_bits));
	dc->nb_active = 0;
	dc->ctr.cqs = dc->ctr.dcis = dc->ctr.dcts = 0;
	/* A process died inside a command: an entry that does not check out is dropped rather
	 * than indexed with. */
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		if (dc->cq[i].live && !cq_ok(dc->cq[i]))
			dc->cq[i].live = 0;
		if (!dc->cq[i].live)
			continue;
		dc->cq[i].refs = 0;
		pages_mark(dc, dc->cq[i].page, dc->cq[i].npages, true);
		dc->ctr.cqs++;
	}
	for (uint32_t i = 0; i < kDcMaxDci; i++) {
		SimDcDci &d = dc->dci[i];
		if (d.live && (!dci_ok(d) || !dc->cq[d.cq].live))
			d.live = 0;
		if (!d.live)
			continue;
		pages_mark(dc, d.page, d.npages, true);
		d.active_pos = dc->nb_active;
		dc->active[dc->nb_active++] = uint16_t(i);
		dc->cq[d.cq].refs++;
		dc->ctr.dcis++;
	}
	for (uint32_t i = 0; i < kDcMaxDct; i++) {
		if (dc->dct[i].live && (!dct_ok(dc->dct[i]) || !dc->cq[dc->dct[i].cq].live))
			dc->dct[i].live = 0;
		if (!dc->dct[i].live)
			continue;
		pages_mark(dc, dc->dct[i].page, dc->dct[i].npages, true);
		dc->cq[dc->dct[i].cq].refs++;
		dc->ctr.dcts++;
	}
}

bool
dc_valid(const SimDc *dc, uint32_t max_owner, uint32_t nb_uars)
{
	if (dc->nb_active > kDcMaxDci)
		return false;
	uint32_t active = 0;
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		const SimDcCq &c = dc->cq[i];
		if (c.live > 1 || (c.live && (!cq_ok(c) || c.owner >= max_owner)))
			return false;
	}
	for (uint32_t i = 0; i < kDcMaxDci; i++) {
		const SimDcDci &d = dc->dci[i];
		if (d.live > 1)
			return false;
		if (!d.live)
			continue;
		if (!dci_ok(d) || d.owner >= max_owner || d.uar >= nb_uars || !dc->cq[d.cq].live ||
		    d.active_pos >= dc->nb_active || dc->active[d.active_pos] != i)
			return false;
		active++;
	}
	for (uint32_t i = 0; i < kDcMaxDct; i++) {
		const SimDcDct &t = dc->dct[i];
		if (t.live > 1 ||
		    (t.live && (!dct_ok(t) || t.owner >= max_owner || !dc->cq[t.cq].live)))
			return false;
	}
	return active == dc->nb_active;
}

int
dc_dci_reset(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDci || !dc->dci[idx].live || dc->dci[idx].owner != owner ||
	    dc->dci[idx].gen != gen)
		return -EINVAL;
	SimDcDci &d = dc->dci[idx];
	/* RESET: the QP forgets its queue (a WQE still waiting for its time-out included), so
	 * the queue restarts at BB 0 with a zero doorbell record; INIT/RTR/RTS bring it back.
	 * The record is cleared here, under the device mutex, so no pass ever pairs the old
	 * record with the new counter. */
	d.err = 0;
	d.lost = 0;
	d.exec_bb = 0;
	std::atomic_ref<uint32_t>(d.dbrec[0]).store(0, std::memory_order_relaxed);
	std::atomic_ref<uint32_t>(d.dbrec[MLX5_QPN_SND_DBR]).store(0, std::memory_order_release);
	dc->ctr.resets++;
	return 0;
}

int
dc_execute(SimDc *dc, uint8_t *arena, DctLookup lookup, void *ctx, uint32_t err_every)
{
	uint32_t total = 0;
	dc->pass++;
	uint32_t nb = dc->nb_active < kDcMaxDci ? dc->nb_active : kDcMaxDci;

	for (uint32_t k = 0; k < nb && total < kDcExecBudget; k++) {
		/* Checked at attach; re-checked here because another process of this user may
		 * have written the tables since: a bad entry is skipped, never indexed with. */
		if (dc->active[k] >= kDcMaxDci)
			continue;
		SimDcDci &d = dc->dci[dc->active[k]];
		if (!d.live || !dci_ok(d) || !cq_ok(dc->cq[d.cq]))
			continue;
		uint32_t budget = kDcExecBudget - total;
		if (budget > kDcExecBudgetPerDci)
			budget = kDcExecBudgetPerDci;
		total += uint32_t(dci_execute(dc, arena, d, lookup, ctx, budget, err_every));
	}
	return int(total);
}

} // namespace mlx5_qpn_sim
