#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/check-layering.sh [SOURCE_DIR]
#
# The layers point one way: app -> drivers -> lib. A lib/ file that includes a header of
# drivers/ or app/, or a drivers/ file that includes one of app/, fails (run by the test command).
# Headers are matched by file name against the files each upper layer holds.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
fail=0
headers_of() { find "$@" -name '*.h' -printf '%f\n' | sort -u; }
check() { # layer, forbidden folders...
	local layer=$1; shift
	local names
	names=$(headers_of "$@")
	while IFS= read -r line; do
		f=${line%%:*}
		h=$(sed -n 's/.*#include *[<"]\([^>"]*\)[>"].*/\1/p' <<< "${line#*:}")
		if grep -qxF "$(basename "$h")" <<< "$names"; then
			echo "check-layering: $f includes $h, a header of a layer above $layer/"
			fail=1
		fi
	done < <(grep -rn --include='*.h' --include='*.cpp' --include='*.c' '^#include' "$layer" |
		 sed 's/:[0-9]*:/:/')
}
check lib drivers app
check drivers app
[ $fail -eq 0 ] && echo "check-layering: OK (app -> drivers -> lib)"
exit $fail
