#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   tests/app/hw_check_test.sh SOURCE_DIR BUILD_DIR
#
# devtools/hw-check.sh where no ConnectX is: without an RDMA device it stops in exactly one line,
# exit 2; with a fake sysfs naming an mlx5 device that rdma-core cannot open it lists it, runs
# the probe (which fails here), and reports the failure with exit 1 and valid JSON.
set -uo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

out=$("$src/devtools/hw-check.sh" --build="$build" --sysfs="$tmp/none" 2>&1)
rc=$?
if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] ||
	[[ "$out" != "hw-check: no RDMA device ("* ]]; then
	echo "no device: expected one line and exit 2, got exit $rc:"
	printf '%s\n' "$out"
	fail=1
fi

dev=mlx5_qpn_hwcheck0
mkdir -p "$tmp/sys/class/infiniband/$dev/ports/1"
echo "0002:c903:00a1:b2c3" > "$tmp/sys/class/infiniband/$dev/node_guid"
echo "Ethernet" > "$tmp/sys/class/infiniband/$dev/ports/1/link_layer"
# Named like an mlx5 device: listed, probed (rdma-core has no such device), reported failed.
out=$("$src/devtools/hw-check.sh" --build="$build" --sysfs="$tmp/sys" --json="$tmp/r.json" 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! grep -q "^$dev  node_guid 0002:c903:00a1:b2c3  ports 1:Ethernet" <<< "$out" ||
	! grep -q "^$dev: probe/alloc FAILED" <<< "$out" || ! grep -q "hw-check: FAILED" <<< "$out" ||
	! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] is False' \
		"$tmp/r.json"; then
	echo "fake device: expected the listing, a failed report and exit 1, got exit $rc:"
	printf '%s\n' "$out"
	fail=1
fi
[ $fail -eq 0 ] && echo "hw-check test: OK"
exit $fail
