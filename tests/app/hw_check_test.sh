#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   tests/app/hw_check_test.sh SOURCE_DIR BUILD_DIR
#
# devtools/hw-check.sh where no ConnectX is, on fake sysfs trees (its SYSFS root):
#  - no RDMA device, or only devices of other drivers: exactly one line, exit 2;
#  - discovery by driver, not by name: a device named rocep... whose driver is mlx5_core is
#    found, one named mlx5_... with another driver is skipped; the probe then fails here (no
#    rdma-core device), which is reported as a FAIL step, exit 1, and valid JSON;
#  - the host's DC conditions reported before the first DC step (the kernel's DCI rules from
#    HWCHECK_KERNEL, each device's "DC host:" line or why there is none);
#  - the two-host modes: --serve and --connect refused together, --connect's address checked
#    (one line, exit 2, before any device is looked at), and each mode reported as such.
set -uo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
hc="$src/devtools/hw-check.sh"

# expect_line NAME EXIT PREFIX -- ARGS...: exactly one line starting with PREFIX, exit EXIT.
expect_line() {
	local name=$1 want=$2 prefix=$3 out rc
	shift 4
	out=$("$hc" --build="$build" "$@" 2>&1)
	rc=$?
	if [ $rc -ne "$want" ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] ||
		[[ "$out" != "$prefix"* ]]; then
		echo "$name: expected one line '$prefix...' and exit $want, got exit $rc:"
		printf '%s\n' "$out"
		fail=1
	fi
}

# A fake RDMA device NAME bound to driver DRV, port 1 with LINK_LAYER.
fake_dev() { # root name drv link_layer
	local d="$1/class/infiniband/$2"
	mkdir -p "$d/ports/1" "$d/device" "$1/bus/pci/drivers/$3"
	echo "0002:c903:00a1:b2c3" > "$d/node_guid"
	echo "$4" > "$d/ports/1/link_layer"
	ln -s "../../../../bus/pci/drivers/$3" "$d/device/driver"
}

expect_line "no device" 2 "hw-check: no RDMA device (" -- --sysfs="$tmp/none"
SYSFS="$tmp/none" expect_line "no device (SYSFS)" 2 "hw-check: no RDMA device (" --

fake_dev "$tmp/other" irdma0 irdma Ethernet
fake_dev "$tmp/other" mlx5_decoy rxe_like Ethernet
expect_line "no mlx5 device" 2 "hw-check: no mlx5 RDMA device (" -- --sysfs="$tmp/other"

# The mode arguments: refused in one line before any device is looked at.
expect_line "serve+connect" 2 "hw-check: --serve and --connect are exclusive" -- \
	--sysfs="$tmp/none" --serve --connect=192.0.2.1
expect_line "connect+serve" 2 "hw-check: --serve and --connect are exclusive" -- \
	--sysfs="$tmp/none" --connect=192.0.2.1 --serve
expect_line "bare --connect" 2 "hw-check: --connect needs" -- --sysfs="$tmp/none" --connect
expect_line "connect to a name" 2 "hw-check: --connect=host.example: not an IPv4" -- \
	--sysfs="$tmp/none" --connect=host.example
expect_line "connect to 256.1.1.1" 2 "hw-check: --connect=256.1.1.1: not an IPv4" -- \
	--sysfs="$tmp/none" --connect=256.1.1.1
expect_line "connect port" 2 "hw-check: port '99999'" -- --sysfs="$tmp/none" \
	--connect=192.0.2.1:99999
expect_line "serve duration" 2 "hw-check: --duration=0" -- --sysfs="$tmp/none" --serve \
	--duration=0
expect_line "bad ip" 2 "hw-check: --ip=10.1" -- --sysfs="$tmp/none" --serve --ip=10.1
expect_line "unknown" 2 "hw-check: unknown argument '--bogus'" -- --sysfs="$tmp/none" --bogus

# Discovery by driver: rocep1s0f0 (mlx5_core) found, mlx5_decoy (another driver) skipped.
fake_dev "$tmp/sys" rocep1s0f0 mlx5_core Ethernet
fake_dev "$tmp/sys" mlx5_decoy rxe_like Ethernet
for mode in local serve connect; do
	args=()
	[ $mode = serve ] && args=(--serve --duration=1)
	[ $mode = connect ] && args=(--connect=192.0.2.1:18515 --duration=1)
	kern=5.1.0-test
	[ $mode = serve ] && kern=6.1.0-13-amd64
	out=$(HWCHECK_KERNEL=$kern "$hc" --build="$build" --sysfs="$tmp/sys" --json="$tmp/r.json" \
		"${args[@]}" 2>&1)
	rc=$?
	rules="older than 5.2"
	[ $mode = serve ] && rules="5.2 and later"
	# The conditions come after the probe and before the first DC step (rdma_cm).
	order=$(grep -E "^== host conditions|^FAIL probe|^FAIL rdma_cm" <<< "$out" | head -3 |
		cut -c1-10 | tr '\n' '|')
	if [ $rc -ne 1 ] ||
		! grep -q "^rocep1s0f0  driver mlx5_core  node_guid 0002:c903:00a1:b2c3  ports 1:Ethernet" <<< "$out" ||
		! grep -q "^mlx5_decoy (rxe_like): not an mlx5 device, skipped" <<< "$out" ||
		grep -q "probe mlx5_decoy" <<< "$out" ||
		! grep -q "^PASS discover: 1 mlx5 device(s) by driver mlx5_core: rocep1s0f0$" <<< "$out" ||
		! grep -q "^FAIL probe rocep1s0f0: qpn-testpmd exit" <<< "$out" ||
		! grep -q "^FAIL rdma_cm: no probed mlx5 device" <<< "$out" ||
		! grep -q "^kernel $kern: DCI rules $rules" <<< "$out" ||
		! grep -q "^rocep1s0f0: DC conditions not logged (the probe did not get that far)" <<< "$out" ||
		[ "$order" != "FAIL probe|== host co|FAIL rdma_|" ] ||
		! grep -q "^conditions: CPU .*EAL lcores 0-1.*mode $mode" <<< "$out" ||
		! grep -q "hw-check: FAILED" <<< "$out" ||
		! python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] is False and d["mode"] == sys.argv[2], d
assert [s["pass"] for s in d["steps"]] == [True, False, False], d["steps"]
assert [x["name"] for x in d["devices"]] == ["rocep1s0f0"], d["devices"]
assert d["devices"][0]["dc_host"] is None and "DCI rules" in d["kernel_dci_rules"], d' \
			"$tmp/r.json" $mode; then
		echo "fake mlx5 device, mode $mode: expected discovery by driver, FAIL steps, exit 1, got exit $rc:"
		printf '%s\n' "$out"
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "hw-check test: OK"
exit $fail
