/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's command line: the options after the EAL's, their usage text, and the checks
 * that refuse a bad value with one line naming the option and the value as typed (exit 2).
 * Also the devargs helpers the runner and the prompt use to set the quarantine.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <string>

#include <rte_log.h>

#include "mlx5_qpn.h"
#include "opt_num.h"
#include "testpmd.h"

uint32_t
cm_timewait_ms(const run_config &cfg)
{
	return mlx5_qpn_cm_timewait_ms(cfg.plt, cfg.ack_delay);
}

namespace {

void
usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n"
	       "  --qpn-dev=DEVARGS     device (repeatable; default sim0), e.g. sim0,max_qpns=4096\n"
	       "                        or ib=mlx5_0 (hardware; see doc/guides/app.md)\n"
	       "  --engine=NAME         engine (default dci-reconnect):",
	       prog);
	for (const qpn_engine *e : engine_list)
		printf(" %s", e->name);
	printf("\n  --duration=SEC        run time (default 3)\n"
	       "  --connections=N       stop after N connections in total (alloc: per lcore)\n"
	       "  --peers=N             DC targets, each a CM node of its own (default 1, max 32)\n"
	       "  --server-lcores=N     lcores the peers are split among on the passive side\n"
	       "                        (default 1, max 16; at most --peers, one client lcore left)\n"
	       "  --idle-yield          server lcores yield the CPU after an idle round (more\n"
	       "                        lcores than CPUs; default: spin)\n"
	       "  --co-poll             no server lcore: the first --server-lcores client lcores\n"
	       "                        each poll one server in their own loop\n"
	       "  --msgs-per-conn=N     SENDs per connection (default 4; 0: none)\n"
	       "  --inflight=N          connections open at once per client lcore (default 4)\n"
	       "  --quarantine-us=N     quarantine of released QPNs (default: the CM timewait)\n"
	       "  --cm-policy=P         live | strict (default strict: pairs held through timewait)\n"
	       "  --cm-plt=N            CM packet life time exponent (default 10)\n"
	       "  --cm-ack-delay=N      CA ACK delay exponent (default 10); with the default\n"
	       "                        both give a timewait of 16 ms\n"
	       "  --force-shared-qpn    negative control: two connections share one QPN\n"
	       "  --seed=N              random seed of churn (default 1)\n"
	       "  --burst=N, --hold=N   alloc engine: QPNs per burst (8), QPNs held per lcore (64)\n"
	       "  --json=FILE           write the summary as JSON\n"
	       "  --stats-period=S      a progress line every S seconds (default 1; 0: none)\n"
	       "  --destroy-sim         remove the emulated devices' shared memory at exit\n"
	       "  --hw-peer=IP:PORT     hardware mode, active side: the passive qpn-testpmd\n"
	       "  --hw-port=PORT        hardware mode, passive side: port to listen on (18515)\n"
	       "  --hw-bind=IP          hardware mode: the probed device's IPv4 address to listen\n"
	       "                        on / connect from (default: the first IPv4 address of the\n"
	       "                        device's netdev)\n"
	       "  --role=R              both | client | server (default both: one process); client\n"
	       "                        and server are two processes sharing --fabric and the device\n"
	       "  --fabric=NAME         CM over the shared-memory fabric NAME (default: in-process)\n"
	       "  -i, --interactive     interactive prompt\n"
	       "  -h, --help            this text\n");
	for (const qpn_engine *e : engine_list)
		printf("engine %s: %s\n", e->name, e->help);
}

/* Numeric options: app/common/opt_num.h, one line naming the option and the value as typed. */
bool
opt_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	std::string why;
	if (opt_num_u64(v, lo, hi, out, &why))
		return true;
	fprintf(stderr, "%s\n", opt_num_error("qpn-testpmd", opt, v, why).c_str());
	return false;
}

/* Address options (--hw-peer, --hw-bind): VALID's reason in the same one line. */
bool
opt_addr(const char *opt, const char *v, bool (*valid)(const std::string &, std::string *),
	 std::string *out)
{
	std::string why;
	if (!valid(v, &why)) {
		fprintf(stderr, "%s\n", opt_num_error("qpn-testpmd", opt, v, why).c_str());
		return false;
	}
	*out = v;
	return true;
}

