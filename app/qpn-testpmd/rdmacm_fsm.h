/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma_cm side of qpn-testpmd's hardware connections as pure functions, so that every path
 * is unit-tested without a device (tests/app/test_rdmacm_fsm.cpp); conn_rdmacm.cpp only carries
 * out what they decide.
 *
 * - rdmacm_fsm_step(): one connection's state machine. Input: the connection's state, an
 *   rdma_cm event type (or one of the RC_IN_* inputs: what the engine did, or a local call that
 *   failed) and the event's status. Output: the next state, the actions to carry out, and the
 *   event to hand to the engine.
 * - rdmacm_fail_reason(): the line a failed connection is reported with.
 * - rdmacm_identify() / rdmacm_same_device(): whether a cm_id routes through the probed device
 *   (its node GUID and port; a VF without a node GUID by its port GIDs).
 * - rdmacm_pdata_*(): the private data of the REQ and the REP (the DCT number and DC key).
 * - rdmacm_send_gate(): whether a connection may still have DC sends posted for it.
 * - rdmacm_dc_addr(), rdmacm_dc_path(): the DC route to the peer and the local path of the DC
 *   objects, from the connection's resolved AV.
 *
 * Who releases what. The engines own the QPN (conn.h): the passive engine gives it back on
 * REJECTED, CLOSED without timewait and TIMEWAIT_EXIT, after its own reject and after a failed
 * accept; the active engine on REJECTED, CLOSED and ERROR. Both then call release(), which
 * destroys the cm_id. So "release the QPN" (RC_ACT_RELEASE_QPN) means: hand the engine the event
 * on which it releases (rdmacm_engine_events()); RC_ACT_DESTROY_ID means: destroy the cm_id now
 * (only after the engine's release, or for a request the engine never saw). Once a connection
 * has asked for its release it ignores every further event, so nothing is released twice.
 *
 * The kernel's CM keeps the timewait of a cm_id itself; the QPN goes back to the pool's
 * quarantine at DISCONNECTED, which covers the peer's timewait (BRIEF §2).
 */
#ifndef QPN_TESTPMD_RDMACM_FSM_H
#define QPN_TESTPMD_RDMACM_FSM_H

#include <cstddef>
#include <cstdint>
#include <string>

#include <rdma/rdma_cma.h>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "conn.h"

enum rdmacm_state : uint8_t {
	RC_ST_FREE,          /* no connection */
	RC_ST_ADDR,          /* active: address resolution started */
	RC_ST_ROUTE,         /* active: route resolution started */
	RC_ST_CONNECTING,    /* active: REQ sent */
	RC_ST_REQUESTED,     /* passive: REQ handed to the engine */
	RC_ST_ACCEPTED,      /* passive: REP sent */
	RC_ST_ESTABLISHED,   /* both: REP (active) / RTU (passive) seen */
	RC_ST_DISCONNECTING, /* active: DREQ sent */
	RC_ST_RELEASING,     /* release asked of the engine: further events are ignored */
};

/* Inputs that are not rdma_cm events (negative, so never an rdma_cm_event_type). */
enum rdmacm_input : int {
	RC_IN_START = -1,       /* active: the engine started a connection (address resolution) */
	RC_IN_CALL_FAILED = -2, /* a call an action made failed (resolve, connect, establish) */
	RC_IN_ACCEPT = -3,      /* passive: the engine accepted (status: the call's result) */
	RC_IN_REJECT = -4,      /* passive: the engine rejected the request itself */
	RC_IN_DISCONNECT = -5,  /* active: the engine sent the DREQ (status: the call's result) */
	RC_IN_RELEASE = -6,     /* the engine is done with the connection */
	RC_IN_REFUSED = -7,     /* the request/route failed the device or private-data check */
};

/* What to do, a bit set. */
enum rdmacm_action : uint16_t {
	/* Carried out in this (bit) order; only the first four can fail. */
	RC_ACT_RESOLVE_ROUTE = 1u << 0, /* rdma_resolve_route() */
	RC_ACT_CHECK = 1u << 1,         /* device check (and private data on a request/REP) */
	RC_ACT_CONNECT = 1u << 2,       /* rdma_connect(): the REQ with qp_num and private data */
	RC_ACT_ESTABLISH = 1u << 3,     /* rdma_establish(): the RTU */
	RC_ACT_REJECT = 1u << 4,        /* rdma_reject() the request */
	RC_ACT_DELIVER = 1u << 5,       /* hand `deliver` to the engine */
	RC_ACT_RELEASE_QPN = 1u << 6,   /* have the engine release: rdmacm_engine_events() */
	RC_ACT_COUNT_ERROR = 1u << 7,   /* count an error (QPN_CONN_EV_ERROR to the engine) */
	RC_ACT_DESTROY_ID = 1u << 8,    /* rdma_destroy_id() on the connection's cm_id */
	RC_ACT_CLOSE = 1u << 9,         /* the device is gone: say so once */
};

struct rdmacm_step {
	rdmacm_state next;
	uint16_t actions;            /* rdmacm_action bits */
	qpn_conn_event_type deliver; /* with RC_ACT_DELIVER */
	uint16_t reason;             /* REJECTED: the REJ reason */
};

/* One input on a connection of the active (passive == false) or passive side. EVENT is an
 * rdma_cm_event_type or an rdmacm_input; STATUS is the event's status. Inputs that mean nothing
 * in STATE give no actions and keep it. */
rdmacm_step rdmacm_fsm_step(bool passive, rdmacm_state state, int event, int status);

/* The events (besides RC_ACT_DELIVER's, which comes first) that carry RC_ACT_COUNT_ERROR and
 * RC_ACT_RELEASE_QPN of ACTIONS to the engine of that side, into OUT (room for 2); returns how
 * many. A release is CLOSED (timewait false), on which both engines release; with an error the
 * active engine gets ERROR alone (it counts and releases on it), the passive one ERROR (counted)
 * then CLOSED (released). */
unsigned rdmacm_engine_events(bool passive, uint16_t actions, qpn_conn_event_type *out);

/* A REJ's status as the engines count it: the IB CM reason, or UINT16_MAX (no reason). */
uint16_t rdmacm_rej_reason(int status);

/* Why a connection that INPUT (an rdma_cm event or an RC_IN_* input) failed did fail, as the
 * engine reports it: one line, a static string ("the local address changed ...", ...). */
const char *rdmacm_fail_reason(int input);

/* The probed device as a cm_id's device is compared with it. */
constexpr unsigned kRdmacmMaxGids = 32;
struct rdmacm_probed {
	uint64_t guid;    /* node GUID, host order; 0: a VF whose node GUID was never set */
	uint8_t port;     /* the port it serves (0: any) */
	unsigned nb_gids; /* the port's non-zero GIDs (read when guid is 0) */
	uint8_t gids[kRdmacmMaxGids][16];
};

/*
 * Whether a cm_id routes through the probed device. HAS_DEVICE: the id has a device (verbs);
 * ID_GUID_BE its node GUID (network order), ID_PORT its port, ID_SGID its source GID (16 bytes,
 * may be null when unknown). By GUID and port (rdmacm_same_device()); but every VF whose
 * administrator set no node GUID reports 0, so when the probed device's GUID is 0 too the id's
 * source GID must be one of the probed port's GIDs (those of its netdev's addresses): a VF with
 * another address is another VF. false with *why = one line.
 */
bool rdmacm_identify(bool has_device, uint64_t id_guid_be, uint8_t id_port, const uint8_t *id_sgid,
		     const rdmacm_probed &probed, std::string *why);

/*
 * Whether a cm_id's device is the probed one. ID_GUID_BE is ibv_get_device_guid() of the
 * id's device (network order, 0 when the id has no device yet), PROBED_GUID the probed
 * device's mlx5_qpn_dev_info.node_guid (host order). ID_PORT / PROBED_PORT: the id's port and
 * the one required (PROBED_PORT 0: any port). false with *why = one line for the refusal.
 */
bool rdmacm_same_device(uint64_t id_guid_be, uint8_t id_port, uint64_t probed_guid,
			uint8_t probed_port, std::string *why);

/*
 * Private data of the REQ and the REP: a versioned struct, every field in network byte order.
 * The REP carries the passive side's DCT number and DC key, which the active side's DCI needs
 * to address it; the REQ carries the active side's (0 when it has no DCT). A peer's CM may
 * pad the private data (IB pads the REQ to 56 bytes and the REP to 196): longer is fine,
 * shorter, another magic or another version is malformed.
 */
constexpr uint16_t kRdmacmPdataMagic = 0x5150; /* "QP" */
constexpr uint8_t kRdmacmPdataVersion = 1;

struct rdmacm_pdata {
	uint32_t dctn;   /* DCT number (24 bits), 0: none */
	uint64_t dc_key; /* the DCT's DC access key */
};

constexpr size_t kRdmacmPdataLen = 16; /* magic 2, version 1, reserved 1, dctn 4, dc_key 8 */

/* Write P into BUF (at least kRdmacmPdataLen bytes); returns kRdmacmPdataLen. */
size_t rdmacm_pdata_put(const rdmacm_pdata &p, uint8_t *buf);

/* Read LEN bytes of private data into *P. 0, or -EINVAL (short, wrong magic or version, a DCT
 * number over 24 bits) with *why = one line. */
int rdmacm_pdata_get(const void *buf, size_t len, rdmacm_pdata *p, std::string *why);

/* Whether private data received on a REQ (passive side) or a REP (active side) can be used: a
 * REP must name the peer's DCT when this side sends data (NEED_DCT), a REQ may carry 0 (the
 * active side has DCIs only). false with *why = one line. */
bool rdmacm_pdata_check(const rdmacm_pdata &p, bool need_dct, std::string *why);

/* Whether a DC send may be posted for a connection in STATE whose REP named PEER: only while it
 * is established and the REP named a DCT. A connection closed (DISCONNECTED, the peer's DREQ of
 * a stale connection), closing, failed or released gets -ENOTCONN and nothing is posted: its
 * CM connection, not the DCI, says whether the peer still expects its data. */
int rdmacm_send_gate(rdmacm_state state, const rdmacm_pdata &peer);

/*
 * The local path of a DCT or DCI from the AV the kernel's CM resolved for a connection and its
 * path MTU (rdma_init_qp_attr() at RTR: ah_attr, path_mtu): the GID index, hop limit, traffic
 * class, flow label, SL and rate of the route, as UCX takes its DC address from the
 * interface's GID. false with *why: no port, SL above 15, flow label above 20 bits, a path MTU
 * that is no enum ibv_mtu (0 is kept: the port's active MTU).
 */
bool rdmacm_dc_path(const ibv_ah_attr &a, uint8_t path_mtu, mlx5_qpn_dc_path *out,
		    std::string *why);

/*
 * The route of a DC send to the peer from the address vector the kernel's CM resolved for the
 * connection (rdma_init_qp_attr() at RTR: the path the REQ/REP took, with the GID index and,
 * on RoCE, the GRH): what mlx5_qpn_ah_create() takes. false with *why: an AV a DCI cannot
 * use (no port, an SL above 15, a flow label above 20 bits, neither a LID nor a GRH).
 */
bool rdmacm_dc_addr(const ibv_ah_attr &a, mlx5_qpn_dc_addr *out, std::string *why);

#endif /* QPN_TESTPMD_RDMACM_FSM_H */
