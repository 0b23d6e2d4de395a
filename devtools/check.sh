#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/check.sh [--no-format] [--no-library] [--no-tidy] [SOURCE_DIR [BUILD_DIR]]
#
# Every static check of the tree, in one command (run by the test command as the meson test
# 'check', suite 'check'):
#  1. format       clang-format --dry-run --Werror with .clang-format on the tracked *.c *.h
#                  *.cpp under lib/ drivers/ app/ tests/ (skipped, with one line, where no
#                  clang-format is installed; devtools/format.sh applies it);
#  2. editorconfig no trailing whitespace and a final newline in every tracked text file;
#  3. library      the exported symbols, the SONAME and the installed headers
#                  (devtools/check-library.sh; needs BUILD_DIR);
#  4. layering     the include direction by grep (devtools/check-layering.sh) and as the build
#                  enforces it, by compile probes against every library's include path, the
#                  driver's floors included (devtools/check-probe.sh; needs BUILD_DIR);
#  5. dialect      no atomic builtins (C++ atomics only) and no rte_log call outside the one log
#                  macro family in lib/ and drivers/;
#  6. nothrow      no allocation that can throw in lib/ and drivers/: no std::string, std::vector,
#                  std::map, ... and no plain `new` (new (std::nothrow), NtVec instead);
#  7. tidy         one surface dialect (.clang-tidy, doc/guides/contributing.md §3): clang-tidy-14
#                  on the tracked *.cpp of lib/ drivers/ app/ with BUILD_DIR's compile commands,
#                  one line per offence (file:line: check); first it shows one refusal on purpose
#                  (`if (!p)`); a source unchanged since it passed (its includes, flags and
#                  checks too) is not checked again (devtools/tidy-run.py, QPN_TIDY_CACHE=off
#                  checks all); skipped, with one line, where clang-tidy-14 is not installed.
# SOURCE_DIR defaults to this script's tree, BUILD_DIR to SOURCE_DIR/build (parts needing it are
# skipped when it is not a configured build). --no-format or QPN_CHECK_FORMAT=0 skips part 1,
# --no-library part 3 (a sanitizer build's library cannot be linked without its runtime), --no-tidy
# or QPN_CHECK_TIDY=0 part 7 (the sanitizer builds: the same sources, checked once in the plain one).
# Exit status: 0 when every part that ran passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
do_format=${QPN_CHECK_FORMAT:-1}
do_library=1
do_tidy=${QPN_CHECK_TIDY:-1}
while [ $# -gt 0 ]; do
	case "$1" in
	--no-format) do_format=0 ;;
	--no-library) do_library=0 ;;
	--no-tidy) do_tidy=0 ;;
	-h|--help) sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "check: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
src=$(cd "${1:-$here/..}" && pwd)
build=${2:-$src/build}
# The parts are independent (each reads the tree, the library part installs into a directory of
# its own): they run at once, in the background, each into its own output file, and their outputs
# are shown afterwards in the order below, whole, so that each part stays readable. On a 2-core
# CI machine that is the wall time of the longest part (the library's install and compile, the
# include probes) instead of the sum. QPN_CHECK_JOBS=1 runs them one after the other.
failed=()
parts=()
part_dir=$(mktemp -d /tmp/qpn-check.XXXXXX)
trap 'rm -rf "$part_dir"' EXIT
run_part() { # name command...
	local name=$1
	shift
	parts+=("$name")
	{
		"$@"
		echo $? > "$part_dir/$name.rc"
	} > "$part_dir/$name.out" 2>&1 &
	[ "${QPN_CHECK_JOBS:-0}" != 1 ] || wait
}
note_part() { # name line: a part that does not run (its one line, in order)
	parts+=("$1")
	echo "$2" > "$part_dir/$1.out"
	echo 0 > "$part_dir/$1.rc"
	touch "$part_dir/$1.noted"
}

