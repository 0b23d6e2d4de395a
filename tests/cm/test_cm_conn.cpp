/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CM state machines, table-driven: an agent under test ("local", GUID kLocal) is brought into
 * every state of both sides by a scripted peer (frames built by hand), then receives each of
 * the seven message types; the table gives the resulting state, the frames emitted and the
 * event delivered.
 */
#include "cm_test_util.h"

#include <cerrno>

using namespace cmtest;

namespace {

constexpr uint64_t kLocal = 0xA0A0;
constexpr uint64_t kPeer = 0xB0B0;
constexpr uint64_t kSvc = 0x4791;
constexpr uint32_t kPeerId = 0x5005;
constexpr uint32_t kLocalQpn = 0x111;
constexpr uint32_t kPeerQpn = 0x222;
constexpr uint64_t kT0 = 1000 * kMs;
constexpr int S_IDLE = MLX5_QPN_CM_STATE_IDLE, S_REQ_SENT = MLX5_QPN_CM_STATE_REQ_SENT,
	      S_REQ_RCVD = MLX5_QPN_CM_STATE_REQ_RCVD, S_REP_SENT = MLX5_QPN_CM_STATE_REP_SENT,
	      S_EST = MLX5_QPN_CM_STATE_ESTABLISHED, S_DREQ_SENT = MLX5_QPN_CM_STATE_DREQ_SENT,
	      S_TW = MLX5_QPN_CM_STATE_TIMEWAIT;
constexpr uint8_t REQ = MLX5_QPN_CM_MSG_REQ, REP = MLX5_QPN_CM_MSG_REP, RTU = MLX5_QPN_CM_MSG_RTU,
		  REJ = MLX5_QPN_CM_MSG_REJ, MRA = MLX5_QPN_CM_MSG_MRA, DREQ = MLX5_QPN_CM_MSG_DREQ,
		  DREP = MLX5_QPN_CM_MSG_DREP;
constexpr uint32_t E_NONE = 0, E_REQ = MLX5_QPN_CM_EVENT_REQ, E_EST = MLX5_QPN_CM_EVENT_ESTABLISHED,
		   E_REJ = MLX5_QPN_CM_EVENT_REJECTED, E_DISC = MLX5_QPN_CM_EVENT_DISCONNECTED;

/* The peer's frame of @p type for connection @p id of the local agent. */
mlx5_qpn_cm_msg
peer_msg(uint8_t type, uint32_t id, uint16_t reason = MLX5_QPN_CM_REJ_CONSUMER_DEFINED)
{
	mlx5_qpn_cm_msg m = msg(type, kPeer, kPeerId, id);
	switch (type) {
	case MLX5_QPN_CM_MSG_REQ:
		m.remote_comm_id = 0;
		m.service_id = kSvc;
		m.qpn = kPeerQpn;
		m.packet_life_time = 16;
		m.ack_delay = 16;
		m.cm_response_timeout = 20;
		m.max_cm_retries = 2;
		break;
	case MLX5_QPN_CM_MSG_REP:
		m.qpn = kPeerQpn;
		m.ack_delay = 16;
		break;
	case MLX5_QPN_CM_MSG_REJ:
		m.reason = reason;
		m.msg_ref = MLX5_QPN_CM_REF_REQ;
		break;
	case MLX5_QPN_CM_MSG_MRA:
		m.msg_ref = MLX5_QPN_CM_REF_REQ;
		m.service_timeout = 10;
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		m.qpn = kLocalQpn;
		break;
	default:
		break;
	}
	return m;
}

/* Drive a fresh agent's connection into @p state on the given side; returns its comm id. */
uint32_t
reach(mlx5_qpn_cm *cm, bool active, int state)
{
	uint32_t id = 0;
	if (active) {
		EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, kLocalQpn, nullptr, 0, kT0, &id), 0);
		if (state != S_REQ_SENT) {
			EXPECT_EQ(feed(cm, peer_msg(REP, id), kT0), 0);
		}
	} else {
		EXPECT_EQ(mlx5_qpn_cm_listen(cm, kSvc), 0);
		EXPECT_EQ(feed(cm, peer_msg(REQ, 0), kT0), 0);
		auto ev = events(cm);
		EXPECT_EQ(ev.size(), 1u);
		if (ev.empty())
			return 0;
		id = ev[0].conn_id;
		if (state != S_REQ_RCVD) {
			EXPECT_EQ(mlx5_qpn_cm_accept(cm, id, kLocalQpn, nullptr, 0, kT0), 0);
		}
		if (state != S_REQ_RCVD && state != S_REP_SENT) {
			EXPECT_EQ(feed(cm, peer_msg(RTU, id), kT0), 0);
		}
	}
	if (state == S_DREQ_SENT || state == S_TW) {
		EXPECT_EQ(mlx5_qpn_cm_disconnect(cm, id, kT0), 0);
	}
	if (state == S_TW) {
		EXPECT_EQ(feed(cm, peer_msg(DREP, id), kT0), 0);
	}
	EXPECT_EQ(state_of(cm, id), state);
	drain(cm);
	events(cm);
	return id;
}

