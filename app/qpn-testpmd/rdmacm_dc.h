/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DC data path of qpn-testpmd's librdmacm connections (conn_rdmacm.cpp), through the public
 * DC API on the probed device(s), as conn_emu_dc.cpp does it on the emulated device:
 * - each client lcore: a CQ and a DCI on its device; once a REP arrived, an address handle to
 *   the peer from the connection's resolved AV (rdma_init_qp_attr at RTR: rdmacm_dc_addr()),
 *   and the peer's DCT number and DC key from the REP's private data. Sends go there.
 * - the passive side: one CQ and one DCT with a DC key drawn at setup; every REP carries them;
 *   its poll reads each received message (mlx5_qpn_dct_read) and checks its bytes.
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

/* Active: the peer of LCORE as the REP of ID named it (P), routed by the AV the kernel's CM
 * resolved for ID (rdma_init_qp_attr at RTR). The AH is made once per lcore (all connections of
 * a run go to one peer). 0, or a negative errno with *why. */
int rcdc_active_peer(run_ctx *ctx, unsigned lcore, const rdmacm_pdata &p, rdma_cm_id *id,
		     std::string *why);

/* conn.h's send and flush of the active side; -ENOTCONN before a REP named the peer. */
int rcdc_active_send(unsigned lcore, uint64_t wr_id);
void rcdc_active_flush(unsigned lcore);

/* Send completions of LCORE's DCI as COMPLETION events (at most MAX). */
unsigned rcdc_active_completions(unsigned lcore, qpn_conn_event *ev, unsigned max);

/* Passive: the DCT's receives as COMPLETION events (error: an error CQE, an unreadable message
 * or one whose bytes are not what the active side sends). */
unsigned rcdc_passive_receives(qpn_conn_event *ev, unsigned max);

#endif /* QPN_TESTPMD_RDMACM_DC_H */
