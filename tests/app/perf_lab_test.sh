#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   tests/app/perf_lab_test.sh SOURCE_DIR BUILD_DIR [SANITIZER]
#
# qpn-perf as a lab tool, end to end: a --quick run on -l 0-1 with a small budget writes a JSON
# with a scaling point for 1 and 2 lcores for every peer that scales and ordered latency
# percentiles; qpn-perf-report turns it into index.html and the plots, naming every section.
# Under TSan the lcores are off (DPDK's launch is not instrumented, so TSan cannot see its
# ordering); the single-lcore figures are still checked.
set -uo pipefail
src=$1
build=$2
san=${3:-none}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

args=(--quick --budget-ms=2 --repeat=2 --json="$tmp/perf.json")
lcores=on
case "$san" in
*thread*) args+=(--lcores=off); lcores=off ;;
*address*) args+=(--only=floor,floor-inl,mempool,mempool-pk,rdmacore,qpnpool,qpnpool-q) ;;
esac
if ! "$build/app/qpn-perf/qpn-perf" --no-huge --no-pci -m 512 -l 0-1 \
	--file-prefix=qpnperflab$$ --log-level=lib.eal:warning -- "${args[@]}" >"$tmp/out" 2>&1; then
	echo "qpn-perf failed:"
	cat "$tmp/out"
	exit 1
fi

