/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's options: --help, the numeric options through the apps' one parser, and checks
 * across options (--only names peers).
 */
#include "perf_app.h"

namespace {

/* Numeric options: the apps' one number parser (app/common/opt_num.h); one line naming the
 * option and the value as typed. */
bool
perf_parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	std::string why;

	if (opt_num_u64(s, min, max, out, &why))
		return true;
	fprintf(stderr, "%s\n", opt_num_error("qpn-perf", opt, s, why).c_str());
	return false;
}

int
perf_bad(const char *opt, const char *value, const char *why)
{
	fprintf(stderr, "%s\n", opt_num_error("qpn-perf", opt, value, why).c_str());
	return -EINVAL;
}

struct perf_row;
/* @return 0; -EINVAL after one line naming the option (as --NAME) and the value; 1: --help. */
using perf_setter = int (*)(perf_opts *o, const perf_row &r, const char *name, const char *v);

/*
 * One option: its name, its argument (nullptr: none), what sets it, and its help (nullptr: not
 * shown, for the internal --count-child). A number goes to u64 or u within [lo, hi].
 */
struct perf_row {
	const char *name;
	const char *arg;
	perf_setter set;
	uint64_t lo, hi;
	uint64_t perf_opts::*u64;
	unsigned int perf_opts::*u;
	const char *help; /* '\n' continues in the help column */
};

int
set_num(perf_opts *o, const perf_row &r, const char *name, const char *v)
{
	uint64_t x;
	if (!perf_parse_u64(name, v, r.lo, r.hi, &x))
		return -EINVAL;
	if (r.u64 != nullptr)
		o->*r.u64 = x;
	else
		o->*r.u = static_cast<unsigned int>(x);
	return 0;
}

int
set_scaling(perf_opts *o, const perf_row &, const char *name, const char *v)
{
	if (v != nullptr && strcmp(v, "on") == 0)
		o->lcores = true;
	else if (v != nullptr && strcmp(v, "off") == 0)
		o->lcores = false;
	else
		return perf_bad(name, v, "expected on or off");
	return 0;
}

/* --lcores=on|off, the old spelling of --scaling: taken with a line saying so, as DPDK
 * deprecates an option for a release before it goes. Any other value is the EAL's lcore map
 * given after "--", where it does nothing: refused, pointing to where it belongs. */
int
set_lcores_old(perf_opts *o, const perf_row &r, const char *name, const char *v)
{
	if (v != nullptr && (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)) {
		fprintf(stderr,
			"qpn-perf: --lcores=%s is deprecated, use --scaling=%s (--lcores is the "
			"EAL's lcore map, before --)\n",
			v, v);
		return set_scaling(o, r, name, v);
	}
	return perf_bad(name, v,
			"the EAL's lcore map goes before \"--\"; the scaling runs are "
			"--scaling=on|off");
}

int
set_json(perf_opts *o, const perf_row &, const char *name, const char *v)
{
	if (v == nullptr || *v == '\0')
		return perf_bad(name, v, "empty; expected a file name");
	o->json = v;
	return 0;
}

int
set_only(perf_opts *o, const perf_row &, const char *name, const char *v)
{
	if (v == nullptr || *v == '\0')
		return perf_bad(name, v, "empty; expected a list of peers");
	o->only = v;
	return 0;
}

int
set_count(perf_opts *o, const perf_row &, const char *name, const char *v)
{
	if (v == nullptr || strcmp(v, "instructions") != 0)
		return perf_bad(name, v, "expected instructions");
	o->count_instructions = true;
	return 0;
}

/* Internal: set by --count=instructions for its run under callgrind. */
int
set_count_child(perf_opts *o, const perf_row &, const char *, const char *v)
{
	o->count_child = v != nullptr ? v : "";
	return 0;
}

int
set_quick(perf_opts *o, const perf_row &, const char *, const char *)
{
	o->quick = true;
	return 0;
}

