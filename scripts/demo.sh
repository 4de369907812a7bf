#!/usr/bin/env bash
# The demo: builds Manta, starts a simulated cluster of two v6e-16 TPU slices
# (a head and 8 TPU hosts, all on this machine), shows `manta status` and
# `manta list nodes`, submits a job that runs one task per host of a slice,
# reserves both slices whole and runs one actor per host across them
# (multislice), and runs a counter actor; runs the Python examples as a
# job (tasks and actors, then one task per host of a slice); trains a small model over both
# slices with the trainer (maxtext_trainer, 8 workers); runs an elastic
# training job (maxtext_elastic_trainer), kills a host of slice 1 during it
# and starts it again, so the run shrinks to 4 workers and grows back to 8;
# then stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target demo
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
echo "+ manta job submit --working-dir examples/python -- python3 tasks_and_actors.py (and the slice example)"
"$MANTA" job submit --temp-dir="$TEMP_DIR" --working-dir examples/python \
  --runtime-env-json "{\"env_vars\": {\"PYTHONPATH\": \"$(pwd)/build/python\"}}" -- \
  sh -c "/usr/bin/python3 tasks_and_actors.py && /usr/bin/python3 tpu_slices.py --temp-dir=$TEMP_DIR"
echo "+ manta job submit --working-dir . -- build/bin/maxtext_trainer ... (both slices, 8 workers)"
"$MANTA" job submit --temp-dir="$TEMP_DIR" --working-dir . -- build/bin/maxtext_trainer \
  train/kernels/configs/base.yml base_output_directory="$TEMP_DIR/train" dataset_type=synthetic \
  model_name=tiny per_device_batch_size=1 steps=40 ici_fsdp_parallelism=4 ici_tensor_parallelism=4 \
  dcn_data_parallelism=2 enable_checkpointing=true checkpoint_period=20 run_name=demo-2x-v6e-16
# Waits until the job's logs hold $2 (at most $3 seconds).
wait_for_log() {
  local deadline=$(( $(date +%s) + $3 ))
  until "$MANTA" job logs "$1" --temp-dir="$TEMP_DIR" 2>/dev/null | grep -q "$2"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "timed out waiting for '$2'" >&2; return 1; fi
    sleep 0.5
  done
}
# The raylet of TPU host $2 of slice $1 (its pid file and environment).
host_raylet() {
  for f in "$TEMP_DIR"/session_latest/pids/raylet_*; do
    local pid; pid=$(cat "$f")
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "TPU_NAME=$1" &&
       tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "TPU_WORKER_ID=$2"; then
      echo "$pid"; return 0
    fi
  done
  return 1
}
echo "+ manta job submit --no-wait --submission-id=demo-elastic -- build/bin/maxtext_elastic_trainer ... (num_workers {4, 8})"
"$MANTA" job submit --temp-dir="$TEMP_DIR" --no-wait --submission-id=demo-elastic --working-dir . -- \
  build/bin/maxtext_elastic_trainer train/kernels/configs/base.yml base_output_directory="$TEMP_DIR/train" \
  model_name=tiny per_device_batch_size=1 steps=400 ici_fsdp_parallelism=4 ici_tensor_parallelism=4 \
  enable_checkpointing=true checkpoint_period=25 run_name=demo-elastic
# Step lines are collapsed across workers; the checkpoint line is printed once.
wait_for_log demo-elastic "saved checkpoint .*/checkpoints/25" 300
VICTIM=$(host_raylet tpu-group-1 1)
echo "+ kill -9 $VICTIM   # the raylet of tpu-group-1 host 1, as a preempted VM goes"
kill -9 "$VICTIM"
wait_for_log demo-elastic "from 8 -> 4 workers" 120
echo "+ TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=1 TPU_NAME=tpu-group-1 manta start --address=127.0.0.1:$PORT   # the host returns"
TPU_ACCELERATOR_TYPE=v6e-16 TPU_TOPOLOGY=4x4 TPU_WORKER_ID=1 TPU_NAME=tpu-group-1 \
  "$MANTA" start --address="127.0.0.1:$PORT" --temp-dir="$TEMP_DIR" >/dev/null
echo "+ manta job logs --follow demo-elastic"
"$MANTA" job logs --follow demo-elastic --temp-dir="$TEMP_DIR" | grep -v "TrainWorker"
echo "+ manta list train-runs"
"$MANTA" list train-runs --temp-dir="$TEMP_DIR"
echo "+ manta list actors"
"$MANTA" list actors --temp-dir="$TEMP_DIR"
echo "+ manta list placement-groups"
"$MANTA" list placement-groups --temp-dir="$TEMP_DIR"
echo "+ manta stop"
"$MANTA" stop --temp-dir="$TEMP_DIR"
