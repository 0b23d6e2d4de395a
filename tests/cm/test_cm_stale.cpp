/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stale-connection detection and timewait in both policies, retransmission timers, and full
 * lifecycles between two agents (frames carried by cmtest::pump()).
 */
#include "cm_test_util.h"

#include <cerrno>

using namespace cmtest;

namespace {

constexpr uint64_t kClient = 0xC1;
constexpr uint64_t kServer = 0x5E;
constexpr uint64_t kSvc = 0x4791;
constexpr uint64_t kT0 = 5000 * kMs;

struct Pair {
	AgentPtr client, server;
	explicit Pair(mlx5_qpn_cm_policy pol)
	    : client(params(kClient, pol)), server(params(kServer, pol))
	{
		EXPECT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	}
	int pump(uint64_t now) { return cmtest::pump({{kClient, client}, {kServer, server}}, now); }

	/*
	 * Client connects with @p cqpn, server accepts with @p sqpn. Returns the server's event
	 * for the REQ (conn id in .conn_id) or an event of type 0 if the REQ never arrived.
	 */
	mlx5_qpn_cm_event connect(uint32_t cqpn, uint32_t sqpn, uint64_t now, uint32_t *cid)
	{
		EXPECT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, cqpn, nullptr, 0, now, cid),
			  0);
		pump(now);
		mlx5_qpn_cm_event req{};
		for (auto &e : events(server))
			if (e.type == MLX5_QPN_CM_EVENT_REQ)
				req = e;
		if (req.type == MLX5_QPN_CM_EVENT_REQ) {
			EXPECT_EQ(req.remote_qpn, cqpn);
			EXPECT_EQ(mlx5_qpn_cm_accept(server, req.conn_id, sqpn, nullptr, 0, now),
				  0);
			pump(now);
		}
		return req;
	}
};

uint32_t
count(const std::vector<mlx5_qpn_cm_event> &ev, uint32_t type, uint16_t reason = 0)
{
	uint32_t n = 0;
	for (const auto &e : ev)
		n += e.type == type && e.reason == reason;
	return n;
}

} // namespace

TEST(CmLifecycle, ConnectDisconnectTimewait)
{
	Pair p(MLX5_QPN_CM_POLICY_LIVE);
	uint32_t cid;
	const char pd[] = "hello";
	ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 0x100, pd, sizeof(pd), kT0, &cid),
		  0);
	p.pump(kT0);
	auto sev = events(p.server);
	ASSERT_EQ(sev.size(), 1u);
	EXPECT_EQ(sev[0].type, MLX5_QPN_CM_EVENT_REQ);
	EXPECT_EQ(sev[0].remote_guid, kClient);
	EXPECT_EQ(sev[0].remote_qpn, 0x100u);
	EXPECT_EQ(sev[0].service_id, kSvc);
	ASSERT_EQ(sev[0].private_data_len, sizeof(pd));
	EXPECT_STREQ(reinterpret_cast<const char *>(sev[0].private_data), pd);
	uint32_t sid = sev[0].conn_id;
	ASSERT_EQ(mlx5_qpn_cm_accept(p.server, sid, 0x200, nullptr, 0, kT0), 0);
	p.pump(kT0);
	auto cev = events(p.client);
	ASSERT_EQ(cev.size(), 1u);
	EXPECT_EQ(cev[0].type, MLX5_QPN_CM_EVENT_ESTABLISHED);
	EXPECT_EQ(cev[0].remote_qpn, 0x200u);
	EXPECT_EQ(count(events(p.server), MLX5_QPN_CM_EVENT_ESTABLISHED), 1u);
	EXPECT_EQ(mlx5_qpn_cm_pair_held(p.server, kClient, 0x100), 1);
	EXPECT_EQ(mlx5_qpn_cm_pair_held(p.client, kServer, 0x200), 1);

	const uint64_t t1 = kT0 + 10 * kMs;
	ASSERT_EQ(mlx5_qpn_cm_disconnect(p.client, cid, t1), 0);
	p.pump(t1);
	EXPECT_EQ(count(events(p.client), MLX5_QPN_CM_EVENT_DISCONNECTED), 1u);
	EXPECT_EQ(count(events(p.server), MLX5_QPN_CM_EVENT_DISCONNECTED), 1u);
	EXPECT_EQ(state_of(p.client, cid), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(state_of(p.server, sid), MLX5_QPN_CM_STATE_TIMEWAIT);
	mlx5_qpn_cm_conn_info info;
	ASSERT_EQ(mlx5_qpn_cm_conn_get(p.client, cid, &info), 0);
	EXPECT_EQ(info.timewait_ms, 1024u) << "packet life time 16, ack delay 16";
	EXPECT_EQ(info.timer_ns, t1 + 1024 * kMs);
	EXPECT_EQ(stats(p.client).timewait_entries, 1u);

	/* Expiry at exactly start + timewait, not a nanosecond earlier. */
	EXPECT_EQ(mlx5_qpn_cm_tick(p.client, t1 + 1024 * kMs - 1), 0);
	EXPECT_EQ(state_of(p.client, cid), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(mlx5_qpn_cm_tick(p.client, t1 + 1024 * kMs), 1);
	EXPECT_EQ(state_of(p.client, cid), MLX5_QPN_CM_STATE_IDLE);
	auto ex = events(p.client);
	ASSERT_EQ(ex.size(), 1u);
	EXPECT_EQ(ex[0].type, MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT);
	EXPECT_EQ(ex[0].conn_id, cid);
	EXPECT_EQ(mlx5_qpn_cm_tick(p.server, t1 + 1024 * kMs), 1);
	mlx5_qpn_cm_stats s = stats(p.client);
	EXPECT_EQ(s.conns, 0u);
	EXPECT_EQ(s.timewait_entries, 0u);
	EXPECT_EQ(s.pairs, 0u);
	EXPECT_EQ(s.established, 1u);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_REQ - 0x10], 1u);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_RTU - 0x10], 1u);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_DREQ - 0x10], 1u);
	EXPECT_EQ(s.rx[MLX5_QPN_CM_MSG_REP - 0x10], 1u);
	EXPECT_EQ(s.rx[MLX5_QPN_CM_MSG_DREP - 0x10], 1u);
	EXPECT_EQ(stats(p.server).conns, 0u);
}

