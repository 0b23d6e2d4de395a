#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   tests/app/perf_count_test.sh BUILD_DIR [SANITIZER]
#
# qpn-perf --count=instructions: instructions per pair for ours and rte_mempool, counted under
# callgrind, land in the table and the JSON. Skipped (77) without valgrind, and in sanitizer
# builds (an ASan or TSan binary does not run under valgrind).
set -uo pipefail
build=$1
san=${2:-none}
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
[ "$san" = none ] || { echo "sanitizer build ($san): skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! "$build/app/qpn-perf/qpn-perf" --no-huge --no-pci -m 256 -l 0 \
	--file-prefix=qpnperfcnt$$ --log-level=lib.eal:warning -- --quick --budget-ms=2 \
	--repeat=1 --burst=0 --only=mempool,qpnpool --count=instructions \
	--json="$tmp/perf.json" >"$tmp/out" 2>&1; then
	echo "qpn-perf --count=instructions failed:"
	cat "$tmp/out"
	exit 1
fi
/usr/bin/python3 - "$tmp/perf.json" <<'PY' || { cat "$tmp/out"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
per = d["instructions"]["per_op"]
bad = [n for n in ("mempool", "qpnpool") if not 5 < per.get(n, {}).get("pair", 0) < 100000]
print("instructions per pair:", {n: round(v.get("pair", 0), 1) for n, v in per.items()})
if d["aims"]["pair_instructions_vs_mempool"]["value"] is None:
    bad.append("aim pair_instructions_vs_mempool not measured")
sys.exit(1 if bad else 0)
PY