int
set_help(perf_opts *, const perf_row &, const char *, const char *)
{
	return 1;
}

constexpr uint64_t kMaxRange = MLX5_QPN_MAX - kPerfFirstQpn;

/* clang-format off */
const perf_row perf_rows[] = {
	{"iterations", "N", set_num, 1000, UINT64_C(10000000000), &perf_opts::iterations, nullptr,
	 "most alloc+free pairs per timed run (default 2000000)"},
	{"repeat", "N", set_num, 1, 1000, nullptr, &perf_opts::repeat,
	 "repetitions; figures are medians (default 5)"},
	{"cache", "N", set_num, 1, 65536, nullptr, &perf_opts::cache,
	 "per-lcore cache of ours and of rte_mempool (default 256)"},
	{"range", "N", set_num, 1024, kMaxRange, nullptr, &perf_opts::range,
	 "QPNs in the range every peer hands out (default 65536)"},
	{"range-q", "N", set_num, 1024, kMaxRange, nullptr, &perf_opts::range_q,
	 "range of qpnpool-q, room for its quarantine (default 1048576)"},
	{"quarantine-us", "N", set_num, 0, 10000000, &perf_opts::quarantine_us, nullptr,
	 "quarantine of the qpnpool-q peer (default 1000)"},
	{"burst", "N", set_num, 0, PERF_MAX_BURST, nullptr, &perf_opts::burst,
	 "bulk size of the burst loop, 0 = no burst loop (default 32)"},
	{"hold", "K", set_num, 1, 1u << 20, nullptr, &perf_opts::hold,
	 "QPNs held live by the hold-and-release loop (default 1024)"},
	{"storm", "S", set_num, 1, 1u << 16, nullptr, &perf_opts::storm,
	 "connections per reconnect storm (default 256)"},
	{"idle-us", "N", set_num, 1, 10000000, nullptr, &perf_opts::idle_us,
	 "idle sleep before each storm (default 1000)"},
	{"scaling", "on|off", set_scaling, 0, 0, nullptr, nullptr,
	 "also run on 1..N lcores at once, cross-lcore and non-EAL\n"
	 "threads (default on; N = the lcores of -l)"},
	{"lcores", "on|off", set_lcores_old, 0, 0, nullptr, nullptr, nullptr},
	{"json", "FILE", set_json, 0, 0, nullptr, nullptr,
	 "write every figure as JSON (qpn-perf-report draws it)"},
	{"only", "LIST", set_only, 0, 0, nullptr, nullptr,
	 "comma-separated peers: floor,floor-inl,mempool,mempool-pk,\n"
	 "ring,stack,rdmacore,rdmavt,qpnpool,qpnpool-q,qpndev"},
	{"block-log", "G", set_num, 0, 20, nullptr, &perf_opts::block_log,
	 "rdma-core model: 2^G QPNs per block (default 8)"},
	{"budget-ms", "N", set_num, 1, 60000, &perf_opts::budget_ms, nullptr,
	 "target length of one timed run (default 200)"},
	{"count", "instructions", set_count, 0, 0, nullptr, nullptr,
	 "also count instructions per op on one lcore under\n"
	 "valgrind's callgrind (and hardware counters where the\n"
	 "kernel allows perf_event_open)"},
	{"quick", nullptr, set_quick, 0, 0, nullptr, nullptr,
	 "short run: 200000 pairs, 3 repetitions, 10 ms budget"},
	{"count-child", "DIR", set_count_child, 0, 0, nullptr, nullptr, nullptr},
	{"help", nullptr, set_help, 0, 0, nullptr, nullptr, nullptr},
};
/* clang-format on */

constexpr size_t kRows = sizeof(perf_rows) / sizeof(perf_rows[0]);

