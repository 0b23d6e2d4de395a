/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DC data path of qpn-testpmd's librdmacm connections (conn_rdmacm.cpp), through the public
 * DC API on the probed device(s), as conn_emu_dc.cpp does it on the emulated device:
 * - the passive side: one CQ and a DC key drawn at setup; the DCT is made at the first
 *   CONNECT_REQUEST, on the path of that request's route (rdma_init_qp_attr at RTR: the GID
 *   index, hop limit, traffic class, SL, MTU and rate the kernel's CM resolved), before the
 *   engine accepts it, so that its REP names the DCT; every REP carries its number and key. Its
 *   poll reads each received message (mlx5_qpn_dct_read) and checks its bytes.
 * - each client lcore: a CQ at setup; its DCI and its address handle to the peer at the first
 *   REP of the lcore, both from that connection's resolved AV (the DCI's local path and the
 *   AH's route: rdmacm_dc_path(), rdmacm_dc_addr()). Each connection sends to the DCT its own
 *   REP named, and only while it is established (rdmacm_send_gate()).
 * Both take the path as UCX takes its DC address from the interface's GID: on RoCE the route's
 * GID entry (rarely index 0) and its hop limit, not the port's defaults. The DCI is recovered
 * after an error CQE (dc_dci.h).
 * ONLY ON A CONNECTX: no device runs this here (doc/guides/driver.md).
 * Threads: a client lcore calls the rcdc_active_* functions with its own id; the passive ones
 * run on the one lcore that drives the passive side.
 */
#ifndef QPN_TESTPMD_RDMACM_DC_H
#define QPN_TESTPMD_RDMACM_DC_H

#include <cstdint>
#include <string>

#include "conn.h"
#include "rdmacm_fsm.h"

/* The DC objects of the sides this process runs (none with --msgs-per-conn=0); sets
 * ctx->data_path and ctx->data_path_note. 0, or a negative errno (one line printed). */
int rcdc_setup(run_ctx *ctx);

/* Destroy everything rcdc_setup() and the connections made. */
void rcdc_teardown(run_ctx *ctx);

/* What this side's REQ (active) or REP (passive) carries: the passive side's DCT, else 0. */
rdmacm_pdata rcdc_local(bool passive);

/* Passive: a request arrived on ID: make the DCT on its route's path if there is none yet. 0, or
 * a negative errno with *why (the request is refused). */
int rcdc_passive_request(run_ctx *ctx, rdma_cm_id *id, std::string *why);

/* Active: the REP of ID named the peer's DCT (P). The lcore's DCI (on the path of ID's route)
 * and its AH (to the peer, by ID's resolved AV) are made at the lcore's first REP: all
 * connections of a run go to one peer. 0, or a negative errno with *why. */
int rcdc_active_peer(run_ctx *ctx, unsigned lcore, const rdmacm_pdata &p, rdma_cm_id *id,
		     std::string *why);

/* conn.h's send of the active side, to the DCT a connection's REP named (PEER); -ENOTCONN
 * before the lcore has a DCI and a route. */
int rcdc_active_send(unsigned lcore, const rdmacm_pdata &peer, uint64_t wr_id);
void rcdc_active_flush(unsigned lcore);

/* Send completions of LCORE's DCI as COMPLETION events (at most MAX), and its recovery. */
unsigned rcdc_active_completions(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max);

/* Passive: the DCT's receives as COMPLETION events (error: an error CQE, an unreadable message
 * or one whose bytes are not what the active side sends). */
unsigned rcdc_passive_receives(qpn_conn_event *ev, unsigned max);

#endif /* QPN_TESTPMD_RDMACM_DC_H */
