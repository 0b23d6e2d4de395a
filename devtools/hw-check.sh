#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/hw-check.sh [--build=DIR] [--device=NAME] [--ip=IPv4] [--port=N] [--duration=S]
#                        [--json=FILE] [--sysfs=DIR]
#
# First contact with a ConnectX, in one command (doc/guides/driver.md, "Trying it on a
# ConnectX"). On a host with an mlx5 device and the README's packages it
#  1. lists the RDMA devices (/sys/class/infiniband: name, node GUID, ports and link layers,
#     netdevs);
#  2. probes each mlx5 device with qpn-testpmd's `alloc` engine and prints the caps and the QPN
#     source the driver chose (its INFO line at probe, --log-level=mlx5_qpn.hw:info);
#  3. on the first probed device (or --device) runs a `dct-accept` server and a `dci-reconnect`
#     client over rdma_cm on this host, the client connecting to the server through the device's
#     own IPv4 address (--ip, or the first IPv4 address of the device's netdev);
#     (each connection also carries DC SENDs: the client's DCI to the DCT the server's REP
#     names, which the server reads and checks);
#  4. prints one report (caps, source, connections/s, stale rejects, errors, DC sends, their
#     completions and the server's receives) and, with --json, writes it as JSON too.
# Exit status: 0 when every step worked, 1 when one failed (the report says which), 2 when there
# is nothing to check: no RDMA device (one line), or no qpn-testpmd built.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build="$src/build"
device=""
ip=""
port=18515
duration=5
json=""
sysfs=/sys
for a in "$@"; do
	case "$a" in
	--build=*) build=${a#*=} ;;
	--device=*) device=${a#*=} ;;
	--ip=*) ip=${a#*=} ;;
	--port=*) port=${a#*=} ;;
	--duration=*) duration=${a#*=} ;;
	--json=*) json=${a#*=} ;;
	--sysfs=*) sysfs=${a#*=} ;;
	-h | --help)
		sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "hw-check: unknown argument '$a' (--help lists them)"
		exit 2
		;;
	esac
done

