/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of the emulated connection implementation (conn.h), shared by its two files:
 * conn_emu.cpp (the CM fabric, the agents and the ops table) and conn_emu_dc.cpp (the DC data
 * path: DCTs, DCIs, sends, completions). The design is described at the top of conn_emu.cpp.
 */
#ifndef QPN_TESTPMD_CONN_EMU_H
#define QPN_TESTPMD_CONN_EMU_H

#include <vector>

#include <mlx5_qpn/mlx5_qpn_dc.h>

#include "dc_dci.h"
#include "testpmd.h"

constexpr uint64_t kServiceId = 0x0106'0000'0000'4450ull; /* RDMA_PS_TCP-like service id */
constexpr uint64_t kDcKey = 0x5150'4e44'434b'4559ull;
/* CM slots of a client lcore's agent (and of all server agents together, --peers sharing them,
 * each at least kAgentConnsMin), timewait entries included: a connection holds its slot for its
 * timewait, so an agent keeps ~connections/s x timewait slots. agent_conns() gives ~384 slots
 * per ms of timewait (room for ~384k connections/s per agent, more than one lcore reaches), from
 * kAgentConns (~5 MB an agent; at the default 16 ms timewait 6,144 would do: 2.7x that) up to
 * kAgentConnsMax (~160 MB an agent, a 1 s timewait). The slots are populated at create
 * (cm.md §6), so a slot above what the timewait needs costs memory and start-up time (page
 * faults; 4x as many under ThreadSanitizer) and is never used. */
constexpr uint32_t kAgentConns = 16384;
constexpr uint32_t kAgentConnsMin = 16384;
constexpr uint32_t kAgentConnsMax = 1u << 19;
uint32_t agent_conns(const run_config &cfg);
/* Events queued per agent between two poll rounds (~18 MB): at 100k connections/s (four events
 * each on the passive side) a round may come ~150 ms late before events are dropped (counted). */
constexpr uint32_t kAgentEvents = 65536;
constexpr unsigned kShmSlots = 4096; /* frames pending per node on a shared-memory fabric */
constexpr double kDirWaitS = 5.0;    /* how long a client waits for a server to publish */

/* A small event copy: what the active side needs of struct mlx5_qpn_cm_event. */
struct mini_ev {
	uint32_t type;
	uint32_t conn_id;
	uint16_t reason;
};

/* The active node of one client lcore: its own CM agent, used by that lcore only (no lock). */
struct client_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
};

/* One passive node (a peer, --peers). */
struct server_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
};

/* DC resources: per device one DCT per peer, on one CQ per server (peer p's DCTs on CQ
 * p % nb_servers, a CQ being one thread's); per client lcore one DCI on one CQ (dc_dci.h). */
struct dc_dev {
	std::vector<mlx5_qpn_cq *> cq; /* per server */
	std::vector<mlx5_qpn_dct *> dct;
	std::vector<uint32_t> dctn;
};

/* Events taken from an agent and not yet handed to the engine (poll hands out a burst). */
template <typename T> struct ev_queue {
	std::vector<T> evs;
	size_t at = 0;
	bool empty() const { return at == evs.size(); }
	void clear()
	{
		evs.clear();
		at = 0;
	}
};

struct emu_state {
	mlx5_qpn_cm_fabric *fabric = nullptr;  /* in-process fabric, or */
	mlx5_qpn_cm_shm_fabric *shm = nullptr; /* the shared-memory one (--fabric) */
	unsigned fabric_seq = 0;               /* in-process fabrics made so far (their names) */
	/* The peers clients connect to: this process's server nodes, or the directory's. */
	std::vector<uint64_t> peer_guid;
	std::vector<uint32_t> peer_dctn;
	std::vector<uint64_t> peer_key;
	std::vector<client_node *> clients; /* per client lcore, in client_idx order */
	std::vector<server_node *> servers; /* per peer */
	std::vector<dc_dev> dcdev;          /* per device */
	app_dci dcl[RTE_MAX_LCORE];
	ev_queue<mini_ev> mine[RTE_MAX_LCORE];              /* per client lcore */
	ev_queue<qpn_conn_event> passive[kMaxServerLcores]; /* per server */
	qpn_conn_totals last; /* of the previous runs (kept after teardown) */
};

/* One per process: one run at a time. */
extern emu_state g_emu;

/* conn_emu_dc.cpp */
int emu_dc_init(run_ctx *ctx);
void emu_dc_fini(run_ctx *ctx);
/* conn.h's send: only on an established connection of the lcore's agent (-ENOTCONN). */
int emu_dc_send(run_ctx *ctx, unsigned lcore, uint32_t conn, unsigned peer, uint64_t wr_id);
void emu_dc_flush(run_ctx *ctx, unsigned lcore);
/* Up to MAX completions of the lcore's DCI as events (and its recovery, dc_dci.h). */
unsigned emu_dc_send_completions(run_ctx *ctx, unsigned lcore, qpn_conn_event *ev, unsigned max);
/* The receives of server SERVER's DCTs (server 0 runs the device's doorbell service first), as
 * events on the queue. */
void emu_dc_receives(run_ctx *ctx, unsigned server, std::vector<qpn_conn_event> &out);

#endif /* QPN_TESTPMD_CONN_EMU_H */