# Tracked files (any file in a tarball without git).
tracked() { # pathspecs...
	if git -C "$src" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
		git -C "$src" ls-files -- "$@"
	else
		(cd "$src" && find . -type f -not -path './build*' -not -path './.git/*' |
			sed 's|^\./||')
	fi
}

check_format() {
	local cf
	cf=$(command -v clang-format-14 || command -v clang-format || true)
	if [ -z "$cf" ]; then
		echo "check: format skipped (no clang-format installed)"
		return 0
	fi
	local files
	mapfile -t files < <(tracked 'lib/*.c' 'lib/*.h' 'lib/*.cpp' 'drivers/*.c' 'drivers/*.h' \
		'drivers/*.cpp' 'app/*.c' 'app/*.h' 'app/*.cpp' 'tests/*.c' 'tests/*.h' 'tests/*.cpp')
	local bad
	# Two clang-format processes (one per CI core), each given a large batch of files: its start
	# (reading .clang-format) is paid once per batch.
	bad=$(cd "$src" && printf '%s\0' "${files[@]}" |
		xargs -0 -n 64 -P 2 "$cf" --style=file --dry-run --Werror 2>&1 |
		sed -n 's|^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*|\1|p' |
		sort | uniq -c)
	if [ -n "$bad" ]; then
		echo "check: $(wc -l <<< "$bad") files are not formatted as .clang-format says" \
			"(lines to change, file; fix with devtools/format.sh):"
		head -20 <<< "$bad"
		return 1
	fi
	echo "check: format OK (${#files[@]} files)"
}

check_editorconfig() {
	# One process for the whole tree. Text files only: binary fuzz corpora are left alone.
	tracked . | grep -v '^tests/fuzz/corpus_' | python3 -c '
import re, sys
src, bad = sys.argv[1], 0
for f in sys.stdin.read().splitlines():
    try:
        data = open(src + "/" + f, "rb").read()
    except (FileNotFoundError, IsADirectoryError):
        continue
    if b"\0" in data[:8192]:
        continue
    for n, line in enumerate(data.split(b"\n"), 1):
        if re.search(rb"[ \t\r\f\v]+$", line):
            print(f"check: trailing whitespace: {f}:{n}")
            bad = 1
    if data and not data.endswith(b"\n"):
        print(f"check: no final newline: {f}")
        bad = 1
if not bad:
    print("check: editorconfig basics OK")
sys.exit(bad)
' "$src"
}

# One dialect for shared state (doc/guides/contributing.md): C++ atomics (std::atomic members,
# std::atomic_ref on fields of layouts that stay plain structs), never the GCC builtins or DPDK's
# legacy rte_atomic API; a log line only through the family in lib/log/mlx5_qpn_log.h. One
# header pair is exempt from the first rule: the inline fast path of the public pool headers is
# compiled by C applications too, and C has no std::atomic: the GCC builtins (shared by C and C++)
# are its atomics, on the fields the library reaches through std::atomic (layouts asserted equal).
check_dialect() {
	local bad=0 hits
	hits=$(cd "$src" && git ls-files -- 'lib/*.h' 'lib/*.cpp' 'drivers/*.h' 'drivers/*.cpp' \
		'app/*.h' 'app/*.cpp' | grep -vxE 'lib/pool/mlx5_qpn_pool(_core)?\.h' |
		xargs grep -nE '__atomic_[a-z_]+\(|\brte_atomic(16|32|64)_' || true)
	if [ -n "$hits" ]; then
		echo "$hits" | sed 's/^/check: atomic builtin (use std::atomic or std::atomic_ref): /'
		bad=1
	fi
	hits=$(cd "$src" && git ls-files -- 'lib/*.h' 'lib/*.cpp' 'drivers/*.h' 'drivers/*.cpp' |
		xargs grep -nE '^[[:space:]]*rte_log\(' | grep -v '^lib/log/' || true)
	if [ -n "$hits" ]; then
		echo "$hits" | sed 's/^/check: rte_log outside the log family (MLX5_QPN_LOG): /'
		bad=1
	fi
	[ $bad -eq 0 ] && echo "check: dialect OK (C++ atomics, one log family)"
	return $bad
}

