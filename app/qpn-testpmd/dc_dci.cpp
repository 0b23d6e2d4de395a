/* SPDX-License-Identifier: BSD-3-Clause */
/* A client lcore's DCI: sends, completions with syndromes, recovery (dc_dci.h). */
#include "dc_dci.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "testpmd.h"

int
app_dci_send(app_dci &d, const mlx5_qpn_ah *ah, uint32_t dctn, uint64_t dc_key, uint64_t wr_id)
{
	if (d.dci == nullptr)
		return -ENOTCONN;
	if (d.dead)
		return -EIO;
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
	d.dead = true;
	st.errors.fetch_add(1, std::memory_order_relaxed);
	APP_LOG(ERR, "lcore %u: DCI 0x%x in error and not recoverable: %s; its sends stop", lcore,
		mlx5_qpn_dci_qpn(d.dci), strerror(-rc));
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
