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

#include <mlx5_qpn/mlx5_qpn.h>

#include "opt_num.h"
#include "testpmd.h"

uint32_t
cm_timewait_ms(const run_config &cfg)
{
	return mlx5_qpn_cm_timewait_ms(cfg.plt, cfg.ack_delay);
}

namespace {

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
	fprintf(f, "  %-14s %s\n", "allocator", cfg.allocator.c_str());
	std::string counts;
	for (unsigned n : cfg.client_lcores) {
		if (!counts.empty())
			counts += ',';
		counts += std::to_string(n);
	}
	fprintf(f, "  %-14s %s\n", "client-lcores",
		counts.empty() ? "(every client lcore of the layout)" : counts.c_str());
	fprintf(f, "  %-14s %s\n", "destroy-sim", cfg.destroy_sim ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "hw-peer", cfg.hw_peer.empty() ? "(none)" : cfg.hw_peer.c_str());
	fprintf(f, "  %-14s %u\n", "hw-port", cfg.hw_port);
	fprintf(f, "  %-14s %s\n", "hw-bind",
		cfg.hw_bind.empty() ? "(the device's netdev)" : cfg.hw_bind.c_str());
}

namespace {

/* What the options set, and what the checks after them need to know. */
struct parse_state {
	run_config *cfg;
	bool engine_set;
};

struct opt_row;
/* @return 0; -EINVAL after one line naming the option and the value; 1: exit at once (help). */
using opt_setter = int (*)(parse_state &st, const opt_row &o, const char *v);

/*
 * One option, as testpmd's lgopts and usage are one list: its name, its argument (nullptr: a
 * flag), the range of a number the row checks itself (the run parameters' ranges are in
 * num_params, shared with the prompt), what sets it, the flag it turns on, its help.
 */
struct opt_row {
	const char *name;
	char short_name; /* 0: long only */
	const char *arg; /* "N", "SEC", ...; nullptr: no argument */
	uint64_t lo, hi;
	opt_setter set;
	bool run_config::*flag;
	const char *help; /* '\n' continues in the help column */
};

int
set_flag(parse_state &st, const opt_row &o, const char *)
{
	st.cfg->*o.flag = true;
	return 0;
}

/* A run parameter given as an option: config_set, and its one line naming the option. */
int
set_param(parse_state &st, const opt_row &o, const char *v)
{
	std::string why;
	if (config_set(st.cfg, o.name, v, &why) == 0)
		return 0;
	fprintf(stderr, "%s\n",
		opt_num_error("qpn-testpmd", ("--" + std::string(o.name)).c_str(), v, why).c_str());
	return -EINVAL;
}

int
set_dev(parse_state &st, const opt_row &, const char *v)
{
	if (!check_devargs(v))
		return -EINVAL;
	st.cfg->devargs.push_back(v);
	return 0;
}

int
set_engine(parse_state &st, const opt_row &, const char *v)
{
	st.cfg->engine = v;
	st.engine_set = true;
	return 0;
}

int
set_json(parse_state &st, const opt_row &, const char *v)
{
	st.cfg->json = v;
	return 0;
}

int
set_quarantine(parse_state &st, const opt_row &o, const char *v)
{
	return opt_uint("--quarantine-us", v, o.lo, o.hi, &st.cfg->quarantine_us) ? 0 : -EINVAL;
}

int
set_hw_port(parse_state &st, const opt_row &o, const char *v)
{
	return opt_uint("--hw-port", v, o.lo, o.hi, &st.cfg->hw_port) ? 0 : -EINVAL;
}

int
set_hw_peer(parse_state &st, const opt_row &, const char *v)
{
	return opt_addr("--hw-peer", v, hw_peer_valid, &st.cfg->hw_peer) ? 0 : -EINVAL;
}

int
set_hw_bind(parse_state &st, const opt_row &, const char *v)
{
	return opt_addr("--hw-bind", v, hw_bind_valid, &st.cfg->hw_bind) ? 0 : -EINVAL;
}

int
set_policy(parse_state &st, const opt_row &, const char *v)
{
	if (strcmp(v, "live") == 0) {
		st.cfg->policy = MLX5_QPN_CM_POLICY_LIVE;
	} else if (strcmp(v, "strict") == 0) {
		st.cfg->policy = MLX5_QPN_CM_POLICY_STRICT;
	} else {
		fprintf(stderr,
			"qpn-testpmd: bad value for --cm-policy: \"%s\" (expected live or "
			"strict)\n",
			v);
		return -EINVAL;
	}
	return 0;
}

int
set_role(parse_state &st, const opt_row &, const char *v)
{
	if (strcmp(v, "both") != 0 && strcmp(v, "client") != 0 && strcmp(v, "server") != 0) {
		fprintf(stderr,
			"qpn-testpmd: bad value for --role: \"%s\" (expected both, client or "
			"server)\n",
			v);
		return -EINVAL;
	}
	st.cfg->role = v;
	return 0;
}

int
set_fabric(parse_state &st, const opt_row &, const char *v)
{
	if (v[0] == '\0' || strlen(v) > MLX5_QPN_CM_SHM_NAMESIZE ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
		    strlen(v)) {
		fprintf(stderr,
			"qpn-testpmd: bad value for --fabric: \"%s\" (1..%d characters from "
			"[A-Za-z0-9_.-])\n",
			v, MLX5_QPN_CM_SHM_NAMESIZE);
		return -EINVAL;
	}
	st.cfg->fabric = v;
	return 0;
}

/* --allocator, --client-lcores: compare.cpp's. */
int
set_allocator(parse_state &st, const opt_row &, const char *v)
{
	return compare_parse_allocator(st.cfg, v);
}

int
set_client_lcores(parse_state &st, const opt_row &, const char *v)
{
	return compare_parse_client_lcores(st.cfg, v);
}

int set_help(parse_state &st, const opt_row &o, const char *v);

/* clang-format off */
const opt_row opt_table[] = {
	{"qpn-dev", 0, "DEVARGS", 0, 0, set_dev, nullptr,
	 "device (repeatable; default " QPN_TESTPMD_DEFAULT_DEV "),\n"
	 "e.g. sim0,max_qpns=4096\n"
	 "or ib=mlx5_0 (hardware; see doc/guides/app.md)"},
	{"engine", 0, "NAME", 0, 0, set_engine, nullptr, "engine (default dci-reconnect):"},
	{"duration", 0, "SEC", 0, 0, set_param, nullptr, "run time (default 3)"},
	{"connections", 0, "N", 0, 0, set_param, nullptr,
	 "stop after N connections in total (alloc: per lcore)"},
	{"peers", 0, "N", 0, 0, set_param, nullptr,
	 "DC targets, each a CM node of its own (default 1, max 32)"},
	{"server-lcores", 0, "N", 0, 0, set_param, nullptr,
	 "lcores the peers are split among on the passive side\n"
	 "(default 1, max 16; at most --peers, one client lcore left)"},
	{"idle-yield", 0, nullptr, 0, 0, set_flag, &run_config::idle_yield,
	 "server lcores yield the CPU after an idle round (more\n"
	 "lcores than CPUs; default: spin)"},
	{"co-poll", 0, nullptr, 0, 0, set_flag, &run_config::co_poll,
	 "no server lcore: the first --server-lcores client lcores\n"
	 "each poll one server in their own loop"},
	{"allocator", 0, "A", 0, 0, set_allocator, nullptr,
	 "ours | rdma-core | both: the active side's QPNs from the\n"
	 "pool (default ours) or rdma-core's algorithm on the device;\n"
	 "both: one run each, side by side (batch mode)"},
	{"client-lcores", 0, "N,...", 0, 0, set_client_lcores, nullptr,
	 "one run per count of client lcores, e.g. 1,2,4 (batch mode;\n"
	 "default: one run on every client lcore)"},
	{"msgs-per-conn", 0, "N", 0, 0, set_param, nullptr,
	 "SENDs per connection (default 4; 0: none)"},
	{"inflight", 0, "N", 0, 0, set_param, nullptr,
	 "connections open at once per client lcore (default 4)"},
	{"quarantine-us", 0, "N", 0, kMaxQuarantineUs, set_quarantine, nullptr,
	 "quarantine of released QPNs (default: the CM timewait)"},
	{"cm-policy", 0, "P", 0, 0, set_policy, nullptr,
	 "live | strict (default strict: pairs held through timewait)"},
	{"cm-plt", 0, "N", 0, 0, set_param, nullptr, "CM packet life time exponent (default 10)"},
	{"cm-ack-delay", 0, "N", 0, 0, set_param, nullptr,
	 "CA ACK delay exponent (default 10); with the default\n"
	 "both give a timewait of 16 ms"},
	{"force-shared-qpn", 0, nullptr, 0, 0, set_flag, &run_config::force_shared_qpn,
	 "negative control: two connections share one QPN"},
	{"seed", 0, "N", 0, 0, set_param, nullptr, "random seed of churn (default 1)"},
	{"burst", 0, "N", 0, 0, set_param, nullptr, "alloc engine: QPNs per burst (default 8)"},
	{"hold", 0, "N", 0, 0, set_param, nullptr, "alloc engine: QPNs held per lcore (default 64)"},
	{"json", 0, "FILE", 0, 0, set_json, nullptr, "write the summary as JSON"},
	{"stats-period", 0, "S", 0, 0, set_param, nullptr,
	 "a progress line every S seconds (default 1; 0: none)"},
	{"destroy-sim", 0, nullptr, 0, 0, set_flag, &run_config::destroy_sim,
	 "remove the emulated devices' shared memory at exit"},
	{"hw-peer", 0, "IP:PORT", 0, 0, set_hw_peer, nullptr,
	 "hardware mode, active side: the passive qpn-testpmd"},
	{"hw-port", 0, "PORT", 1, 65535, set_hw_port, nullptr,
	 "hardware mode, passive side: port to listen on (18515)"},
	{"hw-bind", 0, "IP", 0, 0, set_hw_bind, nullptr,
	 "hardware mode: the probed device's IPv4 address to listen\n"
	 "on / connect from (default: the first IPv4 address of the\n"
	 "device's netdev)"},
	{"role", 0, "R", 0, 0, set_role, nullptr,
	 "both | client | server (default both: one process); client\n"
	 "and server are two processes sharing --fabric and the device"},
	{"fabric", 0, "NAME", 0, 0, set_fabric, nullptr,
	 "CM over the shared-memory fabric NAME (default: in-process)"},
	{"interactive", 'i', nullptr, 0, 0, set_flag, &run_config::interactive,
	 "interactive prompt"},
	{"help", 'h', nullptr, 0, 0, set_help, nullptr, "this text"},
};
/* clang-format on */

constexpr size_t kOpts = sizeof(opt_table) / sizeof(opt_table[0]);

/* The usage text, from the table: the option and its argument in one column, the help in the
 * next (a help's '\n' continues there), the engines after --engine's line. */
void
usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n", prog);
	for (const opt_row &o : opt_table) {
		char left[40];
		int at = 0;
		if (o.short_name != 0)
			at = snprintf(left, sizeof(left), "-%c, ", o.short_name);
		snprintf(left + at, sizeof(left) - at, "--%s%s%s", o.name,
			 o.arg != nullptr ? "=" : "", o.arg != nullptr ? o.arg : "");
		printf("  %-22s", left);
		for (const char *h = o.help; *h != '\0'; h++)
			if (*h == '\n')
				printf("\n  %-22s", "");
			else
				putchar(*h);
		if (o.set == set_engine)
			for (const qpn_engine *e : engine_list)
				printf(" %s", e->name);
		putchar('\n');
	}
	for (const qpn_engine *e : engine_list)
		printf("engine %s: %s\n", e->name, e->help);
}

