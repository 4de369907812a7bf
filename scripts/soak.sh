#!/usr/bin/env bash
# Runs the whole test suite N times in a row (5 by default) while a third
# process keeps one core busy, and prints a table of each run: tests, failed,
# and the names of those that failed. A test that fails once is a flake to
# fix at its root. Builds first (scripts/build.sh).
#
#   scripts/soak.sh [RUNS] [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
shift || true
scripts/install_deps.sh --test
scripts/build.sh >/dev/null
LOGS=$(mktemp -d /tmp/manta-soak.XXXXXX)
# The busy core: a shell loop at normal priority, as another job would be.
( while :; do :; done ) &
busy=$!
trap 'kill $busy 2>/dev/null || true' EXIT
for i in $(seq 1 "$RUNS"); do
  start=$SECONDS
  (cd build && ctest -j"${MANTA_TEST_JOBS:-2}" --timeout 600 "$@" >"$LOGS/run_$i.log" 2>&1) || true
  echo "$((SECONDS - start))" >"$LOGS/run_$i.seconds"
  echo "run $i done in $((SECONDS - start)) s" >&2
done
kill $busy 2>/dev/null || true
printf '%-5s %8s %7s %7s  %s\n' run seconds tests failed "failed tests"
for i in $(seq 1 "$RUNS"); do
  log="$LOGS/run_$i.log"
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log")
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$log")
  names=$(sed -n '/The following tests FAILED/,$p' "$log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p' | tr '\n' ' ')
  printf '%-5s %8s %7s %7s  %s\n' "$i" "$(cat "$LOGS/run_$i.seconds")" "${total:-?}" "${failed:-?}" "${names:--}"
done
echo "logs: $LOGS"
