/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DC_H
#define MLX5_QPN_DC_H

/**
 * @file
 * DC data path of an mlx5_qpn device: DC initiators (DCI) that send to DC targets (DCT), and
 * completion queues — in the mlx5 formats. A DCI's send queue holds mlx5 send WQEs (control
 * segment, datagram segment with the DCT's QPN and DC key, inline data segment); posting writes
 * them, ringing updates the doorbell record and writes the 64-bit doorbell register of the DCI's
 * mapped UAR page (offset 0x800). The device executes the WQEs, delivers each SEND to its DCT
 * (checking the DC key), and writes 64-byte CQEs whose owner bit flips on each pass of the ring.
 * A malformed WQE completes with an error CQE and its syndrome; a SEND nobody answers (unknown
 * DCT, wrong DC key: the DCT drops it) completes with MLX5_QPN_SYND_TRANSPORT_RETRY once the
 * sender's retries run out, as hardware does. After an error CQE the DCI is in ERR until
 * mlx5_qpn_dci_recover() (mlx5_qpn_dci_state()); the DCT's and the DCI's local path (RoCE GID,
 * hop limit, MTU) is struct mlx5_qpn_dc_path.
 *
 * Every send carries a route: an address handle (struct mlx5_qpn_ah) whose address vector
 * (LID, SL, GRH) the WQE's datagram segment is built from, as rdma-core's mlx5 provider copies
 * an ibv_ah's AV into a DC WQE.
 *
 * Backends: both implement all of it the same way: a CQ, a DCI, and a DCT on an SRQ whose
 * receive WQEs this library posts. The hardware backend creates mlx5dv DC QPs and an ibv_ah per
 * address; the emulated device keeps its queues in its shared memory, so a DCI of one process
 * can send to a DCT of another process on the same emulated device. On both, a send without an AH is
 * refused (-EINVAL): a real fabric needs the route, and the emulated device is no more lenient.
 *
 * Thread safety: a DCI, a DCT and a CQ are each used by one thread at a time. Different objects
 * may be used concurrently; an AH is read-only after create and may be used by any number of
 * DCIs of its device at once (destroy it only when none still posts with it).
 *
 * Progress: post, ring, poll drive every backend. A ConnectX executes WQEs by itself; a device
 * that executes them in software (the emulated one) runs one execution step inside every
 * mlx5_qpn_cq_poll(), so an application needs no other call and no service lcore, in any
 * process. mlx5_qpn_dev_service_run() is the same step without a CQ (a no-op on hardware).
 */

#include <stdint.h>

#include "mlx5_qpn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_cq;
struct mlx5_qpn_dci;
struct mlx5_qpn_dct;
struct mlx5_qpn_ah;

/**
 * Where a DCI's sends go: the fields of an ibv_ah_attr a DC send needs. InfiniBand routes by
 * dlid (and the GRH when is_global); RoCE always needs is_global and the peer's GID.
 */
struct mlx5_qpn_dc_addr {
	uint8_t port;          /**< Local port, 1-based (0 means 1). */
	uint8_t sl;            /**< Service level, 0..15. */
	uint8_t is_global;     /**< 1: a GRH with the fields below. */
	uint8_t sgid_index;    /**< Local GID table index (GRH). */
	uint16_t dlid;         /**< Destination LID (InfiniBand). */
	uint8_t hop_limit;     /**< GRH hop limit. */
	uint8_t traffic_class; /**< GRH traffic class. */
	uint32_t flow_label;   /**< GRH flow label, 20 bits. */
	uint8_t dgid[16];      /**< Destination GID (GRH), network order. */
};

/**
 * The local path of a DC object, applied at its RTR transition (INIT->RTR of ibv_modify_qp):
 * what rdma_init_qp_attr() gives for a connection's route (ibv_qp_attr::ah_attr and path_mtu),
 * as UCX takes its DCT's and DCI's address from the interface's GID and hop limit.
 * InfiniBand without a GRH needs none of it; RoCE always needs is_global and the GID index of
 * the route (e.g. the RoCE v2 entry of the interface's IPv4 address, rarely index 0).
 * A NULL path to mlx5_qpn_dci_create_path() / mlx5_qpn_dct_create_path() means the port's
 * default: no GRH on InfiniBand; on RoCE the first RoCE v2 GID holding an IPv4 address
 * (::ffff:a.b.c.d; none: -EINVAL), hop limit 64, traffic class 0; the port's active MTU.
 * A path_mtu above the port's active MTU is lowered to it (as rdma_cm and UCX take the
 * smaller). Refused (-EINVAL, one log line) as the kernel refuses them: a port the device has
 * not, sl above 15, path_mtu above 5, static_rate above 23 (IBV_RATE_800_GBPS), a flow label
 * above 20 bits, no GRH on RoCE, a GID index with no entry in the port's table. The emulated
 * device has InfiniBand ports with one GID each (index 0) and checks the same.
 */
