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
      libgtest-dev libgmock-dev clang-format-14 clang-tidy-14 libjansson-dev python3-matplotlib
      valgrind ccache)
# gdb: a test that hangs reports every thread's stack (tests/common/hang_report.h).
[ "$mode" = run ] || pkgs+=(gdb)
# dpdk, python3-pyelftools: DPDK's dpdk-pmdinfo.py, which the vdev tests run on the library.
[ "$mode" = run ] || pkgs+=(dpdk python3-pyelftools)
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

# ccache (meson puts it before the compiler when it is installed at `meson setup`): the test
# command in a new clone of a tree compiled before on this machine, in any folder (CI clones into
# a new one each time), takes its objects from the cache instead of compiling them again. Paths
# under the clone's root are hashed relative to it (the build commands name the sources
# relative to the build directory, and meson's include paths too); the debug information of the
# sanitizer trees (-g1) names the build directory relative to the root (-fdebug-prefix-map), so
# it keys on no folder either; pch_defines,time_macros let ccache cache the sources compiled
# with the test suite's precompiled header (tests/pch/); include_file_mtime/ctime: a fresh
# clone's files are all seconds old, and ccache would otherwise not trust their stat (and
# preprocess every source again to be sure). The cache is the user's (ccache's default place).
export CCACHE_BASEDIR=$PWD
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

# DPDK's driver-SDK headers of the installed version, for the mlx5_qpn vdev (Debian's DPDK has
# none: the script fetches them once from Debian's source package; without them, one line and
# everything else builds).
sdk=$(devtools/dpdk-sdk-headers.sh) || sdk=""
configure() { # dir [meson options...]
	local dir=$1; shift
	if [ ! -f "$dir/build.ninja" ]; then
		echo "quickstart: configuring $dir"
		meson setup "$dir" -Ddpdk_sdk_headers="$sdk" "$@" >/dev/null
	fi
}
# Ninja's own progress ([done/total] and the file at hand) stays on screen: a first build takes
# minutes on a small machine, and a silent one looks hung.
build() { # dir [targets...]
	local dir=$1; shift
	echo "quickstart: building ${*:-everything} in $dir"
	ninja -C "$dir" "$@"
}

