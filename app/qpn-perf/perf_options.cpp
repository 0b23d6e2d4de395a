/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf's options: --help, the numeric options through the apps' one parser, and checks
 * across options (--only names peers).
 */
#include "perf_app.h"

namespace {

enum {
	OPT_ITER = 256,
	OPT_REPEAT,
	OPT_CACHE,
	OPT_RANGE,
	OPT_QUAR,
	OPT_BURST,
	OPT_LCORES,
	OPT_JSON,
	OPT_ONLY,
	OPT_QUICK,
	OPT_BLOCK_LOG,
	OPT_BUDGET,
	OPT_RANGE_Q,
	OPT_HOLD,
	OPT_STORM,
	OPT_IDLE,
	OPT_COUNT,
	OPT_COUNT_CHILD,
	OPT_HELP,
};

const struct option perf_long_opts[] = {
	{"iterations", required_argument, nullptr, OPT_ITER},
	{"repeat", required_argument, nullptr, OPT_REPEAT},
	{"cache", required_argument, nullptr, OPT_CACHE},
	{"range", required_argument, nullptr, OPT_RANGE},
	{"quarantine-us", required_argument, nullptr, OPT_QUAR},
	{"burst", required_argument, nullptr, OPT_BURST},
	{"lcores", required_argument, nullptr, OPT_LCORES},
	{"json", required_argument, nullptr, OPT_JSON},
	{"only", required_argument, nullptr, OPT_ONLY},
	{"quick", no_argument, nullptr, OPT_QUICK},
	{"block-log", required_argument, nullptr, OPT_BLOCK_LOG},
	{"budget-ms", required_argument, nullptr, OPT_BUDGET},
	{"range-q", required_argument, nullptr, OPT_RANGE_Q},
	{"hold", required_argument, nullptr, OPT_HOLD},
	{"storm", required_argument, nullptr, OPT_STORM},
	{"idle-us", required_argument, nullptr, OPT_IDLE},
	{"count", required_argument, nullptr, OPT_COUNT},
	{"count-child", required_argument, nullptr, OPT_COUNT_CHILD},
	{"help", no_argument, nullptr, OPT_HELP},
	{nullptr, 0, nullptr, 0},
};

void
perf_usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n"
	       "  --iterations=N     most alloc+free pairs per timed run (default 2000000)\n"
	       "  --repeat=N         repetitions; figures are medians (default 5)\n"
	       "  --cache=N          per-lcore cache of ours and of rte_mempool (default 256)\n"
	       "  --range=N          QPNs in the range every peer hands out (default 65536)\n"
	       "  --range-q=N        range of qpnpool-q, room for its quarantine (default 1048576)\n"
	       "  --quarantine-us=N  quarantine of the qpnpool-q peer (default 1000)\n"
	       "  --burst=N          bulk size of the burst loop, 0 = no burst loop (default 32)\n"
	       "  --hold=K           QPNs held live by the hold-and-release loop (default 1024)\n"
	       "  --storm=S          connections per reconnect storm (default 256)\n"
	       "  --idle-us=N        idle sleep before each storm (default 1000)\n"
	       "  --lcores=on|off    also run on 1..N lcores at once, cross-lcore and non-EAL\n"
	       "                     threads (default on; N = the lcores of -l)\n"
	       "  --json=FILE        write every figure as JSON (qpn-perf-report draws it)\n"
	       "  --only=LIST        comma-separated peers: floor,floor-inl,mempool,mempool-pk,\n"
	       "                     ring,stack,rdmacore,rdmavt,qpnpool,qpnpool-q,qpndev\n"
	       "  --block-log=G      rdma-core model: 2^G QPNs per block (default 8)\n"
	       "  --budget-ms=N      target length of one timed run (default 200)\n"
	       "  --count=instructions  also count instructions per op on one lcore under\n"
	       "                     valgrind's callgrind (and hardware counters where the\n"
	       "                     kernel allows perf_event_open)\n"
	       "  --quick            short run: 200000 pairs, 3 repetitions, 10 ms budget\n",
	       prog);
}

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

} // namespace

