#!/usr/bin/env bash
# Measures a clean build: wall time, CPU-seconds (user + system of every
# compiler and linker), the seconds of each folder's steps and the ten
# heaviest steps, from the build's .ninja_log.
#
#   bench/build_time.sh                 # a clean build of everything in a temporary directory
#   bench/build_time.sh --target demo   # only what the demo runs
#   bench/build_time.sh --log DIR       # only report on an existing build directory's log
#
# ccache is kept out (CCACHE_DISABLE=1). Jobs: MANTA_BUILD_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
report() {  # report BUILD_DIR
  python3 - "$1" "$ROOT" <<'PY'
import collections, os, sys
build, root = sys.argv[1], sys.argv[2]
steps = {}
with open(os.path.join(build, ".ninja_log")) as f:
    for line in f:
        if line.startswith("#"): continue
        start, end, _, out, _ = line.rstrip("\n").split("\t")
        steps[out] = (int(end) - int(start)) / 1000.0  # the last build of each output
def folder(out):
    # Object files: <dir>/CMakeFiles/<target>.dir/...
    if "/CMakeFiles/" in out: return out.split("/CMakeFiles/")[0]
    if out.startswith("gen/"): return "proto"
    return "(links)" if out.startswith(("bin/", "lib/", "tests/")) else "(other)"
def kind(out):
    # What a step builds: a test, a benchmark, a fuzz replay, or the product.
    target = out.split("/CMakeFiles/")[1].split(".dir/")[0] if "/CMakeFiles/" in out else out.split("/")[-1]
    if out.startswith("bench/") or target.startswith("bench_") or "manta_bench" in target: return "benchmarks"
    if out.startswith("fuzz/") or target.endswith("_replay"): return "fuzz replays"
    if out.startswith("tests/") or target.endswith("_test") or "test_util" in target or target.endswith("_driver"):
        return "tests"
    return "product"
by_folder = collections.Counter()
by_kind = collections.Counter()
for out, s in steps.items():
    by_folder[folder(out)] += s
    by_kind[kind(out)] += s
total = sum(steps.values())
print(f"steps: {len(steps)}, step-seconds: {total:.0f}")
print("by folder (step-seconds):")
for name, s in sorted(by_folder.items(), key=lambda kv: -kv[1]):
    print(f"  {name:<28} {s:7.0f}")
compiles = sum(v for k, v in steps.items() if k.endswith(".o"))
links = sum(v for k, v in steps.items() if k.startswith(("bin/", "tests/", "lib/")) and not k.endswith(".o"))
print(f"compiling: {compiles:.0f}, linking and archiving: {links:.0f}, other steps: {total - compiles - links:.0f}")
print("by kind (step-seconds):")
for name, s in sorted(by_kind.items(), key=lambda kv: -kv[1]):
    print(f"  {name:<28} {s:7.0f}")
print("ten heaviest steps:")
for out, s in sorted(steps.items(), key=lambda kv: -kv[1])[:10]:
    print(f"  {s:6.1f} s  {out}")
PY
}
if [ "${1:-}" = "--log" ]; then report "$2"; exit 0; fi  # a build directory, or a saved .ninja_log's folder
BUILD=$(mktemp -d /tmp/manta-build-time.XXXXXX)
# MANTA_BUILD_TIME_LOG=FILE keeps the .ninja_log for a later --log report.
trap 'if [ -n "${MANTA_BUILD_TIME_LOG:-}" ]; then cp "$BUILD/.ninja_log" "$MANTA_BUILD_TIME_LOG"; fi; rm -rf "$BUILD"' EXIT
export CCACHE_DISABLE=1
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
start=$(date +%s.%N)
# user + system CPU of the build and every process it waits for
/usr/bin/time -f "%U %S" -o "$BUILD/cpu" cmake --build "$BUILD" -j"${MANTA_BUILD_JOBS:-2}" "$@" >/dev/null
end=$(date +%s.%N)
read -r user sys <"$BUILD/cpu"
python3 -c 'import sys; s, e, u, y = map(float, sys.argv[1:]); print(f"wall: {e - s:.0f} s, CPU: {u + y:.0f} s (user {u:.0f} + system {y:.0f})")' \
  "$start" "$end" "$user" "$sys"
report "$BUILD"