ibdir="$sysfs/class/infiniband"
devs=()
if [ -d "$ibdir" ]; then
	for d in "$ibdir"/*; do
		[ -e "$d" ] && devs+=("$(basename "$d")")
	done
fi
if [ ${#devs[@]} -eq 0 ]; then
	echo "hw-check: no RDMA device ($ibdir is empty or absent): nothing to check on this host"
	exit 2
fi
testpmd="$build/app/qpn-testpmd/qpn-testpmd"
if [ ! -x "$testpmd" ]; then
	testpmd=$(command -v qpn-testpmd || true)
	if [ -z "$testpmd" ]; then
		echo "hw-check: qpn-testpmd not built (looked in $build/app/qpn-testpmd and PATH; --build=DIR)"
		exit 2
	fi
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
eal=(--no-huge --no-pci -m 512 -l 0-1 --log-level=lib.eal:error --log-level=mlx5_qpn.hw:info)

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

echo "== RDMA devices"
for d in "${devs[@]}"; do
	guid=$(cat "$ibdir/$d/node_guid" 2>/dev/null || echo "?")
	ports=""
	for p in "$ibdir/$d"/ports/*; do
		[ -e "$p" ] && ports+=" $(basename "$p"):$(cat "$p/link_layer" 2>/dev/null || echo ?)"
	done
	nets=""
	for n in "$ibdir/$d"/device/net/*; do
		[ -e "$n" ] && nets+="$(basename "$n") "
	done
	echo "$d  node_guid $guid  ports${ports:- none}  netdev ${nets:-none}"
done

echo "== probe (alloc engine, 1 s)"
declare -A caps source probed
for d in "${devs[@]}"; do
	[[ "$d" == mlx5_* ]] || { echo "$d: not an mlx5 device, skipped"; continue; }
	out="$tmp/alloc_$d.log"
	"$testpmd" "${eal[@]}" --file-prefix="hwcheck_alloc_$d" -- --qpn-dev="ib=$d" \
		--engine=alloc --duration=1 --json="$tmp/alloc_$d.json" > "$out" 2>&1
	rc=$?
	line=$(grep -m1 "QPN source:" "$out")
	caps[$d]=${line#*mlx5_qpn.hw: }
	source[$d]=${line##*QPN source: }
	if [ $rc -eq 0 ]; then
		probed[$d]=1
		echo "$d: ${caps[$d]:-no caps line logged}"
		echo "$d: alloc $(jget "$tmp/alloc_$d.json" connections) QPNs in 1 s, pool capacity $(jget "$tmp/alloc_$d.json" pool.capacity)"
	else
		fail=1
		echo "$d: probe/alloc FAILED (exit $rc):"
		sed 's/^/    /' "$out" | tail -15
	fi
done

# The device for the connections, and its address.
if [ -z "$device" ]; then
	for d in "${devs[@]}"; do
		[ -n "${probed[$d]:-}" ] && { device=$d; break; }
	done
fi
cps="-"; stale="-"; errors="-"; server_conns="-"; conn_note=""
sends="-"; comps="-"; cerrs="-"; recvd="-"; rerrs="-"
if [ -z "$device" ] || [ -z "${probed[$device]:-}" ]; then
	conn_note="no probed mlx5 device: connections not tried"
	fail=1
else
	if [ -z "$ip" ]; then
		for nd in "$ibdir/$device"/device/net/*; do
			[ -e "$nd" ] || continue
			ip=$(ip -4 -o addr show dev "$(basename "$nd")" 2>/dev/null | awk '{print $4}' |
				cut -d/ -f1 | head -1)
			[ -n "$ip" ] && break
		done
	fi
	if [ -z "$ip" ]; then
		conn_note="$device has no IPv4 address on its netdev: give --ip=IPv4"
		fail=1
	fi
fi
if [ -z "$conn_note" ]; then
	echo "== rdma_cm on $device through $ip:$port (dct-accept server, dci-reconnect client, ${duration} s)"
	"$testpmd" "${eal[@]}" --file-prefix=hwcheck_srv -- --qpn-dev="ib=$device" \
		--engine=dct-accept --hw-bind="$ip" --hw-port="$port" \
		--duration=$((duration + 3)) --json="$tmp/srv.json" > "$tmp/srv.log" 2>&1 &
	server_pid=$!
	sleep 2
	"$testpmd" "${eal[@]}" --file-prefix=hwcheck_cli -- --qpn-dev="ib=$device" \
		--engine=dci-reconnect --hw-peer="$ip:$port" --hw-bind="$ip" \
		--duration="$duration" --json="$tmp/cli.json" > "$tmp/cli.log" 2>&1
	crc=$?
	wait "$server_pid"
	src_rc=$?
	server_pid=""
	cps=$(jget "$tmp/cli.json" conn_per_sec)
	stale=$(jget "$tmp/cli.json" stale_rejects)
	errors=$(jget "$tmp/cli.json" errors.other)
	server_conns=$(jget "$tmp/srv.json" connections)
	sends=$(jget "$tmp/cli.json" data.sends)
	comps=$(jget "$tmp/cli.json" data.completions)
	cerrs=$(jget "$tmp/cli.json" data.error_completions)
	recvd=$(jget "$tmp/srv.json" data.received)
	rerrs=$(jget "$tmp/srv.json" data.error_completions)
	if [ $crc -ne 0 ] || [ $src_rc -ne 0 ] || [ "$cps" = "-" ] || [ "$cps" = "0" ] ||
		[ "$cps" = "0.0" ] || [ "$sends" = "0" ] || [ "$cerrs" != "0" ] || [ "$rerrs" != "0" ]; then
		fail=1
		conn_note="client exit $crc, server exit $src_rc, DC send/receive errors $cerrs/$rerrs"
		echo "client (last lines):"; tail -15 "$tmp/cli.log" | sed 's/^/    /'
		echo "server (last lines):"; tail -15 "$tmp/srv.log" | sed 's/^/    /'
	fi
fi

echo "== report"
for d in "${devs[@]}"; do
	[[ "$d" == mlx5_* ]] || continue
	echo "$d: source ${source[$d]:-?}; caps: ${caps[$d]:-not logged}"
done
echo "connections: device ${device:-none}, ${cps} connections/s (client), ${server_conns} accepted (server), stale rejects ${stale}, errors ${errors}${conn_note:+ ($conn_note)}"
echo "DC data: ${sends} sends, ${comps} completions (${cerrs} in error) on the client; ${recvd} received and checked (${rerrs} bad) on the server"
if [ -n "$json" ]; then
	DEVS="${devs[*]}" python3 - "$json" "$tmp" "${device:-}" "$cps" "$stale" "$errors" \
		"$server_conns" "$conn_note" "$fail" "$sends" "$comps" "$cerrs" "$recvd" "$rerrs" <<'PY'
import json, os, sys
out, tmp, device, cps, stale, errors, srv, note, fail = sys.argv[1:10]
sends, comps, cerrs, recvd, rerrs = sys.argv[10:15]
def num(v):
    try:
        return float(v) if "." in v else int(v)
    except ValueError:
        return None
devices = []
for d in os.environ["DEVS"].split():
    log = os.path.join(tmp, "alloc_%s.log" % d)
    line = ""
    if os.path.exists(log):
        line = next((l.strip() for l in open(log) if "QPN source:" in l), "")
    devices.append({"name": d, "caps": line.split("mlx5_qpn.hw: ", 1)[-1] or None,
                    "source": line.rsplit("QPN source: ", 1)[-1] if line else None})
json.dump({"devices": devices, "connections": {
    "device": device or None, "conn_per_sec": num(cps), "server_accepted": num(srv),
    "stale_rejects": num(stale), "errors": num(errors), "note": note or None},
    "dc_data": {"sends": num(sends), "completions": num(comps), "error_completions": num(cerrs),
                "received": num(recvd), "receive_errors": num(rerrs)},
    "ok": fail == "0"}, open(out, "w"), indent=2)
PY
	echo "JSON: $json"
fi
[ $fail -eq 0 ] && echo "hw-check: OK" || echo "hw-check: FAILED (send this whole output back, see doc/guides/driver.md)"
exit $fail
