/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Malformed frames: counted, dropped, logged once per burst; and a deterministic in-suite fuzz
 * run (random and mutated frames through the decoder and an agent with live connections).
 */
#include "cm_test_util.h"

#include <rte_log.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <string>

using namespace cmtest;

namespace {

constexpr uint64_t kLocal = 0xA1;
constexpr uint64_t kPeer = 0xB2;
constexpr uint64_t kSvc = 7;

/* Capture DPDK log output in memory while alive. */
class LogCapture {
public:
	LogCapture() : f_(open_memstream(&buf_, &len_)) { rte_openlog_stream(f_); }
	~LogCapture()
	{
		rte_openlog_stream(nullptr);
		std::fclose(f_);
		std::free(buf_);
	}
	std::string text()
	{
		std::fflush(f_);
		return std::string(buf_, len_);
	}

private:
	char *buf_ = nullptr;
	size_t len_ = 0;
	FILE *f_;
};

size_t
occurrences(const std::string &s, const std::string &what)
{
	size_t n = 0;
	for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1))
		n++;
	return n;
}

std::vector<uint8_t>
valid_frame(std::mt19937_64 &rng, uint32_t known_id)
{
	static const uint8_t kTypes[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16};
	mlx5_qpn_cm_msg m = msg(kTypes[rng() % 7], rng() % 4 ? kPeer : 0x1234 + rng() % 3,
				uint32_t(1 + rng() % 4),
				rng() % 2 ? known_id : uint32_t(rng() % 8));
	m.qpn = uint32_t(rng() % 4);
	m.service_id = rng() % 3 ? kSvc : rng();
	m.packet_life_time = uint8_t(rng() % 32);
	m.ack_delay = uint8_t(rng() % 32);
	m.cm_response_timeout = uint8_t(rng() % 32);
	m.max_cm_retries = uint8_t(rng() % 16);
	m.msg_ref = uint8_t(rng() % 3);
	m.service_timeout = uint8_t(rng() % 32);
	m.reason = uint16_t(1 + rng() % 33);
	if (m.type == MLX5_QPN_CM_MSG_REQ)
		m.remote_comm_id = 0;
	if (m.remote_comm_id == 0 && m.type != MLX5_QPN_CM_MSG_REQ)
		m.remote_comm_id = 1;
	m.private_data_len = uint8_t(rng() % (mlx5_qpn_cm_private_data_max(m.type) + 1));
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	EXPECT_GT(len, 0);
	return std::vector<uint8_t>(buf, buf + (len > 0 ? len : 0));
}

} // namespace

TEST(CmMalformed, CountedDroppedAndLoggedOncePerBurst)
{
	AgentPtr cm(params(kLocal));
	uint32_t id;
	ASSERT_EQ(mlx5_qpn_cm_connect(cm, kPeer, kSvc, 5, nullptr, 0, 0, &id), 0);
	drain(cm);
	mlx5_qpn_cm_msg rep = msg(MLX5_QPN_CM_MSG_REP, kPeer, 99, id);
	rep.qpn = 6;
	uint8_t good[MLX5_QPN_CM_FRAME_MAX];
	int glen = mlx5_qpn_cm_msg_encode(&rep, good, sizeof(good));
	ASSERT_GT(glen, 0);

	std::string log;
	{
		LogCapture cap;
		/* A truncated REP, 100 times in one burst: one log line. */
		for (int i = 0; i < 100; i++) {
			EXPECT_EQ(mlx5_qpn_cm_input(cm, good, size_t(glen - 1), 1000), -EBADMSG);
		}
		EXPECT_EQ(occurrences(cap.text(), "malformed"), 1u);
		/* The connection did not move. */
		EXPECT_EQ(state_of(cm, id), MLX5_QPN_CM_STATE_REQ_SENT);
		/* A valid frame ends the burst with a summary of what was suppressed. */
		EXPECT_EQ(mlx5_qpn_cm_input(cm, good, size_t(glen), 1000), 0);
		log = cap.text();
		EXPECT_EQ(occurrences(log, "99 more malformed"), 1u) << log;
		/* A burst also ends after a second of caller time. */
		EXPECT_EQ(mlx5_qpn_cm_input(cm, good, 3, 2000), -EBADMSG);
		EXPECT_EQ(mlx5_qpn_cm_input(cm, good, 3, 2000 + 999999999), -EBADMSG);
		EXPECT_EQ(mlx5_qpn_cm_input(cm, good, 3, 2000 + 1000000000), -EBADMSG);
		log = cap.text();
	}
	EXPECT_EQ(occurrences(log, "dropped malformed frame"), 3u) << log;
	mlx5_qpn_cm_stats s = stats(cm);
	EXPECT_EQ(s.malformed, 103u);
	EXPECT_EQ(s.rx[MLX5_QPN_CM_MSG_REP - 0x10], 1u);
	EXPECT_EQ(state_of(cm, id), MLX5_QPN_CM_STATE_ESTABLISHED);
}

