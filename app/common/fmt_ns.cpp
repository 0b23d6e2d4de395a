/* SPDX-License-Identifier: BSD-3-Clause */
#include "fmt_ns.h"

#include <cstdio>

std::string
fmt_ns(double v)
{
	char b[32];
	if (v < 10)
		snprintf(b, sizeof(b), "%.1fns", v);
	else if (v < 1e3)
		snprintf(b, sizeof(b), "%.0fns", v);
	else if (v < 1e6)
		snprintf(b, sizeof(b), "%.*fus", v < 1e4 ? 2 : 1, v / 1e3);
	else if (v < 1e9)
		snprintf(b, sizeof(b), "%.*fms", v < 1e7 ? 2 : 1, v / 1e6);
	else
		snprintf(b, sizeof(b), "%.2fs", v / 1e9);
	return b;
}
