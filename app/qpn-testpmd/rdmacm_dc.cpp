/* SPDX-License-Identifier: BSD-3-Clause */
/* The librdmacm connections' DC data path (rdmacm_dc.h). ONLY ON A CONNECTX. */
#include "rdmacm_dc.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <rte_lcore.h>
#include <rte_random.h>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "dc_dci.h"
#include "rdmacm_glue.h"
#include "testpmd.h"

namespace {

struct rcdc_lcore {
	app_dci d;
	mlx5_qpn_ah *ah = nullptr;
};

struct rcdc_all {
	rcdc_lcore lc[RTE_MAX_LCORE];
	mlx5_qpn_cq *pcq = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	uint64_t key = 0;
};

rcdc_all g_dc;

/* A failed call: one line, and the run's note. */
int
failed(run_ctx *ctx, const char *what, int rc)
{
	ctx->data_path_note = std::string(what) + ": " + strerror(-rc);
	fprintf(stderr, "qpn-testpmd: DC data path: %s\n", ctx->data_path_note.c_str());
	rcdc_teardown(ctx);
	return rc;
}

/* What rdma_init_qp_attr() gives at RTR for ID: the AV the REQ/REP took (GID index included)
 * and the path MTU. It needs the IB CM id, which exists from the REQ on: at a request
 * (passive) and at the REP (active), not yet at ROUTE_RESOLVED. */
int
route_attr(rdma_cm_id *id, ibv_qp_attr *qa, std::string *why)
{
	*qa = ibv_qp_attr{};
	int mask = 0;
	qa->qp_state = IBV_QPS_RTR;
	if (rdmacm_glue_get()->init_qp_attr(id, qa, &mask) == 0)
		return 0;
	int rc = errno > 0 ? -errno : -EIO;
	*why = std::string("rdma_init_qp_attr(RTR): ") + strerror(-rc);
	return rc;
}

/* A DC call that failed: *why, and its errno. */
int
call_failed(const char *what, int rc, std::string *why)
{
	*why = std::string(what) + ": " + strerror(-rc);
	return rc;
}

} // namespace

int
rcdc_setup(run_ctx *ctx)
{
	ctx->data_path = false;
	if (ctx->cfg->msgs_per_conn == 0) {
		ctx->data_path_note = "--msgs-per-conn=0";
		return 0;
	}
	int rc;
	if (ctx->side_passive) {
		/* A key of this run's own: the peer can only know it from the REP. */
		g_dc.key = rte_rand() | 1;
		if ((rc = mlx5_qpn_cq_create(ctx->dev, 12, &g_dc.pcq)) != 0)
			return failed(ctx, "mlx5_qpn_cq_create", rc);
	}
	unsigned lc;
	RTE_LCORE_FOREACH(lc)
	{
		if (!ctx->side_active || !ctx->role[lc].client)
			continue;
		mlx5_qpn_dev *dev = ctx->devs[ctx->role[lc].dev];
		if ((rc = mlx5_qpn_cq_create(dev, 10, &g_dc.lc[lc].d.cq)) != 0)
			return failed(ctx, "mlx5_qpn_cq_create", rc);
	}
	ctx->data_path = true;
	ctx->data_path_note.clear();
	return 0;
}

void
rcdc_teardown(run_ctx *)
{
	for (rcdc_lcore &l : g_dc.lc) {
		mlx5_qpn_dci_destroy(l.d.dci);
		mlx5_qpn_ah_destroy(l.ah);
		mlx5_qpn_cq_destroy(l.d.cq);
		l = rcdc_lcore{};
	}
	mlx5_qpn_dct_destroy(g_dc.dct);
	mlx5_qpn_cq_destroy(g_dc.pcq);
	g_dc.dct = nullptr;
	g_dc.pcq = nullptr;
}

rdmacm_pdata
rcdc_local(bool passive)
{
	if (!passive || g_dc.dct == nullptr)
		return rdmacm_pdata{0, 0};
	return rdmacm_pdata{mlx5_qpn_dct_qpn(g_dc.dct), g_dc.key};
}