int
set_help(parse_state &, const opt_row &, const char *)
{
	return 1;
}

/* Two processes (--role=client|server): the CM fabric must be the shared one and both sides
 * must open the same (one) device; the server runs the passive side whatever the engine. */
int
check_role(parse_state &st)
{
	run_config *cfg = st.cfg;
	if (cfg->role == "both")
		return 0;
	if (cfg->fabric.empty()) {
		fprintf(stderr,
			"qpn-testpmd: --role=%s needs --fabric=NAME (the same in both processes)\n",
			cfg->role.c_str());
		return -EINVAL;
	}
	if (cfg->devargs.size() != 1) {
		fprintf(stderr, "qpn-testpmd: --role=%s takes exactly one --qpn-dev\n",
			cfg->role.c_str());
		return -EINVAL;
	}
	if (cfg->role == "server") {
		if (st.engine_set && cfg->engine != "dct-accept" &&
		    cfg->engine != "dci-reconnect") {
			fprintf(stderr,
				"qpn-testpmd: --role=server runs the passive side: --engine=%s does "
				"not apply\n",
				cfg->engine.c_str());
			return -EINVAL;
		}
		cfg->engine = "dct-accept";
	} else if (cfg->engine != "dci-reconnect" && cfg->engine != "churn") {
		fprintf(stderr, "qpn-testpmd: --role=client runs the active side: use "
				"--engine=dci-reconnect or churn\n");
		return -EINVAL;
	}
	return 0;
}

