#!/usr/bin/env bash
# The demo: builds Manta, starts a simulated cluster of two v6e-16 TPU slices
# (a head and 8 TPU hosts, all on this machine), shows `manta status` and
# `manta list nodes`, submits a job that runs one task per host of a slice,
# reserves both slices whole and runs one actor per host across them
# (multislice), and runs a counter actor; trains a small model over both
# slices with the trainer (maxtext_trainer, 8 workers); then stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
MANTA=build/bin/manta
TEMP_DIR=$(mktemp -d /tmp/manta-demo.XXXXXX)
cleanup() {
  "$MANTA" stop --temp-dir="$TEMP_DIR" >/dev/null 2>&1 || true
  rm -rf "$TEMP_DIR"
}
trap cleanup EXIT INT TERM

PORT=${MANTA_DEMO_PORT:-6379}
echo "+ manta start --head --port=$PORT"
"$MANTA" start --head --port="$PORT" --temp-dir="$TEMP_DIR"
for slice in 0 1; do
  for worker in 0 1 2 3; do
    echo "+ TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=$worker TPU_NAME=tpu-group-$slice manta start --address=127.0.0.1:$PORT"
    TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=$worker TPU_NAME=tpu-group-$slice \
      "$MANTA" start --address="127.0.0.1:$PORT" --temp-dir="$TEMP_DIR" >/dev/null
  done
done
echo "+ manta status"
"$MANTA" status --temp-dir="$TEMP_DIR"
echo "+ manta list nodes"
"$MANTA" list nodes --temp-dir="$TEMP_DIR"
EXAMPLES=$(cd build/bin && pwd)
echo "+ manta job submit -- example_tpu_hosts && example_tpu_multislice && example_counter"
"$MANTA" job submit --temp-dir="$TEMP_DIR" -- \
  sh -c "$EXAMPLES/example_tpu_hosts && $EXAMPLES/example_tpu_multislice && $EXAMPLES/example_counter"
echo "+ manta job submit --working-dir . -- build/bin/maxtext_trainer ... (both slices, 8 workers)"
"$MANTA" job submit --temp-dir="$TEMP_DIR" --working-dir . -- build/bin/maxtext_trainer \
  train/kernels/configs/base.yml base_output_directory="$TEMP_DIR/train" dataset_type=synthetic \
  model_name=tiny per_device_batch_size=1 steps=40 ici_fsdp_parallelism=4 ici_tensor_parallelism=4 \
  dcn_data_parallelism=2 enable_checkpointing=true checkpoint_period=20 run_name=demo-2x-v6e-16
echo "+ manta list train-runs"
"$MANTA" list train-runs --temp-dir="$TEMP_DIR"
echo "+ manta list actors"
"$MANTA" list actors --temp-dir="$TEMP_DIR"
echo "+ manta list placement-groups"
"$MANTA" list placement-groups --temp-dir="$TEMP_DIR"
echo "+ manta stop"
"$MANTA" stop --temp-dir="$TEMP_DIR"