struct Row {
	bool active;
	int from;
	uint8_t rx;
	int to;
	std::vector<uint8_t> tx;
	uint32_t event;
};

std::string
row_name(const Row &r)
{
	return std::string(r.active ? "active " : "passive ") + mlx5_qpn_cm_state_name(r.from) +
	       " + " + mlx5_qpn_cm_msg_name(r.rx);
}

/* Every state of both sides times every message type (live policy). */
const std::vector<Row> &
table()
{
	static const std::vector<Row> rows = {
		/* Active side. A REQ reaching an active connection is a new passive request
		 * from the same peer with the same QPN: stale while the pair is held. */
		{true, S_REQ_SENT, REQ, S_REQ_SENT, {}, E_REQ},
		{true, S_REQ_SENT, REP, S_EST, {RTU}, E_EST},
		{true, S_REQ_SENT, RTU, S_REQ_SENT, {}, E_NONE},
		{true, S_REQ_SENT, REJ, S_IDLE, {}, E_REJ},
		{true, S_REQ_SENT, MRA, S_REQ_SENT, {}, E_NONE},
		{true, S_REQ_SENT, DREQ, S_REQ_SENT, {}, E_NONE},
		{true, S_REQ_SENT, DREP, S_REQ_SENT, {}, E_NONE},
		{true, S_EST, REQ, S_DREQ_SENT, {DREQ, REJ}, E_NONE},
		{true, S_EST, REP, S_EST, {RTU}, E_NONE}, /* duplicate REP: RTU again */
		{true, S_EST, RTU, S_EST, {}, E_NONE},
		{true, S_EST, REJ, S_TW, {}, E_DISC},
		{true, S_EST, MRA, S_EST, {}, E_NONE},
		{true, S_EST, DREQ, S_TW, {DREP}, E_DISC},
		{true, S_EST, DREP, S_EST, {}, E_NONE},
		{true, S_DREQ_SENT, REQ, S_DREQ_SENT, {REJ}, E_NONE},
		{true, S_DREQ_SENT, REP, S_DREQ_SENT, {}, E_NONE},
		{true, S_DREQ_SENT, RTU, S_DREQ_SENT, {}, E_NONE},
		{true, S_DREQ_SENT, REJ, S_DREQ_SENT, {}, E_NONE},
		{true, S_DREQ_SENT, MRA, S_DREQ_SENT, {}, E_NONE},
		{true, S_DREQ_SENT, DREQ, S_TW, {DREP}, E_DISC},
		{true, S_DREQ_SENT, DREP, S_TW, {}, E_DISC},
		{true, S_TW, REQ, S_TW, {}, E_REQ}, /* live: pair released at timewait */
		{true, S_TW, REP, S_TW, {}, E_NONE},
		{true, S_TW, RTU, S_TW, {}, E_NONE},
		{true, S_TW, REJ, S_TW, {}, E_NONE},
		{true, S_TW, MRA, S_TW, {}, E_NONE},
		{true, S_TW, DREQ, S_TW, {DREP}, E_NONE}, /* our DREP was lost */
		{true, S_TW, DREP, S_TW, {}, E_NONE},
		/* Passive side. A REQ here repeats the one that made the connection. */
		{false, S_REQ_RCVD, REQ, S_REQ_RCVD, {}, E_NONE},
		{false, S_REQ_RCVD, REP, S_REQ_RCVD, {}, E_NONE},
		{false, S_REQ_RCVD, RTU, S_REQ_RCVD, {}, E_NONE},
		{false, S_REQ_RCVD, REJ, S_IDLE, {}, E_REJ},
		{false, S_REQ_RCVD, MRA, S_REQ_RCVD, {}, E_NONE},
		{false, S_REQ_RCVD, DREQ, S_REQ_RCVD, {}, E_NONE},
		{false, S_REQ_RCVD, DREP, S_REQ_RCVD, {}, E_NONE},
		{false, S_REP_SENT, REQ, S_REP_SENT, {REP}, E_NONE}, /* our REP was lost */
		{false, S_REP_SENT, REP, S_REP_SENT, {}, E_NONE},
		{false, S_REP_SENT, RTU, S_EST, {}, E_EST},
		{false, S_REP_SENT, REJ, S_IDLE, {}, E_REJ},
		{false, S_REP_SENT, MRA, S_REP_SENT, {}, E_NONE}, /* MRA of REQ: wrong message */
		{false, S_REP_SENT, DREQ, S_TW, {DREP}, E_DISC},
		{false, S_REP_SENT, DREP, S_REP_SENT, {}, E_NONE},
		{false, S_EST, REQ, S_EST, {}, E_NONE},
		{false, S_EST, REP, S_EST, {}, E_NONE},
		{false, S_EST, RTU, S_EST, {}, E_NONE},
		{false, S_EST, REJ, S_TW, {}, E_DISC},
		{false, S_EST, MRA, S_EST, {}, E_NONE},
		{false, S_EST, DREQ, S_TW, {DREP}, E_DISC},
		{false, S_EST, DREP, S_EST, {}, E_NONE},
		{false, S_DREQ_SENT, REQ, S_DREQ_SENT, {}, E_NONE},
		{false, S_DREQ_SENT, REP, S_DREQ_SENT, {}, E_NONE},
		{false, S_DREQ_SENT, RTU, S_DREQ_SENT, {}, E_NONE},
		{false, S_DREQ_SENT, REJ, S_DREQ_SENT, {}, E_NONE},
		{false, S_DREQ_SENT, MRA, S_DREQ_SENT, {}, E_NONE},
		{false, S_DREQ_SENT, DREQ, S_TW, {DREP}, E_DISC},
		{false, S_DREQ_SENT, DREP, S_TW, {}, E_DISC},
		{false, S_TW, REQ, S_TW, {}, E_REQ}, /* live: a new connection may reuse the pair */
		{false, S_TW, REP, S_TW, {}, E_NONE},
		{false, S_TW, RTU, S_TW, {}, E_NONE},
		{false, S_TW, REJ, S_TW, {}, E_NONE},
		{false, S_TW, MRA, S_TW, {}, E_NONE},
		{false, S_TW, DREQ, S_TW, {DREP}, E_NONE},
		{false, S_TW, DREP, S_TW, {}, E_NONE},
	};
	return rows;
}

} // namespace

