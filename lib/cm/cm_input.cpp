/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Received frames: decode and dispatch to the state machines (mlx5_qpn_cm_input), the
 * transport's receive burst with its sender check (mlx5_qpn_cm_poll), and the rate-limited log
 * of malformed frames.
 */
#include "cm_internal.h"

#include <rte_errno.h>
#include <rte_log.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cm_impl {

void
end_malformed_burst(mlx5_qpn_cm *cm)
{
	if (cm->mal_burst && cm->mal_suppressed != 0)
		CM_LOG(WARNING, "%s: %" PRIu64 " more malformed frames dropped", cm->name,
		       cm->mal_suppressed);
	cm->mal_burst = false;
	cm->mal_suppressed = 0;
}

void
malformed(mlx5_qpn_cm *cm, int rc, size_t len, uint64_t now_ns)
{
	cm->stats.malformed++;
	/* One line per burst: a flood of garbage must not flood the log too. */
	if (cm->mal_burst && now_ns - cm->mal_burst_start < 1000000000ull) {
		cm->mal_suppressed++;
		return;
	}
	end_malformed_burst(cm);
	CM_LOG(WARNING, "%s: dropped malformed frame of %zu bytes: %s", cm->name, len,
	       rc == -EBADMSG ? "truncated or bad length" :
	       rc == -EPROTO  ? "bad magic, version or type" :
	       rc == -ERANGE  ? "field out of range" :
				"sender mismatch");
	cm->mal_burst = true;
	cm->mal_burst_start = now_ns;
}

} // namespace cm_impl

using namespace cm_impl;

namespace {

constexpr unsigned kBurst = 32;

} // namespace

extern "C" {

int
mlx5_qpn_cm_input(struct mlx5_qpn_cm *cm, const void *frame, size_t len, uint64_t now_ns)
{
	if (cm == nullptr || frame == nullptr)
		return -EINVAL;
	cm->now_ns = now_ns; /* the time the answers (REP, RTU, DREP, REJ) are sent at */
	mlx5_qpn_cm_msg m;
	int rc = mlx5_qpn_cm_msg_decode(frame, len, &m);
	if (rc != 0) {
		malformed(cm, rc, len, now_ns);
		return rc;
	}
	end_malformed_burst(cm);
	cm->stats.rx[type_index(m.type)]++;
	switch (m.type) {
	case MLX5_QPN_CM_MSG_REQ:
		on_req(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_REP:
		on_rep(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_RTU:
		on_rtu(cm, m);
		break;
	case MLX5_QPN_CM_MSG_REJ:
		on_rej(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_MRA:
		on_mra(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_DREQ:
		on_dreq(cm, m, now_ns);
		break;
	case MLX5_QPN_CM_MSG_DREP:
		on_drep(cm, m, now_ns);
		break;
	default:
		break;
	}
	return 0;
}

namespace {

/* How far past the caller's now_ns a frame's send time is believed: a frame legitimately comes
 * from after the caller's clock read by the length of a poll round or a preemption (ms); a stamp
 * further ahead (a broken clock, or a hostile writer of a shared-memory fabric) would fire every
 * timer due until then, and leave the wheel's cursor there for good. */
constexpr uint64_t kFrameAheadMaxNs = 1000000000ull;

uint64_t
frame_time(uint64_t sent_ns, uint64_t now_ns)
{
	if (sent_ns == 0)
		return now_ns;
	if (sent_ns > now_ns && sent_ns - now_ns > kFrameAheadMaxNs)
		return now_ns + kFrameAheadMaxNs;
	return sent_ns;
}

} // namespace

int
mlx5_qpn_cm_poll(struct mlx5_qpn_cm *cm, uint64_t now_ns)
{
	if (cm == nullptr)
		return -EINVAL;
	if (!cm->has_tp || cm->tp.recv_burst == nullptr)
		return -ENOTSUP;
	int n = cm->tp.recv_burst(cm->tp.ctx, cm->rx_burst, kBurst);
	if (n < 0)
		return n;
	n = std::min<int>(n, int(kBurst));
	for (int i = 0; i < n; i++) {
		const mlx5_qpn_cm_frame &f = cm->rx_burst[i];
		size_t len = std::min<size_t>(f.len, sizeof(f.data));
		/* At the time it was sent, after the timers due by then (mlx5_qpn_cm_poll()'s
		 * contract); a time behind the last tick fires nothing again. */
		const uint64_t at = frame_time(f.sent_ns, now_ns);
		mlx5_qpn_cm_tick(cm, at);
		/* The transport knows the real sender: a frame claiming another GUID is dropped. */
		if (len >= 16 && f.src_guid != 0) {
			uint64_t claimed = 0;
			for (int b = 0; b < 8; b++)
				claimed = (claimed << 8) | f.data[8 + b];
			if (claimed != f.src_guid) {
				malformed(cm, -EACCES, len, at);
				continue;
			}
		}
		mlx5_qpn_cm_input(cm, f.data, len, at);
	}
	mlx5_qpn_cm_tick(cm, now_ns);
	return n;
}

} // extern "C"