/* The quarantine is given once; by default it is the CM timewait, which the CM options can make
 * longer than the driver takes: say so in the options' terms, not as a devarg the user never
 * typed. */
int
check_quarantine(const run_config *cfg)
{
	for (auto &d : cfg->devargs)
		if (devargs_has_key(d, "quarantine_us") && cfg->quarantine_us >= 0) {
			fprintf(stderr, "qpn-testpmd: give the quarantine once: --quarantine-us or "
					"the devarg quarantine_us, not both\n");
			return -EINVAL;
		}
	if (cfg->quarantine_us >= 0 || uint64_t(cm_timewait_ms(*cfg)) * 1000u <= kMaxQuarantineUs)
		return 0;
	for (auto &d : cfg->devargs)
		if (!devargs_has_key(d, "quarantine_us")) {
			fprintf(stderr,
				"qpn-testpmd: --cm-plt=%u --cm-ack-delay=%u give a CM timewait of "
				"%u ms, longer than the longest quarantine (%" PRIu64 " ms) that "
				"the default --quarantine-us would take from it: lower them, or "
				"give --quarantine-us\n",
				cfg->plt, cfg->ack_delay, cm_timewait_ms(*cfg),
				kMaxQuarantineUs / 1000);
			return -EINVAL;
		}
	return 0;
}

