/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device's DC execution (hw_fake_glue.h: dc_execute): what a ConnectX does with a rung
 * DCI, in the PRM layouts of common/mlx5_qpn_prm_wqe.h, so that the DC layer's own WQEs, SRQ
 * WQEs and CQ polling meet a device on a machine without one: only in RTS, only what the
 * doorbell record and the UAR register both announce, lost SENDs retried until the transport
 * timeout on the fake clock, and an ERR state that flushes until RESET.
 */
#include <endian.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "common/mlx5_qpn_prm_wqe.h"
#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

namespace hwfake {

using namespace priv;

namespace {

/*
 * Write one CQE at the CQ's producer index, owner bit of its pass, op_own last. The device
 * reads the consumer index the driver publishes in the CQ's doorbell record (24 bits): a CQE
 * that would land on one not yet consumed is an overrun, which a ConnectX does not write; it
 * raises a CQ error (IBV_EVENT_CQ_ERR) and completes nothing more on that CQ.
 */
void
cq_write(FakeCq *cq, mlx5_qpn_cqe_fields f, uint8_t extra, const uint8_t *inl, uint32_t inl_len)
{
	uint32_t n = uint32_t(cq->ring.size() / 64);
	const uint32_t ci = be32toh(std::atomic_ref<uint32_t>(cq->dbrec[MLX5_QPN_CQ_SET_CI])
					    .load(std::memory_order_acquire)) &
			    0xffffff;
	if (!cq->error && ((cq->pi - ci) & 0xffffff) >= n) {
		cq->error = true;
		fake().cq_errors++;
		raise_cq_error(&cq->cq);
	}
	if (cq->error)
		return;
	uint8_t *cqe = &cq->ring[size_t(cq->pi % n) * 64];
	f.owner = uint8_t((cq->pi / n) & 1);
	uint8_t op_own = mlx5_qpn_cqe_fill(cqe, &f);
	if (inl != nullptr)
		memcpy(cqe, inl, inl_len);
	std::atomic_ref<uint8_t>(cqe[63]).store(uint8_t(op_own | extra), std::memory_order_release);
	cq->pi++;
}

bool
mr_covers(uint32_t lkey, uint64_t addr, uint32_t len)
{
	auto it = g_mrs.find(lkey);
	if (it == g_mrs.end())
		return false;
	uint64_t base = uint64_t(uintptr_t(it->second->mr.addr));
	return addr >= base && addr + len <= base + it->second->mr.length;
}

/* Why the receive WQE at w cannot take a SEND of len bytes for DCT t: 0 (it can), or the
 * NAK the responder answers with, as the IBTA classes it: a message longer than the buffer is
 * an invalid request; a buffer the responder may not write (no MR of that lkey covering it,
 * an MR without LOCAL_WRITE or of another PD) or an injected responder error is a remote
 * operational error. *resp: the responder's own syndrome. */
uint8_t
receive_nak(const FakeQp *t, uint32_t cap, uint32_t lkey, uint64_t addr, uint32_t len,
	    uint8_t *resp)
{
	if (fake().resp_err != 0) {
		*resp = fake().resp_err;
		fake().resp_err = 0;
		return MLX5_QPN_SYND_REMOTE_OP_ERR;
	}
	if (len > cap) {
		*resp = MLX5_QPN_SYND_LOCAL_LENGTH_ERR;
		return MLX5_QPN_SYND_REMOTE_INV_REQ_ERR;
	}
	auto it = g_mrs.find(lkey);
	if (!mr_covers(lkey, addr, len) || !(it->second->access & IBV_ACCESS_LOCAL_WRITE) ||
	    it->second->mr.pd != t->qp.pd) {
		*resp = MLX5_QPN_SYND_LOCAL_PROT_ERR;
		return MLX5_QPN_SYND_REMOTE_OP_ERR;
	}
	return 0;
}

/* Deliver one SEND to DCT t: 0 delivered; -1 no receive posted (RNR); else the NAK's
 * syndrome for the requester (the responder completed its WQE in error). */
int
deliver(FakeQp *t, uint32_t src_qpn, const uint8_t *data, uint32_t len)
{
	FakeSrq *s = t->srq;
	uint16_t posted = uint16_t(
		be32toh(std::atomic_ref<uint32_t>(s->dbrec[0]).load(std::memory_order_acquire)));
	if (s->hw_taken == posted) {
		fake().rnr++;
		return -1;
	}
	uint16_t idx = s->hw_head;
	const uint8_t *w = &s->wqes[size_t(idx) * 32];
	uint32_t cap = mlx5_qpn_get_be32(w + MLX5_QPN_SRQ_OFF_DSEG);
	uint32_t lkey = mlx5_qpn_get_be32(w + MLX5_QPN_SRQ_OFF_DSEG + 4);
	uint64_t addr = mlx5_qpn_get_be64(w + MLX5_QPN_SRQ_OFF_DSEG + 8);
	s->hw_head = mlx5_qpn_get_be16(w + MLX5_QPN_SRQ_OFF_NEXT);
	s->hw_taken++;
	mlx5_qpn_cqe_fields f{};
	f.qpn = t->qp.qp_num;
	f.src_qpn = src_qpn;
	f.wqe_counter = idx;
	f.byte_cnt = len;
	uint8_t resp = 0;
	const uint8_t nak = receive_nak(t, cap, lkey, addr, len, &resp);
	if (nak != 0) {
		f.opcode = MLX5_QPN_PRM_CQE_RESP_ERR;
		f.syndrome = resp;
		cq_write(t->cq, f, 0, nullptr, 0);
		fake().naks++;
		return nak;
	}
	f.opcode = MLX5_QPN_PRM_CQE_RESP_SEND;
	if (fake().scatter32 && len <= MLX5_QPN_CQE_INLINE_SCATTER_MAX) {
		cq_write(t->cq, f, MLX5_QPN_CQE_INLINE_SCATTER_32, data, len);
		return 0;
	}
	memcpy(reinterpret_cast<void *>(uintptr_t(addr)), data, len);
	cq_write(t->cq, f, 0, nullptr, 0);
	return 0;
}

/* The transport timeout of d in us: 4.096 us * 2^timeout per try, retry_cnt + 1 tries; a
 * timeout of 0 waits for ever (IBTA: no local ACK timeout). */
uint64_t
timeout_us(const FakeQp *d)
{
	if (d->timeout == 0)
		return UINT64_MAX;
	const uint64_t ns = (uint64_t(4096) << (d->timeout & 31)) * (uint64_t(d->retry_cnt) + 1);
	return (ns + 999) / 1000;
}

/* The UAR register: a write the device has not taken yet becomes its view of the doorbell
 * when it names this DCI (the register holds the control segment's first 8 bytes). The fake
 * reads memory, not bus writes: a write of the very 8 bytes it last took is not seen (the
 * same WQE index and ds again, 2^16 BBs later); RESET clears what it took. */
void
take_doorbell(FakeQp *d)
{
	uint64_t v = std::atomic_ref<uint64_t>(*static_cast<uint64_t *>(d->reg_page))
			     .load(std::memory_order_acquire);
	if (v == d->uar_last)
		return;
	d->uar_last = v;
	uint8_t b[8];
	memcpy(b, &v, sizeof(b));
	if (mlx5_qpn_get_be32(b + 4) >> 8 != d->qp.qp_num)
		return;
	d->db_valid = true;
	d->db_idx = uint16_t(mlx5_qpn_get_be32(b) >> 8);
}

void
to_err(FakeQp *d)
{
	d->state = IBV_QPS_ERR;
	d->qp.state = IBV_QPS_ERR;
	d->waiting = false;
}

/* Try the SEND at the head of d: 0 and *done (completed) or not (waits: RNR, or dropped and
 * the timeout not yet passed); a syndrome when it fails. */
int
send_one(FakeQp *d, const uint8_t *wqe, const mlx5_qpn_wqe_fields &w, bool *done)
{
	FakeDevice &dev = fake();
	*done = false;
	auto t = g_dcts.find(w.dqp_dct & 0xffffff);
	const bool found = t != g_dcts.end();
	const bool routed = found && roce_route_ok(wqe + MLX5_QPN_CTRL_SEG_SIZE, t->second);
	const bool key_ok = found && t->second->key == w.dc_key;
	if (found && routed && key_ok) {
		const int rc = deliver(t->second, d->qp.qp_num, w.data,
				       w.inl_hdr & ~MLX5_QPN_INLINE_SEG);
		if (rc < 0)
			return 0; /* RNR: retried on the next call */
		d->waiting = false;
		*done = true;
		return rc; /* 0, or the responder's NAK: the requester's error */
	}
	/* Lost on the way or dropped by the target: the requester hears nothing and retries
	 * until its transport timeout has passed. */
	if (!d->waiting) {
		d->waiting = true;
		d->wait_since_us = dev.now_us;
		dev.dropped++;
		if (found && routed)
			dev.key_violations++;
	}
	if (dev.now_us - d->wait_since_us < timeout_us(d))
		return 0;
	d->waiting = false;
	return MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR;
}

} // namespace

void
advance_us(uint64_t us)
{
	fake().now_us += us;
}

int
dc_execute()
{
	std::lock_guard<std::mutex> g(g_mu);
	int done = 0;
	for (auto &[qpn, d] : g_dcis) {
		/* RESET, INIT, RTR: the SQ is not processed; ERR: flushed. */
		if (d->state != IBV_QPS_RTS && d->state != IBV_QPS_ERR)
			continue;
		take_doorbell(d);
		const uint32_t *dbrec = static_cast<const uint32_t *>(d->dbrec_page);
		uint16_t pi =
			uint16_t(be32toh(std::atomic_ref<uint32_t>(const_cast<uint32_t &>(dbrec[1]))
						 .load(std::memory_order_acquire)));
		const uint32_t nbb_ring = uint32_t(d->sq.size() / 64);
		while (uint16_t(d->sq_ci) != pi) {
			const uint16_t c = uint16_t(d->sq_ci);
			/* Rung: the register named a WQE index at or beyond this one. */
			if (!d->db_valid || int16_t(uint16_t(d->db_idx - c)) < 0)
				break;
			/* Gather the WQE's BBs (it may wrap around the ring). */
			uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * 64];
			memcpy(wqe, &d->sq[size_t(d->sq_ci % nbb_ring) * 64], 64);
			mlx5_qpn_wqe_fields w;
			mlx5_qpn_wqe_parse_ctrl(wqe, &w);
			uint32_t nbb = mlx5_qpn_wqe_bbs(w.ds);
			if (nbb == 0 || nbb > MLX5_QPN_WQE_MAX_BBS)
				nbb = 1;
			if (uint16_t(pi - c) < nbb)
				break; /* the record does not cover the whole WQE yet */
			for (uint32_t i = 1; i < nbb; i++)
				memcpy(wqe + i * 64, &d->sq[size_t((d->sq_ci + i) % nbb_ring) * 64],
				       64);
			mlx5_qpn_cqe_fields f{};
			f.qpn = qpn;
			f.wqe_counter = c;
			f.wqe_opcode = MLX5_QPN_OPCODE_SEND;
			f.opcode = MLX5_QPN_PRM_CQE_REQ;
			int synd = 0;
			if (d->state == IBV_QPS_ERR) {
				synd = MLX5_QPN_SYND_WR_FLUSH_ERR; /* not sent */
				fake().flushed++;
			} else {
				synd = mlx5_qpn_wqe_parse_dc_send(wqe, sizeof(wqe), &w);
				if (synd == 0 && (w.qpn != qpn || w.wqe_index != c))
					synd = MLX5_QPN_SYND_LOCAL_QP_OP_ERR; /* a stale WQE */
				bool sent = false;
				synd = synd != 0 ? synd : send_one(d, wqe, w, &sent);
				if (synd == 0 && !sent)
					break; /* waits: RNR, or dropped before its timeout */
				fake().executed++;
				if (synd != 0)
					to_err(d);
			}
			if (synd != 0) {
				f.opcode = MLX5_QPN_PRM_CQE_REQ_ERR;
				f.syndrome = uint8_t(synd);
			}
			/* A success completes into the CQ only when the WQE asked for it (CQ
			 * update in fm_ce_se); an error always does. */
			if (synd != 0 || (w.fm_ce_se & MLX5_QPN_WQE_CTRL_CQ_UPDATE) != 0)
				cq_write(d->cq, f, 0, nullptr, 0);
			d->sq_ci += nbb;
			done++;
		}
	}
	return done;
}

int
srq_posted(uint32_t dctn)
{
	std::lock_guard<std::mutex> g(g_mu);
	auto t = g_dcts.find(dctn);
	if (t == g_dcts.end() || t->second->srq == nullptr)
		return -1;
	return int(be32toh(t->second->srq->dbrec[0]));
}

} // namespace hwfake
