#!/usr/bin/env bash
# Checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) of the project's own code with clang's -Wthread-safety, as errors.
#
#   scripts/thread_safety.sh              # every daemon, library and CLI source
#   scripts/thread_safety.sh runtime      # only files under these folders
#
# clang (14 on Debian 12) parses each translation unit (-fsyntax-only: no code
# is made; a unity build's batches, as the main build compiles them) with the
# flags CMake gives it, in build-tsa/ (configured with clang; only the
# generated protobuf headers are built there). Tests and benchmarks are left
# out: they hold no annotated state. Exits non-zero on the first folder with
# an error and prints clang's diagnostics. MANTA_BUILD_JOBS sets the
# parallelism (2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-tsa
JOBS="${MANTA_BUILD_JOBS:-2}"
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=(common gcs raylet runtime state dashboard cli train serve)
scripts/install_deps.sh >/dev/null
if ! command -v clang++ >/dev/null; then
  echo "Installing clang (Debian 12: clang 14) for the lock annotation check"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends clang >/dev/null
fi

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DMANTA_TCMALLOC=OFF >/dev/null
fi
# The generated headers every source includes.
mapfile -t GENERATED < <(ninja -C "$BUILD" -t targets all | sed -n 's/^\(gen\/proto\/[^:]*\.pb\.h\): .*/\1/p')
ninja -C "$BUILD" -j"$JOBS" "${GENERATED[@]}" >/dev/null

python3 - "$BUILD" "$ROOT" "$JOBS" "${DIRS[@]}" <<'PY'
import json, os, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
build, root, jobs, dirs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
entries = json.load(open(os.path.join(build, "compile_commands.json")))
def sources(e):
    # A unity unit (CMake's Unity/unity_N_cxx.cxx) stands for the files it includes.
    if "/Unity/unity_" not in e["file"]: return [e["file"]]
    return re.findall(r'^#include "([^"]+)"', open(e["file"]).read(), re.M)
def wanted(e):
    # Files CMake generates (the page's assets) are not the project's to check.
    rels = [os.path.relpath(p, root) for p in sources(e) if not p.startswith(build + "/")]
    if not rels or not all(any(r.startswith(d.rstrip("/") + "/") for d in dirs) for r in rels): return False
    return not any(os.path.basename(r).endswith("_test.cc") or r.startswith(("bench/", "fuzz/")) or
                   "/bench/" in r or "/fuzz/" in r for r in rels)
units = sorted({e["file"]: e for e in entries if wanted(e)}.values(), key=lambda e: e["file"])
def check(e):
    args = shlex.split(e["command"])
    out, skip = [], False
    for a in args:
        if skip: skip = False; continue
        if a == "-o": skip = True; continue
        if a == "-c": continue
        out.append(a)
    out += ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]
    r = subprocess.run(out, cwd=e["directory"], capture_output=True, text=True)
    return e["file"], r.returncode, r.stderr
failed = 0
with ThreadPoolExecutor(jobs) as pool:
    for path, rc, err in pool.map(check, units):
        if rc != 0:
            failed += 1
            print(f"== {os.path.relpath(path, root)}\n{err}", end="")
files = sum(len(sources(e)) for e in units)
print(f"thread-safety: {files} files in {len(units)} units checked, {failed} units with errors")
sys.exit(1 if failed else 0)
PY
