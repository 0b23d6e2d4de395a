#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The README's two quick-start commands:
#   devtools/quickstart.sh run    install what is missing, build, run qpn-testpmd on the emulated device
#   devtools/quickstart.sh test   install what is missing, build, run every test (plus the ASan+UBSan
#                                 and ThreadSanitizer builds of the suite)
# Idempotent: a second run installs nothing and reuses the build directories.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
run|test) ;;
*) echo "usage: $0 run|test" >&2; exit 2 ;;
esac

# Debian 12 packages the project builds and tests with.
pkgs=(meson ninja-build pkg-config g++ libdpdk-dev libibverbs-dev librdmacm-dev libhwloc-dev
      libgtest-dev libgmock-dev clang-format-14 libjansson-dev python3-matplotlib valgrind)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "quickstart: installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

configure() { # dir [meson options...]
	local dir=$1; shift
	if [ ! -f "$dir/build.ninja" ]; then
		echo "quickstart: configuring $dir"
		meson setup "$dir" "$@" >/dev/null
	fi
}
# Ninja's own progress ([done/total] and the file at hand) stays on screen: a first build takes
# minutes on a small machine, and a silent one looks hung.
build() { # dir [targets...]
	local dir=$1; shift
	echo "quickstart: building ${*:-everything} in $dir"
	ninja -C "$dir" "$@"
}
setup() { # dir [meson options...]: configure and build everything (the test suite included)
	configure "$@"
	build "$1"
}

eal=(--no-huge --no-pci -m 512 -l 0-1 --file-prefix="qs$$" --log-level=lib.eal:error)

if [ "$mode" = run ]; then
	# Only what is run: the app (and the library it links), not the test suite.
	configure build
	build build app/qpn-testpmd/qpn-testpmd
	exec ./build/app/qpn-testpmd/qpn-testpmd "${eal[@]}" -- \
		--qpn-dev=sim0 --engine="${QPN_ENGINE:-dci-reconnect}" --duration="${QPN_DURATION:-3}" \
		--json=build/qpn-testpmd.json
fi

# Multi-process tests (DPDK primary + secondary) need hugepages: set them up as root, else say so
# (those tests then skip with one line each).
if [ "$(id -u)" -eq 0 ]; then
	[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 64 ] || echo 64 > /proc/sys/vm/nr_hugepages || true
	mkdir -p /dev/hugepages
	mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages || true
fi
if ! mountpoint -q /dev/hugepages 2>/dev/null || [ "$(cat /proc/sys/vm/nr_hugepages)" -lt 64 ]; then
	echo "quickstart: no hugepages (needs root): the multi-process tests will be skipped"
fi

setup build

# test: the suite, then the sanitizer builds of it. Each meson test is its own process with its
# own EAL file prefix; the sanitizer builds run the same suites.
passed=0
failed=0
run_suite() { # build-dir [env...]: runs meson test, adds its Ok/Fail counts, fails on failure
	local dir=$1; shift
	local log="$dir/quickstart-test.log" rc=0
	env "$@" meson test -C "$dir" --print-errorlogs --num-processes 2 --timeout-multiplier "$mult" \
		"${skip[@]}" 2>&1 | tee "$log" || rc=1
	passed=$((passed + $(awk '/^Ok:/ {print $2}' "$log" | tail -1)))
	failed=$((failed + $(awk '/^Fail:/ {print $2}' "$log" | tail -1)))
	[ $rc -eq 0 ] || { echo "tests: $passed passed, $failed failed"; exit 1; }
}

mult=1
skip=()
run_suite build
# The sanitizer builds run what a sanitizer can find something in: not the source checks
# (format, layering, exports) nor the docs' commands, which the release build has just run.
skip=(--no-suite check --no-suite doc)
setup build-asan -Db_sanitize=address,undefined -Dbuildtype=debug -Db_lundef=false
mult=4
run_suite build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
setup build-tsan -Db_sanitize=thread -Dbuildtype=debug -Db_lundef=false
mult=6
run_suite build-tsan "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/config/tsan.supp"
echo "quickstart: all tests passed (release, ASan+UBSan, TSan)"
echo "tests: $passed passed, $failed failed"
