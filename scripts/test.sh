#!/usr/bin/env bash
# Builds Manta and runs the whole test suite: unit tests and integration
# tests that start real clusters of processes, three tests at a time (most
# wait on their processes more than they compute; each integration test has
# its own ports and session directory; the few that need the machine to
# themselves say RUN_SERIAL). The build checks the lock annotations as it
# compiles (clang's -Wthread-safety). Ends with how long each phase took.
#
#   scripts/test.sh                 # everything, as CI runs it
#   scripts/test.sh -R Elastic      # build, then only `ctest -R Elastic`
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
JOBS="${MANTA_TEST_JOBS:-3}"
ctest_run() { (cd build && exec ctest --output-on-failure -j"$JOBS" --timeout 600 "$@"); }

timed "setup" scripts/install_deps.sh --test
timed "build" scripts/build.sh
status=0
if [ $# -gt 0 ]; then
  timed "tests" ctest_run "$@" || status=$?
  printf '%s\n' "${phases[@]}"
  exit $status
fi

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

printf '%s\n' "${phases[@]}"
exit $status