TEST(CmConn, TableCoversEveryStateAndMessage)
{
	/* 4 active states + 5 passive states, 7 messages each. */
	EXPECT_EQ(table().size(), (4u + 5u) * 7u);
}

TEST(CmConn, EveryTransition)
{
	for (const Row &r : table()) {
		SCOPED_TRACE(row_name(r));
		AgentPtr cm(params(kLocal));
		ASSERT_NE(cm.cm, nullptr);
		if (r.active) {
			/* so that a REQ can be taken */
			ASSERT_EQ(mlx5_qpn_cm_listen(cm, kSvc), 0);
		}
		uint32_t id = reach(cm, r.active, r.from);
		ASSERT_NE(id, 0u);
		mlx5_qpn_cm_stats before = stats(cm);
		EXPECT_EQ(feed(cm, peer_msg(r.rx, id), kT0 + kMs), 0);
		EXPECT_EQ(state_of(cm, id), r.to);
		auto out = drain(cm);
		EXPECT_EQ(types(out), r.tx);
		for (const Frame &f : out) {
			EXPECT_EQ(f.dst, kPeer);
		}
		auto ev = events(cm);
		if (r.event == E_NONE) {
			EXPECT_TRUE(ev.empty());
		} else {
			ASSERT_EQ(ev.size(), 1u);
			EXPECT_EQ(ev[0].type, r.event);
			if (r.event != E_REQ) {
				EXPECT_EQ(ev[0].conn_id, id);
			}
		}
		mlx5_qpn_cm_stats after = stats(cm);
		EXPECT_EQ(after.rx[r.rx - REQ], before.rx[r.rx - REQ] + 1);
		EXPECT_EQ(after.malformed, 0u);
		/* Nothing happened at all: the frame must have been counted as unexpected. */
		bool nothing = r.to == r.from && r.tx.empty() && r.event == E_NONE;
		bool absorbed = after.duplicates > before.duplicates ||
				after.mra_rx > before.mra_rx;
		if (nothing && !absorbed) {
			EXPECT_EQ(after.unexpected, before.unexpected + 1);
		}
	}
}

