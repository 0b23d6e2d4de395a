/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `churn` engine: dci-reconnect with random mixes. Each connection picks a random peer and
 * a random number of SENDs (0 .. 2 x --msgs-per-conn), one in eight closes right after the RTU
 * without sending; now and then a reconnect storm opens every slot of the lcore at once for the
 * next 128 connections, and bulk alloc/free bursts with no connection are mixed in. Random
 * choices come from --seed, so a run can be repeated.
 */
#include "testpmd.h"

static int churn_init(run_ctx *ctx) { return cm_glue_init(ctx); }

static int churn_lcore_run(run_ctx *ctx, unsigned lcore)
{
	static const client_mode mode{true};
	return cm_lcore_run(ctx, lcore, mode);
}

static void churn_fini(run_ctx *ctx) { cm_glue_fini(ctx); }

const qpn_engine engine_churn = {
	"churn",
	"random peers, message counts and aborts, reconnect storms, bulk alloc/free bursts",
	churn_init,
	churn_lcore_run,
	churn_fini,
	false,
	true,
};
