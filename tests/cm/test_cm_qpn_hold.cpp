/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How long the passive side must hold the QPN of its REP after a disconnect, in the strict CM
 * model. The pair (server GUID, server QPN) is held by the REMOTE agent (the client's), from the
 * REP until the client's timewait ends; the client enters timewait when the DREP arrives, so its
 * timewait ends the DREP's transit after the server's own. The server cannot see that transit:
 * a hold of one timewait from its CLOSED (whether as the pool's quarantine started at CLOSED, or
 * as its own timewait alone) hands the QPN out while the client still holds it, and the next
 * REP with it is rejected STALE_CONN. Holding it through its own timewait and then the
 * quarantine (one more timewait) covers any transit shorter than a timewait — qpn-testpmd's
 * dct-accept releases it so.
 */
#include "cm_test_util.h"

using namespace cmtest;

namespace {

constexpr uint64_t kClient = 0xC1;
constexpr uint64_t kServer = 0x5E;
constexpr uint64_t kSvc = 0x4791;
constexpr uint64_t kT0 = 5000 * kMs;
constexpr uint64_t kTw = 1024 * kMs; /* params(): packet life time 16, ACK delay 16 */
constexpr uint32_t kServerQpn = 0x200;

/* Frames of FROM fed to TO at NOW; how many. */
size_t
deliver(mlx5_qpn_cm *from, mlx5_qpn_cm *to, uint64_t now)
{
	std::vector<Frame> fs = drain(from);
	for (const Frame &f : fs)
		mlx5_qpn_cm_input(to, f.bytes.data(), f.bytes.size(), now);
	return fs.size();
}

/*
 * One connection (client QPN 0x100, server QPN kServerQpn), closed by the client at T1 with the
 * DREP arriving TRANSIT later; then, REUSE_AFTER past the server's CLOSED (t1), a second REQ
 * (client QPN 0x101, a fresh one) answered with kServerQpn again. The client's event for it.
 */
mlx5_qpn_cm_event
reuse_after(uint64_t transit, uint64_t reuse_after)
{
	AgentPtr client(params(kClient, MLX5_QPN_CM_POLICY_STRICT));
	AgentPtr server(params(kServer, MLX5_QPN_CM_POLICY_STRICT));
	EXPECT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	auto pump = [&](uint64_t now) {
		return cmtest::pump({{kClient, client}, {kServer, server}}, now);
	};
	uint32_t cid;
	EXPECT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 0x100, nullptr, 0, kT0, &cid), 0);
	pump(kT0);
	auto sev = events(server);
	EXPECT_EQ(sev.size(), 1u);
	if (sev.empty())
		return {};
	EXPECT_EQ(mlx5_qpn_cm_accept(server, sev[0].conn_id, kServerQpn, nullptr, 0, kT0), 0);
	pump(kT0);
	EXPECT_EQ(mlx5_qpn_cm_pair_held(client, kServer, kServerQpn), 1);
	events(client);
	events(server);

	/* DREQ at t1: the server sends the DREP and enters timewait (its CLOSED) at once... */
	const uint64_t t1 = kT0 + 10 * kMs;
	EXPECT_EQ(mlx5_qpn_cm_disconnect(client, cid, t1), 0);
	EXPECT_EQ(deliver(client, server, t1), 1u);
	/* ...the client gets the DREP TRANSIT later and enters timewait then. */
	EXPECT_EQ(deliver(server, client, t1 + transit), 1u);
	EXPECT_EQ(state_of(client, cid), MLX5_QPN_CM_STATE_TIMEWAIT);

	/* The server's QPN is handed out again REUSE_AFTER past t1. */
	const uint64_t t2 = t1 + reuse_after;
	mlx5_qpn_cm_tick(client, t2);
	mlx5_qpn_cm_tick(server, t2);
	events(client);
	events(server);
	uint32_t cid2;
	EXPECT_EQ(mlx5_qpn_cm_connect(client, kServer, kSvc, 0x101, nullptr, 0, t2, &cid2), 0);
	pump(t2);
	sev = events(server);
	EXPECT_EQ(sev.size(), 1u);
	if (sev.empty())
		return {};
	EXPECT_EQ(mlx5_qpn_cm_accept(server, sev[0].conn_id, kServerQpn, nullptr, 0, t2), 0);
	pump(t2);
	auto cev = events(client);
	EXPECT_EQ(cev.size(), 1u);
	return cev.empty() ? mlx5_qpn_cm_event{} : cev[0];
}

} // namespace

/* Released at its CLOSED and quarantined one timewait ("held once"), or held through its own
 * timewait alone: the client still holds the pair, so the REP is stale. */
TEST(CmQpnHold, OneTimewaitFromTheServersCloseIsStale)
{
	for (uint64_t transit : {1 * kMs, 100 * kMs}) {
		mlx5_qpn_cm_event ev = reuse_after(transit, kTw);
		EXPECT_EQ(ev.type, MLX5_QPN_CM_EVENT_REJECTED) << "DREP transit " << transit;
		EXPECT_EQ(ev.reason, MLX5_QPN_CM_REJ_STALE_CONN) << "DREP transit " << transit;
		/* Even a hold longer by a little less than the transit is stale. */
		ev = reuse_after(transit, kTw + transit - 1);
		EXPECT_EQ(ev.reason, MLX5_QPN_CM_REJ_STALE_CONN) << "DREP transit " << transit;
	}
}

/* Through its own timewait and then one more timewait (the pool's quarantine): the client's
 * timewait is over for any transit shorter than a timewait, and the REP is accepted. */
TEST(CmQpnHold, OwnTimewaitThenQuarantineIsNotStale)
{
	for (uint64_t transit : {0 * kMs, 1 * kMs, 100 * kMs, kTw - 1}) {
		mlx5_qpn_cm_event ev = reuse_after(transit, kTw + kTw);
		EXPECT_EQ(ev.type, MLX5_QPN_CM_EVENT_ESTABLISHED) << "DREP transit " << transit;
		EXPECT_EQ(ev.remote_qpn, kServerQpn);
	}
	/* The bound is exact: the hold the client needs is timewait + transit. */
	mlx5_qpn_cm_event ev = reuse_after(100 * kMs, kTw + 100 * kMs);
	EXPECT_EQ(ev.type, MLX5_QPN_CM_EVENT_ESTABLISHED);
}
