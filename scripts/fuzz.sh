#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, ASan and UBSan in
# build-fuzz/, and runs each for SECONDS (default 60) from the seeds in
# fuzz/corpus/<target>/ (new inputs are kept in build-fuzz/corpus/<target>/).
# Prints each target's executions and whether it crashed; exits 1 on a crash
# (the input is left in build-fuzz/crashes/).
#
#   scripts/fuzz.sh            # one minute each
#   scripts/fuzz.sh 3600       # an hour each
#   MANTA_FUZZ_TARGETS="tar_fuzz core_worker_fuzz" scripts/fuzz.sh 600   # some of them
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
scripts/install_deps.sh >/dev/null
if ! command -v clang++ >/dev/null || [ ! -e "$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get install -y -q clang libclang-rt-dev >/dev/null
fi
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMANTA_FUZZ=ON >/dev/null
fi
flock /tmp/manta_build.lock cmake --build build-fuzz -j2 --target fuzz_targets
mkdir -p build-fuzz/crashes
status=0
# core_worker_fuzz starts a one-node cluster from these daemons.
export MANTA_BIN_DIR=${MANTA_BIN_DIR:-$PWD/build-fuzz/bin}
for target in ${MANTA_FUZZ_TARGETS:-tar_fuzz resources_fuzz http2_gate_fuzz submit_request_fuzz config_fuzz checkpoint_fuzz gcs_handlers_fuzz raylet_handlers_fuzz dashboard_http_fuzz core_worker_rooms_fuzz serve_api_fuzz core_worker_fuzz}; do
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus"
  seeds=fuzz/corpus/$target
  log=build-fuzz/$target.log
  if build-fuzz/bin/$target -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=2048 \
       -artifact_prefix=build-fuzz/crashes/$target- "$corpus" "$seeds" >"$log" 2>&1; then
    result="no crash"
  else
    result="CRASH (see $log and build-fuzz/crashes/)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  printf '%-22s %12s executions in %ss: %s\n' "$target" "$runs" "$SECONDS_EACH" "$result"
done
exit $status
