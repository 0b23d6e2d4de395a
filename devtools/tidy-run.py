#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/tidy-run.py SOURCE_DIR BUILD_DIR DB_DIR CLANG_TIDY LOG
#
# Runs CLANG_TIDY on every source of DB_DIR/compile_commands.json (devtools/tidy-db.py), one
# process per source, as many at once as there are cores, and writes their outputs, one source
# after the other, to LOG (devtools/check.sh reads the offences from it). Exit status: non-zero
# when a clang-tidy did.
#
# A source whose check passed is not checked again while nothing it is checked from changed: a
# pass is remembered outside the tree (QPN_TIDY_CACHE, default ~/.cache/mlx5-qpn/tidy; "off" turns
# it off) under a key that hashes
#  - the source's content and the content of every file it includes, as the build's last compile
#    of it saw them (ninja's dependency log), system headers included;
#  - its compile command (the tree's and the build's own paths made relative, so that a clone in
#    another folder finds the same key), every .clang-tidy of the tree, clang-tidy's version, and
#    this script and devtools/check.sh;
# so an edit to the source or to a header it includes, a flag, a check or the tool checks the
# source again, and an offence is never remembered (only a clean output is). The include list of
# a source is only trusted when its object is up to date (`ninja -n` would not compile it again):
# a source edited since the last build is checked, as without the cache, and so is the app source
# that includes meson's vcs_tag header (remade at every build). CI runs the test command in a new
# clone each time: there the check test took 20 CPU s instead of 148 with the sources unchanged
# since the last run on the machine (doc/guides/results.md, 2026-12-05).
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys

src, build, db = (os.path.realpath(a) for a in sys.argv[1:4])
tidy, log = sys.argv[4], sys.argv[5]
here = os.path.dirname(os.path.realpath(__file__))
entries = json.load(open(os.path.join(db, "compile_commands.json")))
cache = os.environ.get("QPN_TIDY_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mlx5-qpn", "tidy")

content = {}


def digest(path):
    """The content hash of a file (cached: a header is read once); None when it is unreadable."""
    if path not in content:
        try:
            with open(path, "rb") as fh:
                content[path] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            content[path] = None
    return content[path]


def rel(text):
    """Text with the build's and the tree's absolute paths made relative (build first: it may lie
    inside the tree)."""
    return text.replace(build, "@BUILD@").replace(src, "@SRC@")


def ninja_deps(outputs):
    """output -> the files its last compile read, for the outputs that are up to date (an object
    to compile again may include a new header its recorded list lacks); {} when the build files
    are to be generated again."""
    try:
        dry = subprocess.run(["ninja", "-C", build, "-n", "-v"] + outputs, capture_output=True,
                             text=True, check=True).stdout
        text = subprocess.run(["ninja", "-C", build, "-t", "deps"] + outputs,
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    if "--internal regenerate" in dry:
        return {}
    dirty = {w for line in dry.splitlines() for w in line.split()}
    deps, out = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            out = line.split(":")[0]
            out = out if "(VALID)" in line and out not in dirty else None
            if out:
                deps[out] = []
        elif line.strip() and out:
            deps[out].append(os.path.normpath(os.path.join(build, line.strip())))
    return deps


def common_key():
    h = hashlib.sha256()
    version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout
    h.update(version.encode())
    configs = subprocess.run(["git", "-C", src, "ls-files", "*.clang-tidy"], capture_output=True,
                             text=True).stdout.split()
    for f in sorted(configs or [".clang-tidy"]) + ["devtools/check.sh", "devtools/tidy-run.py"]:
        h.update(f.encode() + b"\0" + str(digest(os.path.join(src, f))).encode())
    return h.hexdigest()


def key(entry, deps, base):
    """The source's key, or None when ninja holds no include list for it."""
    files = deps.get(entry.get("output", ""))
    if not files:
        return None
    h = hashlib.sha256(base.encode())
    command = entry.get("command") or " ".join(entry.get("arguments", []))
    h.update(rel(command).removeprefix("ccache ").encode() + b"\0")
    # In the order of their relative names: the absolute ones sort differently in another folder.
    for f in [entry["file"]] + sorted(set(files), key=rel):
        d = digest(f)
        if d is None:
            return None
        h.update(rel(f).encode() + b"\0" + d.encode() + b"\0")
    return h.hexdigest()


def check(entry):
    p = subprocess.run([tidy, "--quiet", "-p", db, entry["file"]], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    return p.returncode, p.stdout


use_cache = cache != "off"
keys = {}
if use_cache:
    deps = ninja_deps([e["output"] for e in entries if "output" in e])
    base = common_key()
    keys = {e["file"]: key(e, deps, base) for e in entries}
todo = [e for e in entries
        if not keys.get(e["file"]) or not os.path.exists(os.path.join(cache, keys[e["file"]]))]
rc = 0
with open(log, "w") as out, concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    for e, (code, text) in zip(todo, pool.map(check, todo)):
        out.write(text)
        rc = rc or code
        k = keys.get(e["file"])
        # A pass only: no diagnostic at all (a warning not made an error is still written down).
        if use_cache and k and code == 0 and "warning:" not in text and "error:" not in text:
            os.makedirs(cache, exist_ok=True)
            open(os.path.join(cache, k), "w").close()
print(f"{len(todo)} checked, {len(entries) - len(todo)} unchanged since a pass (cache {cache})"
      if use_cache else f"{len(todo)} checked (cache off)")
sys.exit(rc)
