#!/usr/bin/env bash
# Builds Manta and runs the whole test suite: unit tests and integration
# tests that start real clusters of processes; then, when no ctest argument
# narrows the run, checks the lock annotations (scripts/thread_safety.sh).
# Ends with how long each phase took.
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
timed "tests" bash -c 'cd build && exec ctest --output-on-failure -j1 --timeout 600 "$@"' ctest "$@" || status=$?
# The whole run (no ctest filter) also checks the lock annotations with
# clang's -Wthread-safety (scripts/thread_safety.sh, about 2 minutes).
if [ $# -eq 0 ]; then timed "lock annotations" scripts/thread_safety.sh || status=$?; fi
printf '%s\n' "${phases[@]}"
exit $status
