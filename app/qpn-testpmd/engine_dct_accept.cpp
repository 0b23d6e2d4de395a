/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `dct-accept` engine: the passive side. Each peer (--peers) is a DC target behind a CM
 * agent of its own; for every REQ it takes a reserved QPN and accepts with it (REP), as
 * rdma-core's DC-over-CM test does, waits for the RTU, receives the SENDs on its DCT, answers
 * the DREQ and gives the QPN back when its timewait ends. In one process the client lcores
 * drive it exactly as in dci-reconnect; the summary reports the server's steps (alloc,
 * REP->RTU, release) and counts its completed connections.
 */
#include "testpmd.h"

static int dcta_init(run_ctx *ctx) { return cm_glue_init(ctx); }

static int dcta_lcore_run(run_ctx *ctx, unsigned lcore)
{
	static const client_mode mode{};
	return cm_lcore_run(ctx, lcore, mode);
}

static void dcta_fini(run_ctx *ctx) { cm_glue_fini(ctx); }

const qpn_engine engine_dct_accept = {
	"dct-accept",
	"passive side: per REQ a reserved QPN in the REP, RTU, receives on the DCT, DREP, release "
	"after timewait",
	dcta_init,
	dcta_lcore_run,
	dcta_fini,
	true,
	true,
};
