#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/tidy-fix.sh [BUILD_DIR]
#
# Applies the fix-its of .clang-tidy (the checks devtools/check.sh runs: one surface dialect,
# doc/guides/contributing.md §3) to the tree, then clang-format to every file it changed. BUILD_DIR
# (default build/) is a configured build whose generated headers exist (`ninja -C build` once).
#  - the tracked *.cpp of lib/ drivers/ app/ and the headers they include (HeaderFilterRegex),
#    each checked as the build compiles it; the fixes of all sources are applied at once by
#    clang-apply-replacements-14, which merges the identical fixes of a header seen from many;
#  - a rename of a constant declared in a header (readability-identifier-naming) is also applied
#    to the test sources that name it: those are checked with that one check, their own
#    diagnostics filtered out (-line-filter names the headers of lib/ drivers/ app/ only);
#  - passes repeat until one changes nothing (at most 4): two fixes of one expression conflict and
#    the second waits for the next pass. A second run on a fixed tree changes nothing.
# What remains has no fix-it (an allocation, a function over 80 lines): devtools/check.sh lists it;
# a renamed constant still written in a comment or a guide is listed at the end.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
for t in clang-tidy-14 clang-apply-replacements-14 clang-format-14; do
	command -v "$t" > /dev/null || { echo "tidy-fix: $t missing (apt-get install clang-tidy-14 clang-format-14)" >&2; exit 1; }
done
[ -f "$build/compile_commands.json" ] || { echo "tidy-fix: no $build/compile_commands.json" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qpn-tidy-fix.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
git ls-files 'lib/*.cpp' 'drivers/*.cpp' 'app/*.cpp' | "$src/devtools/tidy-db.py" "$src" "$build" "$tmp/db" > /dev/null
# -line-filter: the headers of lib/ drivers/ app/ (a name matches a path's end).
filter=$(git ls-files 'lib/*.h' 'drivers/*.h' 'app/*.h' | python3 -c '
import json, sys
print(json.dumps([{"name": "/" + f} for f in sys.stdin.read().split()]))')
list_sources() { # db dir
	python3 -c '
import json, os, sys
for e in json.load(open(sys.argv[1] + "/compile_commands.json")):
    print(os.path.join(e["directory"], e["file"]))' "$1"
}
# One clang-tidy per source (xargs -P: one per core), each exporting its fixes to a file of its own.
export_fixes() { # db dir, out dir, clang-tidy args...
	local db=$1 out=$2
	shift 2
	mkdir -p "$out"
	list_sources "$db" | xargs -P "$(nproc)" -I{} sh -c '
		f=$1; shift
		"$@" --export-fixes="$0/$(echo "$f" | md5sum | cut -c1-16).yaml" "$f" > /dev/null 2>&1 || :
	' "$out" {} clang-tidy-14 --quiet -p "$db" "$@"
}
snapshot() { git ls-files -z 'lib/*' 'drivers/*' 'app/*' 'tests/*' | xargs -0 md5sum 2> /dev/null; }
snapshot > "$tmp/before"
for pass in 1 2 3 4; do
	rm -rf "$tmp/fixes"
	export_fixes "$tmp/db" "$tmp/fixes"
	# The test sources that name a constant about to be renamed (one clang-tidy each is costly:
	# GoogleTest's headers), or all of them when a test header names one.
	renamed=$(cat "$tmp/fixes"/*.yaml 2> /dev/null | sed -n \
		"s/.*Message: *['\"]invalid case style for constexpr variable '*\([A-Za-z0-9_]*\)'*.*/\1/p" |
		sort -u)
	[ -z "$renamed" ] || echo "$renamed" >> "$tmp/renamed"
	if [ -n "$renamed" ]; then
		users=$(git grep -lw $(printf -- '-e %s ' $renamed) -- 'tests/*.cpp' 'tests/*.h' || :)
		grep -q '\.h$' <<< "$users" && users=$(git ls-files 'tests/*.cpp')
		if [ -n "$users" ]; then
			echo "$users" | "$src/devtools/tidy-db.py" "$src" "$build" "$tmp/db-tests" \
				--tests > /dev/null 2>&1
			export_fixes "$tmp/db-tests" "$tmp/fixes" \
				--checks='-*,readability-identifier-naming' --line-filter="$filter"
		fi
	fi
	snapshot > "$tmp/pass-before"
	clang-apply-replacements-14 "$tmp/fixes" 2>&1 | grep -v '^$' | sed 's/^/tidy-fix: /' || :
	snapshot > "$tmp/pass-after"
	n=$(diff "$tmp/pass-before" "$tmp/pass-after" | grep -c '^>' || :)
	echo "tidy-fix: pass $pass changed $n files"
	[ "$n" -gt 0 ] || break
done
snapshot > "$tmp/after"
mapfile -t changed < <(diff "$tmp/before" "$tmp/after" | sed -n 's/^> [0-9a-f]*  //p')
if [ ${#changed[@]} -gt 0 ]; then
	clang-format-14 --style=file -i "${changed[@]}"
	printf 'tidy-fix: changed %s\n' "${changed[@]}"
fi
# A renamed constant may still be written in a comment or a guide: those are for a person.
if [ -s "$tmp/renamed" ]; then
	git grep -nw $(sort -u "$tmp/renamed" | sed 's/^/-e /') -- lib drivers app doc README.md |
		sed 's/^/tidy-fix: a renamed constant still written here (a comment?): /' || :
fi
echo "tidy-fix: ${#changed[@]} files changed; devtools/check.sh lists what has no fix-it"
