#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/soak.sh [MINUTES [PROCS [QUARANTINE_MS]]]     (defaults: 30 minutes, 3, 50 ms)
#
# For a lab, not the test command (which runs 30 s of it as the `soak` test).
# Multi-process churn on one emulated device for MINUTES: worker processes allocate, hold and
# free QPNs at full speed while one of them is SIGKILLed every 50-400 ms (during start-up, inside
# a reservation holding the device lock, inside pool calls) and the emulated firmware fails some
# commands. An independent checker reads every process's event log afterwards and counts
# violations of invariants 1, 2, 4 and 5 (doc/guides/reliability.md), and for each death the time
# from the kill to the first hand-out of its QPNs to another process (min/median/max against the
# quarantine: never below it; above it by the time the next process took a range). Prints
# operations, kills, QPNs reclaimed, return times, faults, violations and whether the whole
# capacity came back at the end; writes build/soak.json; exits non-zero on any violation or loss.
# Needs the build of devtools/quickstart.sh (made here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-30}
procs=${2:-3}
quarantine_ms=${3:-50}
if ! [[ "$minutes" =~ ^[0-9]+$ ]] || [ "$minutes" -lt 1 ] || ! [[ "$procs" =~ ^[0-9]+$ ]] ||
	! [[ "$quarantine_ms" =~ ^[0-9]+$ ]]; then
	echo "usage: $0 [MINUTES [PROCS [QUARANTINE_MS]]]   (whole minutes >= 1; default 30 3 50)" >&2
	exit 2
fi
if [ ! -f build/build.ninja ]; then
	meson setup build >/dev/null
fi
ninja -C build tests/soak/qpn_soak >/dev/null
exec ./build/tests/soak/qpn_soak --seconds $((minutes * 60)) --procs "$procs" \
	--quarantine-ms "$quarantine_ms" --json build/soak.json
