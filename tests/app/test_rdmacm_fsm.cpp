/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's rdma_cm side without a device (app/qpn-testpmd/rdmacm_fsm.h): the state machine
 * driven through every path with a model of the engines' contract (conn.h), the device check
 * (by GUID, and by port GID for a VF without one), the send gate, the private data, the DC
 * route and path, the addresses (--hw-peer, --hw-bind, the listener's netdev) and the app's
 * own librdmacm loader.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "../app/qpn-testpmd/rdmacm_addr.h"
#include "../app/qpn-testpmd/rdmacm_fsm.h"
#include "mlx5_qpn_cm.h"
#include "../app/qpn-testpmd/rdmacm_glue.h"

namespace {

/*
 * One connection, its state machine and a model of the engine on top (engine_dct_accept.cpp,
 * engine_dci_reconnect.cpp): the passive engine takes a QPN on REQUEST and accepts (or rejects
 * and releases when it has none, or when the accept fails); it releases on REJECTED, CLOSED and
 * TIMEWAIT_EXIT. The active engine holds its QPN from the start and releases on REJECTED, CLOSED
 * and ERROR. "Release" is: the QPN back (counted), then release() = RC_IN_RELEASE.
 */
struct conn_model {
	bool passive;
	rdmacm_state st = RC_ST_FREE;
	/* what the world answers */
	bool check_ok = true, call_ok = true, alloc_ok = true, accept_ok = true;
	/* what happened */
	bool qpn_held = false;
	int qpn_taken = 0, qpn_released = 0, destroyed = 0, rejects_sent = 0, errors = 0;
	int established = 0, closes = 0;
	std::vector<qpn_conn_event_type> seen;
	uint16_t last_reason = 0;

	explicit conn_model(bool p) : passive(p)
	{
		if (!passive) { /* the active engine allocates, then starts */
			qpn_held = true;
			qpn_taken = 1;
		}
	}

	void run(rdmacm_step s)
	{
		st = s.next;
		for (uint16_t a = 1; a <= RC_ACT_CLOSE; a = uint16_t(a << 1)) {
			if ((s.actions & a) == 0)
				continue;
			bool ok = a == RC_ACT_CHECK ? check_ok :
				  a == RC_ACT_RESOLVE_ROUTE || a == RC_ACT_CONNECT ||
						  a == RC_ACT_ESTABLISH ?
						      call_ok :
						      true;
			if (!ok) {
				in(a == RC_ACT_CHECK ? RC_IN_REFUSED : RC_IN_CALL_FAILED);
				return;
			}
			if (a == RC_ACT_REJECT)
				rejects_sent++;
			if (a == RC_ACT_DESTROY_ID)
				destroyed++;
			if (a == RC_ACT_CLOSE)
				closes++;
		}
		std::vector<qpn_conn_event_type> evs;
		if (s.actions & RC_ACT_DELIVER) {
			evs.push_back(s.deliver);
			last_reason = s.reason;
		}
		qpn_conn_event_type more[2];
		unsigned m = rdmacm_engine_events(passive, s.actions, more);
		evs.insert(evs.end(), more, more + m);
		for (qpn_conn_event_type e : evs)
			engine(e);
	}

	void in(int event, int status = 0) { run(rdmacm_fsm_step(passive, st, event, status)); }

	void give_back()
	{
		if (qpn_held) {
			qpn_held = false;
			qpn_released++;
		}
		in(RC_IN_RELEASE);
	}

	void engine(qpn_conn_event_type e)
	{
		seen.push_back(e);
		switch (e) {
		case QPN_CONN_EV_REQUEST:
			if (!alloc_ok) {
				in(RC_IN_REJECT);
				in(RC_IN_RELEASE);
				return;
			}
			qpn_held = true;
			qpn_taken++;
			in(RC_IN_ACCEPT, accept_ok ? 0 : -EIO);
			if (!accept_ok) {
				in(RC_IN_REJECT);
				give_back();
			}
			return;
		case QPN_CONN_EV_ESTABLISHED:
			established++;
			return;
		case QPN_CONN_EV_ERROR:
			errors++;
			if (!passive && qpn_held)
				give_back();
			return;
		case QPN_CONN_EV_REJECTED:
		case QPN_CONN_EV_CLOSED:
		case QPN_CONN_EV_TIMEWAIT_EXIT:
			if (qpn_held)
				give_back();
			return;
		default:
			return;
		}
	}

	/* The connection is over: QPN given back exactly as often as taken, the id destroyed once. */
	void expect_clean(const char *what) const
	{
		SCOPED_TRACE(what);
		EXPECT_EQ(st, RC_ST_FREE);
		EXPECT_FALSE(qpn_held);
		EXPECT_EQ(qpn_released, qpn_taken);
		EXPECT_EQ(destroyed, 1);
	}
};

/* A passive connection through its REP (accepted, waiting for the RTU). */
conn_model
accepted()
{
	conn_model c(true);
	c.in(RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(c.st, RC_ST_ACCEPTED);
	EXPECT_EQ(c.qpn_taken, 1);
	return c;
}

conn_model
passive_established()
{
	conn_model c = accepted();
	c.in(RDMA_CM_EVENT_ESTABLISHED);
	EXPECT_EQ(c.st, RC_ST_ESTABLISHED);
	EXPECT_EQ(c.established, 1);
	return c;
}

} /* namespace */

TEST(RdmacmFsm, PassiveNormalLife)
{
	conn_model c = passive_established();
	c.in(RDMA_CM_EVENT_DISCONNECTED);
	c.expect_clean("DISCONNECTED");
	EXPECT_EQ(c.errors, 0);
	/* The kernel's TIMEWAIT_EXIT after the release finds nothing to do. */
	c.in(RDMA_CM_EVENT_TIMEWAIT_EXIT);
	c.expect_clean("TIMEWAIT_EXIT after the release");
}

TEST(RdmacmFsm, PassiveEveryEndReleasesQpnAndDestroysId)
{
	const int ends[] = {RDMA_CM_EVENT_UNREACHABLE,   RDMA_CM_EVENT_REJECTED,
			    RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_DISCONNECTED,
			    RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_DEVICE_REMOVAL};
	for (bool est : {false, true})
		for (int ev : ends) {
			conn_model c = est ? passive_established() : accepted();
			c.in(ev, ev == RDMA_CM_EVENT_REJECTED ? 10 : 0);
			std::string what = "event " + std::to_string(ev) +
					   (est ? " after the RTU" : " after the REP");
			c.expect_clean(what.c_str());
			/* A second end event changes nothing. */
			c.in(RDMA_CM_EVENT_DISCONNECTED);
			c.in(RDMA_CM_EVENT_UNREACHABLE);
			c.expect_clean((what + ", then more events").c_str());
			bool failure = ev == RDMA_CM_EVENT_UNREACHABLE ||
				       ev == RDMA_CM_EVENT_CONNECT_ERROR ||
				       ev == RDMA_CM_EVENT_DEVICE_REMOVAL;
			EXPECT_EQ(c.errors, failure ? 1 : 0) << what;
			EXPECT_EQ(c.closes, ev == RDMA_CM_EVENT_DEVICE_REMOVAL ? 1 : 0) << what;
			if (ev == RDMA_CM_EVENT_REJECTED) {
				EXPECT_EQ(c.last_reason, 10) << what;
			}
		}
}

TEST(RdmacmFsm, PassiveOwnRejectDestroysId)
{
	conn_model c(true);
	c.alloc_ok = false; /* no QPN: the engine rejects */
	c.in(RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(c.rejects_sent, 1);
	EXPECT_EQ(c.qpn_taken, 0);
	c.expect_clean("own reject");
}

TEST(RdmacmFsm, PassiveFailedAcceptReleasesQpnAndDestroysId)
{
	conn_model c(true);
	c.accept_ok = false;
	c.in(RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(c.rejects_sent, 1);
	EXPECT_EQ(c.qpn_taken, 1);
	c.expect_clean("failed accept");
	/* Late events of that id are ignored. */
	c.in(RDMA_CM_EVENT_ESTABLISHED);
	EXPECT_EQ(c.established, 0);
}

TEST(RdmacmFsm, PassiveRefusedRequestNeverReachesEngine)
{
	conn_model c(true);
	c.check_ok = false; /* another device, or malformed private data */
	c.in(RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(c.qpn_taken, 0);
	EXPECT_EQ(c.rejects_sent, 1);
	EXPECT_EQ(c.errors, 1);
	EXPECT_TRUE(c.seen.empty() || c.seen[0] != QPN_CONN_EV_REQUEST);
	c.expect_clean("refused request");
}

TEST(RdmacmFsm, PassiveRequestCheckedBeforeDelivery)
{
	rdmacm_step s = rdmacm_fsm_step(true, RC_ST_FREE, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	EXPECT_EQ(s.next, RC_ST_REQUESTED);
	EXPECT_TRUE(s.actions & RC_ACT_CHECK);
	EXPECT_TRUE(s.actions & RC_ACT_DELIVER);
	EXPECT_LT(unsigned(RC_ACT_CHECK), unsigned(RC_ACT_DELIVER)); /* carried out in bit order */
	EXPECT_EQ(s.deliver, QPN_CONN_EV_REQUEST);
	EXPECT_LT(unsigned(RC_ACT_REJECT), unsigned(RC_ACT_DESTROY_ID)); /* reject, then destroy */
}

namespace {

/* An active connection started and driven to STAGE inputs (0: started .. 4: disconnecting). */
conn_model
active_at(int stage)
{
	conn_model c(false);
	c.in(RC_IN_START);
	const int seq[] = {RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED,
			   RDMA_CM_EVENT_CONNECT_RESPONSE};
	for (int i = 0; i < stage && i < 3; i++)
		c.in(seq[i]);
	if (stage >= 4)
		c.in(RC_IN_DISCONNECT, 0);
	return c;
}

} /* namespace */

TEST(RdmacmFsm, ActiveNormalLife)
{
	conn_model c = active_at(3);
	EXPECT_EQ(c.st, RC_ST_ESTABLISHED);
	EXPECT_EQ(c.established, 1);
	c.in(RC_IN_DISCONNECT, 0);
	EXPECT_EQ(c.st, RC_ST_DISCONNECTING);
	c.in(RDMA_CM_EVENT_DISCONNECTED);
	c.expect_clean("DREQ, DISCONNECTED");
	EXPECT_EQ(c.errors, 0);
	ASSERT_FALSE(c.seen.empty());
	EXPECT_EQ(c.seen.back(), QPN_CONN_EV_CLOSED);
}

TEST(RdmacmFsm, ActiveEveryEndAtEveryStageReleases)
{
	const int ends[] = {RDMA_CM_EVENT_ADDR_ERROR,    RDMA_CM_EVENT_ROUTE_ERROR,
			    RDMA_CM_EVENT_UNREACHABLE,   RDMA_CM_EVENT_REJECTED,
			    RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_DISCONNECTED,
			    RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_DEVICE_REMOVAL,
			    RC_IN_CALL_FAILED,           RC_IN_REFUSED};
	for (int stage = 0; stage <= 4; stage++)
		for (int ev : ends) {
			conn_model c = active_at(stage);
			c.in(ev, ev == RDMA_CM_EVENT_REJECTED ? 10 : 0);
			std::string what = "stage " + std::to_string(stage) + ", input " +
					   std::to_string(ev);
			c.expect_clean(what.c_str());
			c.in(RDMA_CM_EVENT_DISCONNECTED);
			c.expect_clean((what + ", then DISCONNECTED").c_str());
		}
}

TEST(RdmacmFsm, ActiveFailedCallsRelease)
{
	/* resolve_route, the device check at the route, connect, the REP's check, establish */
	for (int stage = 1; stage <= 3; stage++)
		for (bool check : {false, true}) {
			conn_model c = active_at(stage - 1);
			(check ? c.check_ok : c.call_ok) = false;
			const int seq[] = {RDMA_CM_EVENT_ADDR_RESOLVED,
					   RDMA_CM_EVENT_ROUTE_RESOLVED,
					   RDMA_CM_EVENT_CONNECT_RESPONSE};
			c.in(seq[stage - 1]);
			std::string what = "stage " + std::to_string(stage) +
					   (check ? " check" : " call");
			if (check && stage == 1) { /* no check at the address */
				EXPECT_EQ(c.st, RC_ST_ROUTE) << what;
				continue;
			}
			c.expect_clean(what.c_str());
			EXPECT_EQ(c.errors, 1) << what;
			EXPECT_EQ(c.established, 0) << what;
		}
}

TEST(RdmacmFsm, ActiveFailedDisconnectWaitsForClose)
{
	conn_model c = active_at(3);
	c.in(RC_IN_DISCONNECT, -EINVAL);
	EXPECT_EQ(c.st, RC_ST_ESTABLISHED);
	c.in(RDMA_CM_EVENT_DISCONNECTED);
	c.expect_clean("failed DREQ, then the peer's close");
}

TEST(RdmacmFsm, ReleaseAtStopFromAnyState)
{
	for (bool passive : {false, true})
		for (int s = RC_ST_ADDR; s <= RC_ST_RELEASING; s++) {
			rdmacm_step r = rdmacm_fsm_step(passive, rdmacm_state(s), RC_IN_RELEASE, 0);
			EXPECT_EQ(r.next, RC_ST_FREE);
			EXPECT_EQ(r.actions, RC_ACT_DESTROY_ID);
		}
	EXPECT_EQ(rdmacm_fsm_step(true, RC_ST_FREE, RC_IN_RELEASE, 0).actions, 0);
}

/* Random event sequences: whatever the order, never a second release, never a leak once the
 * engine gives up (the stop path: release of what it still holds). */
TEST(RdmacmFsm, RandomSequencesNeverLeakNorReleaseTwice)
{
	const int inputs[] = {RDMA_CM_EVENT_ADDR_RESOLVED,    RDMA_CM_EVENT_ROUTE_RESOLVED,
			      RDMA_CM_EVENT_CONNECT_RESPONSE, RDMA_CM_EVENT_ESTABLISHED,
			      RDMA_CM_EVENT_CONNECT_REQUEST,  RDMA_CM_EVENT_ADDR_ERROR,
			      RDMA_CM_EVENT_ROUTE_ERROR,      RDMA_CM_EVENT_UNREACHABLE,
			      RDMA_CM_EVENT_REJECTED,         RDMA_CM_EVENT_CONNECT_ERROR,
			      RDMA_CM_EVENT_DISCONNECTED,     RDMA_CM_EVENT_TIMEWAIT_EXIT,
			      RDMA_CM_EVENT_DEVICE_REMOVAL,   RDMA_CM_EVENT_ADDR_CHANGE,
			      int(RC_IN_DISCONNECT),          int(RC_IN_CALL_FAILED)};
	std::mt19937 rng(7);
	for (int round = 0; round < 4000; round++) {
		bool passive = round & 1;
		conn_model c(passive);
		c.check_ok = rng() % 8 != 0;
		c.call_ok = rng() % 8 != 0;
		c.alloc_ok = rng() % 8 != 0;
		c.accept_ok = rng() % 8 != 0;
		c.in(passive ? int(RDMA_CM_EVENT_CONNECT_REQUEST) : int(RC_IN_START));
		/* A destroyed id gets no events: the sequence ends when the connection is FREE. */
		for (int i = 0, n = int(rng() % 8); i < n && c.st != RC_ST_FREE; i++)
			c.in(inputs[rng() % (sizeof(inputs) / sizeof(inputs[0]))], int(rng() % 30));
		ASSERT_LE(c.qpn_released, c.qpn_taken) << round;
		ASSERT_LE(c.destroyed, 1) << round;
		if (c.st != RC_ST_FREE) /* still open at stop: the engine gives up */
			c.give_back();
		ASSERT_EQ(c.qpn_released, c.qpn_taken) << round;
		ASSERT_FALSE(c.qpn_held) << round;
		ASSERT_EQ(c.st, RC_ST_FREE) << round;
		ASSERT_EQ(c.destroyed, 1) << round;
	}
}

/* RDMA_CM_EVENT_ADDR_CHANGE on a connection's id: its address is gone, so the connection fails
 * (counted, with the reason), at every stage and on both sides, and everything is released. */
TEST(RdmacmFsm, AddrChangeFailsTheConnectionAtEveryStage)
{
	for (int stage = 0; stage <= 4; stage++) {
		conn_model c = active_at(stage);
		c.in(RDMA_CM_EVENT_ADDR_CHANGE);
		std::string what = "active stage " + std::to_string(stage);
		c.expect_clean(what.c_str());
		EXPECT_EQ(c.errors, 1) << what;
	}
	conn_model a = accepted();
	a.in(RDMA_CM_EVENT_ADDR_CHANGE);
	a.expect_clean("passive, accepted");
	EXPECT_EQ(a.errors, 1);
	conn_model e = passive_established();
	e.in(RDMA_CM_EVENT_ADDR_CHANGE);
	e.expect_clean("passive, established");
	EXPECT_EQ(e.errors, 1);
	const char *why = rdmacm_fail_reason(RDMA_CM_EVENT_ADDR_CHANGE);
	EXPECT_NE(std::string(why).find("address changed"), std::string::npos) << why;
	EXPECT_STRNE(rdmacm_fail_reason(RDMA_CM_EVENT_UNREACHABLE), why);
	EXPECT_NE(rdmacm_fail_reason(12345), nullptr);
}

/* A DC send belongs to its CM connection: posted only while it is established with a REP that
 * named a DCT; once the connection is closed (the peer's DREQ, a stale connection's DREQ),
 * failed or released, -ENOTCONN and nothing is posted. */
TEST(RdmacmSend, GatedByTheConnection)
{
	const rdmacm_pdata dct{0x123, 0x77};
	for (int st = RC_ST_FREE; st <= RC_ST_RELEASING; st++)
		EXPECT_EQ(rdmacm_send_gate(rdmacm_state(st), dct),
			  st == RC_ST_ESTABLISHED ? 0 : -ENOTCONN)
			<< st;
	EXPECT_EQ(rdmacm_send_gate(RC_ST_ESTABLISHED, rdmacm_pdata{0, 0}), -ENOTCONN);

	/* Driven through the state machine: open, then closed by the peer. */
	conn_model c = active_at(3);
	EXPECT_EQ(rdmacm_send_gate(c.st, dct), 0);
	c.in(RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_EQ(rdmacm_send_gate(c.st, dct), -ENOTCONN);
	conn_model d = active_at(4); /* our DREQ sent */
	EXPECT_EQ(rdmacm_send_gate(d.st, dct), -ENOTCONN);
	conn_model f = active_at(3);
	f.in(RDMA_CM_EVENT_ADDR_CHANGE);
	EXPECT_EQ(rdmacm_send_gate(f.st, dct), -ENOTCONN);
}

TEST(RdmacmFsm, EngineEvents)
{
	qpn_conn_event_type e[2];
	ASSERT_EQ(rdmacm_engine_events(true, RC_ACT_RELEASE_QPN | RC_ACT_COUNT_ERROR, e), 2u);
	EXPECT_EQ(e[0], QPN_CONN_EV_ERROR);
	EXPECT_EQ(e[1], QPN_CONN_EV_CLOSED);
	ASSERT_EQ(rdmacm_engine_events(false, RC_ACT_RELEASE_QPN | RC_ACT_COUNT_ERROR, e), 1u);
	EXPECT_EQ(e[0], QPN_CONN_EV_ERROR);
	ASSERT_EQ(rdmacm_engine_events(false, RC_ACT_RELEASE_QPN, e), 1u);
	EXPECT_EQ(e[0], QPN_CONN_EV_CLOSED);
	EXPECT_EQ(rdmacm_engine_events(true, RC_ACT_DELIVER, e), 0u);
}

TEST(RdmacmFsm, RejReason)
{
	EXPECT_EQ(rdmacm_rej_reason(10), 10);
	EXPECT_EQ(rdmacm_rej_reason(0), UINT16_MAX);
	EXPECT_EQ(rdmacm_rej_reason(-110), UINT16_MAX); /* rdma_cm's -ETIMEDOUT style status */
	EXPECT_EQ(rdmacm_rej_reason(MLX5_QPN_CM_REJ_REASON_SLOTS), UINT16_MAX);
}

TEST(RdmacmDevice, SameDevice)
{
	const uint64_t guid = 0x0002c90300a1b2c3ull;
	std::string why;
	EXPECT_TRUE(rdmacm_same_device(htobe64(guid), 1, guid, 0, &why));
	EXPECT_TRUE(rdmacm_same_device(htobe64(guid), 2, guid, 2, &why));

	EXPECT_FALSE(rdmacm_same_device(htobe64(guid + 1), 1, guid, 0, &why));
	EXPECT_EQ(why.find('\n'), std::string::npos);
	EXPECT_NE(why.find("0002c90300a1b2c4"), std::string::npos) << why;
	EXPECT_NE(why.find("0002c90300a1b2c3"), std::string::npos) << why;

	/* Byte order: the id's GUID is in network order, the probed one in host order. */
	EXPECT_FALSE(rdmacm_same_device(guid, 1, guid, 0, &why));

	EXPECT_FALSE(rdmacm_same_device(0, 1, guid, 0, &why));
	EXPECT_NE(why.find("no RDMA device"), std::string::npos) << why;

	EXPECT_FALSE(rdmacm_same_device(htobe64(guid), 1, guid, 2, &why));
	EXPECT_NE(why.find("port 1"), std::string::npos) << why;
}

/* A VF whose node GUID was never set reports 0, as does every other such VF: the probed one
 * is told apart by its port's GIDs, not refused outright, and not confused with another. */
TEST(RdmacmDevice, VfWithoutGuidToldApartByPortGid)
{
	rdmacm_probed vf{};
	vf.port = 1;
	vf.nb_gids = 2;
	uint8_t mine[16] = {0xfe, 0x80};
	mine[15] = 0x11;
	uint8_t v4[16] = {};
	v4[10] = v4[11] = 0xff;
	v4[12] = 10;
	v4[15] = 7;
	memcpy(vf.gids[0], mine, 16);
	memcpy(vf.gids[1], v4, 16);
	std::string why;
	EXPECT_TRUE(rdmacm_identify(true, 0, 1, v4, vf, &why)) << why;
	EXPECT_TRUE(rdmacm_identify(true, 0, 1, mine, vf, &why)) << why;

	uint8_t other[16];
	memcpy(other, v4, 16);
	other[15] = 8; /* the VF beside it: 10.0.0.8 */
	EXPECT_FALSE(rdmacm_identify(true, 0, 1, other, vf, &why));
	EXPECT_NE(why.find("::ffff:10.0.0.8"), std::string::npos) << why;
	EXPECT_NE(why.find("GUID 0"), std::string::npos) << why;
	EXPECT_EQ(why.find('\n'), std::string::npos);
	EXPECT_FALSE(rdmacm_identify(true, 0, 2, v4, vf, &why)); /* another port */
	EXPECT_NE(why.find("port 2"), std::string::npos) << why;
	EXPECT_FALSE(rdmacm_identify(true, 0, 1, nullptr, vf, &why));
	uint8_t zero[16] = {};
	EXPECT_FALSE(rdmacm_identify(true, 0, 1, zero, vf, &why));
	EXPECT_FALSE(rdmacm_identify(false, 0, 1, v4, vf, &why)); /* no device at all */
	EXPECT_NE(why.find("no RDMA device"), std::string::npos) << why;

	/* A device with a GUID is compared by it: a GUID-0 id is another device, GIDs or not. */
	rdmacm_probed pf = vf;
	pf.guid = 0x0002c90300a1b2c3ull;
	EXPECT_FALSE(rdmacm_identify(true, 0, 1, v4, pf, &why));
	EXPECT_TRUE(rdmacm_identify(true, htobe64(pf.guid), 1, other, pf, &why)) << why;
	EXPECT_FALSE(rdmacm_identify(true, htobe64(pf.guid + 1), 1, v4, pf, &why));
	rdmacm_probed vf0 = vf; /* GUID 0 and no GIDs read: nothing matches */
	vf0.nb_gids = 0;
	EXPECT_FALSE(rdmacm_identify(true, 0, 1, v4, vf0, &why));
}

TEST(RdmacmPdata, RoundTripInNetworkOrder)
{
	uint8_t buf[kRdmacmPdataLen];
	ASSERT_EQ(rdmacm_pdata_put(rdmacm_pdata{0x123456, 0x0102030405060708ull}, buf),
		  kRdmacmPdataLen);
	const uint8_t want[kRdmacmPdataLen] = {0x51, 0x50, 1, 0, 0, 0x12, 0x34, 0x56,
					       1,    2,    3, 4, 5, 6,    7,    8};
	EXPECT_EQ(memcmp(buf, want, sizeof(want)), 0);
	rdmacm_pdata p{};
	std::string why;
	ASSERT_EQ(rdmacm_pdata_get(buf, sizeof(buf), &p, &why), 0) << why;
	EXPECT_EQ(p.dctn, 0x123456u);
	EXPECT_EQ(p.dc_key, 0x0102030405060708ull);

	/* IB pads the REQ's private data to 56 bytes: extra bytes are fine. */
	uint8_t padded[56] = {};
	memcpy(padded, buf, sizeof(buf));
	EXPECT_EQ(rdmacm_pdata_get(padded, sizeof(padded), &p, &why), 0) << why;
}

TEST(RdmacmPdata, MalformedIsRefused)
{
	uint8_t buf[kRdmacmPdataLen];
	rdmacm_pdata_put(rdmacm_pdata{7, 9}, buf);
	rdmacm_pdata p{0xabc, 0xdef};
	std::string why;
	for (size_t len = 0; len < kRdmacmPdataLen; len++) {
		EXPECT_EQ(rdmacm_pdata_get(buf, len, &p, &why), -EINVAL) << len;
		EXPECT_NE(why.find("too short"), std::string::npos) << why;
	}
	EXPECT_EQ(rdmacm_pdata_get(nullptr, 16, &p, &why), -EINVAL);

	uint8_t bad[kRdmacmPdataLen];
	memcpy(bad, buf, sizeof(bad));
	bad[0] ^= 0xff;
	EXPECT_EQ(rdmacm_pdata_get(bad, sizeof(bad), &p, &why), -EINVAL);
	EXPECT_NE(why.find("magic"), std::string::npos) << why;

	memcpy(bad, buf, sizeof(bad));
	bad[2] = 2;
	EXPECT_EQ(rdmacm_pdata_get(bad, sizeof(bad), &p, &why), -EINVAL);
	EXPECT_NE(why.find("version 2"), std::string::npos) << why;

	memcpy(bad, buf, sizeof(bad));
	bad[4] = 1; /* DCT number 0x01000007: over 24 bits */
	EXPECT_EQ(rdmacm_pdata_get(bad, sizeof(bad), &p, &why), -EINVAL);
	EXPECT_NE(why.find("24 bits"), std::string::npos) << why;

	/* Nothing was written on a refusal. */
	EXPECT_EQ(p.dctn, 0xabcu);
	EXPECT_EQ(p.dc_key, 0xdefu);

	/* Every byte pattern of the header: refused or accepted, never more than 24 bits. */
	std::mt19937 rng(3);
	for (int i = 0; i < 10000; i++) {
		uint8_t r[kRdmacmPdataLen];
		for (uint8_t &b : r)
			b = uint8_t(rng());
		if (i & 1) {
			r[0] = 0x51;
			r[1] = 0x50;
			r[2] = 1;
		}
		if (rdmacm_pdata_get(r, sizeof(r), &p, &why) == 0) {
			ASSERT_LE(p.dctn, 0xffffffu);
		}
	}
}

/* A REP must name the DCT the active side sends to; a REQ may carry none. */
TEST(RdmacmPdata, RepWithoutDctIsRefusedWhereDataFollows)
{
	std::string why;
	EXPECT_TRUE(rdmacm_pdata_check(rdmacm_pdata{0x1234, 0xabc}, true, &why));
	EXPECT_TRUE(rdmacm_pdata_check(rdmacm_pdata{0, 0}, false, &why)); /* a REQ */
	EXPECT_FALSE(rdmacm_pdata_check(rdmacm_pdata{0, 0xabc}, true, &why));
	EXPECT_NE(why.find("no DCT"), std::string::npos) << why;
	EXPECT_EQ(why.find('\n'), std::string::npos);
}

/* The DC route from the AV the CM resolved (rdma_init_qp_attr at RTR), field by field. */
TEST(RdmacmDcAddr, FromTheResolvedAv)
{
	ibv_ah_attr a{};
	a.port_num = 2;
	a.dlid = 0x1a;
	a.sl = 5;
	mlx5_qpn_dc_addr d;
	std::string why;
	ASSERT_TRUE(rdmacm_dc_addr(a, &d, &why)) << why;
	EXPECT_EQ(d.port, 2);
	EXPECT_EQ(d.dlid, 0x1a);
	EXPECT_EQ(d.sl, 5);
	EXPECT_EQ(d.is_global, 0);

	/* RoCE: no LID, a GRH with the peer's GID and the local GID index. */
	a.dlid = 0;
	a.is_global = 1;
	a.grh.sgid_index = 3;
	a.grh.hop_limit = 64;
	a.grh.traffic_class = 0x60;
	a.grh.flow_label = 0xfffff;
	for (int i = 0; i < 16; i++)
		a.grh.dgid.raw[i] = uint8_t(i * 7);
	ASSERT_TRUE(rdmacm_dc_addr(a, &d, &why)) << why;
	EXPECT_EQ(d.is_global, 1);
	EXPECT_EQ(d.sgid_index, 3);
	EXPECT_EQ(d.hop_limit, 64);
	EXPECT_EQ(d.traffic_class, 0x60);
	EXPECT_EQ(d.flow_label, 0xfffffu);
	EXPECT_EQ(memcmp(d.dgid, a.grh.dgid.raw, 16), 0);

	/* What no DCI can route by: refused in one line, nothing written. */
	mlx5_qpn_dc_addr keep = d;
	ibv_ah_attr bad = a;
	bad.port_num = 0;
	EXPECT_FALSE(rdmacm_dc_addr(bad, &d, &why));
	EXPECT_NE(why.find("no port"), std::string::npos) << why;
	bad = a;
	bad.sl = 16;
	EXPECT_FALSE(rdmacm_dc_addr(bad, &d, &why));
	bad = a;
	bad.grh.flow_label = 1u << 20;
	EXPECT_FALSE(rdmacm_dc_addr(bad, &d, &why));
	bad = a;
	bad.is_global = 0;
	EXPECT_FALSE(rdmacm_dc_addr(bad, &d, &why));
	EXPECT_NE(why.find("neither a LID nor a GRH"), std::string::npos) << why;
	EXPECT_EQ(why.find('\n'), std::string::npos);
	EXPECT_EQ(memcmp(&keep, &d, sizeof(d)), 0);
}

/* The DCT's and the DCI's local path from the route the CM resolved (rdma_init_qp_attr at
 * RTR): on RoCE the route's GID index and hop limit, not index 0 and hop limit 1. */
TEST(RdmacmDcPath, FromTheResolvedRoute)
{
	ibv_ah_attr a{};
	a.port_num = 1;
	a.is_global = 1;
	a.sl = 3;
	a.static_rate = IBV_RATE_100_GBPS;
	a.grh.sgid_index = 3; /* the IPv4-mapped RoCE v2 entry */
	a.grh.hop_limit = 64;
	a.grh.traffic_class = 106;
	a.grh.flow_label = 0x12345;
	mlx5_qpn_dc_path p;
	std::string why;
	ASSERT_TRUE(rdmacm_dc_path(a, IBV_MTU_1024, &p, &why)) << why;
	EXPECT_EQ(p.port, 1);
	EXPECT_EQ(p.is_global, 1);
	EXPECT_EQ(p.sgid_index, 3);
	EXPECT_EQ(p.hop_limit, 64);
	EXPECT_EQ(p.traffic_class, 106);
	EXPECT_EQ(p.flow_label, 0x12345u);
	EXPECT_EQ(p.sl, 3);
	EXPECT_EQ(p.path_mtu, IBV_MTU_1024);
	EXPECT_EQ(p.static_rate, IBV_RATE_100_GBPS);
	EXPECT_EQ(p.rsvd, 0u);

	/* InfiniBand without a GRH: no GRH fields, whatever the AV's grh holds. */
	a.is_global = 0;
	a.dlid = 7;
	ASSERT_TRUE(rdmacm_dc_path(a, IBV_MTU_4096, &p, &why)) << why;
	EXPECT_EQ(p.is_global, 0);
	EXPECT_EQ(p.sgid_index, 0);
	EXPECT_EQ(p.hop_limit, 0);
	EXPECT_EQ(p.path_mtu, IBV_MTU_4096);
	ASSERT_TRUE(rdmacm_dc_path(a, 0, &p, &why)) << why; /* 0: the port's active MTU */
	EXPECT_EQ(p.path_mtu, 0);

	mlx5_qpn_dc_path keep = p;
	ibv_ah_attr bad = a;
	bad.port_num = 0;
	EXPECT_FALSE(rdmacm_dc_path(bad, IBV_MTU_1024, &p, &why));
	EXPECT_NE(why.find("no port"), std::string::npos) << why;
	bad = a;
	bad.sl = 16;
	EXPECT_FALSE(rdmacm_dc_path(bad, IBV_MTU_1024, &p, &why));
	EXPECT_FALSE(rdmacm_dc_path(a, 6, &p, &why));
	EXPECT_NE(why.find("path MTU 6"), std::string::npos) << why;
	EXPECT_EQ(why.find('\n'), std::string::npos);
	EXPECT_EQ(memcmp(&keep, &p, sizeof(p)), 0);
}

TEST(RdmacmAddr, NetdevsFromSysfs)
{
	char root[] = "/tmp/qpn_rdmacm_sysfs_XXXXXX";
	ASSERT_NE(mkdtemp(root), nullptr);
	std::string r = root;
	std::string net = r + "/class/infiniband/mlx5_0/device/net";
	std::string cmd = "mkdir -p " + net + "/eth1 " + net + "/eth0";
	ASSERT_EQ(system(cmd.c_str()), 0);
	std::vector<std::string> nd = rdmacm_netdevs(r, "mlx5_0");
	ASSERT_EQ(nd.size(), 2u);
	EXPECT_EQ(nd[0], "eth0");
	EXPECT_EQ(nd[1], "eth1");
	EXPECT_TRUE(rdmacm_netdevs(r, "mlx5_1").empty());
	EXPECT_TRUE(rdmacm_netdevs(r, "").empty());
	EXPECT_TRUE(rdmacm_netdevs(r, "../../x").empty());
	cmd = "rm -rf " + r;
	ASSERT_EQ(system(cmd.c_str()), 0);
}

/* The probed port's GIDs as the kernel prints them: dense from 0, zero entries skipped. */
TEST(RdmacmAddr, PortGidsFromSysfs)
{
	char root[] = "/tmp/qpn_rdmacm_gids_XXXXXX";
	ASSERT_NE(mkdtemp(root), nullptr);
	std::string r = root;
	std::string gids = r + "/class/infiniband/mlx5_4/ports/1/gids";
	std::string cmd = "mkdir -p " + gids + " && cd " + gids +
			  " && echo fe80:0000:0000:0000:0202:c9ff:fe00:0001 > 0" +
			  " && echo 0000:0000:0000:0000:0000:0000:0000:0000 > 1" +
			  " && echo 0000:0000:0000:0000:0000:ffff:0a00:0007 > 2";
	ASSERT_EQ(system(cmd.c_str()), 0);
	uint8_t g[4][16];
	ASSERT_EQ(rdmacm_port_gids(r, "mlx5_4", 1, g, 4), 2u);
	EXPECT_EQ(g[0][0], 0xfe);
	EXPECT_EQ(g[0][15], 0x01);
	EXPECT_EQ(g[1][10], 0xff); /* the IPv4-mapped RoCE v2 entry */
	EXPECT_EQ(g[1][15], 0x07);
	EXPECT_EQ(rdmacm_port_gids(r, "mlx5_4", 1, g, 1), 1u); /* at most MAX */
	EXPECT_EQ(rdmacm_port_gids(r, "mlx5_4", 2, g, 4), 0u);
	EXPECT_EQ(rdmacm_port_gids(r, "../mlx5_4", 1, g, 4), 0u);
	cmd = "rm -rf " + r;
	ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(RdmacmAddr, Parsers)
{
	sockaddr_in sa{};
	std::string why;
	ASSERT_TRUE(rdmacm_parse_peer("192.0.2.7:18515", &sa, &why)) << why;
	EXPECT_EQ(sa.sin_family, AF_INET);
	EXPECT_EQ(ntohs(sa.sin_port), 18515);
	EXPECT_EQ(ntohl(sa.sin_addr.s_addr), 0xc0000207u);
	EXPECT_FALSE(rdmacm_parse_peer("192.0.2.7", &sa, &why));
	EXPECT_FALSE(rdmacm_parse_peer("192.0.2.7:0", &sa, &why));
	EXPECT_NE(why.find("port"), std::string::npos) << why;
	EXPECT_FALSE(rdmacm_parse_peer("host:1", &sa, &why));
	in_addr a{};
	EXPECT_TRUE(rdmacm_parse_ipv4("10.1.2.3", &a, &why));
	EXPECT_FALSE(rdmacm_parse_ipv4("10.1.2", &a, &why));
	EXPECT_FALSE(rdmacm_parse_ipv4("", &a, &why));
	/* No such device here: no netdev, one reason. */
	EXPECT_FALSE(rdmacm_netdev_ipv4("mlx5_qpn_nodev", &a, &why));
	EXPECT_NE(why.find("mlx5_qpn_nodev"), std::string::npos) << why;
}

TEST(RdmacmGlue, LoadsOnceOrSaysWhy)
{
	const rdmacm_glue *g = rdmacm_glue_get();
	EXPECT_EQ(g, rdmacm_glue_get());
	if (g == nullptr) {
		EXPECT_NE(std::string(rdmacm_glue_error()).find("librdmacm.so.1"),
			  std::string::npos)
			<< rdmacm_glue_error();
		return;
	}
	EXPECT_STREQ(rdmacm_glue_error(), "");
	EXPECT_TRUE(g->create_event_channel && g->destroy_event_channel && g->create_id &&
		    g->destroy_id && g->resolve_addr && g->resolve_route && g->connect &&
		    g->accept && g->reject && g->disconnect && g->get_cm_event && g->ack_cm_event &&
		    g->listen && g->bind_addr && g->establish && g->get_device_guid &&
		    g->get_device_name);
}
