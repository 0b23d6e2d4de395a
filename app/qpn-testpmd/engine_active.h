/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The active side's connection body (engine_dci_reconnect.cpp), for the engines that run it:
 * dci-reconnect itself, churn with its own pattern, and dct-accept as its peer. A pattern says
 * which connection comes next and how many may be open; the body does the rest.
 */
#ifndef QPN_TESTPMD_ENGINE_ACTIVE_H
#define QPN_TESTPMD_ENGINE_ACTIVE_H

#include "testpmd.h"

constexpr unsigned kMaxSlots = 64; /* connections one client lcore keeps at once */

/* One connection to start. */
struct active_plan {
	unsigned peer; /* 0 .. ctx->nb_peers - 1 */
	unsigned msgs; /* SENDs once established */
	bool abort;    /* close right after the RTU, without sending */
};

/* How a client lcore picks its connections. Every hook may be null (dci-reconnect's pattern:
 * peers in turn, --msgs-per-conn SENDs, --inflight open at once); PRIV is the pattern's own
 * per-lcore state. */
struct active_pattern {
	void *priv;
	/* The next connection (called before its QPN is taken, whether the start succeeds). */
	void (*plan)(void *priv, const run_ctx *ctx, active_plan *p);
	/* How many slots may be open this round (INFLIGHT: what --inflight allows). */
	unsigned (*slots)(void *priv, unsigned inflight);
	/* A connection was started. */
	void (*started)(void *priv);
	/* Once per round while not stopping, after the starts: work of the pattern's own. */
	void (*round)(void *priv, mlx5_qpn_dev *dev);
};

/* The loop of one client lcore: returns when ctx->stop is set (or its share of --connections
 * is started) and its connections are closed, or the drain deadline passed. */
int active_lcore_run(run_ctx *ctx, unsigned lcore, const active_pattern &pat);

#endif /* QPN_TESTPMD_ENGINE_ACTIVE_H */