struct mlx5_qpn_dc_path {
	uint8_t port;          /**< Local port, 1-based (0: the handle's port). */
	uint8_t is_global;     /**< 1: a GRH with sgid_index, hop_limit, traffic_class. */
	uint8_t sgid_index;    /**< Local GID table index (RoCE: the route's). */
	uint8_t hop_limit;     /**< GRH hop limit (0 means 64). */
	uint8_t traffic_class; /**< GRH traffic class. */
	uint8_t sl;            /**< Service level (RoCE: priority), 0..15. */
	uint8_t path_mtu;    /**< enum ibv_mtu value 1..5 (256..4096); 0: the port's active MTU. */
	uint8_t static_rate; /**< enum ibv_rate value; 0: the port's rate. */
	uint32_t flow_label; /**< GRH flow label, 20 bits. */
	uint32_t rsvd;       /**< 0. */
};

/** mlx5_qpn_dci_state(): the DCI sends. */
#define MLX5_QPN_DCI_READY 0
/** mlx5_qpn_dci_state(): an error CQE moved the DCI to ERR; every WQE posted after the failed
 * one completes flushed (MLX5_QPN_SYND_WR_FLUSH), mlx5_qpn_dci_post_send() refuses new ones
 * (-EIO), mlx5_qpn_dci_recover() brings it back. */
#define MLX5_QPN_DCI_ERROR 1

/** Error CQE syndromes (PRM; rdma-core MLX5_CQE_SYNDROME_*) a DC user meets. */
#define MLX5_QPN_SYND_LOCAL_LENGTH 0x01 /**< Local length error. */
#define MLX5_QPN_SYND_LOCAL_QP_OP  0x02 /**< Malformed WQE. */
#define MLX5_QPN_SYND_WR_FLUSH     0x05 /**< Flushed: the QP was in ERR. */
/** The target NAKed the SEND: its receive could not hold it (the message is longer than the
 * posted buffer). */
#define MLX5_QPN_SYND_REMOTE_INV_REQ 0x12
#define MLX5_QPN_SYND_REMOTE_ACCESS  0x13 /**< Remote access error. */
/** The target NAKed the SEND: its receive failed (the buffer's key, access or PD, or an error
 * of the responder). */
#define MLX5_QPN_SYND_REMOTE_OP       0x14
#define MLX5_QPN_SYND_TRANSPORT_RETRY 0x15 /**< Retries exceeded: no answer from the target. */

/** CQE opcodes (PRM, op_own >> 4). */
#define MLX5_QPN_CQE_REQ       0x0 /**< Send completion (requester). */
#define MLX5_QPN_CQE_RESP_SEND 0x2 /**< Receive completion (responder: a DCT got a SEND). */
#define MLX5_QPN_CQE_REQ_ERR   0xd /**< Requester error. */
#define MLX5_QPN_CQE_RESP_ERR  0xe /**< Responder error. */

