/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_H
#define QPN_TESTPMD_H

/*
 * qpn-testpmd: engines in the manner of testpmd's forwarding engines — one struct of hooks per
 * engine, one file each, each holding its own per-connection body. The runner (run.cpp) sets the
 * run up (devices, the connection implementation, roles), launches one lcore body for every
 * engine on the worker lcores and waits (batch) or serves the prompt (cli.cpp); beside it the
 * monitor (monitor.cpp) samples the timeline, prints the progress lines every --stats-period,
 * serves telemetry and turns SIGINT/SIGTERM into a normal end. At the end the summary
 * (stats.cpp) and the JSON (stats_json.cpp; stats.h what they share). Options, and `set` by
 * name, are options*.cpp's (options.h). The CM engines reach connections only through conn.h.
 *
 * Lcore layout (see doc/guides/app.md): the main lcore monitors or runs the prompt. With two or
 * more workers the last --server-lcores workers (at least one client lcore left) are the
 * *server* lcores (the passive side) and the others are *client* lcores (the active side). The
 * peers (passive CM nodes and their DCTs) are partitioned among the server lcores: peer p is
 * served by server lcore p % nb_servers alone (its agent, its DCTs' CQ), so no lock is taken on
 * the passive side; server lcore 0 also runs the device's doorbell service. With --co-poll the
 * first --server-lcores client lcores each poll one server in their own loop instead (no
 * dedicated server lcore: as many busy lcores as workers). With a single worker
 * that worker runs the client and polls the server side in the same loop; with no worker the
 * main lcore does both (batch mode only); both cases have one server (index 0).
 *
 * Sides. A CM engine measures one side and, in one process, the other side runs as its peer:
 * dci-reconnect and churn are the active side with dct-accept's passive body as the peer;
 * dct-accept is the passive side with dci-reconnect's active body as the peer. Two processes
 * (--role=server / --role=client, see doc/guides/app_reference.md §2) run one side each over a
 * shared-memory CM fabric (--fabric): the server process has no client lcore (its first
 * --server-lcores workers serve until the run ends) and publishes its nodes and DCTs in the
 * fabric's service directory; the client process has no server lcore, reads the directory and runs
 * the device's doorbell service itself. On hardware (librdmacm) the peer is another host, so a run
 * has the engine's side only.
 */
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <rte_lcore.h>
#include <rte_log.h>

#include <mlx5_qpn/mlx5_qpn.h>
#include <mlx5_qpn/mlx5_qpn_cm.h>

#include "conn.h"
#include "../common/eal_devs.h" /* by path: the test suite builds app files too */
#include "latency.h"

/* The device of a run without --qpn-dev: the emulated device with as many QPNs as its
 * log_max_num_reserved_qpn gives (2^20), so that the QPNs a 1 s timewait holds (about three
 * timewaits per connection: doc/guides/app_reference.md §3) do not cap conns/s at the rate a few
 * lcores reach; ranges of 2^14 keep the pool's range table (256) far from full. */
#define QPN_TESTPMD_DEFAULT_DEV "sim0,max_qpns=1048576,log_max_alloc=14"

