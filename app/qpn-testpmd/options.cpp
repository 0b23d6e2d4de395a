/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's command line: the options after the EAL's, read with getopt_long over the
 * option table (options_table.cpp), then the checks across options. A bad value is refused
 * with one line naming the option and the value as typed (exit 2). The other parts of the
 * command line: options.h's file map.
 */
#include <cerrno>
#include <cstdio>
#include <getopt.h>
#include <string>
#include <vector>

#include "options.h"

using namespace testpmd_opts;

namespace {

/* getopt_long's view of the table: an option's code is its row's index + 256; the short
 * options map to their rows too. */
void
getopt_tables(struct option *longs, char *shorts)
{
	size_t n = 0;
	*shorts++ = ':';
	for (size_t i = 0; i < opt_count; i++) {
		const opt_row &o = opt_table[i];
		longs[i] = {o.name, o.arg != nullptr ? required_argument : no_argument, nullptr,
			    int(256 + i)};
		if (o.short_name != 0)
			shorts[n++] = o.short_name;
	}
	longs[opt_count] = {nullptr, 0, nullptr, 0};
	shorts[n] = '\0';
}

const opt_row *
row_of(int c)
{
	if (c >= 256 && size_t(c - 256) < opt_count)
		return &opt_table[c - 256];
	for (size_t i = 0; i < opt_count; i++)
		if (opt_table[i].short_name != 0 && opt_table[i].short_name == c)
			return &opt_table[i];
	return nullptr;
}

} /* namespace */

int
parse_args(int argc, char **argv, run_config *cfg)
{
	std::vector<struct option> longs(opt_count + 1);
	std::vector<char> shorts(opt_count + 2);
	getopt_tables(longs.data(), shorts.data());
	parse_state st = {cfg, false};
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts.data(), longs.data(), nullptr)) != -1) {
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
	int rc = devargs_from_eal(cfg);
	if (rc != 0)
		return rc;
	if (cfg->devargs.empty())
		cfg->devargs.push_back(QPN_TESTPMD_DEFAULT_DEV);
	rc = check_role(st);
	if (rc == 0)
		rc = compare_check(*cfg);
	return rc != 0 ? rc : check_quarantine(cfg);
}
