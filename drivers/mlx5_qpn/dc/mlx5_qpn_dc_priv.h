/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DC_PRIV_H
#define MLX5_QPN_DC_PRIV_H

/**
 * @file
 * Internal to the DC data path: the process-local objects behind the public handles, shared by
 * its files:
 *  - mlx5_qpn_dc.cpp     CQ, DCI, DCT create/destroy; post, ring, poll;
 *  - mlx5_qpn_dc_recover.cpp  a DCI's ERR state and its recovery, syndrome names;
 *  - mlx5_qpn_ah.cpp  address handles;
 *  - mlx5_qpn_dc_rx.cpp  receiving on a DCT: its SRQ's WQEs, which the DC layer posts, the
 *                        messages held readable, their reposting, and the read.
 * Thread safety: as mlx5_qpn_dc.h (each object used by one thread at a time).
 */

#include <cstdint>

#include <atomic>

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_prm_wqe.h"

struct mlx5_qpn_backend;
struct mlx5_qpn_dci;

/* Process-local CQ: its ring is in device memory; the map finds the DCI of a requester CQE
 * (like the provider's QP table), to return the wr_id and free the send queue slot; rx_dcts the
 * SRQ-backed DCTs completing on it, whose receive WQEs a responder CQE gives back. */
struct mlx5_qpn_cq {
	struct mlx5_qpn_backend *be;
	const struct mlx5_qpn_dc_ops *dc;         /* be's, checked at create */
	int (*exec)(struct mlx5_qpn_backend *be); /* dc->execute: run by every poll, or NULL */
	struct mlx5_qpn_dc_cq_info info;
	uint8_t *ring;
	uint32_t *dbrec;
	uint32_t ci;
	uint32_t log_depth;
	uint32_t nb_qps;
	/* WQEs the DCIs on this CQ may have outstanding (each its max_wqes): at most the CQ's
	 * depth, so that the device never overruns it (a ConnectX raises a CQ error then and
	 * completes nothing more on the CQ). */
	uint32_t dci_wqes;
	/* The device raised a CQ error on it (cq_check): its DCIs fail with -EIO for good. */
	bool failed;
	uint32_t map_cap; /* power of two */
	uint32_t map_used;
	struct mlx5_qpn_dci **map;
	struct mlx5_qpn_dci *last;
	struct mlx5_qpn_dct *rx_dcts; /* list through mlx5_qpn_dct::rx_next */
};

/* One message held readable on an SRQ-backed DCT: the DC layer's message counter (what the
 * completion's wqe_counter says), the receive WQE holding it, its length. */
struct mlx5_qpn_dc_rx_msg {
	uint32_t cnt;
	uint16_t wqe;
	uint16_t valid;
	uint32_t len;
};

/* The SRQ side of a DCT: the list of receive WQEs as rdma-core keeps it (head:
 * next to post; tail: the spare at the end of the list, never posted), and the last
 * info.rx_slots messages, whose WQEs are kept back from the device until a later message
 * pushes them out. */
struct mlx5_qpn_dc_rx {
	uint8_t *wqes;
	uint32_t *dbrec;
	uint32_t stride;
	uint32_t wqe_mask;
	uint16_t head, tail;
	uint16_t posted; /* counter published in the doorbell record */
	uint16_t rsvd;
	uint32_t msgs;                   /* messages received so far */
	struct mlx5_qpn_dc_rx_msg *held; /* info.rx_slots entries, message counter % rx_slots */
};

/* Process-local DCI: the send queue's counters (BBs and WQEs), the wr_ids, its state. */
struct mlx5_qpn_dci {
	struct mlx5_qpn_cq *cq;
	struct mlx5_qpn_dc_dci_info info;
	uint8_t *sq;
	uint32_t bb_mask;
	uint32_t pi_bb;   /* BB producer counter */
	uint32_t rung_bb; /* last counter published */
	uint32_t max_wqes;
	uint32_t posted;
	uint32_t completed;   /* written by the CQ poller (atomic) */
	uint8_t last_ctrl[8]; /* first 8 bytes of the last WQE's control segment */
	uint64_t *wrid;       /* per BB index of a WQE's first BB */
	/* MLX5_QPN_DCI_READY / _ERROR: written by the CQ poller when it polls an error CQE of
	 * this DCI (atomic), read by the poster; back to READY only in mlx5_qpn_dci_recover(). */
	uint32_t state;
	bool has_path;                /* created with a path (else the port's default) */
	struct mlx5_qpn_dc_path path; /* what dci_reset brings it back with */
};

struct mlx5_qpn_dct {
	struct mlx5_qpn_cq *cq;
	struct mlx5_qpn_dc_dct_info info;
	struct mlx5_qpn_dc_rx srq;
	struct mlx5_qpn_dct *rx_next;
};

namespace mlx5_qpn_dc {

/* An atomic load of device-written memory the DC layer only reads. */
template <typename T>
T
load_shared(const T &x, std::memory_order mo)
{
	return std::atomic_ref<T>(const_cast<T &>(x)).load(mo);
}

/* Set up the SRQ of a DCT: every WQE written, all but the spare posted, the
 * DCT put on its CQ's list. 0; -EINVAL (a layout the DC layer cannot use); -ENOMEM. */
int rx_init(struct mlx5_qpn_dct *dct);

/* Undo rx_init() (before the backend destroys the DCT). */
void rx_fini(struct mlx5_qpn_dct *dct);

/* A responder CQE (RESP_SEND or RESP_ERR) of cq: if it is an SRQ-backed DCT's, take its
 * receive WQE back (hold it readable, or repost it at once for an error), rewrite
 * wc->wqe_counter to the message counter and return true; false for a CQE of no DCT here. */
bool rx_complete(struct mlx5_qpn_cq *cq, const uint8_t *cqe, uint8_t op_own,
		 const struct mlx5_qpn_cqe_fields *f, struct mlx5_qpn_wc *wc);

/* mlx5_qpn_dct_read(). */
int rx_read(const struct mlx5_qpn_dct *dct, uint16_t msg, void *buf, uint32_t len);

/* Whether the device raised a CQ error on cq (the backend's cq_check, asked only where a DCI
 * stops making progress): then, once, every DCI on it goes to ERR and one line says so. */
bool cq_failed(struct mlx5_qpn_cq *cq);

/* The answer of a post on a full send queue: -ENOBUFS, or -EIO when its CQ is in error (the
 * WQEs outstanding will never complete). */
int sq_full(struct mlx5_qpn_dci *dci);

} // namespace mlx5_qpn_dc

#endif /* MLX5_QPN_DC_PRIV_H */