/* Everything the options set. */
struct run_config {
	std::vector<std::string> devargs; /* --qpn-dev, repeatable; or the vdevs' */
	std::vector<eal_dev> eal_devs;    /* the mlx5_qpn vdevs the EAL probed: the run's devices */
	std::string engine = "dci-reconnect";
	double duration_s = 3.0;    /* --duration */
	uint64_t connections = 0;   /* --connections (0: run for duration) */
	unsigned burst = 8;         /* --burst (alloc engine) */
	unsigned hold = 64;         /* --hold (alloc engine) */
	std::string json;           /* --json */
	unsigned peers = 1;         /* --peers: DC targets, each a passive CM node */
	unsigned msgs_per_conn = 4; /* --msgs-per-conn */
	unsigned inflight = 4;      /* --inflight: connections open at once per client lcore */
	int64_t quarantine_us = -1; /* --quarantine-us; -1: the CM timewait */
	uint32_t policy = MLX5_QPN_CM_POLICY_STRICT; /* --cm-policy */
	uint8_t plt = 10;                            /* --cm-plt: packet life time exponent */
	uint8_t ack_delay = 10;                      /* --cm-ack-delay: CA ACK delay exponent */
	bool force_shared_qpn = false;               /* --force-shared-qpn (negative control) */
	bool interactive = false;                    /* -i */
	bool destroy_sim = false;   /* --destroy-sim: remove emulated devices at exit */
	uint64_t seed = 1;          /* --seed (churn) */
	std::string hw_peer;        /* --hw-peer=IP:PORT (hardware, active side) */
	unsigned hw_port = 18515;   /* --hw-port (hardware, passive side) */
	std::string hw_bind;        /* --hw-bind=IP (hardware: the probed device's address) */
	std::string role = "both";  /* --role: both | client | server */
	std::string fabric;         /* --fabric: shared-memory CM fabric ("": in-process) */
	double stats_period_s = 1;  /* --stats-period: progress line period (0: none) */
	unsigned server_lcores = 1; /* --server-lcores: lcores the peers are split among */
	bool idle_yield = false;    /* --idle-yield: server lcores yield the CPU when idle */
	bool co_poll = false;       /* --co-poll: client lcores poll the servers themselves */
	/* --allocator: the active side's QPNs from ours (the pool, mlx5_qpn_reserved_alloc) or
	 * rdma-core's algorithm (mlx5_qpn_dev_fw_qpn_alloc), or "both" back to back
	 * (compare.cpp). */
	std::string allocator = "ours";
	std::vector<unsigned> client_lcores; /* --client-lcores=N[,N...]: one run per count */
	/* --allocator-sweep=US[,US...]: ours beside rdma-core's at each firmware command latency
	 * (us), both reuse orders, both timewaits (compare_sweep.cpp). */
	std::vector<unsigned> sweep_cmd_us;
	bool role_client() const { return role != "server"; }
	bool role_server() const { return role != "client"; }
};

