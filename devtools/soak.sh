#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/soak.sh MINUTES [PROCS]
#
# Multi-process churn on one emulated device for MINUTES: worker processes allocate, hold and
# free QPNs at full speed while one of them is SIGKILLed every 50-400 ms (during start-up, inside
# a reservation holding the device lock, inside pool calls) and the emulated firmware fails some
# commands. An independent checker reads every process's event log afterwards and counts
# violations of invariants 1, 2, 4 and 5 (doc/guides/reliability.md). Prints operations, kills,
# QPNs reclaimed, faults and violations; writes build/soak.json; exits non-zero on any violation.
# Needs the build of devtools/quickstart.sh (made here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-}
procs=${2:-3}
if ! [[ "$minutes" =~ ^[0-9]+$ ]] || [ "$minutes" -lt 1 ] || ! [[ "$procs" =~ ^[0-9]+$ ]]; then
	echo "usage: $0 MINUTES [PROCS]   (whole minutes >= 1)" >&2
	exit 2
fi
if [ ! -f build/build.ninja ]; then
	meson setup build >/dev/null
fi
ninja -C build tests/soak/qpn_soak >/dev/null
exec ./build/tests/soak/qpn_soak --seconds $((minutes * 60)) --procs "$procs" --json build/soak.json
