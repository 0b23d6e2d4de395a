/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receiving on a DCT: every backend hands out an SRQ whose WQEs the DC layer posts (see
 * mlx5_qpn_dc_ops.h and mlx5_qpn_dc_priv.h).
 *
 * Why the DC layer writes the SRQ's WQEs instead of calling ibv_post_srq_recv(): it polls the
 * CQ itself (mlx5_qpn_cq_poll), and rdma-core learns that an SRQ WQE is free again only in its
 * own ibv_poll_cq (mlx5_free_srq_wqe). A list rdma-core posts would drain after one pass. So,
 * as UCX's mlx5 interfaces do, the WQEs are ours: an mlx5 SRQ is a linked list (each WQE names
 * the next by index), the device takes posted WQEs in list order, and the doorbell record
 * counts the WQEs posted. Each WQE has one receive buffer of its own, fixed at setup.
 *
 * The contract of mlx5_qpn_dct_read() (mlx5_qpn_dc.h): a completion's wqe_counter names a
 * message, the last info.rx_slots messages stay readable, an older one is -ESTALE. So
 * a received WQE is not reposted at once: it is held, and goes back to the end of the list
 * (then posted) when the message rx_slots later arrives. The list thus holds rx_slots messages,
 * one spare (its end, never posted, as rdma-core keeps it) and the rest posted to the device.
 * An error completion's WQE (a message longer than the buffer, a flush) is reposted at once.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <rte_atomic.h>
#include <rte_common.h>
#include <rte_log.h>

#include "mlx5_qpn_log.h"

#include "mlx5_qpn_dc_priv.h"

extern int mlx5_qpn_dc_logtype;
#define DC_LOG(level, ...) MLX5_QPN_LOG(dc, level, __VA_ARGS__)