extern int qpn_app_logtype;
#define APP_LOG(level, fmt, ...)                                                                   \
	rte_log(RTE_LOG_##level, qpn_app_logtype, "qpn-testpmd: " fmt "\n", ##__VA_ARGS__)

/* Step histograms of a connection cycle, in TSC cycles. */
enum step_id {
	STEP_ALLOC = 0, /* reserved QPN alloc call */
	STEP_REQ_REP,   /* active: connect (REQ) -> ESTABLISHED (REP received, RTU sent) */
	STEP_RTU,       /* passive: accept (REP sent) -> ESTABLISHED (RTU received) */
	STEP_SEND_CQE,  /* first send posted -> last send completion */
	STEP_DREQ_DREP, /* active: disconnect (DREQ) -> DISCONNECTED (DREP received) */
	STEP_RELEASE,   /* reserved QPN dealloc call */
	STEP_CYCLE,     /* whole cycle: alloc start -> release end */
	STEP_NB,
};
extern const char *const step_names[STEP_NB];

constexpr unsigned kSyndSlots = 0x40;
/* The slot of a CQE syndrome in lcore_stats::conn_failed. */
inline unsigned
synd_slot(uint8_t syndrome)
{
	return syndrome < kSyndSlots ? syndrome : 0;
}

/* What one lcore (or the server side) did. Counters are relaxed atomics written by the owner and
 * read by the main lcore at any time; histograms are read only when the owner is done. */
struct lcore_stats {
	std::atomic<uint64_t> ops{0}; /* completed connect+disconnect cycles (alloc: pairs) */
	std::atomic<uint64_t> allocs{0};
	std::atomic<uint64_t> frees{0};
	std::atomic<uint64_t> eagain{0}; /* alloc found every free QPN in quarantine */
	std::atomic<uint64_t> enospc{0};
	std::atomic<uint64_t> errors{0}; /* unexpected errors (each logged) */
	std::atomic<uint64_t> rej[MLX5_QPN_CM_REJ_REASON_SLOTS]{};
	std::atomic<uint64_t> stale_rejects{0}; /* REJ STALE_CONN seen by this side */
	std::atomic<uint64_t> peer_disc{0};     /* connections closed by the peer */
	std::atomic<uint64_t> cm_busy{0};       /* connect refused for lack of CM slots (retried) */
	std::atomic<uint64_t> sends{0};
	std::atomic<uint64_t> cqes{0};
	std::atomic<uint64_t> cqe_errors{0};  /* error CQEs, flushed ones not included */
	std::atomic<uint64_t> cqe_flushed{0}; /* CQEs flushed by a DCI in error */
	std::atomic<uint64_t> dci_recoveries{0};
	std::atomic<uint64_t> dci_replaced{0}; /* DCIs whose recovery was refused, made anew */
	/* Connections failed by a DC send error, per CQE syndrome (kSyndSlots: the PRM's are all
	 * below 0x40; slot 0 holds any other). */
	std::atomic<uint64_t> conn_failed[kSyndSlots]{};
	std::atomic<uint64_t> recvs{0}; /* server: SENDs received by the DCTs */
	latency_hist hist[STEP_NB];
	uint64_t pool_cycles = 0;  /* sum of alloc + release cycles */
	uint64_t cycle_cycles = 0; /* sum of whole-cycle cycles */
	std::atomic<bool> done{false};

	void clear();
};

/* Most server lcores (--server-lcores): each serves at least one of the --peers (max 32). */
constexpr unsigned kMaxServerLcores = 16;

/* Per-lcore role. */
struct lcore_role {
	bool client = false;
	bool server = false;
	unsigned dev = 0;        /* client: index of its device */
	unsigned client_idx = 0; /* client: 0.. */
	unsigned server_idx = 0; /* server: 0 .. nb_servers - 1 */
};

struct qpn_engine;

struct run_ctx {
	run_config *cfg;
	std::vector<struct mlx5_qpn_dev *> devs;
	struct mlx5_qpn_dev *dev; /* devs[0] */
	std::atomic<bool> stop{false};
	std::atomic<unsigned> clients_running{0};
	uint64_t tsc_hz = 0;
	lcore_role role[RTE_MAX_LCORE];
	lcore_stats lc[RTE_MAX_LCORE];
	/* The passive side, per server (whoever polls it): each written by its server lcore only. */
	lcore_stats srv[kMaxServerLcores];
	unsigned nb_clients = 0;
	unsigned nb_servers = 1;                   /* server lcores of this run (>= 1) */
	int server_lcore[kMaxServerLcores] = {-1}; /* each server's dedicated lcore, -1 co-polled */
	double run_secs = 0;                       /* accumulated over start/stop */
	/* The sides this process runs (run_start: --role, or the engine's side alone when the
	 * connection implementation cannot hold the peer in this process). */
	bool side_active = true;
	bool side_passive = true;
	const qpn_conn_ops *conn = nullptr; /* connections of the last CM run (conn.h) */
	unsigned nb_peers = 0;              /* peers the active side connects to */
	bool data_path = false;             /* DC data path available */
	/* This run's active side allocates with rdma-core's algorithm (--allocator). */
	bool alloc_fw = false;
	unsigned client_limit = 0;  /* client lcores of this run (0: every one the layout gives) */
	std::string data_path_note; /* why not */
	/* The cap the devices' QPNs put on conns/s (run.cpp, qpn_cap_check; 0: none computed):
	 * capacity over the QPN-seconds a connection holds, and what the lcores could do. */
	double qpn_cap = 0;
	double qpn_hold_s = 0;
	double lcores_rate = 0;
};

/*
 * An engine: testpmd's struct fwd_engine, for QPNs. A CM engine has the body of its side: the
 * active side's lcore loop, or the passive side's poll round; the other side of a one-process
 * run is its `peer`'s body. Hooks not needed are null.
 */
struct qpn_engine {
	const char *name;
	const char *help;
	/* Whether the engine uses the CM (and so needs roles, a connection implementation). */
	bool uses_cm;
	/* Which side's steps the summary reports: false the active side (or the pool), true the
	 * passive side. */
	bool passive_side;
	/* Before launch, after the connections are set up; 0 or negative errno (the runner says
	 * which engine failed). */
	int (*begin)(run_ctx *ctx);
	/* After every lcore returned, before the connections are torn down. */
	void (*end)(run_ctx *ctx);
	/* Active side (and alloc): the loop of one lcore; returns when ctx->stop is set (or its
	 * quota is done) and its work is drained. A lcore that also serves the passive side calls
	 * run_serve() once per round. */
	int (*lcore_run)(run_ctx *ctx, unsigned lcore);
	/* Passive side: one round over the passive nodes of server SERVER (REQs, RTUs, DREQs,
	 * receives); called by that server's lcore only. Returns the events handled. */
	unsigned (*passive_poll)(run_ctx *ctx, unsigned server);
	/* The engine whose body plays the other side in one process. */
	const qpn_engine *peer;
};

extern const qpn_engine engine_alloc;
extern const qpn_engine engine_dci_reconnect;
extern const qpn_engine engine_dct_accept;
extern const qpn_engine engine_churn;

const qpn_engine *engine_find(const std::string &name);
extern const qpn_engine *const engine_list[4];

/* Events one poll of the connections hands over at most. */
constexpr unsigned kPollBurst = 64;

/* ---- stats.cpp ---- */
/* A progress line: T seconds in, the rate over the last PERIOD seconds (since *LAST_OPS). */
void stats_progress(run_ctx *ctx, double t, uint64_t *last_ops, double period);
void stats_summary(FILE *f, run_ctx *ctx, const qpn_engine *e);
int stats_json(const char *path, run_ctx *ctx, const qpn_engine *e);
void stats_lcores(FILE *f, run_ctx *ctx);
void stats_clear(run_ctx *ctx);
void show_device(FILE *f, run_ctx *ctx);
void show_pool(FILE *f, run_ctx *ctx);
/* Count a REJ of REASON received by this side. */
void count_rej(lcore_stats &st, uint16_t reason);
/* Count a failed reserved-QPN alloc: -EAGAIN and -ENOSPC are waits; true for anything else,
 * an error (counted as such). */
bool count_alloc_failure(lcore_stats &st, int rc);

/* ---- options*.cpp: the command line (options.h: which file holds what) ---- */
/* Parse the options after the EAL's into CFG: 0, 1 (--help printed), or negative errno (one
 * line printed). */
int parse_args(int argc, char **argv, run_config *cfg);
/* CM timewait of this configuration, in ms. */
uint32_t cm_timewait_ms(const run_config &cfg);
/* The longest quarantine, in us: the driver's bound on its devarg quarantine_us (one hour). */
constexpr uint64_t kMaxQuarantineUs = 3600ull * 1000 * 1000;
/* Whether checked devargs hold the key KEY (exact key, not a substring); the devargs without it. */
bool devargs_has_key(const std::string &da, const char *key);
std::string devargs_without_key(const std::string &da, const char *key);
/* --vdev=mlx5_qpn_...: the EAL's devices (their devargs in cfg->devargs) instead of --qpn-dev's,
 * never both; 0, or -EINVAL / -ENODEV with one line (eal_devs.h). */
int devargs_from_eal(run_config *cfg);
/* The devargs a device is probed with: DA plus the quarantine unless DA sets it. */
std::string devargs_with_quarantine(const std::string &da, int64_t quarantine_us,
				    const run_config &cfg);

/* ---- run.cpp: the runner, shared by batch mode (main.cpp) and the prompt (cli.cpp) ---- */
/* Set the engine up (connections, roles, begin) and launch it on the workers. 0 or negative
 * errno (line printed). */
int run_start(run_ctx *ctx, const qpn_engine *e);
/* Stop: set stop, wait for every worker, end, tear the connections down. */
void run_stop(run_ctx *ctx);
bool run_active();
/* Batch mode: start, progress lines until --duration or the work is done, stop, summary and
 * JSON. The exit status: 0, or 1 on a failed start or errors during the run. */
int run_batch(run_ctx *ctx, const qpn_engine *e);
/* The end of a run: summary, JSON (--json); 0, or 1 on errors during the run or no JSON. */
int run_report(run_ctx *ctx, const qpn_engine *e);
/* For a lcore that also serves the passive side (a co-polling client): one round of it. */
void run_serve(run_ctx *ctx, unsigned lcore);
/* Probe every --qpn-dev with QUARANTINE_US (-1: the CM timewait); close them. */
int devices_probe(run_ctx *ctx, int64_t quarantine_us);
void devices_close(run_ctx *ctx);
/* Re-probe every device with a new quarantine (stopped only); the statistics start again (what
 * the old devices counted is not this set-up's). On failure no device is left (`start` refuses). */
int devices_reprobe(run_ctx *ctx, int64_t quarantine_us);
/* One line for each device whose quarantine is shorter than the CM timewait in force: the rule
 * the pool exists for (a QPN back before the peer's timewait ends is rejected as stale). */
void quarantine_warn(run_ctx *ctx);

/* ---- conn_rdmacm.cpp ---- */
/* Whether s is IPv4:PORT (PORT 1..65535), as --hw-peer needs it; *why says what is wrong. */
bool hw_peer_valid(const std::string &s, std::string *why);
/* Whether s is a dotted IPv4 address, as --hw-bind needs it. */
bool hw_bind_valid(const std::string &s, std::string *why);

/* ---- compare.cpp: --allocator and --client-lcores ---- */
/* Parse their values into CFG: 0, or -EINVAL after one line. */
int compare_parse_allocator(run_config *cfg, const char *v);
int compare_parse_client_lcores(run_config *cfg, const char *v);
int compare_parse_sweep(run_config *cfg, const char *v);
/* After every option: 0, or -EINVAL (one line) where the options cannot go together. */
int compare_check(const run_config &cfg);
/* Whether this launch runs several measured runs (--allocator=both, --client-lcores,
 * --allocator-sweep). */
bool compare_wanted(const run_config &cfg);
/* Batch mode: every allocator at every client-lcore count, each on fresh devices; the table
 * side by side and the JSON. Exit status as run_batch. */
int run_compare(run_ctx *ctx, const qpn_engine *e);
/* run.cpp: one measured run (start, --duration or the work done, stop): 0, or 1 on a failed
 * start. STARTED (if any) runs once the workers are launched, STOPPING before they are told to
 * stop. */
int run_for(run_ctx *ctx, const qpn_engine *e, void (*started)(run_ctx *) = nullptr,
	    void (*stopping)(run_ctx *) = nullptr);
/* run.cpp: the client lcores the lcore layout gives engine E, before --client-lcores limits
 * them (stopped only). */
unsigned run_clients_available(run_ctx *ctx, const qpn_engine *e);

/* ---- cli.cpp ---- */
int cli_run(run_ctx *ctx, const qpn_engine **engine);

/* ---- testpmd's habits: settings by name, the run's clock, the monitor, signals ---- */
/* options_params.cpp: set the run parameter NAME (as its option, without "--") to VALUE,
 * checked as the option is: 0, or -EINVAL with *why (the one line to print) or -ENOENT for an
 * unknown name. */
int config_set(run_config *cfg, const char *name, const char *value, std::string *why);
/* The names config_set takes, '#'-separated (a cmdline token's choice list). */
extern const char config_names[];
/* `show config`: every run parameter, as the options would give it. */
void config_show(FILE *f, const run_config &cfg);
/* What `show config` and `set duration` add to --duration at the prompt, where a run lasts
 * until `stop` (testpmd's way); "" in batch mode. */
const char *duration_note(const run_config &cfg);
/* run.cpp: seconds run since the last `clear stats` (or re-probe), over every start, the
 * running one included (the real clock while running): the summary's duration, what its rates
 * divide by. */
double run_elapsed(run_ctx *ctx);
/* run.cpp: seconds since the running start (0 when stopped): each start's own clock. */
double run_start_elapsed(run_ctx *ctx);
/* run.cpp: the engine of the current (or last) run. */
const qpn_engine *run_engine();
/* stats.cpp: connections of the measured side so far (relaxed reads; any thread). */
uint64_t stats_conns(run_ctx *ctx, const qpn_engine *e);
/* stats.cpp: `show stats` while running: this start's clock and the total, rates since the
 * last show of this start (or the start). */
void stats_show_running(FILE *f, run_ctx *ctx, const qpn_engine *e);
/* stats.cpp: a start: the next `show stats` counts its rates from here. */
void stats_show_restart(run_ctx *ctx, const qpn_engine *e);
/* monitor.cpp: the sampler thread of a run (timeline once a second, progress lines every
 * --stats-period in batch mode); started by run_start, stopped by run_stop. */
void monitor_start(run_ctx *ctx, const qpn_engine *e, bool progress);
void monitor_stop();
/* monitor.cpp: forget the timeline (clear stats). */
void monitor_clear();
/* monitor.cpp: SIGINT/SIGTERM stop the run (a second one exits at once); the signal caught, or
 * 0. */
void signals_install(run_ctx *ctx);
int signal_caught();
/* Before rte_eal_init(): block them, so that every thread the EAL starts has them blocked; after
 * it, unblock them in the main thread (theirs alone). */
void signals_block_thread();
void signals_unblock_main();
/* monitor.cpp: /qpn_testpmd/stats and /qpn_testpmd/config in DPDK telemetry. */
void telemetry_init(run_ctx *ctx);
/* monitor.cpp: keep the summary's step histograms for telemetry (after a stop). */
void telemetry_keep_steps(const latency_hist *hist, uint64_t hz);

#endif
