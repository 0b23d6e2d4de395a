/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM engines' data path glue: one DCT per peer on one CQ per device, one DCI on one CQ per
 * client lcore (mlx5_qpn_dc.h).
 */
#include "cm_glue.h"

void dc_fini(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	for (auto &l : g->dcl) {
		mlx5_qpn_dci_destroy(l.dci);
		mlx5_qpn_cq_destroy(l.cq);
		l = dc_lcore{};
	}
	for (auto &d : g->dcdev) {
		for (auto *t : d.dct)
			mlx5_qpn_dct_destroy(t);
		mlx5_qpn_cq_destroy(d.cq);
	}
	g->dcdev.clear();
}

/* The data path is optional: -EOPNOTSUPP (no DC data path in this build or backend) makes the
 * engines skip the send step; any other error fails the start. */
int dc_init(run_ctx *ctx)
{
	cm_glue *g = ctx->cm;
	ctx->data_path = false;
	ctx->data_path_note.clear();
	if (ctx->cfg->msgs_per_conn == 0) {
		ctx->data_path_note = "--msgs-per-conn=0";
		return 0;
	}
	const char *what = "";
	int rc = 0;
	g->dcdev.resize(ctx->devs.size());
	for (size_t d = 0; d < ctx->devs.size() && rc == 0; d++) {
		what = "mlx5_qpn_cq_create";
		rc = mlx5_qpn_cq_create(ctx->devs[d], 12, &g->dcdev[d].cq);
		unsigned nb_dct = ctx->cfg->role_server() ? ctx->cfg->peers : 0;
		for (unsigned p = 0; p < nb_dct && rc == 0; p++) {
			mlx5_qpn_dct *t = nullptr;
			what = "mlx5_qpn_dct_create";
			rc = mlx5_qpn_dct_create(ctx->devs[d], g->dcdev[d].cq, kDcKey, &t);
			if (rc == 0) {
				g->dcdev[d].dct.push_back(t);
				g->dcdev[d].dctn.push_back(mlx5_qpn_dct_number(t));
			}
		}
	}
	unsigned lc;
	RTE_LCORE_FOREACH(lc) {
		if (rc != 0 || !ctx->role[lc].client)
			continue;
		mlx5_qpn_dev *dev = ctx->devs[ctx->role[lc].dev];
		what = "mlx5_qpn_cq_create";
		rc = mlx5_qpn_cq_create(dev, 10, &g->dcl[lc].cq);
		if (rc == 0) {
			what = "mlx5_qpn_dci_create";
			rc = mlx5_qpn_dci_create(dev, g->dcl[lc].cq, 8, &g->dcl[lc].dci);
		}
	}
	if (rc == 0 && !ctx->cfg->role_server()) {
		/* Client process: the DCTs are the server's, as published. */
		for (auto &d : g->dcdev)
			d.dctn = g->peer_dctn;
		for (uint32_t n : g->peer_dctn)
			if (n == 0) {
				dc_fini(ctx);
				ctx->data_path_note = "the server published no DCT (its "
						      "--msgs-per-conn=0 or no data path)";
				return 0;
			}
	}
	if (rc == 0) {
		ctx->data_path = true;
		return 0;
	}
	dc_fini(ctx);
	ctx->data_path_note = std::string(what) + ": " + strerror(-rc);
	if (rc == -EOPNOTSUPP)
		return 0;
	fprintf(stderr, "qpn-testpmd: DC data path: %s\n", ctx->data_path_note.c_str());
	return rc;
}