TEST(CmConn, RejectReasonsOnRequester)
{
	/* Every IBA reason reaches the consumer; TIMEOUT and STALE_CONN keep a timewait. */
	for (uint16_t r = 1; r < MLX5_QPN_CM_REJ_REASON_SLOTS; r++) {
		if (!mlx5_qpn_cm_rej_reason_valid(r))
			continue;
		SCOPED_TRACE(mlx5_qpn_cm_rej_reason_name(r));
		AgentPtr cm(params(kLocal));
		uint32_t id = reach(cm, true, S_REQ_SENT);
		EXPECT_EQ(feed(cm, peer_msg(REJ, id, r), kT0), 0);
		auto ev = events(cm);
		ASSERT_EQ(ev.size(), 1u);
		EXPECT_EQ(ev[0].type, E_REJ);
		EXPECT_EQ(ev[0].reason, r);
		bool tw = r == MLX5_QPN_CM_REJ_TIMEOUT || r == MLX5_QPN_CM_REJ_STALE_CONN;
		EXPECT_EQ(state_of(cm, id), tw ? S_TW : S_IDLE);
		EXPECT_EQ(stats(cm).rej_rx[r], 1u);
		EXPECT_TRUE(drain(cm).empty());
	}
}

TEST(CmConn, RejectReasonsFromConsumer)
{
	for (uint16_t r = 0; r < 40; r++) {
		SCOPED_TRACE(r);
		AgentPtr cm(params(kLocal));
		uint32_t id = reach(cm, false, S_REQ_RCVD);
		int rc = mlx5_qpn_cm_reject(cm, id, r, "x", 1, kT0);
		if (!mlx5_qpn_cm_rej_reason_valid(r)) {
			EXPECT_EQ(rc, -EINVAL);
			EXPECT_EQ(state_of(cm, id), S_REQ_RCVD);
			continue;
		}
		ASSERT_EQ(rc, 0);
		auto out = drain(cm);
		ASSERT_EQ(out.size(), 1u);
		EXPECT_EQ(out[0].msg.type, REJ);
		EXPECT_EQ(out[0].msg.reason, r);
		EXPECT_EQ(out[0].msg.remote_comm_id, kPeerId);
		EXPECT_EQ(out[0].msg.private_data_len, 1);
		EXPECT_EQ(state_of(cm, id), S_IDLE);
		EXPECT_EQ(stats(cm).rej_tx[r], 1u);
		EXPECT_EQ(mlx5_qpn_cm_pair_held(cm, kPeer, kPeerQpn), 0);
	}
}