namespace mlx5_qpn_dc {
namespace {

uint8_t *
wqe_at(mlx5_qpn_dc_rx *rx, uint32_t i)
{
	return rx->wqes + size_t(i & rx->wqe_mask) * rx->stride;
}

uint16_t
next_of(mlx5_qpn_dc_rx *rx, uint16_t i)
{
	return mlx5_qpn_get_be16(wqe_at(rx, i) + MLX5_QPN_SRQ_OFF_NEXT);
}

/* Post every free WQE but the spare at the end of the list, then publish the count: the WQEs'
 * stores reach memory before the record the device reads them by (rte_io_wmb). */
void
post_free(mlx5_qpn_dc_rx *rx)
{
	uint16_t n = 0;
	while (rx->head != rx->tail) {
		rx->head = next_of(rx, rx->head);
		n++;
	}
	if (!n)
		return;
	rx->posted = uint16_t(rx->posted + n);
	rte_io_wmb();
	std::atomic_ref<uint32_t>(rx->dbrec[MLX5_QPN_SRQ_DBR])
		.store(rte_cpu_to_be_32(rx->posted), std::memory_order_release);
}

/* Give WQE i back: it becomes the list's new end (the old end now leads to it). */
void
give_back(mlx5_qpn_dc_rx *rx, uint16_t i)
{
	mlx5_qpn_put_be16(wqe_at(rx, rx->tail) + MLX5_QPN_SRQ_OFF_NEXT, i);
	rx->tail = i;
}

mlx5_qpn_dct *
rx_dct_of(mlx5_qpn_cq *cq, uint32_t qpn)
{
	for (mlx5_qpn_dct *t = cq->rx_dcts; t != nullptr; t = t->rx_next)
		if (t->info.dctn == qpn)
			return t;
	/* A CQE may name the receiving DCT by its user index rather than its number (CQE
	 * version 1): with one SRQ-backed DCT on the CQ, as the apps build it, it is that one. */
	return (cq->rx_dcts != nullptr) && (cq->rx_dcts->rx_next == nullptr) ? cq->rx_dcts :
									       nullptr;
}

} // namespace

int
rx_init(mlx5_qpn_dct *dct)
{
	const mlx5_qpn_dc_srq_info &si = dct->info.srq;
	mlx5_qpn_dc_rx *rx = &dct->srq;
	uint32_t n = si.log_wqes < 16 ? uint32_t(1) << si.log_wqes : 0;
	/* Room for the held messages, the spare and at least as many posted. */
	uint32_t hold = dct->info.rx_slots;
	if (n < 2 * hold + 1 || !hold || (hold & (hold - 1)) || (si.dbrec == nullptr) ||
	    (si.buf == nullptr) || si.stride < MLX5_QPN_SRQ_WQE_MIN_STRIDE ||
	    (si.stride & (si.stride - 1)) || dct->info.rx_stride < MLX5_QPN_DC_MAX_INLINE) {
		DC_LOG(ERR, "DCT 0x%x: SRQ of %u WQEs of %u bytes for %u held messages of %u bytes",
		       dct->info.dctn, n, si.stride, dct->info.rx_slots, dct->info.rx_stride);
		return -EINVAL;
	}
	rx->held = new (std::nothrow) mlx5_qpn_dc_rx_msg[dct->info.rx_slots]();
	if (rx->held == nullptr)
		return -ENOMEM;
	rx->wqes = static_cast<uint8_t *>(si.wqes);
	rx->dbrec = si.dbrec;
	rx->stride = si.stride;
	rx->wqe_mask = n - 1;
	/* The list in index order, each WQE with its own buffer; head 0 is where the device
	 * starts, the last one is the spare. */
	for (uint32_t i = 0; i < n; i++)
		mlx5_qpn_srq_wqe_build(wqe_at(rx, i), uint16_t((i + 1) & rx->wqe_mask),
				       dct->info.rx_stride, si.lkey,
				       uint64_t(uintptr_t(si.buf +
							  size_t(i) * dct->info.rx_stride)));
	rx->head = 0;
	rx->tail = uint16_t(n - 1);
	rx->posted = 0;
	post_free(rx);
	dct->rx_next = dct->cq->rx_dcts;
	dct->cq->rx_dcts = dct;
	return 0;
}

void
rx_fini(mlx5_qpn_dct *dct)
{
	for (mlx5_qpn_dct **p = &dct->cq->rx_dcts; *p != nullptr; p = &(*p)->rx_next) {
		if (*p == dct) {
			*p = dct->rx_next;
			break;
		}
	}
	delete[] dct->srq.held;
	dct->srq.held = nullptr;
}

bool
rx_complete(mlx5_qpn_cq *cq, const uint8_t *cqe, uint8_t op_own, const mlx5_qpn_cqe_fields *f,
	    mlx5_qpn_wc *wc)
{
	mlx5_qpn_dct *t = rx_dct_of(cq, f->qpn);
	if (t == nullptr)
		return false;
	mlx5_qpn_dc_rx *rx = &t->srq;
	uint16_t wqe = uint16_t(f->wqe_counter & rx->wqe_mask);
	if (f->opcode != MLX5_QPN_CQE_RESP_SEND) {
		give_back(rx, wqe); /* nothing readable in it */
		post_free(rx);
		return true;
	}
	uint32_t len = RTE_MIN(f->byte_cnt, t->info.rx_stride);
	if ((op_own & MLX5_QPN_CQE_INLINE_SCATTER_32) && len <= MLX5_QPN_CQE_INLINE_SCATTER_MAX)
		/* The device put the payload in the CQE: the buffer is ours until reposted. */
		memcpy(t->info.srq.buf + size_t(wqe) * t->info.rx_stride, cqe, len);
	uint32_t m = rx->msgs++;
	mlx5_qpn_dc_rx_msg &h = rx->held[m % t->info.rx_slots];
	if (h.valid)
		give_back(rx, h.wqe); /* the message rx_slots back goes stale */
	h = mlx5_qpn_dc_rx_msg{m, wqe, 1, len};
	post_free(rx);
	wc->wqe_counter = uint16_t(m);
	wc->qpn = t->info.dctn;
	return true;
}

int
rx_read(const mlx5_qpn_dct *dct, uint16_t msg, void *buf, uint32_t len)
{
	const mlx5_qpn_dc_rx_msg &h = dct->srq.held[msg % dct->info.rx_slots];
	/* 65536 is a multiple of rx_slots (a power of two): the slot of msg is that of the
	 * full counter. */
	if (!h.valid || uint16_t(h.cnt) != msg)
		return -ESTALE;
	uint32_t n = RTE_MIN(len, h.len);
	if (n) /* buf may be NULL with len 0 (asking the length) */
		memcpy(buf, dct->info.srq.buf + size_t(h.wqe) * dct->info.rx_stride, n);
	return int(h.len);
}

} // namespace mlx5_qpn_dc
