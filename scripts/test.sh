#!/usr/bin/env bash
# Builds Manta and runs the whole test suite: unit tests and integration
# tests that start real clusters of processes, label by label, two tests at
# a time (each integration test has its own ports and session directory;
# the few that need the machine to themselves say RUN_SERIAL). Beside them,
# at low priority, the lock annotations are checked (scripts/thread_safety.sh,
# clang's -Wthread-safety). Ends with how long each phase took.
#
#   scripts/test.sh                 # everything, as CI runs it
#   scripts/test.sh -R Elastic      # build, then only `ctest -R Elastic` (no lock check)
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
JOBS="${MANTA_TEST_JOBS:-2}"
ctest_run() { (cd build && exec ctest --output-on-failure -j"$JOBS" --timeout 600 "$@"); }

timed "setup" scripts/install_deps.sh --test
timed "build" scripts/build.sh
status=0
if [ $# -gt 0 ]; then
  timed "tests" ctest_run "$@" || status=$?
  printf '%s\n' "${phases[@]}"
  exit $status
fi

lock_log=$(mktemp)
lock_time=$(mktemp)
lock_pid=""
trap 'rm -f "$lock_log" "$lock_time"; [ -z "$lock_pid" ] || kill "$lock_pid" 2>/dev/null || true' EXIT
(
  rc=0
  timed "lock annotations" nice -n 19 env MANTA_BUILD_JOBS=1 scripts/thread_safety.sh || rc=$?
  printf '%s\n' "${phases[@]: -1}" >"$lock_time"
  exit $rc
) >"$lock_log" 2>&1 &
lock_pid=$!

# One ctest run over every label, longest tests first: a clean clone has no
# timings of its own, so it starts from the ones kept in .ci/test_costs.txt
# (scripts/update_test_costs.sh refreshes them). ctest ends with the time
# each label took.
costs=build/Testing/Temporary/CTestCostData.txt
if [ ! -f "$costs" ] && [ -f .ci/test_costs.txt ]; then
  mkdir -p "$(dirname "$costs")"
  cp .ci/test_costs.txt "$costs"
fi
timed "tests" ctest_run || status=1

lock_rc=0
wait "$lock_pid" || lock_rc=$?
lock_pid=""
cat "$lock_log"
phases+=("$(cat "$lock_time")")
[ $lock_rc -eq 0 ] || status=$lock_rc
printf '%s\n' "${phases[@]}"
exit $status
