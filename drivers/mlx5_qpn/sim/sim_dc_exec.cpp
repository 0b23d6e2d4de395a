/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DC execution step (dc_execute, sim_dc.h): the "firmware" running the
 * rung send WQEs of every live DCI, in order, under the device mutex — requester and responder
 * CQEs, delivery through the target DCT's SRQ, receiver-not-ready, lost SENDs and their retry
 * time-out, the flush of a DCI in error. The tables it runs on are sim_dc.cpp's.
 */
#include "sim_dc.h"
#include "mlx5_qpn_prm_wqe.h"

#include <cerrno>
#include <cstring>

#include <atomic>

#include <rte_byteorder.h>

namespace mlx5_qpn_sim {

namespace {

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
		r.syndrome = len > cap ? MLX5_QPN_SYND_LOCAL_LENGTH_ERR :
					 MLX5_QPN_SYND_LOCAL_PROT_ERR;
		cqe_write(dc, arena, rcq, r);
		return true;
	}
	/* A plain copy, as a DMA write: while its WQE is posted the buffer is the device's alone
	 * (the poster handed it over with the doorbell record's release, read with acquire in
	 * srq_posted()), and the owner reads it only once it has seen the CQE, published with
	 * release after this. */
	memcpy(buf, data, len);
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

/* What the execution step needs besides the tables: how DCT numbers resolve, and the fault
 * injection of dc_err_every. */
struct ExecEnv {
	DctLookup lookup;
	void *ctx;
	uint32_t err_every;
};

/* Where a WQE's execution leaves the queue: past it, or waiting at it (it stays at the head
 * for a later pass, and nothing after it runs now). */
enum class Exec { TAKEN, WAIT };

/* A doorbell record beyond anything the ring can hold: a broken poster. One error completion if
 * the CQ has room, and the queue jumps to the record. */
int
dbrec_overrun(SimDc *dc, uint8_t *arena, SimDcDci &d, SimDcCq &cq, uint32_t db)
{
	if (!d.err && cq_room(cq) >= 1)
		req_err(dc, arena, d, cq, uint16_t(d.exec_bb), 0, MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	d.lost = 0;
	d.exec_bb = db & 0xffff;
	return 1;
}

/* Copy the WQE at BB index bb out of the ring into wqe and parse its control segment into f.
 * Returns its BBs; an unusable size is taken as one BB (the WQE completes in error). */
uint32_t
wqe_fetch(const uint8_t *sq, uint32_t bb_mask, uint32_t bb, uint32_t pending, uint8_t *wqe,
	  mlx5_qpn_wqe_fields *f)
{
	sq_copy(sq, bb_mask, bb, 1, wqe);
	mlx5_qpn_wqe_parse_ctrl(wqe, f);
	uint32_t nbb = f->ds ? mlx5_qpn_wqe_bbs(f->ds) : 1;
	if (nbb > MLX5_QPN_WQE_MAX_BBS || nbb > pending)
		nbb = 1;
	else if (nbb > 1)
		sq_copy(sq, bb_mask, bb + 1, nbb - 1, wqe + MLX5_QPN_SEND_WQE_BB);
	return nbb;
}

/* The head WQE of a DCI whose SEND was lost: it waits until the pass after the loss, then
 * completes with the transport retry error (send_lost). */
Exec
lost_timeout(SimDc *dc, uint8_t *arena, SimDcDci &d, SimDcCq &cq, uint16_t idx, uint8_t opcode)
{
	if (d.lost_pass == dc->pass)
		return Exec::WAIT; /* still retrying: its time-out comes on a later pass */
	d.lost = 0;
	req_err(dc, arena, d, cq, idx, opcode, MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
	return Exec::TAKEN;
}

/* The DCT a SEND names, if it is live and sound (its entry and its CQ's); else NULL. */
SimDcDct *
send_target(SimDc *dc, const ExecEnv &env, uint32_t dctn)
{
	int t = env.lookup(env.ctx, dctn);
	if (t < 0 || t >= int(kDcMaxDct) || !dc->dct[t].live || !dc_dct_ok(dc->dct[t]) ||
	    !dc_cq_ok(dc->cq[dc->dct[t].cq]))
		return nullptr;
	return &dc->dct[t];
}

/* A SEND that reached its DCT: the receiver's CQ room, its SRQ, then the requester's CQE if
 * the WQE asks for one. Either wait keeps the order (receiver-not-ready). */
Exec
send_deliver(SimDc *dc, uint8_t *arena, SimDcDci &d, SimDcCq &cq, SimDcDct &dt, uint16_t idx,
	     const mlx5_qpn_wqe_fields &f)
{
	SimDcCq &rcq = dc->cq[dt.cq];
	bool sig = (f.fm_ce_se & MLX5_QPN_WQE_CTRL_CQ_UPDATE) != 0;
	uint32_t need_r = (&rcq == &cq) ? 1 + (sig ? 1 : 0) : 1;
	if (cq_room(rcq) < need_r) {
		dc->ctr.stalls++;
		return Exec::WAIT;
	}
	/* The parse bounds it by MLX5_QPN_WQE_MAX_INLINE. */
	uint32_t len = f.inl_hdr & ~MLX5_QPN_INLINE_SEG;
	if (!srq_deliver(dc, arena, dt, rcq, d.qpn, f.data, len))
		return Exec::WAIT; /* RNR: retried on a later pass */
	if (sig) {
		mlx5_qpn_cqe_fields q = {};
		q.opcode = MLX5_QPN_PRM_CQE_REQ;
		q.wqe_opcode = f.opcode;
		q.qpn = d.qpn;
		q.byte_cnt = len;
		q.wqe_counter = idx;
		cqe_write(dc, arena, cq, q);
	}
	return Exec::TAKEN;
}

/* The head WQE of a DCI in RTS: a malformed one completes in error; a SEND is counted, may be
 * lost by fault injection, goes nowhere for an unknown DCT or a wrong DC key, else is delivered. */
Exec
send_exec(SimDc *dc, uint8_t *arena, SimDcDci &d, SimDcCq &cq, const uint8_t *wqe, uint32_t nbb,
	  uint16_t idx, mlx5_qpn_wqe_fields *f, const ExecEnv &env)
{
	int synd = mlx5_qpn_wqe_parse_dc_send(wqe, size_t(nbb) * MLX5_QPN_SEND_WQE_BB, f);
	if (synd) {
		req_err(dc, arena, d, cq, idx, f->opcode, uint8_t(synd));
		return Exec::TAKEN;
	}
	dc->ctr.sends++;
	if (env.err_every != 0 && dc->ctr.sends % env.err_every == 0) {
		dc->ctr.faults++;
		send_lost(dc, d);
		return Exec::WAIT;
	}
	SimDcDct *dt = send_target(dc, env, f->dqp_dct & 0xffffff);
	if (dt == nullptr) {
		send_lost(dc, d);
		return Exec::WAIT;
	}
	if (dt->dc_key != f->dc_key) {
		dc->ctr.key_violations++;
		send_lost(dc, d);
		return Exec::WAIT;
	}
	return send_deliver(dc, arena, d, cq, *dt, idx, *f);
}

/* Execute up to budget WQEs of one DCI, in order: flushed in ERR, timed out after a loss, else
 * executed; a WQE that must wait stops the DCI for this pass. */
int
dci_execute(SimDc *dc, uint8_t *arena, SimDcDci &d, const ExecEnv &env, uint32_t budget)
{
	SimDcCq &cq = dc->cq[d.cq];
	uint32_t bb_mask = (uint32_t(1) << d.log_bbs) - 1;
	const uint8_t *sq = dc_page_ptr(arena, d.page);
	uint32_t db = rte_be_to_cpu_32(std::atomic_ref<uint32_t>(d.dbrec[MLX5_QPN_SND_DBR])
					       .load(std::memory_order_acquire));
	uint32_t pending = (db - d.exec_bb) & 0xffff;
	uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * MLX5_QPN_SEND_WQE_BB];
	int done = 0;

	if (pending > bb_mask + 1)
		return dbrec_overrun(dc, arena, d, cq, db);
	while (pending > 0 && uint32_t(done) < budget) {
		if (cq_room(cq) < 1) {
			dc->ctr.stalls++;
			break;
		}
		uint16_t idx = uint16_t(d.exec_bb);
		mlx5_qpn_wqe_fields f;
		uint32_t nbb = wqe_fetch(sq, bb_mask, d.exec_bb, pending, wqe, &f);
		Exec e = Exec::TAKEN;
		if (d.err)
			req_err(dc, arena, d, cq, idx, f.opcode, MLX5_QPN_SYND_WR_FLUSH_ERR);
		else if (d.lost)
			e = lost_timeout(dc, arena, d, cq, idx, f.opcode);
		else
			e = send_exec(dc, arena, d, cq, wqe, nbb, idx, &f, env);
		if (e == Exec::WAIT)
			break;
		d.exec_bb = (d.exec_bb + nbb) & 0xffff;
		pending -= nbb;
		dc->ctr.wqes++;
		done++;
	}
	return done;
}

} // namespace

int
dc_execute(SimDc *dc, uint8_t *arena, DctLookup lookup, void *ctx, uint32_t err_every)
{
	const ExecEnv env = {lookup, ctx, err_every};
	uint32_t total = 0;
	dc->pass++;
	uint32_t nb = dc->nb_active < kDcMaxDci ? dc->nb_active : kDcMaxDci;

	for (uint32_t k = 0; k < nb && total < kDcExecBudget; k++) {
		/* Checked at attach; re-checked here because another process of this user may
		 * have written the tables since: a bad entry is skipped, never indexed with. */
		if (dc->active[k] >= kDcMaxDci)
			continue;
		SimDcDci &d = dc->dci[dc->active[k]];
		if (!d.live || !dc_dci_ok(d) || !dc_cq_ok(dc->cq[d.cq]))
			continue;
		uint32_t budget = kDcExecBudget - total;
		if (budget > kDcExecBudgetPerDci)
			budget = kDcExecBudgetPerDci;
		total += uint32_t(dci_execute(dc, arena, d, env, budget));
	}
	return int(total);
}

} // namespace mlx5_qpn_sim