"$py" - "$tmp/perf.json" "$lcores" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
lcores = sys.argv[2] == "on"
bad = []
def med(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
# The JSON keeps 6 significant digits: figures recomputed from it are compared relatively (a
# sanitizer's ~1400 cycles per pair are written to 0.01).
def near(a, b):
    return a is not None and abs(a - b) <= 1e-4 * max(1.0, abs(b))
for key in ("tool", "version", "git_revision", "eal_args", "machine", "dpdk_version"):
    if key not in d["meta"]:
        bad.append("meta has no " + key)
# The CPU's identity as /proc/cpuinfo gives it: a model name alone hides the core generation.
cpuinfo = {}
for line in open("/proc/cpuinfo"):
    if not line.strip():
        break
    k, _, v = line.partition(":")
    cpuinfo.setdefault(k.strip(), v.strip())
m = d["meta"].get("machine", {})
for key, ci in (("cpu_model", "model name"), ("cpu_family", "cpu family"),
                ("cpu_model_number", "model"), ("cpu_stepping", "stepping"),
                ("cpu_microcode", "microcode")):
    if ci in cpuinfo and m.get(key) != cpuinfo[ci]:
        bad.append("meta.machine.%s %r, /proc/cpuinfo says %r" % (key, m.get(key), cpuinfo[ci]))
if m.get("cpu_hypervisor") != (" hypervisor" in " " + cpuinfo.get("flags", "")):
    bad.append("meta.machine.cpu_hypervisor %r disagrees with cpuinfo's flags" % m.get("cpu_hypervisor"))
peers = [n for n, p in d["peers"].items() if p["ok"]]
if not peers or len(peers) != len(d["peers"]):
    bad.append("peers not all ok: %s" % d["peers"])
for ph in ("pair", "burst", "hold", "storm", "pair_aged"):
    for n in peers:
        r = d["results"][ph].get(n, {})
        if not r.get("ns_per_op_median") or len(r.get("cycles_per_op", [])) != 2:
            bad.append("%s: no %s figure for each of the 2 repetitions" % (n, ph))
# The order of the hand-outs at the end of each repetition: one look per repetition and peer.
for n in peers:
    o = d.get("order", {}).get(n, {})
    q, pct, ch = o.get("qpns", 0), o.get("adjacent_pct", []), o.get("block_changes", [])
    if q < 2 or len(pct) != 2 or len(ch) != 2 or not all(0 <= x <= 100 for x in pct) \
            or not all(0 <= x < q for x in ch) or o.get("block_changes_in_address_order") != q // 512:
        bad.append("%s: order %s" % (n, o))
# The quarantine after the repetitions' other workloads, recomputed from the pair_aged figures.
if "qpnpool" in peers and "qpnpool-q" in peers:
    h = d.get("history", {})
    a = d["results"]["pair_aged"]
    w, wo = med(a["qpnpool-q"]["cycles_per_op"]), med(a["qpnpool"]["cycles_per_op"])
    if not near(h.get("with_cycles", 0), w) or not near(h.get("without_cycles", 0), wo) \
            or not near(h.get("quarantine_vs_none_aged", 0), w / wo):
        bad.append("history %s, want %s / %s" % (h, w, wo))
if lcores:
    for n in peers:
        pts = d["results"]["scaling"].get(n, {}).get("points", [])
        ks = [p["lcores"] for p in pts if p["mops_median"] and p["mops_median"] > 0]
        if ks[:2] != [1, 2]:
            bad.append("%s: scaling points %s, want 1 and 2 lcores" % (n, ks))
        if len(d["results"]["scaling"][n].get("solo", [])) != 2:
            bad.append("%s: no solo figure for each lcore" % n)
keys = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
for n in peers:
    for op in ("alloc", "free"):
        h = d["latency"][n][op]
        v = [h[k] for k in keys]
        if v != sorted(v) or h["count"] != sum(c for _, c in h["hist"]):
            bad.append("%s %s: percentiles not ordered or histogram short: %s" % (n, op, v))
for k, a in d["aims"].items():
    if "met" not in a or "figures" not in a:
        bad.append("aim %s without met/figures" % k)
# The cycle aims are the medians of the per-repetition ratios: recomputed from the figures.
for key, a, b in (("pair_cycles_vs_mempool", "qpnpool", "mempool"),
                  ("quarantine_vs_none", "qpnpool-q", "qpnpool"),
                  ("pair_vs_floor", "qpnpool", "floor")):
    if a not in peers or b not in peers:
        continue
    ca, cb = (d["results"]["pair"][n]["cycles_per_op"] for n in (a, b))
    want = med([x / y for x, y in zip(ca, cb)])
    got = d["aims"][key]["value"]
    if not near(got, want):
        bad.append("aim %s: %s, want %s (median of per-repetition ratios)" % (key, got, want))
# The disturbed repetitions, recomputed from the floor's pair figures.
if "floor" in peers:
    dist = d.get("disturbance", {})
    f = d["results"]["pair"]["floor"].get("cycles_per_op", [])
    if not f or "threshold" not in dist or "pair_vs_mempool_undisturbed" not in dist:
        bad.append("no disturbance report: %s" % dist)
    else:
        want = [i + 1 for i, c in enumerate(f) if c > dist["threshold"] * min(f)]
        if dist.get("repetitions") != want or not near(dist.get("best_cycles", 0), min(f)):
            bad.append("disturbance %s, want repetitions %s best %s" % (dist, want, min(f)))
print("\n".join(bad) if bad else "json ok: %d peers" % len(peers))
sys.exit(1 if bad else 0)
PY

if ! "$src/app/qpn-perf/qpn-perf-report" "$tmp/perf.json" "$tmp/report" >"$tmp/rep" 2>&1; then
	echo "qpn-perf-report failed:"
	cat "$tmp/rep"
	exit 1
fi
fail=0
imgs=(cost.png latency.png)
[ "$lcores" = on ] && imgs+=(scaling.png)
for f in index.html "${imgs[@]}"; do
	if [ ! -s "$tmp/report/$f" ]; then
		echo "report: $f missing"
		fail=1
	fi
done
for s in "Aims" "Cost per operation" "Scaling" "Latency" "Instructions per operation" \
	"Memory" "Run"; do
	if ! grep -q "<h2 id=[^>]*>$s</h2>" "$tmp/report/index.html"; then
		echo "report: no section $s"
		fail=1
	fi
done
if ! grep -q "After a repetition's other workloads (pair_aged)" "$tmp/report/index.html"; then
	echo "report: the aims do not give the quarantine's cost after the other workloads"
	fail=1
fi

# The qpn-testpmd side: the steps/timeline contract, and today's JSON without them.
cat >"$tmp/tp.json" <<'JS'
{"meta": {"tool": "qpn-testpmd", "version": "x"}, "engine": "dci-reconnect",
 "conn_per_sec": 1000.0,
 "steps": {"connect": {"count": 3, "min_ns": 1, "mean_ns": 2, "p50_ns": 2, "p90_ns": 3,
   "p99_ns": 3, "p999_ns": 3, "max_ns": 3, "hist": [[2, 1], [4, 2]]}},
 "timeline": [{"t_s": 1, "connections": 10, "conn_per_sec": 10.0},
   {"t_s": 2, "connections": 30, "conn_per_sec": 20.0}]}
JS
echo '{"meta": {"tool": "qpn-testpmd"}, "engine": "alloc", "connections": 5}' >"$tmp/tp0.json"
for j in tp tp0; do
	if ! "$src/app/qpn-perf/qpn-perf-report" "$tmp/$j.json" "$tmp/$j" >"$tmp/rep" 2>&1 ||
		! grep -q "Connections per second over time" "$tmp/$j/index.html" ||
		! grep -q "Per-step latency" "$tmp/$j/index.html"; then
		echo "report of a qpn-testpmd JSON ($j) failed:"
		cat "$tmp/rep"
		fail=1
	fi
done
for f in timeline.png steps.png; do
	[ -s "$tmp/tp/$f" ] || { echo "testpmd report: $f missing"; fail=1; }
done
[ $fail -eq 0 ] && echo "report ok"
exit $fail
