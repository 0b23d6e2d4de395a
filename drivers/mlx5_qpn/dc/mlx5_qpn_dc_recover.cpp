/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A DCI's ERR state and its recovery (mlx5_qpn_dc.h). The state is what the DCI's CQ polls saw:
 * mlx5_qpn_cq_poll() marks the DCI in ERR when it polls an error CQE of it (the device moved the
 * QP to ERR then), and mlx5_qpn_dci_post_send() refuses WQEs from then on. Recovery is what UCX's
 * DC transport does with a failed DCI: wait until the device has given back every WQE, then
 * RESET -> INIT -> RTR -> RTS through the backend's dci_reset, and start the send queue over.
 */
#include <cerrno>
#include <cstring>

#include <atomic>

#include <rte_log.h>

#include "mlx5_qpn_log.h"

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_dc_priv.h"

extern int mlx5_qpn_dc_logtype;

#define DC_LOG(level, ...) MLX5_QPN_LOG(dc, level, __VA_ARGS__)

using mlx5_qpn_dc::load_shared;

namespace mlx5_qpn_dc {

bool
cq_failed(struct mlx5_qpn_cq *cq)
{
	if (cq->failed)
		return true;
	if (cq->dc->cq_check == nullptr || cq->dc->cq_check(cq->be, &cq->info) != -EIO)
		return false;
	/* The device completes nothing more on the CQ: every DCI on it is as good as in ERR,
	 * and no recovery of the DCI alone brings its completions back. */
	cq->failed = true;
	for (uint32_t i = 0; i < cq->map_cap; i++)
		if (cq->map[i] != nullptr)
			std::atomic_ref<uint32_t>(cq->map[i]->state)
				.store(MLX5_QPN_DCI_ERROR, std::memory_order_release);
	DC_LOG(ERR,
	       "CQ %u is in error (the device overran it and completes nothing more on it): its "
	       "%u DCIs fail with -EIO; destroy them and the CQ, and make them again",
	       cq->info.cqn, cq->map_used);
	return true;
}

int
sq_full(struct mlx5_qpn_dci *dci)
{
	return cq_failed(dci->cq) ? -EIO : -ENOBUFS;
}

} // namespace mlx5_qpn_dc

extern "C" {

int
mlx5_qpn_dci_state(const struct mlx5_qpn_dci *dci)
{
	if (dci == nullptr)
		return -EINVAL;
	return int(load_shared(dci->state, std::memory_order_acquire));
}

int
mlx5_qpn_dci_recover(struct mlx5_qpn_dci *dci)
{
	if (dci == nullptr)
		return -EINVAL;
	if (load_shared(dci->state, std::memory_order_acquire) == MLX5_QPN_DCI_READY)
		return 0;
	const mlx5_qpn_dc_ops *dc = dci->cq->dc;
	if (dc->dci_reset == nullptr) {
		DC_LOG(ERR, "dci_recover: not supported: the backend has no DC op for it");
		return -EOPNOTSUPP;
	}
	/* WQEs posted before the error but never rung would never complete: ring them, so that
	 * the device flushes them and every posted WQE completes exactly once. */
	if (dci->rung_bb != dci->pi_bb)
		mlx5_qpn_dci_ring(dci);
	/* A CQ in error completes nothing more: the WQEs still owned by the device never come
	 * back, so neither does the DCI (cq_failed() said so in its line). */
	if (dci->cq->failed)
		return -EIO;
	/* A WQE still owned by the device would complete into the reset queue's counters. */
	if (dci->posted != load_shared(dci->completed, std::memory_order_acquire))
		return mlx5_qpn_dc::cq_failed(dci->cq) ? -EIO : -EBUSY;
	int rc = dc->dci_reset(dci->cq->be, &dci->info, dci->has_path ? &dci->path : nullptr);
	if (rc) {
		DC_LOG(ERR, "DCI 0x%x: recovery failed, it stays in ERR: %s", dci->info.qpn,
		       strerror(-rc));
		return rc;
	}
	/* RESET restarts the send queue at counter 0 (the device's WQE counter too), as
	 * rdma-core's mlx5 provider does in ibv_modify_qp(RESET): producer, doorbell record and
	 * the per-BB wr_ids start over. Nothing is outstanding, so no poller touches them. */
	dci->pi_bb = 0;
	dci->rung_bb = 0;
	dci->posted = 0;
	std::atomic_ref<uint32_t>(dci->completed).store(0, std::memory_order_relaxed);
	memset(dci->last_ctrl, 0, sizeof(dci->last_ctrl));
	memset(dci->wrid, 0, (size_t(dci->bb_mask) + 1) * sizeof(uint64_t));
	std::atomic_ref<uint32_t>(dci->info.dbrec[MLX5_QPN_SND_DBR])
		.store(0, std::memory_order_release);
	std::atomic_ref<uint32_t>(dci->state).store(MLX5_QPN_DCI_READY, std::memory_order_release);
	/* DEBUG: at a high error rate one line per recovery would flood the log; the app counts them. */
	DC_LOG(DEBUG, "DCI 0x%x: recovered from ERR (RESET -> RTS)", dci->info.qpn);
	return 0;
}

const char *
mlx5_qpn_wc_syndrome_str(uint8_t syndrome)
{
	switch (syndrome) {
	case MLX5_QPN_SYND_LOCAL_LENGTH:
		return "local length error";
	case MLX5_QPN_SYND_LOCAL_QP_OP:
		return "local QP operation error (malformed WQE)";
	case MLX5_QPN_SYND_WR_FLUSH:
		return "work request flushed (the QP is in error)";
	case MLX5_QPN_SYND_REMOTE_INV_REQ:
		return "remote invalid request (the target's receive buffer is too short)";
	case MLX5_QPN_SYND_REMOTE_ACCESS:
		return "remote access error";
	case MLX5_QPN_SYND_REMOTE_OP:
		return "remote operational error (the target's receive failed)";
	case MLX5_QPN_SYND_TRANSPORT_RETRY:
		return "transport retry counter exceeded (no answer from the target)";
	default:
		return "unknown syndrome";
	}
}

} /* extern "C" */
