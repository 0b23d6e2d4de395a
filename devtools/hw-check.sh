#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/hw-check.sh [--serve | --connect=IPv4[:PORT]] [--build=DIR] [--device=NAME]
#                        [--ip=IPv4] [--port=N] [--duration=S] [--lcores=LIST] [--json=FILE]
#                        [--sysfs=DIR]
#
# First contact with a ConnectX, in one command per host (doc/guides/driver.md, "Trying it on a
# ConnectX"). On a host with an mlx5 device and the README's packages it
#  1. finds the mlx5 devices by their driver (SYSFS/class/infiniband/*/device/driver is
#     mlx5_core), whatever rdma-core's udev rule named them (mlx5_0, rocep1s0f0, ibp3s0), and
#     lists them (node GUID, ports and link layers, netdevs); other RDMA devices are named and
#     skipped;
#  2. probes each with qpn-testpmd's `alloc` engine: the caps and the QPN source the driver
#     chose (its INFO line at probe), then, before the first DC step, the host's DC conditions:
#     from the probe's "DC host:" line the device's DC transport (cmd_hca_cap.dct), a RoCE bond
#     (LAG) and lag_dct, the port's link layer and whether it requires a GRH; from the kernel's
#     release its DCI rules (DCI->RESET and an RTR address vector from 5.2 on; HWCHECK_KERNEL
#     overrides the release, for tests);
#  3. proves the fabric over rdma_cm on the first probed device (or --device), from its IPv4
#     address (--ip, or the first IPv4 address of its netdev), with DC SENDs on every
#     connection (the client's DCI to the DCT the server's REP names; the server reads them):
#       (default)        a dct-accept server and a dci-reconnect client on this host;
#       --serve          the server alone, for --duration (default 120 s) or until Ctrl-C: run
#                        `--connect=` on the other host meanwhile;
#       --connect=IP[:PORT]  the client alone, to the --serve of the other host;
#  4. prints one report: every step PASS or FAIL with its reason, the rates with the conditions
#     they hold under (CPU model, lcores, timewait and quarantine, duration); --json writes it.
# Exit status: 0 when every step passed, 1 when one failed (the report says which), 2 when there
# is nothing to check (no mlx5 RDMA device: one line; qpn-testpmd not built) or the arguments
# are wrong (one line). SYSFS (or --sysfs) is the sysfs root, "/sys" unless set (tests).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build="$src/build"
device="" ip="" port=18515 duration="" json="" lcores="0-1" mode=local peer=""
sysfs=${SYSFS:-/sys}

die() { # one line, exit 2
	echo "hw-check: $*"
	exit 2
}

parse_args() {
	local a
	for a in "$@"; do
		case "$a" in
		--serve) [ "$mode" = connect ] && die "--serve and --connect are exclusive (one per host)"
			mode=serve ;;
		--connect=*) [ "$mode" = serve ] && die "--serve and --connect are exclusive (one per host)"
			mode=connect; peer=${a#*=} ;;
		--connect) die "--connect needs the serving host's address: --connect=IPv4[:PORT]" ;;
		--build=*) build=${a#*=} ;;
		--device=*) device=${a#*=} ;;
		--ip=*) ip=${a#*=} ;;
		--port=*) port=${a#*=} ;;
		--duration=*) duration=${a#*=} ;;
		--lcores=*) lcores=${a#*=} ;;
		--json=*) json=${a#*=} ;;
		--sysfs=*) sysfs=${a#*=} ;;
		-h | --help) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) die "unknown argument '$a' (--help lists them)" ;;
		esac
	done
}

