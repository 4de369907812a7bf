#!/usr/bin/env bash
# Keeps the timings ctest last measured (build/Testing/Temporary/
# CTestCostData.txt) as .ci/test_costs.txt, from which scripts/test.sh on a
# clean clone schedules the longest tests first. Run after a whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
costs=build/Testing/Temporary/CTestCostData.txt
[ -f "$costs" ] || { echo "no $costs: run scripts/test.sh first" >&2; exit 1; }
# The tests' lines only (the failures after '---' are this machine's).
sed '/^---$/,$d' "$costs" | sort >.ci/test_costs.txt
echo "$(wc -l <.ci/test_costs.txt) tests' timings in .ci/test_costs.txt"