/** A completion, decoded from a CQE. */
struct mlx5_qpn_wc {
	uint64_t wr_id;       /**< The wr_id given at post (requester) or 0 (responder). */
	uint32_t qpn;         /**< Local QP: the DCI's or the DCT's QPN. */
	uint32_t src_qpn;     /**< Responder: the sending DCI's QPN. */
	uint32_t byte_len;    /**< Bytes delivered. */
	uint16_t wqe_counter; /**< Requester: index of the WQE; responder: the message (for
				 mlx5_qpn_dct_read()). */
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

/** The DCT's QPN, the number a DCI addresses (rdma-core: the DCT's ibv_qp::qp_num, a send's
 * remote_dctn); 0 for NULL. */
uint32_t mlx5_qpn_dct_qpn(const struct mlx5_qpn_dct *dct);

/**
 * Copy the payload of the message a DCT received with responder completion wqe_counter
 * (struct mlx5_qpn_wc::wqe_counter of a MLX5_QPN_CQE_RESP_SEND completion) into buf (at most
 * len bytes). The last 64 messages of a DCT stay readable: a received message's receive buffer
 * goes back to the device only when the 64th later message is polled, and the wqe_counter of a
 * responder completion is a message counter of this library (not the SRQ WQE index). A message
 * is readable once its completion has been polled.
 * Thread safety: the DCT's thread, which on hardware also polls the DCT's CQ (polling gives the
 * buffers back to the device).
 * @return the message's byte length (may exceed len: truncated copy); -EINVAL; -EOPNOTSUPP (a
 *         backend without receive); -ESTALE the message was pushed out by a later one (or the
 *         counter names none received yet).
 */
int mlx5_qpn_dct_read(const struct mlx5_qpn_dct *dct, uint16_t wqe_counter, void *buf,
		      uint32_t len);

/** Destroy a DCT. NULL is ignored. */
void mlx5_qpn_dct_destroy(struct mlx5_qpn_dct *dct);

/**
 * Create an address handle for sends to one peer (hardware: ibv_create_ah, its address vector
 * read back with mlx5dv_init_obj(MLX5DV_OBJ_AH); emulated device: the same AV built in
 * software). Slow path; the AH may be shared by the DCIs of the device, read-only.
 * @return 0; -EINVAL (NULL, sl > 15, flow_label above 20 bits); -ENOMEM; -EOPNOTSUPP; the
 *         negated errno of ibv_create_ah.
 */
int mlx5_qpn_ah_create(struct mlx5_qpn_dev *dev, const struct mlx5_qpn_dc_addr *addr,
		       struct mlx5_qpn_ah **ah);

/** Destroy an address handle (no WQE posted with it may still be unrung). NULL is ignored. */
void mlx5_qpn_ah_destroy(struct mlx5_qpn_ah *ah);

/**
 * Create a DC initiator with a send queue of 2^log_sq_depth WQEs; its QPN comes from the
 * device's QPN table (never from a reserved range). Every WQE completes on cq, so the DCIs on
 * a CQ may have at most its depth of WQEs outstanding in all (a device that overruns a CQ
 * stops completing on it).
 * @return 0; -EINVAL; -ENOMEM; -EOPNOTSUPP (also: the device has no DC transport); -ENOSPC
 *         (cq's DCIs would exceed its depth: one line).
 */
int mlx5_qpn_dci_create(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
			struct mlx5_qpn_dci **dci);

/** The DCI's hardware QPN. */
uint32_t mlx5_qpn_dci_qpn(const struct mlx5_qpn_dci *dci);

/**
 * The most inline bytes one SEND of this DCI carries: MLX5_QPN_DC_MAX_INLINE, or less where
 * the device's largest DC send WQE (cmd_hca_cap.max_wqe_sz_sq_dc, in whole 64-byte blocks, less
 * the control, datagram and inline headers) holds less. 0 for NULL.
 */
uint32_t mlx5_qpn_dci_max_inline(const struct mlx5_qpn_dci *dci);

/**
 * Write one SEND WQE (signaled) to the DCT whose QPN is `dctn` (mlx5_qpn_dct_qpn()) with DC
 * key `dc_key`, routed by `ah` (its address vector is copied into the WQE's datagram segment),
 * len bytes inline (at most mlx5_qpn_dci_max_inline(), never above MLX5_QPN_DC_MAX_INLINE).
 * Not visible to the device until mlx5_qpn_dci_ring().
 * A NULL ah is -EINVAL on every backend: on hardware a WQE with a zero route would go nowhere,
 * and the emulated device refuses it too so that code tested on it runs on a ConnectX.
 * A DCI whose CQ polled an error CQE of it is in ERR (mlx5_qpn_dci_state()): a ConnectX would
 * take the WQE and flush it (MLX5_QPN_SYND_WR_FLUSH); here it is refused with -EIO and nothing
 * is posted, so every WQE that was posted completes exactly once (the error CQE or a flush)
 * and the caller learns at once that the DCI needs mlx5_qpn_dci_recover().
 * @return 0; -ENOBUFS send queue full; -EIO the DCI is in ERR, or its CQ is (the device
 *         overran it: asked of the device when the queue is full); -EINVAL (len too long, NULL,
 *         no route where one is needed, an AH of another device).
 */
int mlx5_qpn_dci_post_send(struct mlx5_qpn_dci *dci, const struct mlx5_qpn_ah *ah, uint32_t dctn,
			   uint64_t dc_key, const void *buf, uint32_t len, uint64_t wr_id);

/** Most inline bytes per SEND. */
#define MLX5_QPN_DC_MAX_INLINE 256

/**
 * Update the doorbell record and ring the UAR doorbell for everything posted, ordered as DPDK's
 * mlx5_doorbell_ring(): I/O write barrier, doorbell record, write barrier, 64-bit UAR write,
 * and a flushing barrier after it when the register is mapped write-combining.
 */
void mlx5_qpn_dci_ring(struct mlx5_qpn_dci *dci);

/** Destroy a DCI. NULL is ignored. */
void mlx5_qpn_dci_destroy(struct mlx5_qpn_dci *dci);

/**
 * mlx5_qpn_dct_create() with a local path (NULL: the port's default, see struct
 * mlx5_qpn_dc_path). On RoCE the DCT answers from the path's GID with its hop limit: when that
 * is not the route's GID, or the hop limit is smaller than the route's hops, its answers never
 * reach the DCI, whose sends then time out (MLX5_QPN_SYND_TRANSPORT_RETRY).
 * @return as mlx5_qpn_dct_create(); -EINVAL also for a path the port refuses (no GRH on RoCE,
 *         a GID index that is not in the table, path_mtu above 5).
 */
int mlx5_qpn_dct_create_path(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint64_t dc_key,
			     const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dct **dct);

/**
 * mlx5_qpn_dci_create() with a local path (NULL: the port's default); the path is kept for
 * mlx5_qpn_dci_recover().
 * @return as mlx5_qpn_dci_create(); -EINVAL also for a path the port refuses.
 */
int mlx5_qpn_dci_create_path(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq,
			     uint32_t log_sq_depth, const struct mlx5_qpn_dc_path *path,
			     struct mlx5_qpn_dci **dci);

/**
 * The DCI's state as its CQ's polls saw it: MLX5_QPN_DCI_READY, or MLX5_QPN_DCI_ERROR once an
 * error CQE of it was polled (the device moved it to ERR). Thread safety: the DCI's thread.
 * @return MLX5_QPN_DCI_READY / MLX5_QPN_DCI_ERROR; -EINVAL for NULL.
 */
int mlx5_qpn_dci_state(const struct mlx5_qpn_dci *dci);

/**
 * Bring a DCI in ERR back to RTS, as UCX's DC transport does: RESET, then INIT, RTR (its
 * creation path, kept since mlx5_qpn_dci_create_path()) and RTS; its send queue starts empty
 * at WQE counter 0, its doorbell record zeroed, as after a hardware RESET. Call it once every
 * WQE posted before the error has completed (the error CQE and the flushed ones polled): while
 * some are outstanding it returns -EBUSY (having rung any posted but unrung WQEs, so that the
 * device flushes them and the next polls complete them). A READY DCI is left as it is (0).
 * Slow path (device commands). Thread safety: the DCI's thread, with no poll of its CQ running
 * at the same time.
 * @return 0; -EINVAL (NULL); -EBUSY (WQEs of the DCI not completed yet: poll, then call again);
 *         -EIO (its CQ is in error: they never will; make the CQ and its DCIs again);
 *         -EOPNOTSUPP (a backend without dci_reset, or a kernel without DCI->RESET, before
 *         5.2: one line); the negated errno of a state change the device refused (the DCI
 *         stays in ERR).
 */
int mlx5_qpn_dci_recover(struct mlx5_qpn_dci *dci);

/** A readable name of an error CQE syndrome ("transport retry counter exceeded", ...);
 * "unknown syndrome" for others. Never NULL. */
const char *mlx5_qpn_wc_syndrome_str(uint8_t syndrome);

/**
 * Progress of the device without a CQ poll: one execution step of a device that executes WQEs
 * in software (the step mlx5_qpn_cq_poll() runs too); a no-op returning 0 on hardware, whose
 * device progresses by itself. Not needed by a loop that polls its CQs. Any thread may call it.
 * @return WQEs executed (>= 0; 0 on hardware); -EINVAL (NULL); -EOPNOTSUPP (a device without
 *         a DC data path).
 */
int mlx5_qpn_dev_service_run(struct mlx5_qpn_dev *dev);

/*
 * Names of the 2.1 ABI, each an exported alias of its successor (the same function) for
 * applications built against it; they leave with the next ABI number. A call compiles with a
 * warning naming the successor. The AH's struct tag follows its calls: struct mlx5_qpn_dc_ah is
 * struct mlx5_qpn_ah.
 */
#define mlx5_qpn_dc_ah mlx5_qpn_ah
/** Deprecated name of mlx5_qpn_dct_qpn(). */
uint32_t mlx5_qpn_dct_number(const struct mlx5_qpn_dct *dct)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_dct_qpn()");
/** Deprecated name of mlx5_qpn_ah_create(). */
int mlx5_qpn_dc_ah_create(struct mlx5_qpn_dev *dev, const struct mlx5_qpn_dc_addr *addr,
			  struct mlx5_qpn_ah **ah) MLX5_QPN_DEPRECATED("use mlx5_qpn_ah_create()");
/** Deprecated name of mlx5_qpn_ah_destroy(). */
void mlx5_qpn_dc_ah_destroy(struct mlx5_qpn_ah *ah)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_ah_destroy()");

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_DC_H */
