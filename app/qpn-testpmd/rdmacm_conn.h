/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two files of qpn-testpmd's librdmacm connections share (conn.h's conn_rdmacm_ops):
 * conn_rdmacm.cpp (setup, carrying out the state machine's decisions, the active side, the ops
 * table) and conn_rdmacm_passive.cpp (the listener and the passive side). Not for other files.
 */
#ifndef QPN_TESTPMD_RDMACM_CONN_H
#define QPN_TESTPMD_RDMACM_CONN_H

#include <algorithm>
#include <atomic>
#include <cstring>
#include <netinet/in.h>
#include <string>
#include <vector>

#include "rdmacm_fsm.h"
#include "rdmacm_glue.h"
#include "testpmd.h"

namespace rcm {

constexpr int kTimeoutMs = 2000;
constexpr unsigned kLcoreConns = 64; /* an active lcore's slots (engine_active.h kMaxSlots) */

struct cm_conn {
	rdma_cm_id *id;
	uint32_t qpn; /* active: the QPN the REQ presents */
	rdmacm_state st;
	rdmacm_pdata peer; /* active: the DCT its REP named (its sends go there) */
};

struct rdmacm_state_all {
	const rdmacm_glue *g = nullptr;
	sockaddr_in dst{};
	sockaddr_in src{};                          /* --hw-bind / the device's address */
	rdmacm_probed dev[RTE_MAX_LCORE] = {};      /* the probed device of each client lcore */
	rdmacm_probed pdev{};                       /* the passive side's device */
	rdma_event_channel *ch[RTE_MAX_LCORE] = {}; /* per client lcore */
	cm_conn *conns[RTE_MAX_LCORE] = {};         /* kLcoreConns per client lcore */
	rdma_event_channel *pch = nullptr;          /* the passive side's */
	rdma_cm_id *listen_id = nullptr;
	std::vector<cm_conn> pconns; /* the passive side's, by conn id */
	/* Touched by every client lcore: the first refusal and the first removal print a line. */
	std::atomic<uint64_t> refusals{0}; /* requests/routes refused by the checks */
	std::atomic<bool> closed{false};   /* a device removal was seen */
};

extern rdmacm_state_all g_rc;
extern run_ctx *g_ctx; /* the run's (set at setup): the AH is made on the lcore's device */

/* One event, copied before its acknowledgement (its private data lives until then). */
struct cm_input {
	rdma_cm_id *id;
	int event;
	int status;
	uint8_t pdata_len;
	uint8_t pdata[64]; /* ours is kRdmacmPdataLen; padding beyond 64 is not needed */
};

/* Where a connection's events go, and what it is checked against. */
struct cm_target {
	bool passive;
	cm_conn *c;
	uint32_t conn;
	unsigned node;
	const rdmacm_probed *dev; /* the probed device it must route through */
	unsigned lcore;           /* active: the client lcore */
	run_ctx *ctx;
};

/* An event channel whose rdma_get_cm_event() answers EAGAIN instead of blocking. */
rdma_event_channel *channel_create();
uint32_t conn_of(rdma_cm_id *id);
void destroy(rdma_cm_id **id);
/* The device's name; with P, what a cm_id's device is compared with (rdmacm_identify). */
std::string dev_ident(mlx5_qpn_dev *dev, rdmacm_probed *p = nullptr);
/* The listener's address: --hw-bind, else the device's. */
int source_addr(run_ctx *ctx, bool required);
/* The REQ's and the REP's parameters (private data in PD). */
rdma_conn_param conn_param(bool passive, uint32_t qpn, uint8_t *pd);
/* Carry out one fallible action; false: it failed (the input for the state machine in *fail). */
bool act(uint16_t a, const cm_target &t, const cm_input &in, int *fail);
/* Feed INPUT to T's state machine and carry out the step; the engine's events go to EV (room
 * for 2). */
unsigned feed(const cm_target &t, const cm_input &in, int input, int status, qpn_conn_event *ev);

/* Up to MAX events of channel CH, each copied, acknowledged, then fed through ON. */
template <typename F>
unsigned
drain(rdma_event_channel *ch, qpn_conn_event *ev, unsigned max, F on)
{
	unsigned n = 0;
	rdma_cm_event *e;
	while (n + 2 <= max && g_rc.g->get_cm_event(ch, &e) == 0) {
		cm_input in{e->id, int(e->event), e->status, 0, {}};
		const rdma_conn_param &cp = e->param.conn;
		if (cp.private_data != nullptr) {
			in.pdata_len =
				uint8_t(std::min<size_t>(cp.private_data_len, sizeof(in.pdata)));
			memcpy(in.pdata, cp.private_data, in.pdata_len);
		}
		g_rc.g->ack_cm_event(e);
		n += on(in, ev + n);
	}
	return n;
}

/* conn_rdmacm_passive.cpp: the listener and the passive side's ops. */
int passive_setup(run_ctx *ctx);
int rc_accept(run_ctx *, unsigned, uint32_t conn, uint32_t qpn);
void rc_reject(run_ctx *, unsigned, uint32_t conn, uint16_t);
void rc_passive_release(run_ctx *, unsigned, uint32_t conn);
unsigned rc_passive_poll(run_ctx *, unsigned, qpn_conn_event *ev, unsigned max);

} /* namespace rcm */

#endif /* QPN_TESTPMD_RDMACM_CONN_H */