TEST(CmConn, PassiveRejectsForServiceAndResources)
{
	mlx5_qpn_cm_params p = params(kLocal);
	p.max_conns = 1;
	AgentPtr cm(p);
	/* Not listening: INVALID_SERVICE_ID, no connection, no event. */
	EXPECT_EQ(feed(cm, peer_msg(REQ, 0), kT0), 0);
	auto out = drain(cm);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.reason, MLX5_QPN_CM_REJ_INVALID_SERVICE_ID);
	EXPECT_EQ(out[0].msg.remote_comm_id, kPeerId);
	EXPECT_EQ(out[0].msg.local_comm_id, 0u);
	EXPECT_TRUE(events(cm).empty());
	/* One slot: the second distinct REQ gets NO_RESOURCES. */
	ASSERT_EQ(mlx5_qpn_cm_listen(cm, kSvc), 0);
	EXPECT_EQ(mlx5_qpn_cm_listen(cm, kSvc), -EEXIST);
	EXPECT_EQ(feed(cm, peer_msg(REQ, 0), kT0), 0);
	EXPECT_EQ(events(cm).size(), 1u);
	mlx5_qpn_cm_msg req2 = peer_msg(REQ, 0);
	req2.local_comm_id = kPeerId + 1;
	req2.qpn = kPeerQpn + 1;
	EXPECT_EQ(feed(cm, req2, kT0), 0);
	out = drain(cm);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.reason, MLX5_QPN_CM_REJ_NO_RESOURCES);
	EXPECT_EQ(mlx5_qpn_cm_unlisten(cm, kSvc), 0);
	EXPECT_EQ(mlx5_qpn_cm_unlisten(cm, kSvc), -ENOENT);
}

TEST(CmConn, StrayFramesGetIbaAnswers)
{
	AgentPtr cm(params(kLocal));
	/* REP for no connection: REJ INVALID_COMM_ID. */
	EXPECT_EQ(feed(cm, peer_msg(REP, 0x77), kT0), 0);
	auto out = drain(cm);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.type, REJ);
	EXPECT_EQ(out[0].msg.reason, MLX5_QPN_CM_REJ_INVALID_COMM_ID);
	/* DREQ for no connection: DREP, so the peer can finish. */
	EXPECT_EQ(feed(cm, peer_msg(DREQ, 0x77), kT0), 0);
	out = drain(cm);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.type, DREP);
	EXPECT_EQ(out[0].msg.remote_comm_id, kPeerId);
	/* Everything else: silence. */
	for (uint8_t t : {RTU, REJ, MRA, DREP}) {
		EXPECT_EQ(feed(cm, peer_msg(t, 0x77), kT0), 0);
	}
	EXPECT_TRUE(drain(cm).empty());
	EXPECT_EQ(stats(cm).unexpected, 6u);
	/* A frame from the wrong node or naming the wrong peer comm id is ignored. */
	uint32_t id = reach(cm, true, S_EST);
	mlx5_qpn_cm_msg m = peer_msg(DREQ, id);
	m.src_guid = kPeer + 1;
	EXPECT_EQ(feed(cm, m, kT0), 0);
	m = peer_msg(DREQ, id);
	m.local_comm_id = kPeerId + 1;
	EXPECT_EQ(feed(cm, m, kT0), 0);
	m = peer_msg(DREQ, id);
	m.qpn = kLocalQpn + 1;
	EXPECT_EQ(feed(cm, m, kT0), 0);
	EXPECT_EQ(state_of(cm, id), S_EST);
}

