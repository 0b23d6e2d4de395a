/* SPDX-License-Identifier: BSD-3-Clause */
#include "opt_num.h"

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace {

bool
all_digits(const char *s, const char *e)
{
	for (; s < e; s++)
		if (!isdigit(static_cast<unsigned char>(*s)))
			return false;
	return true;
}

/* "1..32"; doubles without a trailing ".000000". */
std::string
range_u64(uint64_t lo, uint64_t hi)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%" PRIu64 "..%" PRIu64, lo, hi);
	return buf;
}

std::string
range_double(double lo, double hi)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%.15g..%.15g", lo, hi);
	return buf;
}

} /* namespace */

bool
opt_num_u64(const char *text, uint64_t lo, uint64_t hi, uint64_t *out, std::string *why)
{
	const std::string expect = "expected an integer in " + range_u64(lo, hi);
	if (text == nullptr || *text == '\0') {
		*why = "empty; " + expect;
		return false;
	}
	const char *end = text;
	while (*end)
		end++;
	if (!all_digits(text, end)) {
		*why = "not a decimal integer; " + expect;
		return false;
	}
	errno = 0;
	unsigned long long x = strtoull(text, nullptr, 10);
	if (errno == ERANGE || x < lo || x > hi) {
		*why = "out of range; " + expect;
		return false;
	}
	*out = x;
	return true;
}

bool
opt_num_decimal(const char *text, double lo, double hi, double *out, std::string *why)
{
	const std::string expect = "expected a decimal number in " + range_double(lo, hi);
	if (text == nullptr || *text == '\0') {
		*why = "empty; " + expect;
		return false;
	}
	/* digits [ '.' digits ], at least one digit in all: no sign, exponent, nan, inf, hex. */
	const char *s = text, *dot = nullptr;
	size_t digits = 0;
	for (; *s; s++) {
		if (isdigit(static_cast<unsigned char>(*s)))
			digits++;
		else if (*s == '.' && dot == nullptr)
			dot = s;
		else
			break;
	}
	if (*s != '\0' || digits == 0) {
		*why = "not a decimal number; " + expect;
		return false;
	}
	errno = 0;
	double x = strtod(text, nullptr);
	if (errno == ERANGE || !std::isfinite(x) || x < lo || x > hi) {
		*why = "out of range; " + expect;
		return false;
	}
	*out = x;
	return true;
}

std::string
opt_shown(const char *text)
{
	std::string shown;
	for (const char *s = text != nullptr ? text : ""; *s; s++) {
		unsigned char ch = static_cast<unsigned char>(*s);
		char buf[8];
		if (ch == '"' || ch == '\\')
			snprintf(buf, sizeof(buf), "\\%c", ch);
		else if (isprint(ch))
			snprintf(buf, sizeof(buf), "%c", ch);
		else if (ch == '\t')
			snprintf(buf, sizeof(buf), "\\t");
		else
			snprintf(buf, sizeof(buf), "\\x%02x", ch);
		shown += buf;
	}
	return shown;
}

std::string
opt_num_error(const char *prog, const char *opt, const char *text, const std::string &why)
{
	return std::string(prog) + ": bad value for " + opt + ": \"" + opt_shown(text) + "\" (" +
	       why + ")";
}