TEST(CmStale, LiveReqRejectedAndOldConnectionDisconnected)
{
	for (auto pol : {MLX5_QPN_CM_POLICY_LIVE, MLX5_QPN_CM_POLICY_STRICT}) {
		SCOPED_TRACE(pol == MLX5_QPN_CM_POLICY_LIVE ? "live" : "strict");
		Pair p(pol);
		uint32_t c1, c2;
		mlx5_qpn_cm_event r1 = p.connect(0x300, 0x400, kT0, &c1);
		ASSERT_EQ(r1.type, MLX5_QPN_CM_EVENT_REQ);
		events(p.client);
		events(p.server);
		/* The client reuses QPN 0x300 while the first connection is live (e.g. after a
		 * crash it forgot about): the server sees a stale pair. */
		ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 0x300, nullptr, 0, kT0, &c2),
			  0);
		p.pump(kT0);
		auto cev = events(p.client);
		EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_REJECTED, MLX5_QPN_CM_REJ_STALE_CONN), 1u);
		/* The old connection got a DREQ from the server and is now closed on both sides. */
		EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_DISCONNECTED), 1u);
		EXPECT_EQ(count(events(p.server), MLX5_QPN_CM_EVENT_REQ), 0u);
		mlx5_qpn_cm_stats ss = stats(p.server);
		EXPECT_EQ(ss.stale_rejects, 1u);
		EXPECT_EQ(ss.stale_dreqs, 1u);
		EXPECT_EQ(ss.rej_tx[MLX5_QPN_CM_REJ_STALE_CONN], 1u);
		EXPECT_EQ(state_of(p.server, r1.conn_id), MLX5_QPN_CM_STATE_TIMEWAIT);
		EXPECT_EQ(state_of(p.client, c1), MLX5_QPN_CM_STATE_TIMEWAIT);
		/* As in Linux, the requester rejected as stale waits out a timewait too. */
		EXPECT_EQ(state_of(p.client, c2), MLX5_QPN_CM_STATE_TIMEWAIT);
	}
}

