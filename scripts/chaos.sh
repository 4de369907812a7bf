#!/usr/bin/env bash
# The long chaos run: 10,000 tasks with retries and 100 actors receiving
# numbered calls while a raylet that is not the head's is killed every few
# seconds and replaced, until the workload ends. It passes when no result is
# lost, every actor call succeeded in order or failed with a typed error as
# its retry settings allow, and the cluster's resources return to their
# totals; the report goes to the JSON file (CI runs a short version as part
# of the test suite).
#
#   scripts/chaos.sh [--tasks N] [--actors N] [--calls N] [--kills N] [--period-ms MS] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=10000 actors=100 calls=150 kills=0 period=3000 json=chaos-report.json
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tasks) tasks="$2"; shift 2 ;;
    --actors) actors="$2"; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    --kills) kills="$2"; shift 2 ;;
    --period-ms) period="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) echo "chaos.sh: unknown option '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
scripts/build.sh
export MANTA_BIN_DIR="$PWD/build/bin"
export MANTA_CHAOS_TASKS="$tasks" MANTA_CHAOS_ACTORS="$actors" MANTA_CHAOS_CALLS="$calls"
export MANTA_CHAOS_KILLS="$kills" MANTA_CHAOS_KILL_PERIOD_MS="$period" MANTA_CHAOS_JSON="$json"
build/tests/runtime_integration_test --gtest_filter='ChaosTest.*'
echo "chaos report: $json"
