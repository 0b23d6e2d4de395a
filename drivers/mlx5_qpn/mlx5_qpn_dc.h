/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DC_H
#define MLX5_QPN_DC_H

/**
 * @file
 * DC data path of an mlx5_qpn device: DC initiators (DCI) that send to DC targets (DCT), and
 * completion queues — in the mlx5 formats. A DCI's send queue holds mlx5 send WQEs (control
 * segment, datagram segment with the DCT number and DC key, inline data segment); posting writes
 * them, ringing updates the doorbell record and writes the 64-bit doorbell register of the DCI's
 * mapped UAR page (offset 0x800). The device executes the WQEs, delivers each SEND to its DCT
 * (checking the DC key), and writes 64-byte CQEs whose owner bit flips on each pass of the ring.
 * A WQE the device cannot execute (unknown DCT, wrong DC key, bad segment) completes with an
 * error CQE and its syndrome, as hardware does.
 *
 * Backends: the emulated device implements all of it (queues live in the device's shared
 * memory, so a DCI of one process can send to a DCT of another process on the same emulated
 * device). The hardware backend returns -EOPNOTSUPP: on a ConnectX these are mlx5dv DC QPs,
 * which this project does not drive.
 *
 * Thread safety: a DCI, a DCT and a CQ are each used by one thread at a time. Different objects
 * may be used concurrently. The device executes WQEs in mlx5_qpn_dev_service_run(), which any
 * thread may call (the emulated device also registers it as a DPDK service).
 */

#include <stdint.h>

#include "mlx5_qpn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_cq;
struct mlx5_qpn_dci;
struct mlx5_qpn_dct;

/** CQE opcodes (PRM, op_own >> 4). */
#define MLX5_QPN_CQE_REQ       0x0 /**< Send completion (requester). */
#define MLX5_QPN_CQE_RESP_SEND 0x2 /**< Receive completion (responder: a DCT got a SEND). */
#define MLX5_QPN_CQE_REQ_ERR   0xd /**< Requester error. */
#define MLX5_QPN_CQE_RESP_ERR  0xe /**< Responder error. */

/** A completion, decoded from a CQE. */
struct mlx5_qpn_wc {
	uint64_t wr_id;       /**< The wr_id given at post (requester) or 0 (responder). */
	uint32_t qpn;         /**< Local QP: the DCI's QPN or the DCT number. */
	uint32_t src_qpn;     /**< Responder: the sending DCI's QPN. */
	uint32_t byte_len;    /**< Bytes delivered. */
	uint16_t wqe_counter; /**< Requester: index of the WQE; responder: receive slot. */
	uint8_t opcode;       /**< MLX5_QPN_CQE_*. */
	uint8_t syndrome;     /**< 0, or the error syndrome of an error CQE. */
};

/**
 * Create a completion queue of 2^log_depth CQEs.
 * @return 0; -EINVAL; -ENOMEM; -EOPNOTSUPP (backend without a data path).
 */
int mlx5_qpn_cq_create(struct mlx5_qpn_dev *dev, uint32_t log_depth, struct mlx5_qpn_cq **cq);

/** Destroy a CQ (no QP may still use it). NULL is ignored. */
void mlx5_qpn_cq_destroy(struct mlx5_qpn_cq *cq);

/**
 * Poll up to n completions (owner bit of each CQE against the consumer index's pass).
 * @return the number of completions written to wc (0..n); -EINVAL.
 */
int mlx5_qpn_cq_poll(struct mlx5_qpn_cq *cq, struct mlx5_qpn_wc *wc, unsigned int n);

/**
 * Create a DC target with a DC key; its number comes from the device's QPN table.
 * @return 0; -EINVAL; -ENOMEM; -EOPNOTSUPP.
 */
int mlx5_qpn_dct_create(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint64_t dc_key,
			struct mlx5_qpn_dct **dct);

/** The DCT number (what a DCI addresses). */
uint32_t mlx5_qpn_dct_number(const struct mlx5_qpn_dct *dct);

/**
 * Copy the payload of the message a DCT received with responder completion wqe_counter
 * (struct mlx5_qpn_wc::wqe_counter) into buf (at most len bytes). Thread safety: the DCT's thread.
 * @return the message's byte length (may exceed len: truncated copy); -EINVAL;
 *         -ESTALE the slot was reused by a later message (the ring keeps the last 64).
 */
int mlx5_qpn_dct_read(const struct mlx5_qpn_dct *dct, uint16_t wqe_counter, void *buf,
		      uint32_t len);

/** Destroy a DCT. NULL is ignored. */
void mlx5_qpn_dct_destroy(struct mlx5_qpn_dct *dct);

/**
 * Create a DC initiator with a send queue of 2^log_sq_depth WQEs; its QPN comes from the
 * device's QPN table (never from a reserved range).
 * @return 0; -EINVAL; -ENOMEM; -EOPNOTSUPP.
 */
int mlx5_qpn_dci_create(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
			struct mlx5_qpn_dci **dci);

/** The DCI's hardware QPN. */
uint32_t mlx5_qpn_dci_qpn(const struct mlx5_qpn_dci *dci);

/**
 * Write one SEND WQE (signaled) to DCT `dctn` with DC key `dc_key`, len bytes inline (at most
 * MLX5_QPN_DC_MAX_INLINE). Not visible to the device until mlx5_qpn_dci_ring().
 * @return 0; -ENOBUFS send queue full; -EINVAL (len too long, NULL).
 */
int mlx5_qpn_dci_post_send(struct mlx5_qpn_dci *dci, uint32_t dctn, uint64_t dc_key,
			   const void *buf, uint32_t len, uint64_t wr_id);

/** Most inline bytes per SEND. */
#define MLX5_QPN_DC_MAX_INLINE 256

/** Update the doorbell record and ring the UAR doorbell for everything posted. */
void mlx5_qpn_dci_ring(struct mlx5_qpn_dci *dci);

/** Destroy a DCI. NULL is ignored. */
void mlx5_qpn_dci_destroy(struct mlx5_qpn_dci *dci);

/**
 * Let the device execute rung WQEs once (the body of its doorbell service).
 * @return WQEs executed (>= 0); -EOPNOTSUPP.
 */
int mlx5_qpn_dev_service_run(struct mlx5_qpn_dev *dev);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_DC_H */
