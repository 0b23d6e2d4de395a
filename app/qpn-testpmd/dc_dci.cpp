/* SPDX-License-Identifier: BSD-3-Clause */
/* A client lcore's DCI: sends, completions with syndromes, recovery, replacement (dc_dci.h). */
#include "dc_dci.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "testpmd.h"

int
app_dci_create(app_dci &d, mlx5_qpn_dev *dev, const mlx5_qpn_dc_path *path)
{
	d.dev = dev;
	d.has_path = path != nullptr;
	d.path = d.has_path ? *path : mlx5_qpn_dc_path{};
	return d.has_path ? mlx5_qpn_dci_create_path(dev, d.cq, kDciLogSq, path, &d.dci) :
			    mlx5_qpn_dci_create(dev, d.cq, kDciLogSq, &d.dci);
}

int
app_dci_send(app_dci &d, const mlx5_qpn_ah *ah, uint32_t dctn, uint64_t dc_key, uint64_t wr_id)
{
	if (d.dead)
		return -EIO;
	if (d.dci == nullptr)
		return -ENOTCONN;
	/* A WQE posted to a DCI in ERR would only be flushed: wait for the recovery. */
	if (mlx5_qpn_dci_state(d.dci) == MLX5_QPN_DCI_ERROR)
		return -EAGAIN;
	uint8_t payload[kDcPayload];
	memset(payload, kDcFill, sizeof(payload));
	int rc = mlx5_qpn_dci_post_send(d.dci, ah, dctn, dc_key, payload, sizeof(payload), wr_id);
	if (rc == 0)
		d.outstanding++;
	return rc;
}

namespace {

/* RESET -> RTS once nothing the error left behind is outstanding. */
void
recover(app_dci &d, lcore_stats &st, unsigned lcore)
{
	if (d.dead || d.outstanding != 0 || mlx5_qpn_dci_state(d.dci) != MLX5_QPN_DCI_ERROR)
		return;
	int rc = mlx5_qpn_dci_recover(d.dci);
	if (rc == 0) {
		st.dci_recoveries.fetch_add(1, std::memory_order_relaxed);
		return;
	}
	if (rc == -EBUSY) /* the device still holds WQEs we have not seen complete */
		return;
	/* Refused: a DCI left in ERR would stop this lcore's sends for good. Nothing of it is
	 * outstanding (every WQE completed), so a new DCI on the same CQ takes its place. */
	const uint32_t old_qpn = mlx5_qpn_dci_qpn(d.dci);
	mlx5_qpn_dci_destroy(d.dci);
	d.dci = nullptr;
	int rc2 = d.dev != nullptr ? app_dci_create(d, d.dev, d.has_path ? &d.path : nullptr) :
				     -ENODEV;
	if (rc2 == 0) {
		/* The first replacement of an lcore is a line; the rest are counted (at a high
		 * error rate a line each would flood the log, as recoveries would). */
		if (st.dci_replaced.fetch_add(1, std::memory_order_relaxed) == 0)
			APP_LOG(WARNING,
				"lcore %u: DCI 0x%x in error, its recovery refused (%s): "
				"replaced by DCI 0x%x (further ones counted: DCIs replaced)",
				lcore, old_qpn, strerror(-rc), mlx5_qpn_dci_qpn(d.dci));
		else
			APP_LOG(DEBUG, "lcore %u: DCI 0x%x replaced by DCI 0x%x", lcore, old_qpn,
				mlx5_qpn_dci_qpn(d.dci));
		return;
	}
	d.dead = true;
	st.errors.fetch_add(1, std::memory_order_relaxed);
	APP_LOG(ERR,
		"lcore %u: DCI 0x%x in error, its recovery refused (%s) and no new DCI (%s); "
		"this lcore's sends stop",
		lcore, old_qpn, strerror(-rc), strerror(-rc2));
}

} // namespace

unsigned
app_dci_completions(app_dci &d, qpn_conn_event *ev, unsigned max, lcore_stats &st, unsigned lcore)
{
	if (d.cq == nullptr)
		return 0;
	mlx5_qpn_wc wc[32];
	int n = mlx5_qpn_cq_poll(d.cq, wc, std::min(max, 32u));
	for (int i = 0; i < n; i++) {
		bool err = wc[i].syndrome != 0 || wc[i].opcode == MLX5_QPN_CQE_REQ_ERR;
		ev[i] = qpn_conn_event{.type = QPN_CONN_EV_COMPLETION,
				       .error = err,
				       .syndrome = err ? wc[i].syndrome : uint8_t(0),
				       .wr_id = wc[i].wr_id};
	}
	if (n > 0)
		d.outstanding -= std::min(d.outstanding, uint32_t(n));
	if (d.dci != nullptr)
		recover(d, st, lcore);
	return n > 0 ? unsigned(n) : 0;
}