/* getopt_long's view of the table: an option's code is its row's index + 256; the short
 * options map to their rows too. */
void
getopt_tables(struct option *longs, char *shorts)
{
	size_t n = 0;
	*shorts++ = ':';
	for (size_t i = 0; i < kOpts; i++) {
		const opt_row &o = opt_table[i];
		longs[i] = {o.name, o.arg != nullptr ? required_argument : no_argument, nullptr,
			    int(256 + i)};
		if (o.short_name != 0)
			shorts[n++] = o.short_name;
	}
	longs[kOpts] = {nullptr, 0, nullptr, 0};
	shorts[n] = '\0';
}

const opt_row *
row_of(int c)
{
	if (c >= 256 && size_t(c - 256) < kOpts)
		return &opt_table[c - 256];
	for (const opt_row &o : opt_table)
		if (o.short_name != 0 && o.short_name == c)
			return &o;
	return nullptr;
}

} /* namespace */

int
parse_args(int argc, char **argv, run_config *cfg)
{
	struct option longs[kOpts + 1];
	char shorts[kOpts + 2];
	getopt_tables(longs, shorts);
	parse_state st = {cfg, false};
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, longs, nullptr)) != -1) {
		const opt_row *o = row_of(c);
		if (c == ':') {
			fprintf(stderr, "qpn-testpmd: option \"%s\" needs a value (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
		if (o == nullptr) {
			fprintf(stderr, "qpn-testpmd: unknown option \"%s\" (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
		int rc = o->set(st, *o, optarg);
		if (rc == 1)
			usage(argv[0]);
		if (rc != 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "qpn-testpmd: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (cfg->devargs.empty())
		cfg->devargs.push_back(QPN_TESTPMD_DEFAULT_DEV);
	int rc = check_role(st);
	if (rc == 0)
		rc = compare_check(*cfg);
	return rc != 0 ? rc : check_quarantine(cfg);
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
