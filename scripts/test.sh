#!/usr/bin/env bash
# Builds Manta and runs the whole test suite: unit tests and integration
# tests that start real clusters of processes. When no ctest argument narrows
# the run, the lock annotations are checked too (scripts/thread_safety.sh,
# clang's -Wthread-safety) on one core beside the tests, which run one at a
# time. Ends with how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."
phases=()
timed() {  # timed NAME COMMAND...: runs it, notes its duration, keeps its status
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  phases+=("$(printf '%-22s %5d s' "$name" $((SECONDS - start)))")
  return $rc
}
timed "setup and build" scripts/build.sh
status=0
lock_pid=""
if [ $# -eq 0 ]; then
  lock_log=$(mktemp)
  lock_time=$(mktemp)
  trap 'rm -f "$lock_log" "$lock_time"; [ -z "$lock_pid" ] || kill "$lock_pid" 2>/dev/null || true' EXIT
  (
    timed "lock annotations" env MANTA_BUILD_JOBS=1 scripts/thread_safety.sh || rc=$?
    printf '%s\n' "${phases[@]: -1}" >"$lock_time"
    exit ${rc:-0}
  ) >"$lock_log" 2>&1 &
  lock_pid=$!
fi
timed "tests" bash -c 'cd build && exec ctest --output-on-failure -j1 --timeout 600 "$@"' ctest "$@" || status=$?
if [ -n "$lock_pid" ]; then
  lock_rc=0
  wait "$lock_pid" || lock_rc=$?
  lock_pid=""
  cat "$lock_log"
  phases+=("$(cat "$lock_time")")
  [ $lock_rc -eq 0 ] || status=$lock_rc
fi
printf '%s\n' "${phases[@]}"
exit $status
