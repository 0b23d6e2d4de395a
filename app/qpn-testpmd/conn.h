/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's connection interface: what the CM engines need of a connection, whoever carries
 * it, as testpmd's engines need only rx/tx bursts of a port. Two implementations sit under it:
 * - conn_emu (conn_emu*.cpp): lib/cm's agents over the in-process ring fabric (or the
 *   shared-memory one, --fabric) and the emulated device's DC data path (one DCI per client
 *   lcore, one DCT per peer);
 * - conn_rdmacm (conn_rdmacm*.cpp, rdmacm_conn.h): the kernel's CM through librdmacm on
 *   hardware, port space RDMA_PS_TCP with conn_param.qp_num = the reserved QPN, and the DC data
 *   path on the device (rdmacm_dc.cpp: DCIs, the passive side's DCT named in the REP, AHs from
 *   the CM's route).
 * run.cpp picks one per run (conn_select, the one place that looks at the device); the engines
 * are written once against this table.
 *
 * Sides and threads. The *active* side runs on the client lcores: each calls the active ops with
 * its own lcore id, never another's. The *passive* side (one node per peer, --peers) is split
 * among ctx->nb_servers servers: node p belongs to server p % nb_servers, and each server is
 * driven by one lcore at a time (its server lcore, or a client lcore that co-polls it), which
 * calls the passive ops only for its own nodes (no lock between servers). Connection ids
 * belong to the implementation; they are unique per active lcore, resp. per passive node,
 * among the connections not yet released.
 *
 * Life of a connection (the engine owns the QPN; the implementation only presents it):
 *
 *   active:  start(qpn) --> ESTABLISHED (REP received, RTU sent) --> [send ... COMPLETION]
 *                |                |
 *                +--> REJECTED    +--> disconnect --> CLOSED (DREP) --> release
 *                +--> ERROR       +--> CLOSED without disconnect: closed by the peer
 *
 *   passive: REQUEST --> accept(qpn) --> ESTABLISHED (RTU) --> CLOSED (DREQ answered)
 *                |                                              |  timewait set: wait for
 *                +--> reject                                    |  TIMEWAIT_EXIT
 *                                                               +--> release
 *
 * Errors are negative errno values; every op may be called only between setup and teardown.
 */
#ifndef QPN_TESTPMD_CONN_H
#define QPN_TESTPMD_CONN_H

#include <cstdint>

struct run_ctx;

enum qpn_conn_event_type : uint8_t {
	QPN_CONN_EV_REQUEST,       /* passive: a REQ arrived on `node`; accept or reject `conn` */
	QPN_CONN_EV_ESTABLISHED,   /* active: REP received, RTU sent; passive: RTU received */
	QPN_CONN_EV_REJECTED,      /* a REJ was received (`reason`) */
	QPN_CONN_EV_CLOSED,        /* disconnected: DREP received, or the peer's DREQ answered */
	QPN_CONN_EV_TIMEWAIT_EXIT, /* passive: the timewait of a CLOSED/REJECTED (timewait) ended */
	QPN_CONN_EV_COMPLETION,    /* active: a send completed (`wr_id`); passive: a receive */
	QPN_CONN_EV_ERROR,         /* a local failure (address, route, CM poll); `conn` may be ~0 */
};

/* One event of a poll. */
struct qpn_conn_event {
	qpn_conn_event_type type;
	bool error;    /* COMPLETION: with an error status */
	bool timewait; /* CLOSED/REJECTED: the connection is in timewait; TIMEWAIT_EXIT follows */
	uint8_t syndrome; /* COMPLETION with error: the CQE's syndrome (MLX5_QPN_SYND_*; a
			     flushed WQE of a DCI in ERR is MLX5_QPN_SYND_WR_FLUSH), else 0 */
	uint16_t reason;  /* REJECTED: the REJ reason */
	unsigned node;    /* passive: the node (peer) of `conn` */
	uint32_t conn;    /* the connection (not for completions) */
	uint64_t wr_id;   /* active COMPLETION: what send() was given */
	const char *why;  /* ERROR: why the connection failed (a static string), or null */
};

/* What the CM itself counted over the runs so far (summary and JSON). */
struct qpn_conn_totals {
	uint64_t stale_rejects_sent = 0, stale_dreqs = 0, retransmits = 0, timeouts = 0,
		 malformed = 0, unexpected = 0, fabric_drops = 0, established = 0;
};

/* The active side, called by a client lcore with its own id. */
struct qpn_conn_active_ops {
	/* Send a REQ to peer PEER (0 .. ctx->nb_peers - 1) presenting QPN; *conn gets the id.
	 * -ENOSPC/-ENOBUFS: no CM slot now (retry later); other errors are failures. */
	int (*start)(run_ctx *ctx, unsigned lcore, unsigned peer, uint32_t qpn, uint32_t *conn);
	/* Post one SEND on connection CONN to PEER's DC target (only with ctx->data_path). The
	 * send is tied to its connection: -ENOTCONN when CONN is not established (closed, closing,
	 * or failed: nothing is posted). -ENOBUFS: the send queue is full; -EAGAIN: the lcore's
	 * DCI is in error and not recovered yet (both: post again after completions). */
	int (*send)(run_ctx *ctx, unsigned lcore, uint32_t conn, unsigned peer, uint64_t wr_id);
	/* Ring the doorbell for the sends posted since the last flush. */
	void (*flush)(run_ctx *ctx, unsigned lcore);
	/* Send the DREQ. Non-zero: the connection is already closing (the peer's CLOSED comes). */
	int (*disconnect)(run_ctx *ctx, unsigned lcore, uint32_t conn);
	/* The engine is done with CONN (after CLOSED/REJECTED/ERROR, or given up at stop). */
	void (*release)(run_ctx *ctx, unsigned lcore, uint32_t conn);
	/* Up to MAX events of this lcore's connections; the CM is advanced on each call. The
	 * lcore's DCI is recovered here once every WQE it had when it failed has completed. */
	unsigned (*poll)(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max);
};

/* The passive side, called for a node by the one lcore that drives the node's server. */
struct qpn_conn_passive_ops {
	/* Answer a REQUEST with a REP presenting QPN. */
	int (*accept)(run_ctx *ctx, unsigned node, uint32_t conn, uint32_t qpn);
	/* Answer a REQUEST with a REJ of REASON. */
	void (*reject)(run_ctx *ctx, unsigned node, uint32_t conn, uint16_t reason);
	/* The engine is done with CONN (its QPN given back). */
	void (*release)(run_ctx *ctx, unsigned node, uint32_t conn);
	/* Up to MAX events of the nodes of server SERVER (and their DCTs' receives). */
	unsigned (*poll)(run_ctx *ctx, unsigned server, qpn_conn_event *ev, unsigned max);
};

struct qpn_conn_ops {
	const char *name;
	/* Whether the other side can run in this process. If not (librdmacm: the peer is another
	 * host), a run has one side only: the engine's. */
	bool peer_in_process;
	/* Whether the passive nodes may be split among several server lcores (else one serves). */
	bool passive_split;
	/* Build what a run needs (on the main lcore, roles assigned). Sets ctx->nb_peers,
	 * ctx->data_path and ctx->data_path_note. 0 or negative errno (one line printed). */
	int (*setup)(run_ctx *ctx);
	/* Undo setup (after every lcore returned); keeps the totals for the summary. */
	void (*teardown)(run_ctx *ctx);
	/* The CM's own counters over the runs so far. */
	qpn_conn_totals (*totals)(run_ctx *ctx);
	qpn_conn_active_ops active;
	qpn_conn_passive_ops passive;
};

extern const qpn_conn_ops conn_emu_ops;
extern const qpn_conn_ops conn_rdmacm_ops;

#endif /* QPN_TESTPMD_CONN_H */
