/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM agent's timing wheel (lib/cm/cm_timer_wheel.h): a timer fires at the first take_due
 * whose now is >= its deadline, never earlier, in deadline order across slots; cancel and
 * re-arm; many timers; deadlines more than one turn ahead; a clock that jumps turns ahead.
 * And through the agent: a connection in timewait stays there until its exact deadline with
 * thousands of others held (the tick does not scan the table); more slots than 16 bits hold.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <vector>

#include "cm_internal.h"
#include "cm_test_util.h"

using cm_impl::TimerWheel;

namespace {

constexpr uint64_t kSlotNs = uint64_t(1) << TimerWheel::kShift;
constexpr uint64_t kTurnNs = kSlotNs * TimerWheel::kSlots;

/* Every id due at now, in the order taken. */
std::vector<uint32_t>
drain(TimerWheel &w, uint64_t now)
{
	std::vector<uint32_t> out;
	for (uint32_t id; (id = w.take_due(now)) != TimerWheel::kNil;)
		out.push_back(id);
	return out;
}

struct Wheel : ::testing::Test {
	TimerWheel w;
	void TearDown() override { w.fini(); }
};

using CmTimerWheel = Wheel;

TEST_F(CmTimerWheel, FiresExactlyAtDeadlineNeverBefore)
{
	const uint64_t t0 = 5'000'000'123ull;
	ASSERT_TRUE(w.init(8, t0));
	/* Inside one slot, at a slot edge, a few slots on. */
	const uint64_t d[3] = {t0 + 10, (t0 / kSlotNs + 1) * kSlotNs, t0 + 7 * kSlotNs + 3};
	for (uint32_t i = 0; i < 3; i++)
		w.arm(i, d[i]);
	EXPECT_EQ(w.size(), 3u);
	for (uint32_t i = 0; i < 3; i++) {
		EXPECT_TRUE(drain(w, d[i] - 1).empty()) << "timer " << i << " fired 1 ns early";
		EXPECT_TRUE(w.armed(i));
		EXPECT_EQ(drain(w, d[i]), std::vector<uint32_t>{i});
		EXPECT_FALSE(w.armed(i));
	}
	EXPECT_EQ(w.size(), 0u);
}

TEST_F(CmTimerWheel, OrderAcrossSlotsAndPastDeadlines)
{
	const uint64_t t0 = 1'000'000'000ull;
	ASSERT_TRUE(w.init(64, t0));
	std::mt19937_64 rng(7);
	std::vector<uint64_t> d(64);
	for (uint32_t i = 0; i < 64; i++) {
		/* Distinct slots, shuffled arm order; a few already in the past. */
		d[i] = t0 - 3 * kSlotNs + i * 2 * kSlotNs + rng() % kSlotNs;
	}
	std::vector<uint32_t> order(64);
	for (uint32_t i = 0; i < 64; i++)
		order[i] = i;
	std::shuffle(order.begin(), order.end(), rng);
	for (uint32_t i : order)
		w.arm(i, d[i]);
	/* Past deadlines fire on the first call. */
	EXPECT_EQ(drain(w, t0).size(), 2u);
	/* One call far ahead: every remaining one, in deadline order. */
	std::vector<uint32_t> got = drain(w, t0 + 200 * kSlotNs);
	ASSERT_EQ(got.size(), 62u);
	for (size_t k = 1; k < got.size(); k++)
		EXPECT_LT(d[got[k - 1]], d[got[k]]);
}

TEST_F(CmTimerWheel, CancelAndRearm)
{
	const uint64_t t0 = 0;
	ASSERT_TRUE(w.init(4, t0));
	w.arm(0, 5 * kSlotNs);
	w.arm(1, 5 * kSlotNs);
	w.arm(2, 2 * kSlotNs);
	w.cancel(1);
	w.cancel(1); /* twice: nothing */
	w.cancel(3); /* never armed: nothing */
	EXPECT_EQ(w.size(), 2u);
	/* Re-arm later and earlier than before. */
	w.arm(2, 9 * kSlotNs);
	w.arm(0, kSlotNs / 2);
	EXPECT_EQ(w.deadline(2), 9 * kSlotNs);
	EXPECT_EQ(drain(w, kSlotNs / 2), std::vector<uint32_t>{0});
	EXPECT_TRUE(drain(w, 9 * kSlotNs - 1).empty());
	/* A taken timer armed again from the loop (a retransmit) fires again later. */
	uint32_t id = w.take_due(9 * kSlotNs);
	ASSERT_EQ(id, 2u);
	w.arm(id, 9 * kSlotNs + 1);
	EXPECT_EQ(w.take_due(9 * kSlotNs), TimerWheel::kNil);
	EXPECT_EQ(drain(w, 9 * kSlotNs + 1), std::vector<uint32_t>{2});
	/* Cancel of a timer already due but not yet taken. */
	w.arm(0, 10 * kSlotNs);
	w.arm(1, 10 * kSlotNs);
	ASSERT_NE(w.take_due(10 * kSlotNs), TimerWheel::kNil);
	w.cancel(0);
	w.cancel(1);
	EXPECT_EQ(w.take_due(10 * kSlotNs), TimerWheel::kNil);
	EXPECT_EQ(w.size(), 0u);
}

TEST_F(CmTimerWheel, BeyondOneTurnAndClockJumps)
{
	const uint64_t t0 = 123 * kTurnNs + 17;
	ASSERT_TRUE(w.init(3, t0));
	/* Same slot as t0, one and two turns ahead: skipped until their turn. */
	w.arm(0, t0 + kTurnNs);
	w.arm(1, t0 + 2 * kTurnNs + 5);
	w.arm(2, t0 + 1);
	EXPECT_EQ(drain(w, t0 + 1), std::vector<uint32_t>{2});
	for (uint64_t t = t0 + kSlotNs; t < t0 + kTurnNs; t += 97 * kSlotNs)
		EXPECT_TRUE(drain(w, t).empty()) << t - t0;
	EXPECT_TRUE(drain(w, t0 + kTurnNs - 1).empty());
	EXPECT_EQ(drain(w, t0 + kTurnNs), std::vector<uint32_t>{0});
	/* A jump of several turns: one pass; the early side never fires. */
	EXPECT_TRUE(drain(w, t0 + 2 * kTurnNs + 4).empty());
	EXPECT_EQ(drain(w, t0 + 9 * kTurnNs), std::vector<uint32_t>{1});
	/* After the jump, near and far timers behave. */
	const uint64_t t1 = t0 + 9 * kTurnNs;
	w.arm(0, t1 + 3);
	w.arm(1, t1 + kTurnNs + 3);
	EXPECT_TRUE(drain(w, t1 + 2).empty());
	EXPECT_EQ(drain(w, t1 + 3), std::vector<uint32_t>{0});
	EXPECT_TRUE(drain(w, t1 + kTurnNs + 2).empty());
	EXPECT_EQ(drain(w, t1 + kTurnNs + 3), std::vector<uint32_t>{1});
	/* A clock that goes back: nothing fires. */
	w.arm(2, t1 + kTurnNs + 100);
	EXPECT_TRUE(drain(w, t1).empty());
	EXPECT_TRUE(w.armed(2));
}

TEST_F(CmTimerWheel, ManyTimersRandomAgainstReference)
{
	constexpr uint32_t kN = 20000;
	const uint64_t t0 = 77'000'000'000ull;
	ASSERT_TRUE(w.init(kN, t0));
	std::mt19937_64 rng(11);
	std::vector<uint64_t> ref(kN, 0); /* 0: not armed */
	uint64_t now = t0;
	for (int step = 0; step < 400; step++) {
		for (int k = 0; k < 200; k++) {
			uint32_t id = uint32_t(rng() % kN);
			uint64_t r = rng() % 100;
			if (r < 10) {
				w.cancel(id);
				ref[id] = 0;
			} else {
				/* Up to ~2 turns ahead, some in the past. */
				uint64_t d = now + rng() % (2 * kTurnNs) -
					     (r < 15 ? 3 * kSlotNs : 0);
				w.arm(id, d);
				ref[id] = d;
			}
		}
		now += rng() % (40 * kSlotNs);
		std::vector<uint32_t> got = drain(w, now);
		std::vector<uint32_t> want;
		for (uint32_t id = 0; id < kN; id++)
			if (ref[id] != 0 && ref[id] <= now)
				want.push_back(id);
		std::sort(got.begin(), got.end());
		ASSERT_EQ(got, want) << "step " << step;
		for (uint32_t id : got)
			ref[id] = 0;
		uint32_t armed = 0;
		for (uint32_t id = 0; id < kN; id++) {
			armed += ref[id] != 0;
			ASSERT_EQ(w.armed(id), ref[id] != 0) << id;
		}
		ASSERT_EQ(w.size(), armed);
	}
}

/*
 * Through the agents, strict policy, a 1024 ms timewait: 1500 connections closed ~0.6 ms apart,
 * all inside the first one's timewait (their ends spread over ~860 wheel slots, across a turn
 * boundary). At every probe time each
 * connection is in timewait, and its (GUID, QPN) pair held, exactly while now < its own end: no
 * QPN comes back a nanosecond early, none stays late.
 */
TEST(CmTimerAgent, ManyTimewaitsEndExactlyAtTheirDeadline)
{
	using namespace cmtest;
	constexpr uint64_t kC = 0xC1, kS = 0x5E, kSvc = 0x4791;
	constexpr uint32_t kN = 1500;
	constexpr uint64_t kGap = 600'001; /* ns between two closes: not a slot multiple */
	const uint64_t t0 = 3 * kTurnNs - 1500 * kSlotNs + 12345;
	mlx5_qpn_cm_params pc = params(kC, MLX5_QPN_CM_POLICY_STRICT);
	mlx5_qpn_cm_params ps = params(kS, MLX5_QPN_CM_POLICY_STRICT);
	pc.max_conns = ps.max_conns = 2048;
	pc.event_queue_size = ps.event_queue_size = 8 * kN;
	pc.outbox_size = ps.outbox_size = 8 * kN;
	AgentPtr client(pc), server(ps);
	ASSERT_NE(client.cm, nullptr);
	ASSERT_NE(server.cm, nullptr);
	ASSERT_EQ(mlx5_qpn_cm_listen(server, kSvc), 0);
	auto pump2 = [&](uint64_t now) { pump({{kC, client}, {kS, server}}, now); };
	std::vector<uint32_t> sid(kN);
	std::vector<uint64_t> end(kN);
	for (uint32_t i = 0; i < kN; i++) {
		const uint64_t t = t0 + i * kGap;
		mlx5_qpn_cm_tick(client, t);
		mlx5_qpn_cm_tick(server, t);
		uint32_t cid;
		ASSERT_EQ(mlx5_qpn_cm_connect(client, kS, kSvc, 0x1000 + i, nullptr, 0, t, &cid),
			  0);
		pump2(t);
		for (const auto &e : events(server))
			if (e.type == MLX5_QPN_CM_EVENT_REQ) {
				sid[i] = e.conn_id;
				ASSERT_EQ(mlx5_qpn_cm_accept(server, e.conn_id, 0x9000 + i, nullptr,
							     0, t),
					  0);
			}
		pump2(t);
		ASSERT_EQ(mlx5_qpn_cm_disconnect(client, cid, t), 0);
		pump2(t);
		events(client);
		events(server);
		mlx5_qpn_cm_conn_info ci;
		ASSERT_EQ(mlx5_qpn_cm_conn_get(server, sid[i], &ci), 0) << i;
		ASSERT_EQ(ci.state, MLX5_QPN_CM_STATE_TIMEWAIT);
		end[i] = t + uint64_t(ci.timewait_ms) * kMs;
		ASSERT_EQ(ci.timer_ns, end[i]);
	}
	/* Probes: just before and at every 37th end, and points in between. */
	std::vector<uint64_t> probes;
	for (uint32_t i = 0; i < kN; i += 37) {
		probes.push_back(end[i] - 1);
		probes.push_back(end[i]);
		probes.push_back(end[i] + kSlotNs / 3);
	}
	probes.push_back(end[kN - 1]);
	uint32_t exited = 0;
	for (uint64_t now : probes) {
		int fired = mlx5_qpn_cm_tick(server, now);
		ASSERT_GE(fired, 0);
		for (const auto &e : events(server))
			exited += e.type == MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT;
		for (uint32_t i = 0; i < kN; i++) {
			const bool in_tw = now < end[i];
			ASSERT_EQ(state_of(server, sid[i]) == MLX5_QPN_CM_STATE_TIMEWAIT, in_tw)
				<< "connection " << i << " at end" << (in_tw ? " - " : " + ")
				<< (in_tw ? end[i] - now : now - end[i]) << " ns";
			ASSERT_EQ(mlx5_qpn_cm_pair_held(server, kC, 0x1000 + i), in_tw ? 2 : 0)
				<< i;
		}
	}
	EXPECT_EQ(exited, kN);
	EXPECT_EQ(stats(server).timewait_entries, 0u);
	EXPECT_EQ(stats(server).conns, 0u);
}

/* More slots than 16 bits hold: comm ids stay distinct and look up to their own connection. */
TEST(CmTimerAgent, SlotsBeyond16BitsKeepDistinctCommIds)
{
	using namespace cmtest;
	constexpr uint32_t kN = 70000;
	mlx5_qpn_cm_params p = params(0xC1, MLX5_QPN_CM_POLICY_STRICT);
	p.max_conns = kN;
	p.outbox_size = 16;
	AgentPtr a(p);
	ASSERT_NE(a.cm, nullptr);
	std::vector<uint32_t> ids(kN);
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	uint64_t dst;
	for (uint32_t i = 0; i < kN; i++) {
		ASSERT_EQ(mlx5_qpn_cm_connect(a, 0x5E, 0x4791, 0x100 + i, nullptr, 0, kMs, &ids[i]),
			  0)
			<< i;
		ASSERT_GT(mlx5_qpn_cm_output(a, &dst, buf, sizeof(buf)), 0);
	}
	uint32_t extra;
	EXPECT_EQ(mlx5_qpn_cm_connect(a, 0x5E, 0x4791, 1, nullptr, 0, kMs, &extra), -ENOSPC);
	std::vector<uint32_t> sorted = ids;
	std::sort(sorted.begin(), sorted.end());
	EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
	for (uint32_t i = 0; i < kN; i += 997) {
		mlx5_qpn_cm_conn_info ci;
		ASSERT_EQ(mlx5_qpn_cm_conn_get(a, ids[i], &ci), 0) << i;
		EXPECT_EQ(ci.local_qpn, 0x100 + i);
	}
}

} // namespace
