#!/usr/bin/env bash
# Builds Manta and runs the whole test suite: unit tests and integration
# tests that start real clusters of processes; then, when no ctest argument
# narrows the run, checks the lock annotations (scripts/thread_safety.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
status=0
(cd build && ctest --output-on-failure -j1 --timeout 600 "$@") || status=$?
# The whole run (no ctest filter) also checks the lock annotations with
# clang's -Wthread-safety (scripts/thread_safety.sh, about 2 minutes).
if [ $# -eq 0 ]; then scripts/thread_safety.sh || status=$?; fi
exit $status