/* Returns 0, or -EINVAL after one readable error line. */
int
perf_parse_args(int argc, char **argv, struct perf_opts *o)
{
	bool set_iter = false, set_repeat = false, set_budget = false;
	uint64_t v;
	int opt;

	optind = 1;
	opterr = 0;
	int li = -1;
	while ((opt = getopt_long(argc, argv, ":", perf_long_opts, &li)) != -1) {
		/* The option's name as --NAME (the value may be in the next argument). */
		std::string long_name = li >= 0 ? std::string("--") + perf_long_opts[li].name : "";
		const char *name = li >= 0 ?
					   long_name.c_str() :
					   (optind > 0 && optind <= argc ? argv[optind - 1] : "?");
		li = -1;

		switch (opt) {
		case OPT_ITER:
			if (!perf_parse_u64(name, optarg, 1000, UINT64_C(10000000000), &v))
				return -EINVAL;
			o->iterations = v;
			set_iter = true;
			break;
		case OPT_REPEAT:
			if (!perf_parse_u64(name, optarg, 1, 1000, &v))
				return -EINVAL;
			o->repeat = (unsigned int)v;
			set_repeat = true;
			break;
		case OPT_CACHE:
			if (!perf_parse_u64(name, optarg, 1, 65536, &v))
				return -EINVAL;
			o->cache = (uint32_t)v;
			break;
		case OPT_RANGE:
			if (!perf_parse_u64(name, optarg, 1024, MLX5_QPN_MAX - perf_first_qpn, &v))
				return -EINVAL;
			o->range = (uint32_t)v;
			break;
		case OPT_QUAR:
			if (!perf_parse_u64(name, optarg, 0, 10000000, &v))
				return -EINVAL;
			o->quarantine_us = v;
			break;
		case OPT_BURST:
			if (!perf_parse_u64(name, optarg, 0, PERF_MAX_BURST, &v))
				return -EINVAL;
			o->burst = (unsigned int)v;
			break;
		case OPT_LCORES:
			if (optarg != nullptr && strcmp(optarg, "on") == 0)
				o->lcores = true;
			else if (optarg != nullptr && strcmp(optarg, "off") == 0)
				o->lcores = false;
			else
				return perf_bad(name, optarg, "expected on or off");
			break;
		case OPT_JSON:
			if (optarg == nullptr || *optarg == '\0')
				return perf_bad(name, optarg, "empty; expected a file name");
			o->json = optarg;
			break;
		case OPT_ONLY:
			if (optarg == nullptr || *optarg == '\0')
				return perf_bad(name, optarg, "empty; expected a list of peers");
			o->only = optarg;
			break;
		case OPT_QUICK:
			o->quick = true;
			break;
		case OPT_BLOCK_LOG:
			if (!perf_parse_u64(name, optarg, 0, 20, &v))
				return -EINVAL;
			o->block_log = (unsigned int)v;
			break;
		case OPT_BUDGET:
			if (!perf_parse_u64(name, optarg, 1, 60000, &v))
				return -EINVAL;
			o->budget_ms = v;
			set_budget = true;
			break;
		case OPT_RANGE_Q:
			if (!perf_parse_u64(name, optarg, 1024, MLX5_QPN_MAX - perf_first_qpn, &v))
				return -EINVAL;
			o->range_q = (uint32_t)v;
			break;
		case OPT_HOLD:
			if (!perf_parse_u64(name, optarg, 1, 1u << 20, &v))
				return -EINVAL;
			o->hold = (unsigned int)v;
			break;
		case OPT_STORM:
			if (!perf_parse_u64(name, optarg, 1, 1u << 16, &v))
				return -EINVAL;
			o->storm = (unsigned int)v;
			break;
		case OPT_IDLE:
			if (!perf_parse_u64(name, optarg, 1, 10000000, &v))
				return -EINVAL;
			o->idle_us = (unsigned int)v;
			break;
		case OPT_COUNT:
			if (optarg == nullptr || strcmp(optarg, "instructions") != 0)
				return perf_bad(name, optarg, "expected instructions");
			o->count_instructions = true;
			break;
		case OPT_COUNT_CHILD:
			/* Internal: set by --count=instructions for its run under callgrind. */
			o->count_child = optarg != nullptr ? optarg : "";
			break;
		case OPT_HELP:
			perf_usage(argv[0]);
			return 1;
		case ':':
			fprintf(stderr, "qpn-perf: option \"%s\" needs a value (see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		default:
			PERF_LOG(ERR, "unknown option '%s' (see --help)", name);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		PERF_LOG(ERR, "unexpected argument '%s' (see --help)", argv[optind]);
		return -EINVAL;
	}
	if (o->quick) {
		if (!set_iter)
			o->iterations = 200000;
		if (!set_repeat)
			o->repeat = 3;
		if (!set_budget)
			o->budget_ms = 10;
	}
	if ((o->range >> o->block_log) < 2) {
		PERF_LOG(ERR, "--range=%u holds fewer than 2 blocks of 2^%u QPNs (--block-log)",
			 o->range, o->block_log);
		return -EINVAL;
	}
	return 0;
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
				 ("unknown peer '" + name + "'; see --help for the list").c_str());
			return false;
		}
		pos = end + 1;
	}
	return true;
}