TEST(CmStale, ReuseDuringTimewaitDependsOnPolicy)
{
	for (auto pol : {MLX5_QPN_CM_POLICY_LIVE, MLX5_QPN_CM_POLICY_STRICT}) {
		const bool strict = pol == MLX5_QPN_CM_POLICY_STRICT;
		SCOPED_TRACE(strict ? "strict" : "live");
		Pair p(pol);
		uint32_t c1, c2, c3;
		mlx5_qpn_cm_event r1 = p.connect(0x500, 0x600, kT0, &c1);
		ASSERT_EQ(mlx5_qpn_cm_disconnect(p.client, c1, kT0), 0);
		p.pump(kT0);
		events(p.client);
		events(p.server);
		ASSERT_EQ(state_of(p.server, r1.conn_id), MLX5_QPN_CM_STATE_TIMEWAIT);
		EXPECT_EQ(mlx5_qpn_cm_pair_held(p.server, kClient, 0x500), strict ? 2 : 0);

		/* Reuse of QPN 0x500 half-way through the server's 1024 ms timewait. */
		const uint64_t mid = kT0 + 512 * kMs;
		mlx5_qpn_cm_event r2 = p.connect(0x500, 0x601, mid, &c2);
		auto cev = events(p.client);
		if (strict) {
			EXPECT_EQ(r2.type, 0u) << "strict: the pair is still reserved";
			EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_REJECTED,
					MLX5_QPN_CM_REJ_STALE_CONN),
				  1u);
			EXPECT_EQ(stats(p.server).stale_rejects, 1u);
			EXPECT_EQ(stats(p.server).stale_dreqs, 0u)
				<< "no DREQ to a connection in timewait";
		} else {
			EXPECT_EQ(r2.type, uint32_t(MLX5_QPN_CM_EVENT_REQ)) << "live: accepted";
			EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_ESTABLISHED), 1u);
			EXPECT_EQ(stats(p.server).stale_rejects, 0u);
			EXPECT_EQ(mlx5_qpn_cm_pair_held(p.server, kClient, 0x500), 1);
		}
		/* After the timewait, both policies accept the pair. */
		const uint64_t after = kT0 + 1024 * kMs;
		mlx5_qpn_cm_tick(p.server, after);
		mlx5_qpn_cm_tick(p.client, after);
		events(p.client);
		events(p.server);
		EXPECT_EQ(mlx5_qpn_cm_pair_held(p.server, kClient, 0x500), strict ? 0 : 1);
		if (strict) {
			mlx5_qpn_cm_event r3 = p.connect(0x500, 0x602, after, &c3);
			EXPECT_EQ(r3.type, uint32_t(MLX5_QPN_CM_EVENT_REQ));
			EXPECT_EQ(count(events(p.client), MLX5_QPN_CM_EVENT_ESTABLISHED), 1u);
		}
	}
}

TEST(CmStale, ActiveSideRejectsStaleRep)
{
	Pair p(MLX5_QPN_CM_POLICY_LIVE);
	uint32_t c1, c2;
	p.connect(0x700, 0x800, kT0, &c1);
	events(p.client);
	events(p.server);
	/* The server answers a second REQ with the QPN the first connection still uses. */
	ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 0x701, nullptr, 0, kT0, &c2), 0);
	p.pump(kT0);
	auto sev = events(p.server);
	ASSERT_EQ(sev.size(), 1u);
	ASSERT_EQ(mlx5_qpn_cm_accept(p.server, sev[0].conn_id, 0x800, nullptr, 0, kT0), 0);
	p.pump(kT0);
	auto cev = events(p.client);
	EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_REJECTED, MLX5_QPN_CM_REJ_STALE_CONN), 1u);
	EXPECT_EQ(count(cev, MLX5_QPN_CM_EVENT_DISCONNECTED), 1u) << "old connection: DREQ";
	EXPECT_EQ(state_of(p.client, c2), MLX5_QPN_CM_STATE_IDLE);
	EXPECT_EQ(stats(p.client).stale_rejects, 1u);
	EXPECT_EQ(stats(p.client).stale_dreqs, 1u);
	/* The server's side of the rejected REP: REJ STALE_CONN -> timewait (Linux). */
	EXPECT_EQ(state_of(p.server, sev[0].conn_id), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(stats(p.server).rej_rx[MLX5_QPN_CM_REJ_STALE_CONN], 1u);
}

TEST(CmTimers, ReqRetransmittedThenTimesOut)
{
	AgentPtr c(params(kClient));
	uint32_t id;
	ASSERT_EQ(mlx5_qpn_cm_connect(c, kServer, kSvc, 1, nullptr, 0, kT0, &id), 0);
	auto req = drain(c);
	ASSERT_EQ(req.size(), 1u);
	const uint64_t wait = 4096ull << 20; /* cm_response_timeout 20 */
	EXPECT_EQ(mlx5_qpn_cm_tick(c, kT0 + wait - 1), 0);
	EXPECT_TRUE(drain(c).empty());
	/* max_cm_retries = 2: two identical retransmissions. */
	for (int i = 1; i <= 2; i++) {
		EXPECT_EQ(mlx5_qpn_cm_tick(c, kT0 + uint64_t(i) * wait), 1);
		auto re = drain(c);
		ASSERT_EQ(re.size(), 1u);
		EXPECT_EQ(re[0].bytes, req[0].bytes);
	}
	EXPECT_EQ(mlx5_qpn_cm_tick(c, kT0 + 3 * wait), 1);
	auto out = drain(c);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.type, MLX5_QPN_CM_MSG_REJ);
	EXPECT_EQ(out[0].msg.reason, MLX5_QPN_CM_REJ_TIMEOUT);
	EXPECT_EQ(out[0].msg.remote_comm_id, 0u) << "server's id never learnt";
	auto ev = events(c);
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].type, MLX5_QPN_CM_EVENT_REJECTED);
	EXPECT_EQ(ev[0].reason, MLX5_QPN_CM_REJ_TIMEOUT);
	EXPECT_EQ(state_of(c, id), MLX5_QPN_CM_STATE_IDLE);
	EXPECT_EQ(stats(c).retransmits, 2u);
	EXPECT_EQ(stats(c).timeouts, 1u);
}

