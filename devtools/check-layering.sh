#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/check-layering.sh [SOURCE_DIR]
#
# The layers point one way: app -> drivers -> lib. A lib/ file that includes a header of
# drivers/ or app/, or a drivers/ file that includes one of app/, fails (run by the test command).
# Inside the driver (drivers/mlx5_qpn/meson.build has its floors), as in DPDK's
# drivers/common/mlx5: common/ (the mlx5 layouts, the caps struct) is the lowest floor and
# includes nothing of the driver; ops/ (the backend seam) names no backend; lease/ sees lib/ only;
# the DC data path (dc/) reaches a backend through the seam only; the two backends include nothing
# of each other, of dc/, of lease/ (the generic layer's) or of the generic layer (dev/), which
# includes nothing of sim/, hw/, dc/.
# Headers are matched by file name against the files each forbidden folder holds. The build
# refuses the same includes by its include paths (devtools/check-probe.sh); this grep also
# catches a relative "../sim/..." that no include path can refuse.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
fail=0
drv=drivers/mlx5_qpn
headers_of() { find "$@" -name '*.h' -printf '%f\n' | sort -u; }
check() { # folder, forbidden folders...
	local layer=$1; shift
	local out
	# One awk over every include line: a process per line takes a minute on a loaded machine.
	out=$(grep -rn --include='*.h' --include='*.cpp' --include='*.c' '^#include' "$layer" |
	      awk -v names="$(headers_of "$@" | tr '\n' ' ')" -v forb="$*" -v layer="$layer" '
		BEGIN { n = split(names, a, " "); for (i = 1; i <= n; i++) bad[a[i]] = 1 }
		match($0, /#include *[<"][^>"]*[>"]/) {
			f = $0; sub(/:.*/, "", f)
			h = substr($0, RSTART, RLENGTH); sub(/#include *[<"]/, "", h); sub(/[>"]$/, "", h)
			b = h; sub(/.*\//, "", b)
			if (b in bad)
				print "check-layering: " f " includes " h ", a header of " forb " (not for " layer "/)"
		}')
	if [ -n "$out" ]; then
		echo "$out"
		fail=1
	fi
}
check lib drivers app
check drivers app
check $drv/common $drv/ops $drv/lease $drv/dc $drv/hw $drv/sim $drv/dev
check $drv/ops $drv/lease $drv/dc $drv/hw $drv/sim $drv/dev
check $drv/lease $drv/common $drv/ops $drv/dc $drv/hw $drv/sim $drv/dev
check $drv/dc $drv/sim $drv/hw $drv/lease $drv/dev
check $drv/sim $drv/hw $drv/dc $drv/lease $drv/dev
check $drv/hw $drv/sim $drv/dc $drv/lease $drv/dev
check $drv/dev $drv/sim $drv/hw $drv/dc
[ $fail -eq 0 ] && echo "check-layering: OK (app -> drivers -> lib; the driver's floors of drivers/mlx5_qpn/meson.build)"
exit $fail
