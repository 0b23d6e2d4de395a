/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client lcore's DCI as both fabrics use it (conn_emu_dc.cpp on the emulated device,
 * rdmacm_dc.cpp on hardware): its sends counted until they complete, its completions handed to
 * the engine with their syndromes, and its recovery after an error CQE.
 *
 * An error CQE moves the DCI to ERR (mlx5_qpn_dci_state()); the device then completes every
 * WQE posted before it as flushed (MLX5_QPN_SYND_WR_FLUSH). The engine fails the connection
 * that owned the failed WQE and each connection a flushed WQE belonged to; this lcore posts
 * nothing more (-EAGAIN) until the DCI is back: once every WQE it had outstanding has
 * completed, mlx5_qpn_dci_recover() takes it through RESET to RTS, as UCX's DC transport does,
 * and the connections made after that send again. A recovery the device refuses (other than
 * -EBUSY; a ConnectX can refuse the modify) replaces the DCI: it is destroyed and a new one made
 * on the same CQ, device and path (app_dci_create()), counted in ST.dci_replaced, one line says
 * why. Only if that is refused too is the DCI dead: its sends are -EIO, one line says why.
 *
 * Thread safety: one client lcore's (conn.h).
 */
#ifndef QPN_TESTPMD_DC_DCI_H
#define QPN_TESTPMD_DC_DCI_H

#include <cstdint>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "conn.h"

struct lcore_stats;

struct app_dci {
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	/* Where app_dci_create() made the DCI: a replacement is made alike. */
	mlx5_qpn_dev *dev = nullptr;
	mlx5_qpn_dc_path path{};
	bool has_path = false;
	uint32_t outstanding = 0; /* posted, not completed yet */
	bool dead = false;        /* recovery and replacement refused: no more sends */
};

/* log2 of a client DCI's send queue in basic blocks. */
constexpr uint32_t kDciLogSq = 8;

/* Make D's DCI on DEV over D.cq (made by the caller), through PATH (NULL: the port's default
 * path, as mlx5_qpn_dci_create()), and keep both for a replacement. 0 or the creation's error. */
int app_dci_create(app_dci &d, mlx5_qpn_dev *dev, const mlx5_qpn_dc_path *path);

/* Post one SEND (64 bytes of the fill the passive side checks). 0; -EAGAIN (in error, not
 * recovered yet); -EIO (dead); else mlx5_qpn_dci_post_send()'s errors. */
int app_dci_send(app_dci &d, const mlx5_qpn_ah *ah, uint32_t dctn, uint64_t dc_key, uint64_t wr_id);

/* Up to MAX completions as COMPLETION events (error and syndrome set from the CQE), then the
 * recovery when it is due (counted in ST.dci_recoveries, a replacement in ST.dci_replaced).
 * LCORE names the lines of a refusal. */
unsigned app_dci_completions(app_dci &d, qpn_conn_event *ev, unsigned max, lcore_stats &st,
			     unsigned lcore);

/* What every SEND carries and the passive side checks. */
constexpr uint32_t kDcPayload = 64;
constexpr uint8_t kDcFill = 0x5a;

#endif /* QPN_TESTPMD_DC_DCI_H */
