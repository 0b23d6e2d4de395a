/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_OPTIONS_H
#define QPN_TESTPMD_OPTIONS_H

/*
 * Internal to qpn-testpmd's command line (testpmd.h declares what the rest of the app calls):
 * what the files that share the option table see of each other. File map:
 *
 *   options.cpp          getopt over the table: parse_args, then the checks across options
 *   options_table.cpp    the option table (one row per option: name, argument, help, setter)
 *                        and the setters of the options that are not run parameters
 *   options_params.cpp   the run parameters a number sets, by name: the options' and the
 *                        prompt's `set`, alike; `show config`
 *   options_check.cpp    the checks: a value (one line naming the option and the value as
 *                        typed), --qpn-dev's devargs, and those across options (--role, the
 *                        quarantine)
 *   options_usage.cpp    --help: the usage text from the table
 *   options_devargs.cpp  the devargs helpers the runner and the prompt use (the quarantine)
 */
#include <cstddef>
#include <cstdint>
#include <string>

#include "testpmd.h"

namespace testpmd_opts {

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
 * options_params.cpp, shared with the prompt), what sets it, the flag it turns on, its help.
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

/* options_table.cpp: the table, its length, and the setter whose row lists the engines. */
extern const opt_row opt_table[];
extern const size_t opt_count;
int set_engine(parse_state &st, const opt_row &o, const char *v);

/* options_usage.cpp: --help's text. */
void usage(const char *prog);

/* options_check.cpp: a number in [lo, hi] for OPT, or one line naming OPT and the value. */
bool opt_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);
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
/* An address option (--hw-peer, --hw-bind): VALID's reason in the same one line. */
bool opt_addr(const char *opt, const char *v, bool (*valid)(const std::string &, std::string *),
	      std::string *out);
/* A --qpn-dev value, checked as typed by the driver. */
bool check_devargs(const char *v);
/* Across options, after every one was read: 0, or -EINVAL after one line. */
int check_role(parse_state &st);
int check_quarantine(const run_config *cfg);

} /* namespace testpmd_opts */

#endif /* QPN_TESTPMD_OPTIONS_H */
