#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# devtools/doc-commands.sh [BUILD_DIR]
#
# Runs the commands of README.md, doc/guides/getting_started.md, doc/guides/app.md and
# doc/guides/app_reference.md as they are written, so that the docs cannot drift from the tools. The convention (contributing.md §6):
#   ```sh      commands a reader types: every line is run here (a line ending in '\' goes on)
#   ```text    shown, not run: output, transcripts, synopses, and commands that need root, install
#              system-wide or are the test command itself (the prose says which)
# Other fences (```c, ```) are not run either.
#
# Every command runs with bash from a scratch directory that looks like the source tree (each
# top-level entry a symlink, `build` the BUILD_DIR given, default build/), so files the commands
# write (tp.json, ...) land there and `build/...` paths mean the build under test. Runs are kept
# short: --duration=N becomes --duration=0.3, QPN_DURATION=0.3 for quickstart.sh; a `meson test`
# gets --print-errorlogs and a log of its own, --logbase doc-commands-GUIDE-LINE.
# Exit 0 if every command exited 0, else 1 with each failing command and its output's tail.
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
bld=$(cd "${1:-$src/build}" && pwd) || { echo "doc-commands: no build directory ${1:-}" >&2; exit 1; }
docs=(README.md doc/guides/getting_started.md doc/guides/app.md doc/guides/app_reference.md)

work=$(mktemp -d /tmp/doc-commands.XXXXXX)
trap 'rm -rf "$work"' EXIT
for e in "$src"/* "$src"/.clang-format "$src"/.editorconfig; do
	[ -e "$e" ] || continue
	[ "$(basename "$e")" = build ] && continue
	ln -s "$e" "$work/$(basename "$e")"
done
ln -s "$bld" "$work/build"

# The commands of one file: one per line (continuations joined), prefixed by "LINE:".
extract() { # file
	awk '
		/^```/ {
			if (!inside) { inside = 1; run = ($0 == "```sh"); next }
			inside = 0; run = 0; next
		}
		inside && run {
			line = $0
			if (cmd == "") start = NR
			if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = cmd line; next }
			cmd = cmd line
			if (cmd !~ /^[ \t]*(#.*)?$/) print start ":" cmd
			cmd = ""
		}
	' "$1"
}

ran=0
failed=0
for doc in "${docs[@]}"; do
	while IFS= read -r entry; do
		line=${entry%%:*}
		cmd=${entry#*:}
		# A documented `meson test` writes its log under a name of its own, one per command
		# (meson-logs/doc-commands-GUIDE-LINE.txt): under the default name it overwrote the log
		# of the run this script is a test of, and under one shared name the next command's
		# overwrote a failure's. It prints a failed test's log too, for the tail below.
		logbase="doc-commands-$(basename "$doc" .md)-$line"
		short=$(sed -E -e 's/--duration=[0-9.]+/--duration=0.3/g' \
			-e "s/(^|[;&|] *)meson test /\\1meson test --print-errorlogs --logbase $logbase /g" \
			<<<"$cmd")
		ran=$((ran + 1))
		t=$SECONDS
		out=$(cd "$work" && QPN_DURATION=0.3 timeout -k 5 300 bash -c "$short" 2>&1 </dev/null)
		rc=$?
		echo "doc-commands: $doc:$line: $((SECONDS - t)) s, exit $rc"
		if [ $rc -ne 0 ]; then
			failed=$((failed + 1))
			echo "doc-commands: $doc:$line: exit $rc: $cmd"
			tail -n 40 <<<"$out" | sed 's/^/    /'
		fi
	done < <(extract "$src/$doc")
done
echo "doc-commands: $ran commands run, $failed failed (${docs[*]})"
[ $failed -eq 0 ]
