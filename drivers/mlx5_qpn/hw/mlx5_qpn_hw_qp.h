/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_QP_H
#define MLX5_QPN_HW_QP_H

/**
 * @file
 * Internal: the hardware backend's ordinary-QP source, behind the ops qp_create/qp_destroy.
 *
 * Where no RESERVED_QPN object can be made (firmware without the cap bit, no DEVX, some VFs,
 * old kernels), a QPN can still be held the way UCX falls back: create a real QP and keep it.
 * Its number is unique on the device (device-global, like every QPN) for as long as the QP
 * lives, so the QP *is* the reservation; destroying it, after the generic layer's quarantine,
 * gives the number back to the device's QPN table.
 *
 * Each QPN costs one UD QP (send and receive queues of one entry, one SGE, no inline data);
 * all of them share one one-entry CQ and one protection domain, both allocated with the first
 * QP and destroyed after the last (QPs first, then the CQ, then the PD). A QP is left in RESET:
 * it never sends, receives or completes anything, it only holds its number, so one CQ entry
 * serves any number of them.
 *
 * Every QP's queue buffers and doorbell record are pinned memory, counted against
 * RLIMIT_MEMLOCK (mlx5_qpn_hw_memlock.h): the backend caps the holder at what fits
 * (mlx5_qpn_hw_qps_set_cap()) instead of meeting ENOMEM at the Nth QP.
 *
 * Thread safety: get/put may run concurrently with each other (one mutex, held across the
 * verbs calls: they are slow-path syscalls and the fast path never takes it); destroy must
 * not race them. All calls return 0 or a negative errno.
 */

#include <cstdint>
#include <sys/types.h>

#include "mlx5_qpn_glue.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Depth of the CQ of each held QP: nothing is ever posted, so one entry. */
#define MLX5_QPN_HW_QP_CQE 1

/**
 * Arguments of ibv_create_qp() for one held QPN: UD, send and receive CQ = cq, one WR and
 * one SGE each way, no inline data, no SRQ, unsignaled (attr is zeroed first).
 */
void mlx5_qpn_hw_qp_init_attr(struct ibv_qp_init_attr *attr, struct ibv_cq *cq);

/**
 * Bytes one QP of these attributes pins, estimated from above as libmlx5 sizes its queues:
 * a UD send WQE is the control segment (16), the datagram segment (48) and 16 per SGE (or the
 * inline data), rounded up to the 64-byte basic block; a receive WQE is 16 per SGE; each queue
 * holds the WR count rounded up to a power of two; the buffer is allocated, and pinned, in whole
 * pages. Its doorbell record is a 64-byte slot of a shared page the kernel pins once per page,
 * counted as 64 bytes per QP.
 * @param page the page size (sysconf(_SC_PAGESIZE)); 0 is taken as 4096.
 */
uint64_t mlx5_qpn_hw_qp_pin_bytes(const struct ibv_qp_init_attr *attr, uint64_t page);

/**
 * Bytes a CQ of cqe entries pins: cqe + 1 entries of 64 bytes rounded up to a power of two, in
 * whole pages (libmlx5), plus its 64-byte doorbell record.
 */
uint64_t mlx5_qpn_hw_cq_pin_bytes(int cqe, uint64_t page);

/**
 * How many held QPs fit in room bytes of locked memory beside their shared CQ.
 * @return 0 when not even one fits; UINT32_MAX for an unlimited room.
 */
uint32_t mlx5_qpn_hw_qps_fit(uint64_t room, uint64_t page);

/** The ordinary QPs a device holds. */
struct mlx5_qpn_hw_qps;

/**
 * A holder for the QPs of one context (no verbs call yet).
 * @param glue resolved rdma-core entry points (alloc_pd ... destroy_qp used).
 * @param ctx  the device's context.
 * @param name device name, for log lines.
 * @return the holder, or NULL when out of memory.
 */
struct mlx5_qpn_hw_qps *mlx5_qpn_hw_qps_new(const struct mlx5_qpn_glue *glue,
					    struct ibv_context *ctx, const char *name);

/**
 * Hold at most cap QPs (what RLIMIT_MEMLOCK allows); UINT32_MAX (the default) is no cap.
 * Call before the first get.
 */
void mlx5_qpn_hw_qps_set_cap(struct mlx5_qpn_hw_qps *qps, uint32_t cap);

/**
 * Create one QP and hand out its number.
 * @return 0 and *qpn; -EINVAL for NULL arguments; -ENOMEM (also, in one line, when the cap is
 *         reached: nothing reaches rdma-core); the errno of ibv_alloc_pd, ibv_create_cq or
 *         ibv_create_qp, negated (-EIO if they set none).
 */
int mlx5_qpn_hw_qps_get(struct mlx5_qpn_hw_qps *qps, uint32_t *qpn);

/**
 * Destroy the QP holding qpn (the shared CQ stays); the number goes back to the device.
 * @return 0; -EINVAL when qpn is not held here (nothing reaches rdma-core); the negated
 *         errno of ibv_destroy_qp (the QP is then kept, so close can try again).
 */
int mlx5_qpn_hw_qps_put(struct mlx5_qpn_hw_qps *qps, uint32_t qpn);

/** Number of QPs held. */
uint32_t mlx5_qpn_hw_qps_count(const struct mlx5_qpn_hw_qps *qps);

/**
 * Free the holder. owner != 0: destroy every QP, then the shared CQ, then the PD (the process
 * that opened the device). owner == 0 (a forked child): free this process's memory only — the
 * verbs objects belong to the parent through the shared uverbs file, and destroying them
 * here would take the parent's QPNs away.
 * @return the number of QPs that were still held.
 */
uint32_t mlx5_qpn_hw_qps_free(struct mlx5_qpn_hw_qps *qps, int owner);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLX5_QPN_HW_QP_H */
