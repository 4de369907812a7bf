#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin): everything, or
# what the arguments name (`scripts/build.sh --target demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
JOBS="${MANTA_BUILD_JOBS:-2}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j"$JOBS" "$@"