is_ipv4() {
	local IFS=. o n=0
	[[ "$1" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
	for o in $1; do
		[ "$((10#$o))" -le 255 ] || return 1
		n=$((n + 1))
	done
	[ $n -eq 4 ]
}

is_port() { [[ "$1" =~ ^[0-9]{1,5}$ ]] && [ "$((10#$1))" -ge 1 ] && [ "$((10#$1))" -le 65535 ]; }

check_args() {
	if [ "$mode" = connect ]; then
		local host=${peer%%:*}
		[ "$host" != "$peer" ] && port=${peer#*:}
		is_ipv4 "$host" || die "--connect=$peer: not an IPv4 address (--connect=IPv4[:PORT])"
		peer=$host
	fi
	is_port "$port" || die "port '$port' is not 1..65535"
	[ -z "$ip" ] || is_ipv4 "$ip" || die "--ip=$ip: not an IPv4 address"
	[ -z "$duration" ] || [[ "$duration" =~ ^[0-9]+$ && "$duration" -ge 1 ]] ||
		die "--duration=$duration: a whole number of seconds, at least 1"
	[[ "$lcores" =~ ^[0-9]+([-,][0-9]+)*$ ]] || die "--lcores=$lcores: an EAL lcore list (0-1)"
	[ -n "$duration" ] || { [ "$mode" = serve ] && duration=120 || duration=5; }
}

# The RDMA devices, split by driver: mlx5 (mlx5_core) into $mlx5, the others into $others.
discover() {
	local d drv
	ibdir="$sysfs/class/infiniband"
	mlx5=() others=()
	[ -d "$ibdir" ] || return 0
	for d in "$ibdir"/*; do
		[ -e "$d" ] || continue
		drv=$(basename "$(readlink -f "$d/device/driver" 2>/dev/null || echo none)")
		if [ "$drv" = mlx5_core ]; then
			mlx5+=("$(basename "$d")")
		else
			others+=("$(basename "$d") ($drv)")
		fi
	done
}

no_device_line() {
	if [ ${#others[@]} -eq 0 ]; then
		die "no RDMA device ($ibdir is empty or absent): nothing to check on this host"
	fi
	die "no mlx5 RDMA device (${others[*]}: none has driver mlx5_core): nothing to check on this host"
}

parse_args "$@"
check_args
discover
[ ${#mlx5[@]} -gt 0 ] || no_device_line
if [ -n "$device" ] && [[ " ${mlx5[*]} " != *" $device "* ]]; then
	die "--device=$device is not one of the mlx5 devices (${mlx5[*]})"
fi
testpmd="$build/app/qpn-testpmd/qpn-testpmd"
if [ ! -x "$testpmd" ]; then
	testpmd=$(command -v qpn-testpmd || true)
	[ -n "$testpmd" ] ||
		die "qpn-testpmd not built (looked in $build/app/qpn-testpmd and PATH; --build=DIR)"
fi
tmp=$(mktemp -d)
server_pid=""
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
steps=() # "PASS|FAIL step: reason", in order
eal=(--no-huge --no-pci -m 512 -l "$lcores" --log-level=lib.eal:error --log-level=mlx5_qpn.hw:info)

# Record and print one step's verdict.
step() { # PASS|FAIL text
	steps+=("$1 $2")
	echo "$1 $2"
	[ "$1" = PASS ] || fail=1
}

# A number from a qpn-testpmd JSON summary (dotted path), or "-" when absent.
jget() { # file path
	python3 - "$1" "$2" <<'PY' 2>/dev/null || echo "-"
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(round(v, 1) if isinstance(v, float) else v)
PY
}

list_devices() {
	local d p guid ports nets o
	echo "== RDMA devices (mlx5 by driver: $ibdir/*/device/driver -> mlx5_core)"
	for d in "${mlx5[@]}"; do
		guid=$(cat "$ibdir/$d/node_guid" 2>/dev/null || echo "?")
		ports=""
		for p in "$ibdir/$d"/ports/*; do
			[ -e "$p" ] && ports+=" $(basename "$p"):$(cat "$p/link_layer" 2>/dev/null || echo ?)"
		done
		nets=""
		for p in "$ibdir/$d"/device/net/*; do
			[ -e "$p" ] && nets+="$(basename "$p") "
		done
		echo "$d  driver mlx5_core  node_guid $guid  ports${ports:- none}  netdev ${nets:-none}"
	done
	for o in "${others[@]}"; do
		echo "$o: not an mlx5 device, skipped"
	done
	step PASS "discover: ${#mlx5[@]} mlx5 device(s) by driver mlx5_core: ${mlx5[*]}"
}

declare -A caps source probed
probe_devices() {
	local d out rc line
	echo "== probe (alloc engine, 1 s)"
	for d in "${mlx5[@]}"; do
		out="$tmp/alloc_$d.log"
		"$testpmd" "${eal[@]}" --file-prefix="hwcheck_alloc_$d" -- --qpn-dev="ib=$d" \
			--engine=alloc --duration=1 --json="$tmp/alloc_$d.json" > "$out" 2>&1
		rc=$?
		line=$(grep -m1 "QPN source:" "$out")
		caps[$d]=${line#*mlx5_qpn.hw: }
		source[$d]=${line##*QPN source: }
		if [ $rc -eq 0 ]; then
			probed[$d]=1
			step PASS "probe $d: ${caps[$d]:-no caps line logged}; alloc $(jget "$tmp/alloc_$d.json" connections) QPNs in 1 s, pool capacity $(jget "$tmp/alloc_$d.json" pool.capacity)"
		else
			step FAIL "probe $d: qpn-testpmd exit $rc: $(grep -m1 -i -E 'error|fail|cannot|refus' "$out" || tail -1 "$out")"
			sed 's/^/    /' "$out" | tail -15
		fi
	done
}

# The host's DC conditions, before the first DC step (see the header): each probe's "DC host:"
# line, and the DCI rules of the kernel's release.
declare -A dchost
kernel_rules=""
host_conditions() {
	local d line rel maj min rules="unknown (release not read)"
	echo "== host conditions (before the first DC step)"
	for d in "${mlx5[@]}"; do
		line=$(grep -m1 "DC host:" "$tmp/alloc_$d.log" 2>/dev/null)
		dchost[$d]=${line#*DC host: }
		echo "$d: ${dchost[$d]:-DC conditions not logged (the probe did not get that far)}"
	done
	rel=${HWCHECK_KERNEL:-$(uname -r)}
	IFS=. read -r maj min _ <<< "${rel%%-*}"
	if [[ "$maj" =~ ^[0-9]+$ && "${min:-}" =~ ^[0-9]+$ ]]; then
		if ((maj > 5 || (maj == 5 && min >= 2))); then
			rules="5.2 and later (DCI->RESET and an RTR address vector accepted)"
		else
			rules="older than 5.2 (no DCI->RESET: a DCI in ERR must be made again; DCIs reach RTR without an address vector)"
		fi
	fi
	kernel_rules="kernel $rel: DCI rules $rules"
	echo "$kernel_rules"
	echo "(a vendor kernel may carry the 5.2 rules under an older release: the driver's line at the first DCI says which it met)"
}

# The device for the connections and its address; false (a FAIL recorded) when there is none.
pick_device() {
	local d nd
	if [ -z "$device" ]; then
		for d in "${mlx5[@]}"; do
			[ -n "${probed[$d]:-}" ] && { device=$d; break; }
		done
	fi
	if [ -z "$device" ] || [ -z "${probed[$device]:-}" ]; then
		step FAIL "rdma_cm: no probed mlx5 device: connections not tried"
		return 1
	fi
	if [ -z "$ip" ]; then
		for nd in "$ibdir/$device"/device/net/*; do
			[ -e "$nd" ] || continue
			ip=$(ip -4 -o addr show dev "$(basename "$nd")" 2>/dev/null | awk '{print $4}' |
				cut -d/ -f1 | head -1)
			[ -n "$ip" ] && break
		done
	fi
	if [ -z "$ip" ]; then
		step FAIL "rdma_cm: $device has no IPv4 address on its netdev: give --ip=IPv4"
		return 1
	fi
}

# The passive side: dct-accept on $ip:$port for SECS seconds (in the background).
start_server() { # secs
	"$testpmd" "${eal[@]}" --file-prefix=hwcheck_srv -- --qpn-dev="ib=$device" \
		--engine=dct-accept --hw-bind="$ip" --hw-port="$port" \
		--duration="$1" --json="$tmp/srv.json" > "$tmp/srv.log" 2>&1 &
	server_pid=$!
}

# The active side: dci-reconnect to $1:$port for $duration seconds; its exit status.
run_client() { # peer
	"$testpmd" "${eal[@]}" --file-prefix=hwcheck_cli -- --qpn-dev="ib=$device" \
		--engine=dci-reconnect --hw-peer="$1:$port" --hw-bind="$ip" \
		--duration="$duration" --json="$tmp/cli.json" > "$tmp/cli.log" 2>&1
}

cps="-" stale="-" errors="-" server_conns="-" sends="-" comps="-" cerrs="-" recvd="-" rerrs="-"
tw="-" quar="-"

# The client's verdict from its JSON (exit status $1).
judge_client() { # exit status
	cps=$(jget "$tmp/cli.json" conn_per_sec)
	stale=$(jget "$tmp/cli.json" stale_rejects)
	errors=$(jget "$tmp/cli.json" errors.other)
	sends=$(jget "$tmp/cli.json" data.sends)
	comps=$(jget "$tmp/cli.json" data.completions)
	cerrs=$(jget "$tmp/cli.json" data.error_completions)
	tw=$(jget "$tmp/cli.json" timewait_ms)
	quar=$(jget "$tmp/cli.json" quarantine_us)
	local why=""
	[ "$1" -ne 0 ] && why+="client exit $1; "
	[[ "$cps" = "-" || "$cps" = 0 || "$cps" = 0.0 ]] && why+="no connection made; "
	[ "$stale" != 0 ] && why+="stale rejects $stale; "
	[ "$sends" = 0 ] && why+="no DC send; "
	[ "$cerrs" != 0 ] && why+="$cerrs DC sends completed in error; "
	if [ -n "$why" ]; then
		step FAIL "client (dci-reconnect to $2:$port): ${why%; }"
		echo "client (last lines):"; tail -15 "$tmp/cli.log" | sed 's/^/    /'
	else
		step PASS "client (dci-reconnect to $2:$port): $cps connections/s, $sends DC sends, all completed"
	fi
}

# The server's verdict from its JSON (exit status $1).
judge_server() { # exit status
	server_conns=$(jget "$tmp/srv.json" connections)
	recvd=$(jget "$tmp/srv.json" data.received)
	rerrs=$(jget "$tmp/srv.json" data.error_completions)
	[ "$tw" = "-" ] && tw=$(jget "$tmp/srv.json" timewait_ms)
	[ "$quar" = "-" ] && quar=$(jget "$tmp/srv.json" quarantine_us)
	local why=""
	[ "$1" -ne 0 ] && why+="server exit $1; "
	[[ "$server_conns" = "-" || "$server_conns" = 0 ]] && why+="no connection accepted; "
	[ "$rerrs" != 0 ] && why+="$rerrs bad receives; "
	if [ -n "$why" ]; then
		step FAIL "server (dct-accept on $ip:$port): ${why%; }"
		echo "server (last lines):"; tail -15 "$tmp/srv.log" | sed 's/^/    /'
	else
		step PASS "server (dct-accept on $ip:$port): $server_conns connections accepted, $recvd DC sends received and checked"
	fi
}

run_connections() {
	local crc src_rc
	case "$mode" in
	local)
		echo "== rdma_cm on $device through $ip:$port (server and client on this host, ${duration} s)"
		start_server $((duration + 3))
		sleep 2
		run_client "$ip"; crc=$?
		wait "$server_pid"; src_rc=$?; server_pid=""
		judge_client $crc "$ip"
		judge_server $src_rc ;;
	serve)
		echo "== serving rdma_cm on $device at $ip:$port for ${duration} s (Ctrl-C ends it)"
		echo "   on the other host: devtools/hw-check.sh --connect=$ip:$port"
		start_server "$duration"
		trap 'kill -INT "$server_pid" 2>/dev/null' INT
		wait "$server_pid"; src_rc=$?
		[ $src_rc -gt 128 ] && { wait "$server_pid"; src_rc=$?; }
		server_pid=""
		trap - INT
		judge_server $src_rc ;;
	connect)
		echo "== rdma_cm from $device ($ip) to $peer:$port (${duration} s)"
		run_client "$peer"; crc=$?
		judge_client $crc "$peer" ;;
	esac
}

# Under what the rates hold.
conditions() {
	local cpu
	cpu=$(grep -m1 "model name" /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
	echo "conditions: CPU ${cpu:-unknown}, $(nproc) CPUs; EAL lcores $lcores in each qpn-testpmd; CM timewait ${tw} ms, quarantine ${quar} us; ${duration} s run, mode $mode"
}

list_devices
probe_devices
host_conditions
pick_device && run_connections

echo "== report"
for d in "${mlx5[@]}"; do
	echo "$d: source ${source[$d]:-?}; caps: ${caps[$d]:-not logged}; DC host: ${dchost[$d]:-not logged}"
done
echo "$kernel_rules"
printf '%s\n' "${steps[@]}"
echo "connections: device ${device:-none}, ${cps} connections/s (client), ${server_conns} accepted (server), stale rejects ${stale}, errors ${errors}"
echo "DC data: ${sends} sends, ${comps} completions (${cerrs} in error) on the client; ${recvd} received and checked (${rerrs} bad) on the server"
cond=$(conditions)
echo "$cond"
if [ -n "$json" ]; then
	DEVS="${mlx5[*]}" STEPS=$(printf '%s\n' "${steps[@]}") COND="$cond" KRULES="$kernel_rules" \
		python3 - "$json" "$tmp" \
		"${device:-}" "$cps" "$stale" "$errors" "$server_conns" "$mode" "$fail" "$sends" \
		"$comps" "$cerrs" "$recvd" "$rerrs" <<'PY'
import json, os, sys
out, tmp, device, cps, stale, errors, srv, mode, fail = sys.argv[1:10]
sends, comps, cerrs, recvd, rerrs = sys.argv[10:15]
def num(v):
    try:
        return float(v) if "." in v else int(v)
    except ValueError:
        return None
devices = []
for d in os.environ["DEVS"].split():
    log = os.path.join(tmp, "alloc_%s.log" % d)
    line = host = ""
    if os.path.exists(log):
        line = next((l.strip() for l in open(log) if "QPN source:" in l), "")
        host = next((l.strip() for l in open(log) if "DC host:" in l), "")
    devices.append({"name": d, "caps": line.split("mlx5_qpn.hw: ", 1)[-1] or None,
                    "source": line.rsplit("QPN source: ", 1)[-1] if line else None,
                    "dc_host": host.split("DC host: ", 1)[-1] if host else None})
steps = [{"pass": s.startswith("PASS "), "step": s[5:]}
         for s in os.environ["STEPS"].splitlines() if s]
json.dump({"mode": mode, "devices": devices, "steps": steps, "connections": {
    "device": device or None, "conn_per_sec": num(cps), "server_accepted": num(srv),
    "stale_rejects": num(stale), "errors": num(errors)},
    "dc_data": {"sends": num(sends), "completions": num(comps), "error_completions": num(cerrs),
                "received": num(recvd), "receive_errors": num(rerrs)},
    "kernel_dci_rules": os.environ["KRULES"],
    "conditions": os.environ["COND"], "ok": fail == "0"}, open(out, "w"), indent=2)
PY
	echo "JSON: $json"
fi
[ $fail -eq 0 ] && echo "hw-check: OK" || echo "hw-check: FAILED (send this whole output back, see doc/guides/driver.md)"
exit $fail
