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
	       "  --quarantine-us=N  quarantine of the qpnpool-q peer (default 50)\n"
	       "  --burst=N          bulk size of the burst loop, 0 = no burst loop (default 32)\n"
	       "  --lcores=on|off    also run on 2 lcores at once (default on)\n"
	       "  --json=FILE        write every figure as JSON\n"
	       "  --only=LIST        comma-separated peers: floor,mempool,ring,stack,rdmacore,\n"
	       "                     rdmavt,qpnpool,qpnpool-q\n"
	       "  --block-log=G      rdma-core model: 2^G QPNs per block (default 8)\n"
	       "  --budget-ms=N      target length of one timed run (default 200)\n"
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
