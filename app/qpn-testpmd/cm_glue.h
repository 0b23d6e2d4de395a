/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of the CM engines shared by their files (cm_glue.cpp: the fabric and agents;
 * cm_dc.cpp: the DC data path resources; cm_server.cpp: the passive side; cm_client.cpp: the
 * active side). The design is described at the top of cm_glue.cpp.
 */
#ifndef QPN_TESTPMD_CM_GLUE_H
#define QPN_TESTPMD_CM_GLUE_H

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <unordered_map>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_pause.h>

#include "mlx5_qpn_dc.h"
#include "testpmd.h"

extern int qpn_app_logtype;
#define APP_LOG(level, fmt, ...)                                                                \
	rte_log(RTE_LOG_##level, qpn_app_logtype, "qpn-testpmd: " fmt "\n", ##__VA_ARGS__)

constexpr uint64_t kServiceId = 0x0106'0000'0000'4450ull; /* RDMA_PS_TCP-like service id */
constexpr uint64_t kDcKey = 0x5150'4e44'434b'4559ull;
constexpr unsigned kMaxSlots = 64;      /* connections one client lcore keeps at once */
constexpr uint32_t kAgentConns = 16384; /* CM slots per agent (timewait entries included) */
constexpr uint64_t kDrainNs = 3'000'000'000ull; /* longest wait for open connections at stop */
constexpr unsigned kShmSlots = 4096;    /* frames pending per node on a shared-memory fabric */
constexpr double kDirWaitS = 5.0;       /* how long a client waits for a server to publish */

/* A small event copy: what the loops need of struct mlx5_qpn_cm_event. */
struct mini_ev {
	uint32_t type;
	uint32_t conn_id;
	uint32_t remote_qpn;
	uint16_t reason;
};

struct spin {
	std::atomic_flag f = ATOMIC_FLAG_INIT;
	void lock()
	{
		while (f.test_and_set(std::memory_order_acquire))
			rte_pause();
	}
	void unlock() { f.clear(std::memory_order_release); }
};

struct client_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
	spin lock;
	/* conn id -> owning lcore; under lock. */
	std::unordered_map<uint32_t, unsigned> owner;
	/* Events waiting for their lcore; under lock. */
	std::vector<mini_ev> pending[RTE_MAX_LCORE];
};

struct server_conn {
	uint32_t qpn;
	uint64_t t_req;    /* REQ event seen */
	uint64_t t_acc;    /* accept (REP) sent */
	uint64_t t_alloc0; /* alloc started */
	uint64_t pool_cyc; /* alloc cycles */
	uint64_t t_end;    /* DISCONNECTED seen (0: not completed) */
	bool established;
};

struct server_node {
	mlx5_qpn_cm *cm = nullptr;
	mlx5_qpn_cm_transport tp{};
	uint64_t guid = 0;
	std::unordered_map<uint32_t, server_conn> conns;
};

/* DC resources: per device one DCT per peer on one CQ; per client lcore one DCI on one CQ. */
struct dc_dev {
	mlx5_qpn_cq *cq = nullptr;
	std::vector<mlx5_qpn_dct *> dct;
	std::vector<uint32_t> dctn;
};
struct dc_lcore {
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
};

struct cm_glue {
	mlx5_qpn_cm_fabric *fabric = nullptr;   /* in-process fabric, or */
	mlx5_qpn_cm_shm_fabric *shm = nullptr;  /* the shared-memory one (--fabric) */
	/* The peers clients connect to: this process's server nodes, or the directory's. */
	std::vector<uint64_t> peer_guid;
	std::vector<uint32_t> peer_dctn;
	std::vector<uint64_t> peer_key;
	std::vector<client_node *> clients; /* per device */
	std::vector<server_node *> servers; /* per peer */
	std::vector<dc_dev> dcdev;          /* per device */
	dc_lcore dcl[RTE_MAX_LCORE];
	cm_agent_totals last;               /* of the previous start (kept after fini) */
};

/* cm_dc.cpp */
int dc_init(run_ctx *ctx);
void dc_fini(run_ctx *ctx);

/* cm_server.cpp */
void count_rej(lcore_stats &st, uint16_t reason);
void server_poll(run_ctx *ctx);

#endif /* QPN_TESTPMD_CM_GLUE_H */
