#!/usr/bin/env bash
# The long elastic chaos run: host kills and returns at random steps of an
# elastic run on two simulated v6e-16 slices; it passes when every step is
# counted once and the model matches an unresized run's (CI runs 3 kills
# over 60 steps as part of the test suite).
#
#   scripts/elastic_chaos.sh [KILLS] [STEPS]     # default 10 kills over 200 steps
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export MANTA_BIN_DIR="$PWD/build/bin"
export MANTA_ELASTIC_CHAOS_KILLS="${1:-10}"
export MANTA_ELASTIC_CHAOS_STEPS="${2:-200}"
start=$(date +%s)
build/tests/train_integration_test --gtest_filter='ElasticTest.Chaos*'
echo "chaos: ${MANTA_ELASTIC_CHAOS_KILLS} kills over ${MANTA_ELASTIC_CHAOS_STEPS} steps in $(( $(date +%s) - start )) s"
