#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/check-probe.sh SOURCE_DIR BUILD_DIR
#
# The layering as the build enforces it (run by devtools/check.sh). For each component library
# it takes the exact compiler command of that target from the build (meson-info), and tries to
# compile a one-line probe `#include "<header>"` for every header the component must not see
# (drivers/mlx5_qpn/meson.build has the driver's floors; drv below is drivers/mlx5_qpn):
#   qpn_shm  (lib/shm):   nothing of lib/pool, lib/cm, drivers/, app/
#   qpn_pool (lib/pool):  nothing of lib/cm, drivers/, app/
#   qpn_cm   (lib/cm):    nothing of lib/pool, drivers/, app/
#   qpn_mlx5_common (drv/common): nothing of lib/, app/ or the driver's other floors, the public
#            headers included
#   qpn_lease (drv/lease): nothing of lib/cm, app/ or the driver's other floors
#   qpn_dc   (drv/dc):    nothing of lib/shm, lib/pool, lib/cm, app/, drv/sim, hw, lease, dev
#   qpn_hw   (drv/hw):    nothing of lib/shm, lib/pool, lib/cm, app/, drv/sim, dc, lease, dev
#   qpn_sim  (drv/sim):   nothing of lib/pool, lib/cm, app/, drv/hw, dc, lease, dev
#   qpn_dev  (drv/dev, the generic layer): nothing of app/, drv/sim, hw, dc
#   c_abi    (the public face, C11): no header of lib/, drivers/, app/ by its bare name, only
#            <mlx5_qpn/...>
# Each floor's own folder is on its include path and holds no sub-folder, so a probe compiled
# from a temporary folder finds exactly what a file of that floor finds (a quoted include also
# searches the includer's folder). The public headers a floor may see resolve to their staged
# copies under the build dir, never to the source file, and are not counted as leaks.
# A probe must fail to find the header (or find a system header of the same name, never one of
# the forbidden folder). One positive probe per target proves that a failure means the include
# path and not a broken command. devtools/check-layering.sh still greps the sources, which also
# catches a relative `#include "../../drivers/..."` that no include path can refuse.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
intro="$build/meson-info/intro-targets.json"
[ -f "$intro" ] || { echo "check-probe: $intro missing (not a configured build dir)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
probes=0

# The compiler and its arguments for one language of one target, NUL-separated in a file.
target_cmd() { # target language out
	python3 - "$intro" "$1" "$2" > "$3" <<'PY'
import json, sys
intro, name, lang = sys.argv[1:4]
for t in json.load(open(intro)):
    if t["name"] != name:
        continue
    for s in t["target_sources"]:
        if s.get("language") == lang:
            args = s["compiler"] + [a for a in s["parameters"] if not a.startswith("-fdiagnostics-color")]
            sys.stdout.write("\0".join(args))
            sys.exit(0)
sys.exit(1)
PY
}

# Headers of the forbidden folders, as "path-in-tree<TAB>include-name" for the bare name and the
# name relative to the component folder (e.g. sim/mlx5_qpn_sim.h).
forbidden_names() { # folders...
	# Shell expansions, not basename/cut: ~300 headers, two processes each, were seconds.
	local h rel
	(cd "$src" && find "$@" -name '*.h' 2>/dev/null) | while IFS= read -r h; do
		printf '%s\t%s\n' "$h" "${h##*/}"
		rel=""
		[[ "$h" != */*/* ]] || rel=${h#*/*/}
		[ -z "$rel" ] || [ "$rel" = "${h##*/}" ] || printf '%s\t%s\n' "$h" "$rel"
	done
}

probe() { # target language ext include-line -> 0 if it compiles
	local cmd=("${@:5}")
	printf '%s\n' "$4" > "$tmp/probe.$3"
	(cd "$build" && "${cmd[@]}" -M -MF "$tmp/probe.d" "$tmp/probe.$3" -o /dev/null) \
		> /dev/null 2> "$tmp/probe.err"
}

check_target() { # target language ext positive-include forbidden-folders...
	local target=$1 lang=$2 ext=$3 good=$4
	shift 4
	if ! target_cmd "$target" "$lang" "$tmp/cmd"; then
		echo "check-probe: no $lang target '$target' in the build"
		fail=1
		return
	fi
	local cmd=()
	mapfile -d '' cmd < "$tmp/cmd"
	if ! probe "$target" "$lang" "$ext" "#include $good" "${cmd[@]}"; then
		echo "check-probe: $target cannot compile its own '#include $good':"
		head -5 "$tmp/probe.err"
		fail=1
		return
	fi
	# One preprocessor run tells, for every name at once, whether the target's include path
	# finds it at all (__has_include searches as #include does); only the names it finds are
	# probed one by one, to see which file that is (a system header of the same name is fine).
	# One compiler start per target instead of one per name: ~1 s instead of ~25 s for the ~300.
	local paths=() names=() i
	while IFS=$'\t' read -r path name; do
		paths+=("$path")
		names+=("$name")
	done < <(forbidden_names "$@")
	probes=$((probes + ${#names[@]}))
	for i in "${!names[@]}"; do
		printf '#if __has_include("%s")\nqpn_probe_found %d\n#endif\n' "${names[$i]}" "$i"
	done > "$tmp/batch.$ext"
	if ! (cd "$build" && "${cmd[@]}" -E -P "$tmp/batch.$ext" -o "$tmp/batch.out") \
		2> "$tmp/probe.err"; then
		echo "check-probe: $target cannot preprocess its batch of __has_include probes:"
		head -5 "$tmp/probe.err"
		fail=1
		return
	fi
	for i in $(sed -n 's/^qpn_probe_found \([0-9]*\)$/\1/p' "$tmp/batch.out"); do
		if probe "$target" "$lang" "$ext" "#include \"${names[$i]}\"" "${cmd[@]}" &&
		   grep -qF "$src/${paths[$i]}" "$tmp/probe.d"; then
			echo "check-probe: $target can include \"${names[$i]}\" (${paths[$i]}):" \
				"its include path is too wide"
			fail=1
		fi
	done
}

check_target qpn_shm cpp cpp '"qpn_shm.h"' lib/pool lib/cm drivers app
check_target qpn_pool cpp cpp '"qpn_pool_internal.h"' lib/cm drivers app
check_target qpn_cm cpp cpp '"cm_internal.h"' lib/pool drivers app
drv=drivers/mlx5_qpn
pub="$drv/mlx5_qpn.h $drv/mlx5_qpn_dc.h"
# shellcheck disable=SC2086 # $pub: two file names
check_target qpn_mlx5_common cpp cpp '"mlx5_qpn_prm.h"' lib/shm lib/pool lib/cm app \
	$drv/ops $drv/lease $drv/dc $drv/hw $drv/sim $drv/dev $pub
# shellcheck disable=SC2086
check_target qpn_lease cpp cpp '"mlx5_qpn_lease.h"' lib/cm app \
	$drv/common $drv/ops $drv/dc $drv/hw $drv/sim $drv/dev $pub
check_target qpn_dc cpp cpp '"mlx5_qpn_dc_priv.h"' lib/shm lib/pool lib/cm app \
	$drv/sim $drv/hw $drv/lease $drv/dev
check_target qpn_hw cpp cpp '"mlx5_qpn_hw_priv.h"' lib/shm lib/pool lib/cm app \
	$drv/sim $drv/dc $drv/lease $drv/dev
check_target qpn_sim cpp cpp '"sim_internal.h"' lib/pool lib/cm app $drv/hw $drv/dc $drv/lease \
	$drv/dev
check_target qpn_dev cpp cpp '"mlx5_qpn_dev_priv.h"' app $drv/sim $drv/hw $drv/dc
check_target c_abi c c '<mlx5_qpn/mlx5_qpn_dc.h>' lib drivers app

# Two refusals shown as the compiler prints them: the generic layer reaching into the emulator,
# and common/ reaching up to the seam.
show_refusal() { # target include
	local cmd=()
	target_cmd "$1" cpp "$tmp/cmd" || return 0
	mapfile -d '' cmd < "$tmp/cmd"
	if probe "$1" cpp cpp "#include $2" "${cmd[@]}"; then
		echo "check-probe: $1 compiles '#include $2'"
		fail=1
	else
		echo "check-probe: $1 refuses '#include $2': $(grep -m1 -o 'fatal error: .*' "$tmp/probe.err")"
	fi
}
show_refusal qpn_dev '"sim/sim_internal.h"'
show_refusal qpn_mlx5_common '"mlx5_qpn_ops.h"'

[ $fail -eq 0 ] && echo "check-probe: OK ($probes forbidden includes refused by the build's include paths)"
exit $fail
