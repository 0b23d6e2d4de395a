/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A node that dies without a word (SIGKILL: no DREQ, no REJ) and comes back with its GUID while
 * its peer still remembers its connections: the new incarnation's REQs must each be answered.
 * Its comm ids are drawn anew (a random operand per agent, as Linux's CM does), and a REQ that
 * still lands on a remembered id with another QPN is refused as stale, not absorbed as a
 * duplicate (frames carried by cmtest::pump()).
 */
#include "cm_test_util.h"

#include "cm_internal.h"

#include <cerrno>

using namespace cmtest;

namespace {

constexpr uint64_t kClient = 0xC1;
constexpr uint64_t kServer = 0x5E;
constexpr uint64_t kSvc = 0x4791;
constexpr uint64_t kT0 = 5000 * kMs;

/* The server's consumer: accept every REQ with a QPN of its own; returns the REQs seen. */
uint32_t
serve(mlx5_qpn_cm *server, uint32_t *next_qpn, uint64_t now)
{
	uint32_t reqs = 0;
	for (const auto &e : events(server)) {
		if (e.type != MLX5_QPN_CM_EVENT_REQ)
			continue;
		EXPECT_EQ(mlx5_qpn_cm_accept(server, e.conn_id, (*next_qpn)++, nullptr, 0, now), 0);
		reqs++;
	}
	return reqs;
}

/* A first incarnation of the client with @p n established connections and one more whose REP it
 * never read (REP_SENT on the server), killed then: its agent is destroyed without a frame. */
void
first_life(mlx5_qpn_cm *server, uint32_t n, uint32_t *server_qpn)
{
	AgentPtr c1(params(kClient, MLX5_QPN_CM_POLICY_STRICT));
	ASSERT_NE(c1.cm, nullptr);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t cid;
		ASSERT_EQ(mlx5_qpn_cm_connect(c1, kServer, kSvc, 0x100 + i, nullptr, 0, kT0, &cid),
			  0);
		pump({{kClient, c1}, {kServer, server}}, kT0);
		ASSERT_EQ(serve(server, server_qpn, kT0), 1u);
		pump({{kClient, c1}, {kServer, server}}, kT0);
		ASSERT_EQ(state_of(c1, cid), MLX5_QPN_CM_STATE_ESTABLISHED);
	}
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(c1, kServer, kSvc, 0x100 + n, nullptr, 0, kT0, &cid), 0);
	pump({{kClient, c1}, {kServer, server}}, kT0);
	ASSERT_EQ(serve(server, server_qpn, kT0), 1u);
	drain(server); /* the REP is lost with the process */
	EXPECT_EQ(stats(server).conns, uint64_t(n) + 1);
}

uint32_t
fixed_operand()
{
	return 0x5A5A5A5Au;
}

struct OperandHook {
	OperandHook() { cm_impl::comm_id_operand_test_hook = fixed_operand; }
	~OperandHook() { cm_impl::comm_id_operand_test_hook = nullptr; }
	OperandHook(const OperandHook &) = delete;
	OperandHook &operator=(const OperandHook &) = delete;
};

} // namespace

/* The restarted client (same GUID, new QPNs) completes every connection it opens, at once: its
 * comm ids are not its dead incarnation's, so none is taken for a duplicate. With comm ids
 * that were a function of the slot alone (the same in every incarnation) the server absorbed the
 * REQs as retransmissions of the connections it remembered and never answered them. */
TEST(CmRestart, ARestartedNodeCompletesEveryConnection)
{
	AgentPtr server(params(kServer, MLX5_QPN_CM_POLICY_STRICT));
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	uint32_t sqpn = 0x900;
	const uint32_t n = 4;
	first_life(server, n, &sqpn);
	if (HasFatalFailure())
		return;

	AgentPtr c2(params(kClient, MLX5_QPN_CM_POLICY_STRICT));
	std::vector<uint32_t> ids;
	for (uint32_t i = 0; i <= n; i++) {
		uint32_t cid;
		ASSERT_EQ(mlx5_qpn_cm_connect(c2, kServer, kSvc, 0x200 + i, nullptr, 0, kT0, &cid),
			  0);
		ids.push_back(cid);
		pump({{kClient, c2}, {kServer, server}}, kT0);
		EXPECT_EQ(serve(server, &sqpn, kT0), 1u) << "REQ " << i << " not answered";
		pump({{kClient, c2}, {kServer, server}}, kT0);
	}
	for (uint32_t id : ids)
		EXPECT_EQ(state_of(c2, id), MLX5_QPN_CM_STATE_ESTABLISHED) << std::hex << id;
	EXPECT_EQ(stats(server).duplicates, 0u);
	EXPECT_EQ(stats(server).stale_rejects, 0u);
}

