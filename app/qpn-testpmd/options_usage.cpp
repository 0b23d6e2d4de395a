/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd --help: the usage text, from the option table (options_table.cpp).
 */
#include <cstdio>

#include "options.h"

namespace testpmd_opts {

/* The usage text, from the table: the option and its argument in one column, the help in the
 * next (a help's '\n' continues there), the engines after --engine's line. */
void
usage(const char *prog)
{
	printf("usage: %s [EAL options] -- [options]\n", prog);
	for (size_t i = 0; i < opt_count; i++) {
		const opt_row &o = opt_table[i];
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

} /* namespace testpmd_opts */
