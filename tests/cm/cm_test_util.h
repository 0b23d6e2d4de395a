/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the CM tests: agents without transport, frames built and read by hand. */
#ifndef CM_TEST_UTIL_H
#define CM_TEST_UTIL_H

#include <gtest/gtest.h>

#include "mlx5_qpn_cm.h"

#include <cstring>
#include <vector>

namespace cmtest {

constexpr uint64_t kMs = 1000000ull;

struct Frame {
	uint64_t dst;
	std::vector<uint8_t> bytes;
	mlx5_qpn_cm_msg msg;
};

inline mlx5_qpn_cm_params
params(uint64_t guid, mlx5_qpn_cm_policy policy = MLX5_QPN_CM_POLICY_LIVE)
{
	mlx5_qpn_cm_params p{};
	p.name = "cmtest";
	p.node_guid = guid;
	p.policy = policy;
	p.max_conns = 16;
	p.packet_life_time = 16;
	p.ack_delay = 16;
	p.cm_response_timeout = 20; /* ~4.3 s per attempt */
	p.max_cm_retries = 2;
	return p;
}

struct AgentPtr {
	mlx5_qpn_cm *cm = nullptr;
	explicit AgentPtr(const mlx5_qpn_cm_params &p) : cm(mlx5_qpn_cm_create(&p)) {}
	~AgentPtr() { mlx5_qpn_cm_destroy(cm); }
	AgentPtr(const AgentPtr &) = delete;
	AgentPtr &operator=(const AgentPtr &) = delete;
	operator mlx5_qpn_cm *() const { return cm; }
};

/* Everything an agent emitted since the last call, decoded. */
inline std::vector<Frame>
drain(mlx5_qpn_cm *cm)
{
	std::vector<Frame> out;
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	uint64_t dst;
	int len;
	while ((len = mlx5_qpn_cm_output(cm, &dst, buf, sizeof(buf))) > 0) {
		Frame f;
		f.dst = dst;
		f.bytes.assign(buf, buf + len);
		EXPECT_EQ(mlx5_qpn_cm_msg_decode(buf, size_t(len), &f.msg), 0);
		out.push_back(f);
	}
	EXPECT_EQ(len, -EAGAIN);
	return out;
}

inline std::vector<mlx5_qpn_cm_event>
events(mlx5_qpn_cm *cm)
{
	std::vector<mlx5_qpn_cm_event> out;
	mlx5_qpn_cm_event ev;
	while (mlx5_qpn_cm_poll_event(cm, &ev) == 0)
		out.push_back(ev);
	return out;
}

inline std::vector<uint8_t>
types(const std::vector<Frame> &fs)
{
	std::vector<uint8_t> t;
	for (const auto &f : fs)
		t.push_back(f.msg.type);
	return t;
}

inline mlx5_qpn_cm_msg
msg(uint8_t type, uint64_t src, uint32_t local_id, uint32_t remote_id)
{
	mlx5_qpn_cm_msg m;
	std::memset(&m, 0, sizeof(m));
	m.type = type;
	m.src_guid = src;
	m.local_comm_id = local_id;
	m.remote_comm_id = remote_id;
	return m;
}

inline int
feed(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now)
{
	uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
	int len = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
	EXPECT_GT(len, 0) << "encode of " << mlx5_qpn_cm_msg_name(m.type);
	if (len <= 0)
		return len;
	return mlx5_qpn_cm_input(cm, buf, size_t(len), now);
}

inline int
state_of(mlx5_qpn_cm *cm, uint32_t id)
{
	mlx5_qpn_cm_conn_info info;
	if (mlx5_qpn_cm_conn_get(cm, id, &info) != 0)
		return MLX5_QPN_CM_STATE_IDLE;
	return int(info.state);
}

inline mlx5_qpn_cm_stats
stats(mlx5_qpn_cm *cm)
{
	mlx5_qpn_cm_stats s;
	EXPECT_EQ(mlx5_qpn_cm_stats_get(cm, &s), 0);
	return s;
}

/*
 * Deliver frames between agents (each frame goes to the agent whose GUID is its destination)
 * until nothing moves. Returns the frames delivered.
 */
inline int
pump(std::vector<std::pair<uint64_t, mlx5_qpn_cm *>> nodes, uint64_t now)
{
	int moved = 0;
	for (bool again = true; again;) {
		again = false;
		for (auto &[guid, cm] : nodes) {
			(void)guid;
			for (const Frame &f : drain(cm)) {
				for (auto &[g2, cm2] : nodes)
					if (g2 == f.dst)
						mlx5_qpn_cm_input(cm2, f.bytes.data(),
								  f.bytes.size(), now);
				moved++;
				again = true;
			}
		}
	}
	return moved;
}

} // namespace cmtest

#endif
