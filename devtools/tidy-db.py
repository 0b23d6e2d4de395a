#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/tidy-db.py SOURCE_DIR BUILD_DIR OUT_DIR [--tests] < FILES
#
# Writes OUT_DIR/compile_commands.json for clang-tidy (devtools/check.sh, devtools/tidy-fix.sh):
# one compile command per source named on stdin (paths relative to SOURCE_DIR), taken from
# BUILD_DIR/compile_commands.json. The build lists a source once per target that compiles it
# (app/common/ three times, once in the test executable): the first command outside tests/ is
# kept, its file named by its absolute path. With --tests the test executable's own commands are kept instead, their precompiled
# header (GCC's, which clang cannot read) named by its source path. Prints the sources the build
# does not compile (on stderr) and their number kept (on stdout).
import json
import os
import sys

src, build, out = (os.path.realpath(a) for a in sys.argv[1:4])
tests = "--tests" in sys.argv[4:]
want = {os.path.join(src, f) for f in sys.stdin.read().split()}
seen, keep = set(), []
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f not in want or f in seen or e.get("output", "").startswith("tests/") != tests:
        continue
    seen.add(f)
    e = dict(e, file=f)  # absolute: clang-tidy names a file as its command does
    if tests and "command" in e:
        pch = os.path.join(src, "tests", "pch", "qpn_tests_pch.h")
        e = dict(e, command=e["command"].replace("-include qpn_tests_pch.h", "-include " + pch)
                 .replace(" -fpch-preprocess", ""))
    keep.append(e)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "compile_commands.json"), "w") as fh:
    json.dump(keep, fh, indent=1)
missing = sorted(os.path.relpath(m, src) for m in want - seen)
if missing:
    print("tidy-db: not compiled by the build, not checked: " + " ".join(missing), file=sys.stderr)
print(len(keep))