TEST(CmTimers, MraExtendsAndTimeoutRejReachesSlowConsumer)
{
	Pair p(MLX5_QPN_CM_POLICY_LIVE);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 9, nullptr, 0, kT0, &cid), 0);
	p.pump(kT0);
	auto sev = events(p.server);
	ASSERT_EQ(sev.size(), 1u);
	/* The consumer needs time: MRA with service timeout 24 (~69 s). */
	ASSERT_EQ(mlx5_qpn_cm_mra(p.server, sev[0].conn_id, 24, kT0), 0);
	EXPECT_EQ(mlx5_qpn_cm_mra(p.server, sev[0].conn_id, 24, kT0), 0) << "may repeat";
	p.pump(kT0);
	EXPECT_EQ(stats(p.client).mra_rx, 1u);
	EXPECT_EQ(stats(p.client).duplicates, 1u) << "one MRA per exchange extends the wait";
	const uint64_t wait = 4096ull << 20;
	EXPECT_EQ(mlx5_qpn_cm_tick(p.client, kT0 + 2 * wait), 0) << "MRA extended the timer";
	mlx5_qpn_cm_conn_info info;
	ASSERT_EQ(mlx5_qpn_cm_conn_get(p.client, cid, &info), 0);
	EXPECT_EQ(info.timer_ns, kT0 + (4096ull << 24) + wait);
	/* The client retransmits its REQ, the server repeats its MRA (no further extension),
	 * then the client gives up; its REJ(TIMEOUT) finds the server's connection. */
	uint64_t t = info.timer_ns;
	for (int i = 0; i < 3; i++, t += wait) {
		mlx5_qpn_cm_tick(p.client, t);
		p.pump(t);
	}
	EXPECT_GE(stats(p.server).duplicates, 2u);
	EXPECT_EQ(count(events(p.client), MLX5_QPN_CM_EVENT_REJECTED, MLX5_QPN_CM_REJ_TIMEOUT), 1u);
	EXPECT_EQ(count(events(p.server), MLX5_QPN_CM_EVENT_REJECTED, MLX5_QPN_CM_REJ_TIMEOUT), 1u);
	EXPECT_EQ(state_of(p.server, sev[0].conn_id), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(mlx5_qpn_cm_accept(p.server, sev[0].conn_id, 5, nullptr, 0, t), -EPERM);
}

TEST(CmTimers, LostRtuAndLostDreqRecover)
{
	Pair p(MLX5_QPN_CM_POLICY_LIVE);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 11, nullptr, 0, kT0, &cid), 0);
	p.pump(kT0);
	auto sev = events(p.server);
	ASSERT_EQ(sev.size(), 1u);
	uint32_t sid = sev[0].conn_id;
	ASSERT_EQ(mlx5_qpn_cm_accept(p.server, sid, 12, nullptr, 0, kT0), 0);
	/* Deliver the REP, lose the RTU. */
	for (const Frame &f : drain(p.server))
		mlx5_qpn_cm_input(p.client, f.bytes.data(), f.bytes.size(), kT0);
	EXPECT_EQ(types(drain(p.client)), std::vector<uint8_t>{MLX5_QPN_CM_MSG_RTU});
	EXPECT_EQ(state_of(p.server, sid), MLX5_QPN_CM_STATE_REP_SENT);
	/* Server retransmits the REP; client answers the duplicate with a new RTU. */
	const uint64_t wait = 4096ull << 20;
	EXPECT_EQ(mlx5_qpn_cm_tick(p.server, kT0 + wait), 1);
	p.pump(kT0 + wait);
	EXPECT_EQ(state_of(p.server, sid), MLX5_QPN_CM_STATE_ESTABLISHED);
	EXPECT_EQ(stats(p.client).duplicates, 1u);
	/* The DREQ is lost every time: after the retries the server enters timewait alone. */
	const uint64_t t1 = kT0 + 2 * wait;
	ASSERT_EQ(mlx5_qpn_cm_disconnect(p.server, sid, t1), 0);
	for (int i = 0; i < 3; i++) {
		drain(p.server);
		mlx5_qpn_cm_tick(p.server, t1 + uint64_t(i + 1) * wait);
	}
	EXPECT_EQ(state_of(p.server, sid), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(count(events(p.server), MLX5_QPN_CM_EVENT_DISCONNECTED), 1u);
	EXPECT_EQ(stats(p.server).timeouts, 1u);
	EXPECT_EQ(state_of(p.client, cid), MLX5_QPN_CM_STATE_ESTABLISHED);
}