template <typename T>
bool
opt_uint(const char *opt, const char *v, uint64_t lo, uint64_t hi, T *out)
{
	uint64_t x;
	if (!opt_u64(opt, v, lo, hi, &x))
		return false;
	*out = static_cast<T>(x);
	return true;
}

/*
 * A --qpn-dev value is checked as typed, before anything is added to it, so that a bad one is
 * reported as the user wrote it and under the option's name (the driver's reason, without its
 * prefix, in the same line). Nothing is probed yet, so nothing is left behind.
 */
bool
check_devargs(const char *v)
{
	char why[256];
	if (mlx5_qpn_devargs_check(v, why, sizeof(why)) == 0)
		return true;
	fprintf(stderr, "%s\n",
		opt_num_error("qpn-testpmd", "--qpn-dev", v,
			      why[0] != '\0' ? why : "refused by the driver")
			.c_str());
	return false;
}

enum {
	O_DEV = 256,
	O_ENGINE,
	O_DURATION,
	O_CONNS,
	O_BURST,
	O_HOLD,
	O_JSON,
	O_PEERS,
	O_MSGS,
	O_INFLIGHT,
	O_QUAR,
	O_POLICY,
	O_PLT,
	O_ACK,
	O_SHARED,
	O_SEED,
	O_DESTROY,
	O_HWPEER,
	O_HWPORT,
	O_HWBIND,
	O_ROLE,
	O_FABRIC,
	O_STATS,
	O_SERVERS,
	O_YIELD,
	O_COPOLL,
};

/* The run parameters that a number sets, by their option's name: the command line and the
 * prompt's `set NAME VALUE` check them here, alike. */
struct num_param {
	const char *name;
	uint64_t lo, hi; /* integers; the decimals' bounds are in config_set */
	unsigned run_config::*u;
	uint64_t run_config::*u64;
	uint8_t run_config::*u8;
	double run_config::*dec;
};

constexpr uint64_t kMaxConns = 1000000000000000ull;

const num_param num_params[] = {
	{"duration", 0, 0, nullptr, nullptr, nullptr, &run_config::duration_s},
	{"connections", 1, kMaxConns, nullptr, &run_config::connections, nullptr, nullptr},
	{"inflight", 1, 64, &run_config::inflight, nullptr, nullptr, nullptr},
	{"peers", 1, 32, &run_config::peers, nullptr, nullptr, nullptr},
	{"burst", 1, 64, &run_config::burst, nullptr, nullptr, nullptr},
	{"hold", 0, 1 << 20, &run_config::hold, nullptr, nullptr, nullptr},
	{"msgs-per-conn", 0, 64, &run_config::msgs_per_conn, nullptr, nullptr, nullptr},
	{"seed", 1, 1000000000000000000ull, nullptr, &run_config::seed, nullptr, nullptr},
	{"cm-plt", 0, 31, nullptr, nullptr, &run_config::plt, nullptr},
	{"cm-ack-delay", 0, 31, nullptr, nullptr, &run_config::ack_delay, nullptr},
	{"stats-period", 0, 0, nullptr, nullptr, nullptr, &run_config::stats_period_s},
	{"server-lcores", 1, kMaxServerLcores, &run_config::server_lcores, nullptr, nullptr,
	 nullptr},
};

} /* namespace */

const char config_names[] =
	"duration#connections#inflight#peers#burst#hold#msgs-per-conn#seed#cm-plt#cm-ack-delay#"
	"stats-period#server-lcores";

int
config_set(run_config *cfg, const char *name, const char *value, std::string *why)
{
	for (const num_param &p : num_params) {
		if (strcmp(p.name, name) != 0)
			continue;
		if (p.dec != nullptr) {
			const bool dur = p.dec == &run_config::duration_s;
			double d;
			if (!opt_num_decimal(value, dur ? 0.01 : 0, 86400, &d, why))
				return -EINVAL;
			cfg->*p.dec = d;
			return 0;
		}
		uint64_t v;
		if (!opt_num_u64(value, p.lo, p.hi, &v, why))
			return -EINVAL;
		if (p.u != nullptr)
			cfg->*p.u = static_cast<unsigned>(v);
		else if (p.u64 != nullptr)
			cfg->*p.u64 = v;
		else
			cfg->*p.u8 = static_cast<uint8_t>(v);
		return 0;
	}
	*why = "no such parameter";
	return -ENOENT;
}

