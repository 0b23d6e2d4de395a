#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/format.sh [FILE...]
#
# Applies .clang-format (clang-format 14) in place to the given files, or to every tracked
# *.c *.h *.cpp under lib/ drivers/ app/ tests/ (the files devtools/check.sh checks). Prints how
# many files changed. Run it on a clean tree and commit the result on its own ("format only").
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$cf" ] || { echo "format: no clang-format installed (apt-get install clang-format-14)" >&2; exit 1; }
if [ $# -gt 0 ]; then
	files=("$@")
else
	mapfile -t files < <(git ls-files -- 'lib/*.c' 'lib/*.h' 'lib/*.cpp' 'drivers/*.c' \
		'drivers/*.h' 'drivers/*.cpp' 'app/*.c' 'app/*.h' 'app/*.cpp' 'tests/*.c' 'tests/*.h' \
		'tests/*.cpp')
fi
changed=0
for f in "${files[@]}"; do
	sum=$(md5sum < "$f")
	"$cf" --style=file -i "$f"
	[ "$(md5sum < "$f")" = "$sum" ] || changed=$((changed + 1))
done
echo "format: $changed of ${#files[@]} files changed"
