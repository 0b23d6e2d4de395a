/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated connections' data path: one DCT per peer on one CQ per device, one DCI on one CQ
 * per client lcore (mlx5_qpn_dc.h), the DCTs of each server lcore's peers on a CQ of its own.
 * The active side's SENDs go from its lcore's DCI through the mapped UAR to the peer's DCT; each
 * server lcore polls its DCTs' CQ, and server 0 runs the device's doorbell service. Every send
 * carries an address handle, as on hardware (the emulated device refuses a send without one):
 * the emulated fabric is one subnet, so the AH of an lcore names its device's port and no
 * further route. A send is posted only for a connection its CM agent holds established, and the
 * lcore's DCI is recovered after an error completion (dc_dci.h), as on hardware.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "conn_emu.h"

namespace {

/* The route of each client lcore's sends (conn_emu.h's dc_lcore is not this file's). */
mlx5_qpn_ah *g_ah[RTE_MAX_LCORE];

int
lcore_ah(mlx5_qpn_dev *dev, unsigned lc)
{
	mlx5_qpn_dev_info info{};
	mlx5_qpn_dc_addr a{};
	if (mlx5_qpn_dev_info_get(dev, &info) == 0)
		a.port = info.port;
	return mlx5_qpn_ah_create(dev, &a, &g_ah[lc]);
}

} // namespace

void
emu_dc_fini(run_ctx *)
{
	emu_state *g = &g_emu;
	for (auto *&ah : g_ah) {
		mlx5_qpn_ah_destroy(ah);
		ah = nullptr;
	}
	for (auto &l : g->dcl) {
		mlx5_qpn_dci_destroy(l.dci);
		mlx5_qpn_cq_destroy(l.cq);
		l = app_dci{};
	}
	for (auto &d : g->dcdev) {
		for (auto *t : d.dct)
			mlx5_qpn_dct_destroy(t);
		for (auto *cq : d.cq)
			mlx5_qpn_cq_destroy(cq);
	}
	g->dcdev.clear();
}

/* The data path is optional: -EOPNOTSUPP (no DC data path in this build or backend) makes the
 * engines skip the send step; any other error fails the start. */
int
emu_dc_init(run_ctx *ctx)
{
	emu_state *g = &g_emu;
	ctx->data_path = false;
	ctx->data_path_note.clear();
	if (ctx->cfg->msgs_per_conn == 0) {
		ctx->data_path_note = "--msgs-per-conn=0";
		return 0;
	}
	const char *what = "";
	int rc = 0;
	g->dcdev.resize(ctx->devs.size());
	/* The passive side's DCTs: a CQ per server, each polled by that server's lcore alone. */
	const unsigned nb_cq = ctx->side_passive ? ctx->nb_servers : 0;
	for (size_t d = 0; d < ctx->devs.size() && rc == 0; d++) {
		dc_dev &dd = g->dcdev[d];
		what = "mlx5_qpn_cq_create";
		dd.cq.assign(nb_cq, nullptr);
		for (unsigned k = 0; k < nb_cq && rc == 0; k++)
			rc = mlx5_qpn_cq_create(ctx->devs[d], 12, &dd.cq[k]);
		unsigned nb_dct = ctx->side_passive ? ctx->cfg->peers : 0;
		for (unsigned p = 0; p < nb_dct && rc == 0; p++) {
			mlx5_qpn_dct *t = nullptr;
			what = "mlx5_qpn_dct_create";
			rc = mlx5_qpn_dct_create(ctx->devs[d], dd.cq[p % nb_cq], kDcKey, &t);
			if (rc == 0) {
				dd.dct.push_back(t);
				dd.dctn.push_back(mlx5_qpn_dct_qpn(t));
			}
		}
	}
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		if (rc != 0 || !ctx->role[lc].client)
			continue;
		mlx5_qpn_dev *dev = ctx->devs[ctx->role[lc].dev];
		what = "mlx5_qpn_cq_create";
		rc = mlx5_qpn_cq_create(dev, 10, &g->dcl[lc].cq);
		if (rc == 0) {
			what = "mlx5_qpn_dci_create";
			rc = app_dci_create(g->dcl[lc], dev, nullptr);
		}
		if (rc == 0) {
			what = "mlx5_qpn_ah_create";
			rc = lcore_ah(dev, lc);
		}
	}
	if (rc == 0 && !ctx->side_passive) {
		/* Client process: the DCTs are the server's, as published. */
		for (auto &d : g->dcdev)
			d.dctn = g->peer_dctn;
		for (uint32_t n : g->peer_dctn)
			if (n == 0) {
				emu_dc_fini(ctx);
				ctx->data_path_note = "the server published no DCT (its "
						      "--msgs-per-conn=0 or no data path)";
				return 0;
			}
	}
	if (rc == 0) {
		ctx->data_path = true;
		return 0;
	}
	emu_dc_fini(ctx);
	ctx->data_path_note = std::string(what) + ": " + strerror(-rc);
	if (rc == -EOPNOTSUPP)
		return 0;
	fprintf(stderr, "qpn-testpmd: DC data path: %s\n", ctx->data_path_note.c_str());
	return rc;
}

int
emu_dc_send(run_ctx *ctx, unsigned lcore, uint32_t conn, unsigned peer, uint64_t wr_id)
{
	/* A send belongs to its connection: none once the CM closed it (the peer's DREQ, a stale
	 * connection's) or before it is established. */
	mlx5_qpn_cm_conn_info ci;
	if (mlx5_qpn_cm_conn_get(g_emu.clients[ctx->role[lcore].client_idx]->cm, conn, &ci) != 0 ||
	    ci.state != MLX5_QPN_CM_STATE_ESTABLISHED)
		return -ENOTCONN;
	const uint32_t dctn = g_emu.dcdev[ctx->role[lcore].dev].dctn[peer];
	return app_dci_send(g_emu.dcl[lcore], g_ah[lcore], dctn, g_emu.peer_key[peer], wr_id);
}

void
emu_dc_flush(run_ctx *, unsigned lcore)
{
	mlx5_qpn_dci_ring(g_emu.dcl[lcore].dci);
}

unsigned
emu_dc_send_completions(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max)
{
	return app_dci_completions(g_emu.dcl[lcore], ev, max, ctx->lc[lcore], lcore);
}

void
emu_dc_receives(run_ctx *, unsigned server, std::vector<qpn_conn_event> &out)
{
	/* Each server polls only its own CQ; the poll is also what makes a device that executes
	 * WQEs in software progress (mlx5_qpn_dc.h), so no other call is needed on any backend. */
	mlx5_qpn_wc wc[32];
	for (auto &dd : g_emu.dcdev) {
		if (server >= dd.cq.size())
			continue;
		int n = mlx5_qpn_cq_poll(dd.cq[server], wc, 32);
		for (int i = 0; i < n; i++)
			out.push_back(qpn_conn_event{.type = QPN_CONN_EV_COMPLETION,
						     .error = wc[i].syndrome != 0});
	}
}
