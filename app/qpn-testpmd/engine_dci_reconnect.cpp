/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `dci-reconnect` engine: the active side. Per connection, on every client lcore: reserved
 * QPN alloc -> REQ/REP/RTU with that QPN -> --msgs-per-conn SENDs from the lcore's DCI through
 * its mapped UAR to the peer's DCT -> their completions -> DREQ/DREP -> the QPN released into
 * the quarantine. --inflight connections are open at once per lcore, to --peers DC targets in
 * turn. The summary reports the client's steps. Without a DC data path (DC calls answer
 * -EOPNOTSUPP) the send step is skipped and the CM + QPN cycle still runs.
 */
#include "testpmd.h"

static int dcir_init(run_ctx *ctx) { return cm_glue_init(ctx); }

static int dcir_lcore_run(run_ctx *ctx, unsigned lcore)
{
	static const client_mode mode{};
	return cm_lcore_run(ctx, lcore, mode);
}

static void dcir_fini(run_ctx *ctx) { cm_glue_fini(ctx); }

const qpn_engine engine_dci_reconnect = {
	"dci-reconnect",
	"active side: per connection QPN alloc, REQ/REP/RTU, sends + completions, DREQ/DREP, "
	"release into quarantine",
	dcir_init,
	dcir_lcore_run,
	dcir_fini,
	false,
	true,
};