int
rcdc_passive_request(run_ctx *ctx, rdma_cm_id *id, std::string *why)
{
	if (g_dc.pcq == nullptr || g_dc.dct != nullptr)
		return 0; /* no data path, or the DCT exists */
	ibv_qp_attr qa;
	mlx5_qpn_dc_path path;
	int rc = route_attr(id, &qa, why);
	if (rc != 0)
		return rc;
	if (!rdmacm_dc_path(qa.ah_attr, uint8_t(qa.path_mtu), &path, why))
		return -EINVAL;
	rc = mlx5_qpn_dct_create_path(ctx->dev, g_dc.pcq, g_dc.key, &path, &g_dc.dct);
	return rc == 0 ? 0 : call_failed("mlx5_qpn_dct_create_path", rc, why);
}

int
rcdc_active_peer(run_ctx *ctx, unsigned lcore, const rdmacm_pdata &p, rdma_cm_id *id,
		 std::string *why)
{
	rcdc_lcore &l = g_dc.lc[lcore];
	if (l.d.cq == nullptr)
		return 0; /* no data path: nothing to route */
	if (!rdmacm_pdata_check(p, true, why))
		return -EINVAL;
	if (l.ah != nullptr)
		return 0;
	ibv_qp_attr qa;
	mlx5_qpn_dc_path path;
	mlx5_qpn_dc_addr addr;
	int rc = route_attr(id, &qa, why);
	if (rc != 0)
		return rc;
	if (!rdmacm_dc_path(qa.ah_attr, uint8_t(qa.path_mtu), &path, why) ||
	    !rdmacm_dc_addr(qa.ah_attr, &addr, why))
		return -EINVAL;
	mlx5_qpn_dev *dev = ctx->devs[ctx->role[lcore].dev];
	/* Made at the lcore's first connection; a dead DCI (recovery and replacement refused,
	 * dc_dci.h) is not made again here: its sends stay -EIO, as its line said. */
	if (l.d.dci == nullptr && !l.d.dead && (rc = app_dci_create(l.d, dev, &path)) != 0)
		return call_failed("mlx5_qpn_dci_create_path", rc, why);
	rc = mlx5_qpn_ah_create(dev, &addr, &l.ah);
	return rc == 0 ? 0 : call_failed("mlx5_qpn_ah_create", rc, why);
}

int
rcdc_active_send(unsigned lcore, const rdmacm_pdata &peer, uint64_t wr_id)
{
	rcdc_lcore &l = g_dc.lc[lcore];
	if (l.ah == nullptr || peer.dctn == 0)
		return -ENOTCONN;
	return app_dci_send(l.d, l.ah, peer.dctn, peer.dc_key, wr_id);
}

void
rcdc_active_flush(unsigned lcore)
{
	mlx5_qpn_dci_ring(g_dc.lc[lcore].d.dci);
}

unsigned
rcdc_active_completions(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max)
{
	return app_dci_completions(g_dc.lc[lcore].d, ev, max, ctx->lc[lcore], lcore);
}

unsigned
rcdc_passive_receives(qpn_conn_event *ev, unsigned max)
{
	if (g_dc.pcq == nullptr)
		return 0;
	mlx5_qpn_wc wc[32];
	int n = mlx5_qpn_cq_poll(g_dc.pcq, wc, std::min(max, 32u));
	for (int i = 0; i < n; i++) {
		bool bad = wc[i].opcode != MLX5_QPN_CQE_RESP_SEND || wc[i].syndrome != 0;
		if (!bad) {
			/* The passive side reads what arrived: the active side's fill, whole. */
			uint8_t b[kDcPayload + 1];
			int len = mlx5_qpn_dct_read(g_dc.dct, wc[i].wqe_counter, b, sizeof(b));
			bad = len != int(kDcPayload) ||
			      std::any_of(b, b + kDcPayload,
					  [](uint8_t x) { return x != kDcFill; });
		}
		ev[i] = qpn_conn_event{.type = QPN_CONN_EV_COMPLETION, .error = bad};
	}
	return n > 0 ? unsigned(n) : 0;
}