TEST(CmConn, ApiArgumentErrors)
{
	AgentPtr cm(params(kLocal));
	uint32_t id;
	EXPECT_EQ(mlx5_qpn_cm_connect(nullptr, kPeer, kSvc, 1, nullptr, 0, 0, &id), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, 0, kSvc, 1, nullptr, 0, 0, &id), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 0x1000000, nullptr, 0, 0, &id), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 1, nullptr, 3, 0, &id), -EINVAL);
	uint8_t pd[93] = {};
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 1, pd, 93, 0, &id), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 1, pd, 92, 0, nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_accept(cm, 0x1234, 1, nullptr, 0, 0), -ENOENT);
	EXPECT_EQ(mlx5_qpn_cm_disconnect(cm, 0, 0), -ENOENT);
	EXPECT_EQ(mlx5_qpn_cm_disconnect(nullptr, 1, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_mra(cm, 1, 32, 0), -EINVAL);
	id = reach(cm, true, S_REQ_SENT);
	EXPECT_EQ(mlx5_qpn_cm_accept(cm, id, 1, nullptr, 0, 0), -EPERM);
	EXPECT_EQ(mlx5_qpn_cm_disconnect(cm, id, 0), -EPERM);
	EXPECT_EQ(mlx5_qpn_cm_reject(cm, id, 28, nullptr, 0, 0), -EPERM);
	EXPECT_EQ(mlx5_qpn_cm_mra(cm, id, 5, 0), -EPERM);
	EXPECT_EQ(mlx5_qpn_cm_input(cm, nullptr, 0, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_tick(nullptr, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_poll(cm, 0), -ENOTSUP);
	mlx5_qpn_cm_params bad = params(0);
	EXPECT_EQ(mlx5_qpn_cm_create(&bad), nullptr);
	bad = params(kLocal);
	bad.max_conns = 0;
	EXPECT_EQ(mlx5_qpn_cm_create(&bad), nullptr);
	bad.max_conns = MLX5_QPN_CM_MAX_CONNS + 1;
	EXPECT_EQ(mlx5_qpn_cm_create(&bad), nullptr);
	bad = params(kLocal);
	bad.ack_delay = 32;
	EXPECT_EQ(mlx5_qpn_cm_create(&bad), nullptr);
	bad = params(kLocal);
	bad.policy = 7;
	EXPECT_EQ(mlx5_qpn_cm_create(&bad), nullptr);
	EXPECT_EQ(mlx5_qpn_cm_create(nullptr), nullptr);
	mlx5_qpn_cm_destroy(nullptr);
}

TEST(CmConn, SlotsAreReusedWithFreshCommIds)
{
	mlx5_qpn_cm_params p = params(kLocal);
	p.max_conns = 2;
	AgentPtr cm(p);
	uint32_t a, b, c;
	ASSERT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 1, nullptr, 0, kT0, &a), 0);
	ASSERT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 2, nullptr, 0, kT0, &b), 0);
	EXPECT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 3, nullptr, 0, kT0, &c), -ENOSPC);
	EXPECT_NE(a, b);
	EXPECT_EQ(feed(cm, peer_msg(REJ, a), kT0), 0); /* frees a */
	ASSERT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 3, nullptr, 0, kT0, &c), 0);
	EXPECT_NE(c, a) << "a reused slot must get a new comm id";
	/* A late frame for the old id does not reach the new connection. */
	EXPECT_EQ(feed(cm, peer_msg(REP, a), kT0), 0);
	EXPECT_EQ(state_of(cm, c), S_REQ_SENT);
	EXPECT_EQ(stats(cm).conns, 2u);
}