void
perf_usage(const char *prog)
{
	/* The name, not the path it was started by: a usage line is read, not run. */
	const char *base = strrchr(prog, '/');
	printf("usage: %s [EAL options] -- [options]\n", base != nullptr ? base + 1 : prog);
	for (const perf_row &r : perf_rows) {
		if (r.help == nullptr)
			continue;
		char left[40];
		snprintf(left, sizeof(left), "--%s%s%s", r.name, r.arg != nullptr ? "=" : "",
			 r.arg != nullptr ? r.arg : "");
		printf(strlen(left) < 19 ? "  %-19s" : "  %s  ", left);
		for (const char *h = r.help; *h != '\0'; h++)
			if (*h == '\n')
				printf("\n  %-19s", "");
			else
				putchar(*h);
		putchar('\n');
	}
}

/* Whether the option NAME was given (gv: one flag per row). */
bool
given(const bool *gv, const char *name)
{
	for (size_t i = 0; i < kRows; i++)
		if (strcmp(perf_rows[i].name, name) == 0)
			return gv[i];
	return false;
}

/* What --quick sets unless given, and the checks across options. */
int
perf_finish(struct perf_opts *o, const bool *gv)
{
	if (o->quick) {
		if (!given(gv, "iterations"))
			o->iterations = 200000;
		if (!given(gv, "repeat"))
			o->repeat = 3;
		if (!given(gv, "budget-ms"))
			o->budget_ms = 10;
	}
	if ((o->range >> o->block_log) < 2) {
		PERF_LOG(ERR, "--range=%u holds fewer than 2 blocks of 2^%u QPNs (--block-log)",
			 o->range, o->block_log);
		return -EINVAL;
	}
	return 0;
}

} // namespace

/* Returns 0, 1 (--help) or -EINVAL after one readable error line. */
int
perf_parse_args(int argc, char **argv, struct perf_opts *o)
{
	struct option longs[kRows + 1];
	for (size_t i = 0; i < kRows; i++)
		longs[i] = {perf_rows[i].name,
			    perf_rows[i].arg != nullptr ? required_argument : no_argument, nullptr,
			    int(256 + i)};
	longs[kRows] = {nullptr, 0, nullptr, 0};
	bool gv[kRows] = {};
	int opt;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", longs, nullptr)) != -1) {
		if (opt == 'h') { /* -h, as --help (and as every DPDK app) */
			perf_usage(argv[0]);
			return 1;
		}
		if (opt == ':') {
			fprintf(stderr, "qpn-perf: option \"%s\" needs a value (see --help)\n",
				opt_shown(argv[optind - 1]).c_str());
			return -EINVAL;
		}
		if (opt < 256 || size_t(opt - 256) >= kRows) {
			PERF_LOG(ERR, "unknown option '%s' (see --help)",
				 opt_shown(optind > 0 && optind <= argc ? argv[optind - 1] : "?")
					 .c_str());
			return -EINVAL;
		}
		/* The option's name as --NAME (the value may be in the next argument). */
		const perf_row &r = perf_rows[opt - 256];
		const std::string name = std::string("--") + r.name;
		gv[opt - 256] = true;
		int rc = r.set(o, r, name.c_str(), optarg);
		if (rc == 1)
			perf_usage(argv[0]);
		if (rc != 0)
			return rc;
	}
	if (optind < argc) {
		PERF_LOG(ERR, "unexpected argument '%s' (see --help)",
			 opt_shown(argv[optind]).c_str());
		return -EINVAL;
	}
	return perf_finish(o, gv);
}

/* Every name of --only must be a peer. */
bool
perf_check_only(const std::string &only)
{
	size_t pos = 0;

	while (!only.empty() && pos <= only.size()) {
		size_t end = only.find(',', pos);
		bool known = false;

		if (end == std::string::npos)
			end = only.size();
		std::string name = only.substr(pos, end - pos);

		for (const auto *p : perf_all_peers)
			known = known || name == p->name;
		if (!known) {
			perf_bad("--only", only.c_str(),
				 ("unknown peer \"" + opt_shown(name.c_str()) +
				  "\"; see --help for the list")
					 .c_str());
			return false;
		}
		pos = end + 1;
	}
	return true;
}