# No allocation that can throw in the library (doc/guides/contributing.md §3): it is built with
# -fno-exceptions, where a failed std::string, std::vector, ... or plain `new` is std::terminate,
# an abort on a path whose C API promises -ENOMEM. Containers, their helpers and `new T` without
# (std::nothrow) are refused in lib/ and drivers/; placement new (`new (mem) T`) allocates nothing
# and passes. Comments and string literals are blanked first (lines kept), so prose may say "new".
check_nothrow() {
	local hits
	hits=$(cd "$src" && git ls-files -- 'lib/*.h' 'lib/*.cpp' 'drivers/*.h' 'drivers/*.cpp' |
		xargs perl -e '
my $types = qr/string|wstring|basic_string|vector|map|multimap|set|multiset|unordered_map|
	unordered_multimap|unordered_set|unordered_multiset|list|forward_list|deque|function|
	make_unique|make_shared|to_string/x;
for my $f (@ARGV) {
	open(my $fh, "<", $f) or next;
	local $/;
	my $text = <$fh>;
	# Blank comments and string and character literals, keeping the line breaks.
	$text =~ s{//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27}
		{ (my $m = $&) =~ s/[^\n]/ /g; $m }gse;
	my $n = 0;
	for my $line (split /\n/, $text) {
		$n++;
		if ($line =~ /\bstd::($types)\b/) {
			print "check: std::$1 can throw (use a fixed buffer or NtVec): $f:$n\n";
		} elsif ($line =~ /(?<![\w.>])new\s+(?:[A-Za-z_:])/) {
			print "check: plain new can throw (use new (std::nothrow) or NtVec): $f:$n\n";
		}
	}
}' || true)
	if [ -n "$hits" ]; then
		echo "$hits"
		return 1
	fi
	echo "check: nothrow OK (no container or plain new in lib/ and drivers/)"
}

# One surface dialect (doc/guides/contributing.md §3, the table "One dialect"): the checks of the
# top .clang-tidy (app/.clang-tidy drops the allocation rule) on every tracked *.cpp of lib/,
# drivers/ and app/, each compiled as the build compiles it. The build's compile_commands.json
# lists a source once per target that compiles it (app/common/ three times, once in the test
# executable with its precompiled header): devtools/tidy-db.py writes a copy that keeps the first
# command of each source outside tests/. One clang-tidy per core, one source each
# (devtools/tidy-run.py, which skips a source unchanged since it passed); an offence in a header,
# seen from several sources, is one line. Before that, one refusal on purpose: a two-line snippet
# testing a pointer with `if (!p)` must be refused, or the check could not fail at all.
check_tidy() {
	local ct
	ct=$(command -v clang-tidy-14 || true)
	if [ -z "$ct" ]; then
		echo "check: tidy skipped (no clang-tidy-14 installed; apt-get install clang-tidy-14)"
		return 0
	fi
	local db="$part_dir/tidy-db" snip="$part_dir/tidy-snippet"
	mkdir -p "$db" "$snip"
	printf '%s\n' 'int first(const int *p)' '{ if (!p) return -1; return *p; }' > "$snip/refused.cpp"
	local out
	out=$("$ct" --quiet --config-file="$src/.clang-tidy" "$snip/refused.cpp" -- -std=c++20 2>&1)
	if [ $? -ne 0 ] && grep -q 'refused.cpp:2:.*\[readability-implicit-bool-conversion' <<< "$out"
	then
		echo "check: tidy refuses 'if (!p)': refused.cpp:2: readability-implicit-bool-conversion"
	else
		echo "check: tidy does not refuse 'if (!p)' (is .clang-tidy read?):"
		echo "$out" | head -5
		return 1
	fi
	local n note
	# tidy-db.py: the count on stdout, the sources the build does not compile on stderr.
	note=$(tracked 'lib/*.cpp' 'drivers/*.cpp' 'app/*.cpp' |
		"$here/tidy-db.py" "$src" "$build" "$db" 2>&1 > "$part_dir/tidy.n") || return 1
	[ -z "$note" ] || echo "check: $note"
	n=$(cat "$part_dir/tidy.n")
	# tidy-run.py: one clang-tidy per core; a source that passed and whose content, includes,
	# flags and checks are unchanged since is not checked again (its cache, outside the tree).
	local rc=0 ran
	ran=$("$here/tidy-run.py" "$src" "$build" "$db" "$ct" "$part_dir/tidy.log") || rc=$?
	local bad
	bad=$(python3 -c '
import os, re, sys
src, build, seen = sys.argv[1], sys.argv[3], []
pat = re.compile(r"([^ :][^:]*):(\d+):\d+: (?:warning|error): (.*?) \[([\w.,-]+)\]$")
for line in open(sys.argv[2], errors="replace"):
    m = pat.match(line.rstrip())
    if not m:
        continue
    path = os.path.relpath(os.path.realpath(os.path.join(build, m[1])), src)
    check = m[4].split(",")[0]
    item = path + ":" + m[2] + ": " + check + ": " + m[3]
    if item not in seen:
        seen.append(item)
print("\n".join(seen))
' "$src" "$part_dir/tidy.log" "$build") || { echo "check: tidy: cannot read clang-tidy's output"; return 1; }
	if [ -n "$bad" ] || grep -q '^Error while processing' "$part_dir/tidy.log"; then
		[ -z "$bad" ] || echo "$bad" | sed 's/^/check: tidy: /'
		grep '^Error while processing' "$part_dir/tidy.log" | sort -u | sed 's/^/check: tidy: /'
		echo "check: tidy: $(grep -c . <<< "$bad") offences in $n sources" \
			"(devtools/tidy-fix.sh applies the fix-its)"
		return 1
	fi
	# clang-tidy failed, yet no offence was read: say so rather than pass.
	if [ $rc -ne 0 ]; then
		echo "check: tidy: clang-tidy-14 exited with $rc and no offence read; its output:"
		grep -v '^ ' "$part_dir/tidy.log" | head -20
		return 1
	fi
	echo "check: tidy OK ($n sources, .clang-tidy: $ran)"
}

have_build() { [ -f "$build/meson-info/intro-targets.json" ]; }

if [ "$do_format" = 1 ]; then
	run_part format check_format
else
	note_part format "--- check: format skipped (--no-format / QPN_CHECK_FORMAT=0)"
fi
run_part editorconfig check_editorconfig
run_part dialect check_dialect
run_part nothrow check_nothrow
if [ $do_library -eq 1 ] && have_build; then
	run_part library "$here/check-library.sh" "$src" "$build"
else
	note_part library "--- check: library skipped (--no-library or no build in $build)"
fi
run_part layering "$here/check-layering.sh" "$src"
if have_build; then
	run_part include-paths "$here/check-probe.sh" "$src" "$build"
else
	note_part include-paths "--- check: include-paths skipped (no build in $build)"
fi
if [ "$do_tidy" != 1 ]; then
	note_part tidy "--- check: tidy skipped (--no-tidy / QPN_CHECK_TIDY=0)"
elif [ -f "$build/compile_commands.json" ]; then
	run_part tidy check_tidy
else
	note_part tidy "--- check: tidy skipped (no compile_commands.json in $build)"
fi
wait
for name in "${parts[@]}"; do
	rc=$(cat "$part_dir/$name.rc" 2>/dev/null || echo 1)
	# A skipped part's line says so itself; a part that ran gets its header here.
	[ -e "$part_dir/$name.noted" ] || echo "--- check: $name"
	cat "$part_dir/$name.out"
	[ "$rc" = 0 ] || failed+=("$name")
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "check: FAILED: ${failed[*]}"
	exit 1
fi
echo "check: OK"