/* Two agents of one process draw different operands (the draw is per agent, not per GUID). */
TEST(CmRestart, EachAgentDrawsItsOwnCommIds)
{
	uint32_t first = 0;
	bool differ = false;
	for (int i = 0; i < 4 && !differ; i++) {
		AgentPtr a(params(kClient));
		uint32_t cid;
		ASSERT_EQ(mlx5_qpn_cm_connect(a, kServer, kSvc, 0x100, nullptr, 0, kT0, &cid), 0);
		EXPECT_NE(cid, 0u);
		if (i == 0)
			first = cid;
		differ = cid != first;
	}
	EXPECT_TRUE(differ) << "four agents drew the same first comm id 0x" << std::hex << first;
}

/* The collision the random draw makes rare, forced (both incarnations on one operand): each REQ
 * that lands on a remembered comm id with another QPN is refused as stale (REJ STALE_CONN), the
 * remembered connection, if established, gets a DREQ and leaves through timewait (its QPN given
 * back), and the client's next attempt, on a fresh id, completes. With the REQ absorbed as a
 * duplicate, the new connection was never answered and the old one kept its QPN for ever. */
TEST(CmRestart, AReqOnADeadIncarnationsCommIdIsRefusedAsStale)
{
	OperandHook hook;
	AgentPtr server(params(kServer, MLX5_QPN_CM_POLICY_STRICT));
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	uint32_t sqpn = 0x900;
	first_life(server, 1, &sqpn); /* conn 1 established, conn 2 in REP_SENT */
	if (HasFatalFailure())
		return;

	AgentPtr c2(params(kClient, MLX5_QPN_CM_POLICY_STRICT));
	/* Slot 1: the established connection's id. */
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(c2, kServer, kSvc, 0x200, nullptr, 0, kT0, &cid), 0);
	pump({{kClient, c2}, {kServer, server}}, kT0);
	EXPECT_EQ(serve(server, &sqpn, kT0), 0u);
	auto cev = events(c2);
	ASSERT_EQ(cev.size(), 1u);
	EXPECT_EQ(cev[0].type, MLX5_QPN_CM_EVENT_REJECTED);
	EXPECT_EQ(cev[0].reason, MLX5_QPN_CM_REJ_STALE_CONN);
	auto s = stats(server);
	EXPECT_EQ(s.duplicates, 0u);
	EXPECT_EQ(s.stale_rejects, 1u);
	EXPECT_EQ(s.stale_dreqs, 1u);

	/* Slot 2: the connection whose REP was lost (REP_SENT): refused too, no DREQ. */
	ASSERT_EQ(mlx5_qpn_cm_connect(c2, kServer, kSvc, 0x201, nullptr, 0, kT0, &cid), 0);
	pump({{kClient, c2}, {kServer, server}}, kT0);
	EXPECT_EQ(serve(server, &sqpn, kT0), 0u);
	cev = events(c2);
	ASSERT_EQ(cev.size(), 1u);
	EXPECT_EQ(cev[0].reason, MLX5_QPN_CM_REJ_STALE_CONN);
	EXPECT_EQ(stats(server).stale_dreqs, 1u);

	/* Slot 3: nothing remembered there: completes. */
	ASSERT_EQ(mlx5_qpn_cm_connect(c2, kServer, kSvc, 0x202, nullptr, 0, kT0, &cid), 0);
	pump({{kClient, c2}, {kServer, server}}, kT0);
	EXPECT_EQ(serve(server, &sqpn, kT0), 1u);
	pump({{kClient, c2}, {kServer, server}}, kT0);
	EXPECT_EQ(state_of(c2, cid), MLX5_QPN_CM_STATE_ESTABLISHED);

	/* The old established connection's server QPN comes back at the end of its timewait: its
	 * DREQ names a QPN the new incarnation does not have, which drops it (as Linux's
	 * cm_dreq_handler() does), so the DREQ's retries run out first (3 x ~4.3 s) and the
	 * connection goes to timewait (1 s). */
	bool freed = false;
	for (uint64_t t = kT0; t < kT0 + 60000 * kMs && !freed; t += 100 * kMs) {
		mlx5_qpn_cm_tick(server, t);
		for (const auto &e : events(server))
			freed |= e.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT && e.local_qpn == 0x900;
	}
	EXPECT_TRUE(freed) << "the dead incarnation's connection kept the server's QPN";
}

/* A true retransmission (same comm id, same QPN) is still a duplicate, not stale. */
TEST(CmRestart, ARetransmittedReqIsStillADuplicate)
{
	AgentPtr server(params(kServer, MLX5_QPN_CM_POLICY_STRICT));
	AgentPtr client(params(kClient, MLX5_QPN_CM_POLICY_STRICT));
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 0x100, nullptr, 0, kT0, &cid), 0);
	auto req = drain(client);
	ASSERT_EQ(req.size(), 1u);
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(mlx5_qpn_cm_input(server, req[0].bytes.data(), req[0].bytes.size(), kT0),
			  0);
	EXPECT_EQ(events(server).size(), 1u);
	EXPECT_EQ(stats(server).duplicates, 1u);
	EXPECT_EQ(stats(server).stale_rejects, 0u);
	EXPECT_TRUE(drain(server).empty());
}
