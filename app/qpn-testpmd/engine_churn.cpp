/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `churn` engine: the active side with random mixes. Each connection picks a random peer and
 * a random number of SENDs (0 .. 2 x --msgs-per-conn), one in eight closes right after the RTU
 * without sending; now and then a reconnect storm opens every slot of the lcore at once for the
 * next 128 connections, and bulk alloc/free bursts with no connection are mixed in. Random
 * choices come from --seed, so a run can be repeated. The connection body is dci-reconnect's
 * (engine_active.h); this file holds the pattern. In one process the passive side is
 * dct-accept's body.
 */
#include "engine_active.h"

namespace {

struct xorshift {
	uint64_t s;
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

/* Per client lcore. */
struct churn_state {
	xorshift rng;
	unsigned storm = 0; /* connections left in the current storm */
};

void
churn_plan(void *priv, const run_ctx *ctx, active_plan *p)
{
	churn_state *c = static_cast<churn_state *>(priv);
	p->peer = c->rng.below(ctx->nb_peers);
	p->msgs = c->rng.below(2 * ctx->cfg->msgs_per_conn + 1);
	p->abort = c->rng.below(8) == 0;
}

/* Reconnect storms: every 512 connections or so, all slots at once for the next 128. */
unsigned
churn_slots(void *priv, unsigned inflight)
{
	churn_state *c = static_cast<churn_state *>(priv);
	if (c->storm == 0 && c->rng.below(512) == 0)
		c->storm = 128;
	return c->storm > 0 ? kMaxSlots : inflight;
}

void
churn_started(void *priv)
{
	churn_state *c = static_cast<churn_state *>(priv);
	if (c->storm > 0)
		c->storm--;
}

/* A burst of bare alloc/free mixed in (no connection). */
void
churn_round(void *priv, mlx5_qpn_dev *dev)
{
	churn_state *c = static_cast<churn_state *>(priv);
	if (c->rng.below(64) != 0)
		return;
	uint32_t q[8];
	if (mlx5_qpn_reserved_alloc_bulk(dev, q, 8) == 0)
		mlx5_qpn_reserved_dealloc_bulk(dev, q, 8);
}

int
churn_lcore_run(run_ctx *ctx, unsigned lcore)
{
	churn_state c{.rng = {ctx->cfg->seed * 0x9E3779B97F4A7C15ull + lcore + 1}};
	const active_pattern pat = {
		.priv = &c,
		.plan = churn_plan,
		.slots = churn_slots,
		.started = churn_started,
		.round = churn_round,
	};
	return active_lcore_run(ctx, lcore, pat);
}

} /* namespace */

const qpn_engine engine_churn = {
	.name = "churn",
	.help = "random peers, message counts and aborts, reconnect storms, bulk alloc/free bursts",
	.uses_cm = true,
	.passive_side = false,
	.begin = nullptr,
	.end = nullptr,
	.lcore_run = churn_lcore_run,
	.passive_poll = nullptr,
	.peer = &engine_dct_accept,
};