# Runs a command and leaves "WALL USER SYS" (seconds; the CPU of its children included) in FILE:
# each phase below says its wall time and its CPU, which a machine shared with other work
# inflates less than the wall time. Exit status: the command's.
timed() { # file command...
	local out=$1 TIMEFORMAT='%2R %2U %2S'
	shift
	{ time "$@" 2>&4 4>&-; } 4>&2 2>"$out"
}
# "N s (CPU M s)" from timed's FILE.
took() { # file
	awk '{printf "%.0f s (CPU %.0f s)", $1, $2 + $3}' "$1" 2>/dev/null || echo "? s"
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

# test: three trees (release, ASan+UBSan, ThreadSanitizer), each running the same suites (the
# sanitizer trees skip the source checks and the docs' commands, which the release tree runs).
# On a small machine (CI: 2 cores) the wall time is compile + tests of each tree; the two overlap
# here: while a tree's tests run, the next trees compile at the lowest CPU priority (nice 19), so
# they only take the CPU the tests leave idle (the tests sleep, poll at low rate, wait on child
# processes) and the tests see the machine as if alone. Each tree's suite starts as soon as the
# tree is built, beside the others (below).
# -g1: line tables only (what a sanitizer report and a hang report's stacks print: function,
# file, line), not full debug info: the ASan tree compiled in 169 s instead of 224 s (CPU 327 s
# instead of 433 s) on the 2-core VM, and the background sanitizer builds are what the test
# command waits for.
g1=("-Dcpp_args=-g1 -fdebug-prefix-map=$PWD=." "-Dc_args=-g1 -fdebug-prefix-map=$PWD=.")
asan_opts=("-Db_sanitize=address,undefined" -Dbuildtype=debug -Db_lundef=false "${g1[@]}")
tsan_opts=(-Db_sanitize=thread -Dbuildtype=debug -Db_lundef=false "${g1[@]}")
configure build
configure build-asan "${asan_opts[@]}"
configure build-tsan "${tsan_opts[@]}"
# The sanitizer trees build in the background, one after the other, from the start (the release
# build, at normal priority, takes the CPU first; the background one fills its gaps, e.g. links).
# Each leaves its ninja output in DIR/quickstart-build.log and its exit status in
# DIR/quickstart-build.rc.
bg_build() { # dirs...
	local dir rc
	for dir in "$@"; do
		rc=0
		timed "$dir/quickstart-build.time" nice -n 19 ninja -C "$dir" \
			>"$dir/quickstart-build.log" 2>&1 || rc=$?
		echo "$rc" >"$dir/quickstart-build.rc"
		[ "$rc" -eq 0 ] || return
	done
}
passed=0
failed=0
t0=$SECONDS
rm -f build-asan/quickstart-build.rc build-tsan/quickstart-build.rc
bg_build build-tsan build-asan &
bg_pid=$!
# On an early exit (a failed test) the background build (its ninja too) and the background suites
# (their meson test, which stops its tests) stop with the script.
suite_pids=()
stop_bg() {
	local p
	for p in "$bg_pid" "${suite_pids[@]}"; do
		kill $(pgrep -P "$p") "$p" 2>/dev/null || true
	done
}
trap stop_bg EXIT
timed build/quickstart-build.time build build
echo "quickstart: built build in $(took build/quickstart-build.time)"

# Waits for a background build, showing ninja's progress every 15 s (a silent wait looks hung).
wait_built() { # dir
	local dir=$1 n=0 start=$SECONDS
	while [ ! -f "$dir/quickstart-build.rc" ] && kill -0 "$bg_pid" 2>/dev/null; do
		check_suites
		[ $((n++ % 15)) -ne 0 ] ||
			echo "quickstart: building $dir: $(tail -n 1 "$dir/quickstart-build.log" 2>/dev/null)"
		sleep 1
	done
	if [ "$(cat "$dir/quickstart-build.rc" 2>/dev/null)" != 0 ]; then
		cat "$dir/quickstart-build.log" >&2 || true
		echo "quickstart: building $dir failed" >&2
		finish 1
	fi
	echo "quickstart: built $dir in $(took "$dir/quickstart-build.time") (in the background," \
		"$(grep -c '^\[' "$dir/quickstart-build.log") steps; waited for it $((SECONDS - start)) s)"
}
# The sanitizer trees' tests start hundreds of processes (every test area, and qpn-testpmd,
# qpn-perf, qpn_mp_proc from the tests). Debian's DPDK is a shared build, so rte_eal_init dlopens
# every driver of its plugin directory (pmds-23.0: ~130 drivers, which pull in libibverbs, libmlx5
# and more); ThreadSanitizer, on each dlopen, walks the whole list of loaded modules again (its
# called_from_lib ignore list, with a 4 KiB mmap/munmap per module), so a TSan process spent
# ~3.5 s of CPU starting (~40k mmap/munmap pairs) before its first line of our code. No EAL option
# turns the plugin directory off. The tests use none of those drivers (--no-pci, no ethdev) except
# rte_mempool's software backends (the CM fabric's frame pool uses the ring ops), the vdev bus
# (the driver's vdev) and net_null (a vdev test's foreign vdev):
# as root, the sanitizer suites run in a mount namespace of their own where the plugin directory
# holds only those (copied from it); the EAL options and the tests are the same. A TSan start
# then costs ~0.45 s of CPU. The release suite keeps the full directory (what a user's process
# loads). Not root, or no mount namespace: the suites run as they are, slower.
pmd_dir=$(ls -d "$(pkg-config --variable=libdir libdpdk 2>/dev/null)"/dpdk/pmds-* 2>/dev/null |
	head -n 1 || true)
with_mempool_pmds() { # build-dir command...: runs the command as described above
	local dir=$1; shift
	local few="$PWD/$dir/quickstart-pmds" f
	if [ "$(id -u)" -eq 0 ] && [ -n "$pmd_dir" ] && command -v unshare >/dev/null; then
		rm -rf "$few"
		mkdir -p "$few"
		# The names must end in .so (or .so.ABI) for EAL to load them. The vdev bus is also
		# a library the driver links (its soname, .so.23, resolves into this folder), and the
		# PCI bus one that net_null links: one copy of each under its soname only, so that
		# EAL's dlopen finds the library already loaded instead of a second file registering
		# the bus again. net_null: the vdev tests' "a vdev of another driver only".
		for f in librte_mempool_ring.so librte_mempool_stack.so librte_mempool_bucket.so \
			librte_net_null.so "$(basename "$(readlink "$pmd_dir/librte_bus_vdev.so")")" \
			"$(basename "$(readlink "$pmd_dir/librte_bus_pci.so")")"; do
			[ ! -e "$pmd_dir/$f" ] || cp -L "$pmd_dir/$f" "$few/"
		done
		if unshare --mount --propagation private mount --bind "$few" "$pmd_dir" 2>/dev/null; then
			unshare --mount --propagation private sh -c \
				'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$few" "$pmd_dir" "$@"
			return
		fi
	fi
	"$@"
}
# One tree's suite: meson test with its log in DIR/quickstart-test.log (tee'd; a TAG prefixes the
# lines on screen when two suites run at once). Exit status: meson's.
suite() { # build-dir mult tag [env...]
	local dir=$1 mult=$2 tag=$3; shift 3
	local log="$dir/quickstart-test.log" wrap=()
	[ "$dir" = build ] || wrap=(with_mempool_pmds "$dir")
	"${wrap[@]}" env QPN_TEST_TIMEOUT_MULT="$mult" "$@" meson test -C "$dir" --no-rebuild \
		--print-errorlogs --num-processes 2 --timeout-multiplier "$mult" "${skip[@]}" 2>&1 |
		tee "$log" | sed -u "s/^/$tag/"
}
# Adds a finished suite's Ok/Fail counts. A test that timed out or passed where a failure was
# expected has failed as well: the count says so (it once read "21 passed, 0 failed" above a
# timeout).
count() { # build-dir
	local log="$1/quickstart-test.log"
	passed=$((passed + $(awk '/^Ok:/ {n = $2} END {print n + 0}' "$log")))
	failed=$((failed + $(awk '/^(Fail|Timeout|Unexpected Pass):/ {n += $NF} END {print n + 0}' \
		"$log")))
}

# Each tree's suite starts as soon as the tree is built, in the background, beside whatever
# still builds or runs: the release suite right after the release build, while the sanitizer
# trees compile at nice 19 (they only take the CPU its tests leave idle); the TSan suite when its
# tree is built, the ASan suite when its tree is. Each suite leaves about half of the two cores
# idle (its tests wait on child processes, sleep through quarantines, poll at low rate: the TSan
# suite used 227 CPU s in 200 s), so side by side they take less than the sum of their times.
# On a first run the sanitizer trees are built after the release suite is done, so
# the release suite runs beside the background builds only; on a repeat (the compiler cache has
# every object) all three suites run at once: the tests must pass beside each other, as they
# must on a loaded CI machine. Their lines on screen carry [tsan] / [asan]; each log is
# DIR/quickstart-test.log, its exit status DIR/quickstart-test.rc. The first failed suite stops
# the command (and the rest, through the trap).
bg_suite() { # build-dir mult tag [env...]: suite in the background
	local dir=$1
	rm -f "$dir/quickstart-test.rc"
	echo "quickstart: testing $dir (in the background)"
	(
		rc=0
		timed "$dir/quickstart-test.time" suite "$@" || rc=1
		echo "quickstart: tests of $dir took $(took "$dir/quickstart-test.time")"
		echo "$rc" >"$dir/quickstart-test.rc"
	) &
	suite_pids+=($!)
	started+=("$dir")
}
# The counts of the suites that ended, then exit with STATUS.
finish() { # status
	local dir
	for dir in "${started[@]}"; do
		[ ! -f "$dir/quickstart-test.rc" ] || count "$dir"
	done
	echo "tests: $passed passed, $failed failed"
	exit "$1"
}
# Exits (status 1) as soon as a suite that ended failed.
check_suites() {
	local dir
	for dir in "${started[@]}"; do
		[ "$(cat "$dir/quickstart-test.rc" 2>/dev/null || echo 0)" = 0 ] || finish 1
	done
}
started=()

skip=()
bg_suite build 1 ""

# The sanitizer builds run what a sanitizer can find something in: not the source checks
# (format, layering, exports) nor the docs' commands, which the release build runs.
skip=(--no-suite check --no-suite doc)
# TSAN_OPTIONS: halt_on_error=1: the first report fails the test (a report is a failure, not a
# line to grep for). second_deadlock_stack=1: a lock-order report shows both acquisitions.
# suppressions: DPDK's uninstrumented synchronisation, each entry explained in the file.
# atexit_sleep_ms=100 (default 1000): at exit, with other threads alive, TSan sleeps this long so
# that they can still race with the exit; every process of these tests has such threads (EAL's
# interrupt, multi-process and telemetry threads, blocked in epoll/recvmsg/accept), so each of
# the suite's hundreds of process exits cost 1 s of wall time for nothing. 100 ms still lets them
# run meanwhile. Left at their defaults, on purpose: detect_deadlocks, report_signal_unsafe,
# io_sync (fds as synchronisation, so no false reports), history_size (older stacks in reports).
tsan_env="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/config/tsan.supp"
# The TSan tree builds first: its suite is the longest (~200 s against ~140 s for ASan's).
# (Built ASan first, with the sanitizer suites side by side: 840 s.)
wait_built build-tsan
bg_suite build-tsan 6 "[tsan] " "TSAN_OPTIONS=$tsan_env atexit_sleep_ms=100"
wait_built build-asan
bg_suite build-asan 4 "[asan] " ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for i in "${!started[@]}"; do
	while [ ! -f "${started[$i]}/quickstart-test.rc" ]; do
		check_suites
		# A suite's shell killed (no status written) is a failure, not a wait without end.
		kill -0 "${suite_pids[$i]}" 2>/dev/null || sleep 1
		[ -f "${started[$i]}/quickstart-test.rc" ] || kill -0 "${suite_pids[$i]}" 2>/dev/null ||
			{ echo "quickstart: the suite of ${started[$i]} was killed" >&2; finish 1; }
		sleep 1
	done
done
check_suites
wait
echo "quickstart: all tests passed (release, ASan+UBSan, TSan) in $((SECONDS - t0)) s"
finish 0
