/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef APP_OPT_NUM_H
#define APP_OPT_NUM_H

/*
 * The one number parser of the apps' options (qpn-testpmd's command line and prompt, qpn-perf's
 * command line). strtod/strtoul alone accept what a user never means: "nan", "inf", " 5", "-1"
 * (as a huge unsigned), "5abc" (if the end is not checked), "0x10", "1e3", and an overflow that
 * saturates. Here the text is checked against a plain grammar first, then converted:
 *
 *   integer: one or more decimal digits (no sign, no space, no base prefix), within [lo, hi]
 *   decimal: digits with an optional fraction ("3", "0.5", ".5", "2."), within [lo, hi]
 *
 * On failure *why gets a short reason that says what is expected, e.g.
 * `expected an integer in 1..32`; the caller prints it in one line with the option's name and the
 * value as typed: opt_num_error("qpn-testpmd", "--peers", "nan", why).
 */
#include <cstdint>
#include <string>

/** @return true and *out; false and *why. */
bool opt_num_u64(const char *text, uint64_t lo, uint64_t hi, uint64_t *out, std::string *why);

/** @return true and *out (finite, in [lo, hi]); false and *why. */
bool opt_num_decimal(const char *text, double lo, double hi, double *out, std::string *why);

/**
 * The one line: `PROG: bad value for OPT: "TEXT" (WHY)`, the text escaped as opt_shown() does.
 * For any refused value, not only numbers: a string option's WHY lists what it takes.
 */
std::string opt_num_error(const char *prog, const char *opt, const char *text,
			  const std::string &why);

/**
 * TEXT as a refusal shows it between double quotes: printable characters as they are, '"' and
 * '\' escaped, a tab as \t, any other byte as \xNN, so that a value holding a newline or an
 * escape sequence stays on the refusal's one line and cannot write to the terminal.
 */
std::string opt_shown(const char *text);

#endif