TEST(CmFuzz, RandomAndMutatedFramesNeverBreakTheAgent)
{
	std::mt19937_64 rng(0xC0FFEE);
	int old_level = rte_log_get_level(rte_log_register("mlx5_qpn.cm"));
	rte_log_set_level_pattern("mlx5_qpn.cm", RTE_LOG_ERR);
	for (auto pol : {MLX5_QPN_CM_POLICY_LIVE, MLX5_QPN_CM_POLICY_STRICT}) {
		mlx5_qpn_cm_params p = params(kLocal, pol);
		p.max_conns = 8;
		AgentPtr cm(p);
		ASSERT_EQ(mlx5_qpn_cm_listen(cm, kSvc), 0);
		uint64_t now = 1000;
		uint64_t bad = 0, total = 0;
		std::vector<uint32_t> ids;
		for (int i = 0; i < 4000; i++) {
			now += rng() % (200 * kMs);
			if (rng() % 16 == 0) {
				uint32_t id;
				if (mlx5_qpn_cm_connect(cm, kPeer, kSvc, uint32_t(rng() % 4),
							nullptr, 0, now, &id) == 0)
					ids.push_back(id);
			}
			uint32_t known = ids.empty() ? 1 : ids[rng() % ids.size()];
			std::vector<uint8_t> f;
			switch (rng() % 3) {
			case 0: /* random bytes, random length, sometimes with a valid header */
				f.resize(rng() % 300);
				for (auto &b : f)
					b = uint8_t(rng());
				if (f.size() >= 8 && rng() % 2) {
					f[0] = 0x4D;
					f[1] = 0x51;
					f[2] = 1;
					f[3] = uint8_t(0x10 + rng() % 7);
					f[4] = uint8_t(f.size() >> 8);
					f[5] = uint8_t(f.size());
				}
				break;
			case 1: { /* a valid frame, mutated */
				f = valid_frame(rng, known);
				int muts = 1 + int(rng() % 3);
				for (int k = 0; k < muts && !f.empty(); k++) {
					switch (rng() % 3) {
					case 0:
						f[rng() % f.size()] ^= uint8_t(1u << (rng() % 8));
						break;
					case 1:
						f.resize(rng() % f.size());
						break;
					default:
						f.push_back(uint8_t(rng()));
						break;
					}
				}
				break;
			}
			default: /* a valid frame with random ids and fields */
				f = valid_frame(rng, known);
				break;
			}
			/* An empty vector may have no storage; a zero-length frame still has an address. */
			static const uint8_t kEmpty[1] = {0};
			const uint8_t *fp = f.empty() ? kEmpty : f.data();
			mlx5_qpn_cm_msg m;
			bool valid = mlx5_qpn_cm_msg_decode(fp, f.size(), &m) == 0;
			if (valid) {
				/* The encoding is canonical: what decodes re-encodes to the same bytes. */
				uint8_t re[MLX5_QPN_CM_FRAME_MAX];
				int rlen = mlx5_qpn_cm_msg_encode(&m, re, sizeof(re));
				ASSERT_EQ(size_t(rlen), f.size());
				ASSERT_EQ(std::memcmp(re, fp, f.size()), 0);
			}
			int rc = mlx5_qpn_cm_input(cm, fp, f.size(), now);
			EXPECT_EQ(rc == 0, valid);
			bad += !valid;
			total++;
			/* Replies and events drained at random, sometimes left to pile up. */
			if (rng() % 4 == 0)
				drain(cm);
			if (rng() % 4 == 0) {
				for (const auto &ev : events(cm)) {
					if (ev.type == MLX5_QPN_CM_EVENT_REQ) {
						if (rng() % 2)
							mlx5_qpn_cm_accept(cm, ev.conn_id,
									   uint32_t(rng() % 4),
									   nullptr, 0, now);
						else
							mlx5_qpn_cm_reject(cm, ev.conn_id, 28,
									   nullptr, 0, now);
					}
					if (ev.type == MLX5_QPN_CM_EVENT_ESTABLISHED && rng() % 2)
						mlx5_qpn_cm_disconnect(cm, ev.conn_id, now);
				}
			}
			if (rng() % 8 == 0) {
				EXPECT_GE(mlx5_qpn_cm_tick(cm, now), 0);
			}
			mlx5_qpn_cm_stats s = stats(cm);
			ASSERT_LE(s.conns, p.max_conns);
			ASSERT_LE(s.pairs, s.conns);
			ASSERT_LE(s.timewait_entries, s.conns);
		}
		mlx5_qpn_cm_stats s = stats(cm);
		EXPECT_EQ(s.malformed, bad);
		uint64_t rx = 0;
		for (uint64_t v : s.rx)
			rx += v;
		EXPECT_EQ(rx + bad, total);
		EXPECT_GT(bad, total / 4) << "the mix must exercise the validator";
		EXPECT_GT(rx, total / 4) << "the mix must exercise the state machines";
		/* Far in the future, with all answers lost, every connection is gone. */
		for (int k = 0; k < 40; k++) {
			now += 3600ull * 1000 * kMs;
			drain(cm);
			events(cm);
			mlx5_qpn_cm_tick(cm, now);
		}
		for (const auto &ev : events(cm))
			if (ev.type == MLX5_QPN_CM_EVENT_REQ)
				mlx5_qpn_cm_reject(cm, ev.conn_id, 28, nullptr, 0, now);
		s = stats(cm);
		/* Connections still in REQ_RCVD wait for the consumer (no timer); none left here. */
		EXPECT_EQ(s.conns, 0u);
		EXPECT_EQ(s.pairs, 0u);
		EXPECT_EQ(s.timewait_entries, 0u);
	}
	rte_log_set_level_pattern("mlx5_qpn.cm",
				  old_level > 0 ? uint32_t(old_level) : RTE_LOG_INFO);
}
