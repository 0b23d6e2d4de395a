/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: CM frame decoder and agent input path.
 *
 * Input layout: byte 0 picks how far the agent's clock advances (and whether timers run), the
 * rest is one frame. Properties checked besides "no crash, no sanitizer report":
 * - a frame the decoder accepts re-encodes to the very same bytes (the encoding is canonical,
 *   so nothing unchecked slips through);
 * - input() accepts exactly what the decoder accepts;
 * - the agent's counters stay consistent.
 * The agent lives across inputs, so sequences build real connections. No EAL is needed.
 */
#include "mlx5_qpn_cm.h"

#include <rte_log.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

mlx5_qpn_cm *g_cm;
uint64_t g_now = 1;

void
check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

} // namespace

extern "C" int
LLVMFuzzerInitialize(int *, char ***)
{
	rte_log_set_level_pattern("mlx5_qpn.cm", RTE_LOG_CRIT);
	mlx5_qpn_cm_params p{};
	p.name = "fuzz";
	p.node_guid = 0xA1;
	p.policy = MLX5_QPN_CM_POLICY_STRICT;
	p.max_conns = 8;
	p.event_queue_size = 8;
	p.outbox_size = 8;
	p.packet_life_time = 16;
	p.ack_delay = 16;
	p.cm_response_timeout = 10;
	p.max_cm_retries = 2;
	g_cm = mlx5_qpn_cm_create(&p);
	check(g_cm != nullptr);
	check(mlx5_qpn_cm_listen(g_cm, 7) == 0);
	return 0;
}

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t ctl = data[0];
	const uint8_t *frame = data + 1;
	size_t len = size - 1;

	mlx5_qpn_cm_msg m;
	int drc = mlx5_qpn_cm_msg_decode(frame, len, &m);
	if (drc == 0) {
		uint8_t buf[MLX5_QPN_CM_FRAME_MAX];
		int elen = mlx5_qpn_cm_msg_encode(&m, buf, sizeof(buf));
		check(elen > 0 && size_t(elen) == len && std::memcmp(buf, frame, len) == 0);
	}

	g_now += uint64_t(ctl & 0x3F) << 20;
	if (ctl & 0x40) {
		uint32_t id;
		mlx5_qpn_cm_connect(g_cm, 0xB2, 7, ctl & 3, nullptr, 0, g_now, &id);
	}
	int rc = mlx5_qpn_cm_input(g_cm, frame, len, g_now);
	check((rc == 0) == (drc == 0));
	if (ctl & 0x80)
		check(mlx5_qpn_cm_tick(g_cm, g_now) >= 0);

	/* Consume output and answer REQs, so the agent keeps moving. */
	uint8_t out[MLX5_QPN_CM_FRAME_MAX];
	uint64_t dst;
	int olen;
	while ((olen = mlx5_qpn_cm_output(g_cm, &dst, out, sizeof(out))) > 0) {
		mlx5_qpn_cm_msg om;
		check(mlx5_qpn_cm_msg_decode(out, size_t(olen), &om) == 0);
	}
	mlx5_qpn_cm_event ev;
	while (mlx5_qpn_cm_poll_event(g_cm, &ev) == 0) {
		if (ev.type == MLX5_QPN_CM_EVENT_REQ)
			mlx5_qpn_cm_accept(g_cm, ev.conn_id, ctl & 3, nullptr, 0, g_now);
		else if (ev.type == MLX5_QPN_CM_EVENT_ESTABLISHED && (ctl & 1))
			mlx5_qpn_cm_disconnect(g_cm, ev.conn_id, g_now);
	}
	mlx5_qpn_cm_stats s;
	check(mlx5_qpn_cm_stats_get(g_cm, &s) == 0);
	check(s.conns <= 8 && s.pairs <= s.conns && s.timewait_entries <= s.conns);
	return 0;
}