TEST(CmTimers, RepTimeoutRejectsAndKeepsTimewait)
{
	Pair p(MLX5_QPN_CM_POLICY_STRICT);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(p.client, kServer, kSvc, 21, nullptr, 0, kT0, &cid), 0);
	p.pump(kT0);
	auto sev = events(p.server);
	ASSERT_EQ(sev.size(), 1u);
	ASSERT_EQ(mlx5_qpn_cm_accept(p.server, sev[0].conn_id, 22, nullptr, 0, kT0), 0);
	const uint64_t wait = 4096ull << 20; /* the client's response timeout, from the REQ */
	for (int i = 0; i <= 2; i++) {
		drain(p.server); /* every REP lost */
		mlx5_qpn_cm_tick(p.server, kT0 + uint64_t(i + 1) * wait);
	}
	auto out = drain(p.server);
	ASSERT_EQ(out.size(), 1u);
	EXPECT_EQ(out[0].msg.type, MLX5_QPN_CM_MSG_REJ);
	EXPECT_EQ(out[0].msg.reason, MLX5_QPN_CM_REJ_TIMEOUT);
	EXPECT_EQ(state_of(p.server, sev[0].conn_id), MLX5_QPN_CM_STATE_TIMEWAIT);
	EXPECT_EQ(mlx5_qpn_cm_pair_held(p.server, kClient, 21), 2);
}

TEST(CmConn, EventQueueFullRefusesRequests)
{
	mlx5_qpn_cm_params sp = params(kServer);
	sp.event_queue_size = 1;
	AgentPtr server(sp);
	AgentPtr client(params(kClient));
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	uint32_t a, b;
	ASSERT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 1, nullptr, 0, kT0, &a), 0);
	ASSERT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 2, nullptr, 0, kT0, &b), 0);
	pump({{kClient, client}, {kServer, server}}, kT0);
	EXPECT_EQ(events(server).size(), 1u);
	EXPECT_EQ(stats(server).rej_tx[MLX5_QPN_CM_REJ_NO_RESOURCES], 1u);
	EXPECT_EQ(stats(server).conns, 1u);
	EXPECT_EQ(state_of(client, b), MLX5_QPN_CM_STATE_IDLE);
}

TEST(CmTimers, UnansweredReqExpiresOnThePassiveSide)
{
	AgentPtr server(params(kServer));
	AgentPtr client(params(kClient));
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 31, nullptr, 0, kT0, &cid), 0);
	pump({{kClient, client}, {kServer, server}}, kT0);
	auto sev = events(server);
	ASSERT_EQ(sev.size(), 1u);
	const uint64_t wait = 4096ull << 20;
	/* Requester: 1 + 2 retries; the passive side waits one attempt longer. */
	EXPECT_EQ(mlx5_qpn_cm_tick(server, kT0 + 4 * wait - 1), 0);
	EXPECT_EQ(state_of(server, sev[0].conn_id), MLX5_QPN_CM_STATE_REQ_RCVD);
	EXPECT_EQ(mlx5_qpn_cm_tick(server, kT0 + 4 * wait), 1);
	auto ev = events(server);
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].type, MLX5_QPN_CM_EVENT_REJECTED);
	EXPECT_EQ(ev[0].reason, MLX5_QPN_CM_REJ_TIMEOUT);
	EXPECT_EQ(state_of(server, sev[0].conn_id), MLX5_QPN_CM_STATE_IDLE);
	EXPECT_EQ(mlx5_qpn_cm_pair_held(server, kClient, 31), 0);
	EXPECT_EQ(mlx5_qpn_cm_accept(server, sev[0].conn_id, 1, nullptr, 0, kT0), -ENOENT);
}
