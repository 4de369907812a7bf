#!/usr/bin/env bash
# Builds everything with a sanitizer in its own build directory and runs the
# test suite there (unit and integration tests; the integration tests start
# the sanitized daemons, workers and CLI from that directory's bin/).
#
#   scripts/sanitize.sh asan [ctest args...]   # ASan + UBSan (+ LeakSanitizer) in build-asan/
#   scripts/sanitize.sh tsan [ctest args...]   # ThreadSanitizer in build-tsan/
#
#   scripts/sanitize.sh asan -L unit           # unit tests only
#   scripts/sanitize.sh tsan -R 'GcsRestart'   # a subset
#
# gcc 12, -O1 -g1 (line tables: reports name file and line), assertions on, no tcmalloc (the sanitizers bring their own
# allocator). Every process, test or child daemon, writes its reports to
# <build dir>/sanitizer-logs/<kind>.<pid> instead of stderr (a daemon's stderr
# is often a log file no one reads); after ctest the script prints every
# report there and fails if there is one, even when ctest passed.
# Suppressions for Debian's uninstrumented libraries (gRPC, absl, protobuf)
# are in scripts/sanitizers/; never add the project's own code there.
# On 2 cores the ASan build takes about an hour; MANTA_BUILD_JOBS sets -j (2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
KIND=${1:-}
case "$KIND" in
  # No vptr check: UBSan reads an object's type through a pipe it opens for
  # each check, and in a process out of descriptors (which the gate's tests
  # make on purpose) it takes every object for one with an invalid vptr and
  # ends the process; its suppressions cannot help, being read from a file
  # at the first report. Every other UBSan check stays on.
  asan) FLAGS="-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -fno-sanitize-recover=undefined" ;;
  # -U__SANITIZE_THREAD__: the headers of Debian's protobuf (map_field.h),
  # gRPC and libstdc++ change class layouts and inline code when they see
  # TSan, which their uninstrumented libraries were not built with; the
  # project's code is instrumented all the same. MANTA_TSAN: the order gRPC
  # gives its completions, told to TSan (common/rpc/tsan_handoff.h).
  tsan) FLAGS="-fsanitize=thread -U__SANITIZE_THREAD__ -DMANTA_TSAN=1" ;;
  *) echo "usage: $0 asan|tsan [ctest args...]" >&2; exit 2 ;;
esac
shift
BUILD=$ROOT/build-$KIND
JOBS="${MANTA_BUILD_JOBS:-2}"
scripts/install_deps.sh >/dev/null

EXTRA=()
if [ "$KIND" = tsan ]; then
  # TSan must see abseil's Mutex: its synchronization library is built from
  # the installed version's source (MANTA_TSAN_ABSL_SOURCE in CMakeLists.txt).
  scripts/sanitizers/absl_source.sh "$BUILD/absl-src"
  EXTRA=(-DMANTA_TSAN_ABSL_SOURCE="$BUILD/absl-src")
fi
# Configured every time: a build directory made by an older version of this
# script gets today's flags (CMake rebuilds only if they changed).
CC=gcc CXX=g++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" \
  -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$FLAGS" \
  -DMANTA_TCMALLOC=OFF "${EXTRA[@]}" >/dev/null
cmake --build "$BUILD" -j"$JOBS"

LOGS=$BUILD/sanitizer-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
SUPP=$ROOT/scripts/sanitizers
export MANTA_BIN_DIR=$BUILD/bin
if [ "$KIND" = asan ]; then
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1:log_path=$LOGS/asan:detect_stack_use_after_return=0:allocator_may_return_null=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGS/ubsan"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
else
  # halt_on_error=0: a process reports every race it sees and exits 66.
  export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:history_size=4:log_path=$LOGS/tsan:suppressions=$SUPP/tsan.supp:print_suppressions=0"
fi

status=0
(cd "$BUILD" && ctest --output-on-failure -j1 --timeout 1800 "$@") || status=$?

reports=$(find "$LOGS" -type f -size +0 | sort)
if [ -n "$reports" ]; then
  echo
  echo "==== sanitizer reports ($(echo "$reports" | wc -l) files in $LOGS) ===="
  for f in $reports; do
    echo "---- $f"
    cat "$f"
  done
  status=1
fi
# Daemons a failing test left behind (they hold ports and CPU).
left=$(pgrep -f "^$BUILD/bin/" || true)
if [ -n "$left" ]; then
  echo "processes left running from $BUILD/bin:"; ps -o pid,args -p "$(echo $left | tr ' ' ,)" || true
fi
[ $status -eq 0 ] && echo "sanitize.sh $KIND: no sanitizer reports, all tests passed"
exit $status
