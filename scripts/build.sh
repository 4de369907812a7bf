#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin): everything, or
# what the arguments name (`scripts/build.sh --target demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
JOBS="${MANTA_BUILD_JOBS:-2}"
# clang (installed with the rest) compiles in about two thirds of gcc's time
# and checks the lock annotations as it goes (CMakeLists.txt).
if [ ! -f build/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j"$JOBS" "$@"