void
config_show(FILE *f, const run_config &cfg)
{
	fprintf(f, "engine %s, role %s, fabric %s, devices:", cfg.engine.c_str(), cfg.role.c_str(),
		cfg.fabric.empty() ? "(in-process)" : cfg.fabric.c_str());
	for (auto &d : cfg.devargs)
		fprintf(f, " %s", d.c_str());
	fprintf(f, "\n");
	for (const num_param &p : num_params) {
		if (p.dec != nullptr)
			fprintf(f, "  %-14s %g\n", p.name, cfg.*p.dec);
		else if (p.u != nullptr)
			fprintf(f, "  %-14s %u\n", p.name, cfg.*p.u);
		else if (p.u64 != nullptr)
			fprintf(f, "  %-14s %" PRIu64 "%s\n", p.name, cfg.*p.u64,
				p.u64 == &run_config::connections && cfg.connections == 0 ?
					" (none: run for the duration)" :
					"");
		else
			fprintf(f, "  %-14s %u\n", p.name, unsigned(cfg.*p.u8));
	}
	fprintf(f, "  %-14s %s\n", "quarantine-us",
		cfg.quarantine_us < 0 ? "(the CM timewait)" :
					std::to_string(cfg.quarantine_us).c_str());
	fprintf(f, "  %-14s %s (timewait %u ms)\n", "cm-policy",
		cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live", cm_timewait_ms(cfg));
	fprintf(f, "  %-14s %s\n", "json", cfg.json.empty() ? "(none)" : cfg.json.c_str());
	fprintf(f, "  %-14s %s\n", "force-shared-qpn", cfg.force_shared_qpn ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "idle-yield", cfg.idle_yield ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "co-poll", cfg.co_poll ? "on" : "off");
}

namespace {

/* A run parameter given as an option: config_set, and its one line naming the option. */
bool
opt_param(run_config *cfg, int code, const char *v)
{
	static const std::pair<int, const char *> names[] = {
		{O_DURATION, "duration"}, {O_CONNS, "connections"},  {O_BURST, "burst"},
		{O_HOLD, "hold"},         {O_PEERS, "peers"},        {O_MSGS, "msgs-per-conn"},
		{O_INFLIGHT, "inflight"}, {O_PLT, "cm-plt"},         {O_ACK, "cm-ack-delay"},
		{O_SEED, "seed"},         {O_STATS, "stats-period"}, {O_SERVERS, "server-lcores"},
	};
	for (auto &n : names) {
		if (n.first != code)
			continue;
		std::string why;
		if (config_set(cfg, n.second, v, &why) == 0)
			return true;
		fprintf(stderr, "%s\n",
			opt_num_error("qpn-testpmd", ("--" + std::string(n.second)).c_str(), v, why)
				.c_str());
		return false;
	}
	return false;
}

} /* namespace */

int
parse_args(int argc, char **argv, run_config *cfg)
{
	static const struct option opts[] = {
		{"qpn-dev", required_argument, nullptr, O_DEV},
		{"engine", required_argument, nullptr, O_ENGINE},
		{"duration", required_argument, nullptr, O_DURATION},
		{"connections", required_argument, nullptr, O_CONNS},
		{"burst", required_argument, nullptr, O_BURST},
		{"hold", required_argument, nullptr, O_HOLD},
		{"json", required_argument, nullptr, O_JSON},
		{"peers", required_argument, nullptr, O_PEERS},
		{"msgs-per-conn", required_argument, nullptr, O_MSGS},
		{"inflight", required_argument, nullptr, O_INFLIGHT},
		{"quarantine-us", required_argument, nullptr, O_QUAR},
		{"cm-policy", required_argument, nullptr, O_POLICY},
		{"cm-plt", required_argument, nullptr, O_PLT},
		{"cm-ack-delay", required_argument, nullptr, O_ACK},
		{"force-shared-qpn", no_argument, nullptr, O_SHARED},
		{"seed", required_argument, nullptr, O_SEED},
		{"destroy-sim", no_argument, nullptr, O_DESTROY},
		{"hw-peer", required_argument, nullptr, O_HWPEER},
		{"hw-port", required_argument, nullptr, O_HWPORT},
		{"hw-bind", required_argument, nullptr, O_HWBIND},
		{"role", required_argument, nullptr, O_ROLE},
		{"fabric", required_argument, nullptr, O_FABRIC},
		{"stats-period", required_argument, nullptr, O_STATS},
		{"server-lcores", required_argument, nullptr, O_SERVERS},
		{"idle-yield", no_argument, nullptr, O_YIELD},
		{"co-poll", no_argument, nullptr, O_COPOLL},
		{"interactive", no_argument, nullptr, 'i'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	int c;
	std::string why;
	bool engine_set = false;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hi", opts, nullptr)) != -1) {
		switch (c) {
		case O_DEV:
			if (!check_devargs(optarg))
				return -EINVAL;
			cfg->devargs.push_back(optarg);
			break;
		case O_ENGINE:
			cfg->engine = optarg;
			engine_set = true;
			break;
		case O_ROLE:
			if (strcmp(optarg, "both") != 0 && strcmp(optarg, "client") != 0 &&
			    strcmp(optarg, "server") != 0) {
				fprintf(stderr,
					"qpn-testpmd: bad value for --role: \"%s\" (expected "
					"both, client or server)\n",
					optarg);
				return -EINVAL;
			}
			cfg->role = optarg;
			break;
		case O_FABRIC:
			if (optarg[0] == '\0' || strlen(optarg) > MLX5_QPN_CM_SHM_NAMESIZE ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789_.-") != strlen(optarg)) {
				fprintf(stderr,
					"qpn-testpmd: bad value for --fabric: \"%s\" (1..%d "
					"characters from [A-Za-z0-9_.-])\n",
					optarg, MLX5_QPN_CM_SHM_NAMESIZE);
				return -EINVAL;
			}
			cfg->fabric = optarg;
			break;
		case O_DURATION:
		case O_CONNS:
		case O_BURST:
		case O_HOLD:
		case O_STATS:
		case O_SERVERS:
			if (!opt_param(cfg, c, optarg))
				return -EINVAL;
			break;
		case O_JSON:
			cfg->json = optarg;
			break;
		case O_PEERS:
		case O_MSGS:
		case O_INFLIGHT:
			if (!opt_param(cfg, c, optarg))
				return -EINVAL;
			break;
		case O_QUAR:
			if (!opt_uint("--quarantine-us", optarg, 0, kMaxQuarantineUs,
				      &cfg->quarantine_us))
				return -EINVAL;
			break;
		case O_POLICY:
			if (strcmp(optarg, "live") == 0) {
				cfg->policy = MLX5_QPN_CM_POLICY_LIVE;
			} else if (strcmp(optarg, "strict") == 0) {
				cfg->policy = MLX5_QPN_CM_POLICY_STRICT;
			} else {
				fprintf(stderr,
					"qpn-testpmd: bad value for --cm-policy: \"%s\" "
					"(expected live or strict)\n",
					optarg);
				return -EINVAL;
			}
			break;
		case O_PLT:
		case O_ACK:
			if (!opt_param(cfg, c, optarg))
				return -EINVAL;
			break;
		case O_SHARED:
			cfg->force_shared_qpn = true;
			break;
		case O_YIELD:
			cfg->idle_yield = true;
			break;
		case O_COPOLL:
			cfg->co_poll = true;
			break;
		case O_SEED:
			if (!opt_param(cfg, c, optarg))
				return -EINVAL;
			break;
		case O_DESTROY:
			cfg->destroy_sim = true;
			break;
		case O_HWPEER:
			if (!opt_addr("--hw-peer", optarg, hw_peer_valid, &cfg->hw_peer))
				return -EINVAL;
			break;
		case O_HWPORT:
			if (!opt_uint("--hw-port", optarg, 1, 65535, &cfg->hw_port))
				return -EINVAL;
			break;
		case O_HWBIND:
			if (!opt_addr("--hw-bind", optarg, hw_bind_valid, &cfg->hw_bind))
				return -EINVAL;
			break;
		case 'i':
			cfg->interactive = true;
			break;
		case 'h':
			usage(argv[0]);
			return 1;
		case ':':
			fprintf(stderr, "qpn-testpmd: option \"%s\" needs a value (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		default:
			fprintf(stderr, "qpn-testpmd: unknown option \"%s\" (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qpn-testpmd: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (cfg->devargs.empty())
		cfg->devargs.push_back("sim0");
	if (cfg->role != "both") {
		/* Two processes: the CM fabric must be the shared one and both sides must open the
		 * same (one) device; the server runs the passive side whatever the engine. */
		if (cfg->fabric.empty()) {
			fprintf(stderr,
				"qpn-testpmd: --role=%s needs --fabric=NAME (the same in both "
				"processes)\n",
				cfg->role.c_str());
			return -EINVAL;
		}
		if (cfg->devargs.size() != 1) {
			fprintf(stderr, "qpn-testpmd: --role=%s takes exactly one --qpn-dev\n",
				cfg->role.c_str());
			return -EINVAL;
		}
		if (cfg->role == "server") {
			if (engine_set && cfg->engine != "dct-accept" &&
			    cfg->engine != "dci-reconnect") {
				fprintf(stderr,
					"qpn-testpmd: --role=server runs the passive side: "
					"--engine=%s does not apply\n",
					cfg->engine.c_str());
				return -EINVAL;
			}
			cfg->engine = "dct-accept";
		} else if (cfg->engine != "dci-reconnect" && cfg->engine != "churn") {
			fprintf(stderr, "qpn-testpmd: --role=client runs the active side: use "
					"--engine=dci-reconnect or churn\n");
			return -EINVAL;
		}
	}
	for (auto &d : cfg->devargs)
		if (devargs_has_key(d, "quarantine_us") && cfg->quarantine_us >= 0) {
			fprintf(stderr,
				"qpn-testpmd: give the quarantine once: --quarantine-us or the "
				"devarg quarantine_us, not both\n");
			return -EINVAL;
		}
	/* The default quarantine is the CM timewait, which the CM options can make longer than the
	 * driver takes: say so in the options' terms, not as a devarg the user never typed. */
	if (cfg->quarantine_us < 0 && uint64_t(cm_timewait_ms(*cfg)) * 1000u > kMaxQuarantineUs) {
		bool all_set = true;
		for (auto &d : cfg->devargs)
			all_set &= devargs_has_key(d, "quarantine_us");
		if (!all_set) {
			fprintf(stderr,
				"qpn-testpmd: --cm-plt=%u --cm-ack-delay=%u give a CM timewait of "
				"%u ms, longer than the longest quarantine (%" PRIu64 " ms) that "
				"the default --quarantine-us would take from it: lower them, or "
				"give --quarantine-us\n",
				cfg->plt, cfg->ack_delay, cm_timewait_ms(*cfg),
				kMaxQuarantineUs / 1000);
			return -EINVAL;
		}
	}
	return 0;
}

/* The devargs a device is probed with: the quarantine is a probe-time devarg of the driver;
 * unless the user set it in the devargs, it is --quarantine-us, by default the CM timewait.
 * The user's devargs were checked as typed (check_devargs), so appending one pair keeps them
 * valid; the quarantine itself was checked as an option (parse_args). */
std::string
devargs_with_quarantine(const std::string &da, int64_t quarantine_us, const run_config &cfg)
{
	if (devargs_has_key(da, "quarantine_us"))
		return da;
	uint64_t q = quarantine_us >= 0 ? static_cast<uint64_t>(quarantine_us) :
					  uint64_t(cm_timewait_ms(cfg)) * 1000u;
	return da + ",quarantine_us=" + std::to_string(q);
}

/* Checked devargs have no empty pair, no '[' list and no '=' but one per pair: a split on ','
 * gives exactly the driver's pairs (the first may be the bare device name). */
bool
devargs_has_key(const std::string &da, const char *key)
{
	const std::string want = std::string(key) + "=";
	size_t at = 0;
	for (;;) {
		if (da.compare(at, want.size(), want) == 0)
			return true;
		size_t comma = da.find(',', at);
		if (comma == std::string::npos)
			return false;
		at = comma + 1;
	}
}

std::string
devargs_without_key(const std::string &da, const char *key)
{
	const std::string want = std::string(key) + "=";
	std::string out;
	size_t at = 0;
	for (;;) {
		size_t comma = da.find(',', at);
		std::string pair = da.substr(at, comma == std::string::npos ? std::string::npos :
									      comma - at);
		if (pair.compare(0, want.size(), want) != 0)
			out += (out.empty() ? "" : ",") + pair;
		if (comma == std::string::npos)
			return out;
		at = comma + 1;
	}
}
