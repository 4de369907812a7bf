// Entry point of the training kernels: what MaxText's train.py main is to a
// JAX host. Every process of the job calls RunTraining with the same config
// and its own DistributedEnv; the call returns when `steps` steps are done.
//
//   auto config = LoadConfig({"train/kernels/configs/base.yml", "model_name=tiny",
//                             "steps=20", "ici_fsdp_parallelism=2"});
//   DistributedEnv env;  // process 0 of 1, chips_per_host devices
//   env.chips_per_host = 2;
//   absl::StatusOr<TrainingResult> result = RunTraining(*config, env);
//
// Every process prints one MaxText-style line per step through the spdlog
// logger named "train" (`completed step: ...`), as every JAX host does; the
// caller sets its sinks. With enable_checkpointing the run resumes from the
// latest complete checkpoint under base_output_directory/run_name/checkpoints/
// (or from RunOptions::restore_from), whatever mesh or process count wrote
// it, and saves every checkpoint_period steps and after the last one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/kernels/config.h"
#include "train/kernels/mesh.h"

namespace manta::train {

struct StepMetrics {
  int64_t step = 0;  // 0-based index of the completed step
  double loss = 0;   // mean token loss of the global batch
  double grad_norm = 0;
  double learning_rate = 0;
  double seconds = 0;
  double tflops_per_device = 0;
  double tokens_per_device_per_second = 0;
  // Of local device 0 during this step: time its thread was blocked on
  // communication, and time gradient reductions ran behind the backward pass.
  double seconds_in_collectives = 0;
  double seconds_in_background_collectives = 0;
  // Set for on_step_done only: the directory of the checkpoint saved after
  // this step (every process of the job saved its part), else empty.
  std::string checkpoint_dir;
};

// What to do with a step whose gradients are ready (RunOptions::commit).
enum class StepDecision {
  kApply,           // apply it and go on
  kApplyThenPause,  // apply it (and its checkpoint) and return: the group is re-formed
  kDiscard,         // apply nothing and return: the group broke or is re-formed
};

// Told by each local device when it begins and ends a step, from the
// device's own thread: how a host publishes what its chips do (the kernels
// measure; the caller decides where it goes).
class DeviceActivity {
 public:
  virtual ~DeviceActivity() = default;
  virtual void StepBegan(int local_device) = 0;
  // The step of `local_device` ended (applied or not): `transfer_seconds`
  // of it went to collectives, and the device holds `bytes_held`.
  virtual void StepEnded(int local_device, double transfer_seconds, int64_t bytes_held) = 0;
};

struct RunOptions {
  // OpenBLAS threads per product; 0 keeps the library's setting when one
  // device is local and uses 1 when several devices share the process.
  int blas_threads = 0;
  // Seconds to wait for every process to join the collectives.
  double join_timeout_seconds = 120;
  // Called by process 0 at named points of a checkpoint save ("shards_written",
  // "renamed"), with the checkpoint's step; lets tests kill a save midway.
  std::function<void(const std::string& stage, int64_t step)> save_fault_hook;
  // Called on every process, from local device 0's thread, after each step.
  std::function<void(const StepMetrics&)> on_step;
  // Polled on every process after each step; when it returns true on any
  // process, all of them stop after that step (saving a checkpoint first
  // when checkpointing is enabled) and RunTraining returns normally.
  std::function<bool()> should_stop;
  // Called on every process, from local device 0's thread, once a step is
  // wholly done: after should_stop was agreed and after the checkpoint of
  // that step, if any, was saved by every process. Where a trainer reports.
  std::function<void(const StepMetrics&)> on_step_done;
  // Called on every process, from one local device's thread, when a step's
  // gradients are reduced everywhere and before anything of it changes
  // state (its metrics are known, its time is not final). Every process must
  // get the same answer (a trainer's controller decides for all). When set,
  // should_stop is not used.
  std::function<StepDecision(const StepMetrics&)> commit;
  // Which checkpoint to start from: unset, the latest complete one under the
  // run's directory (when enable_checkpointing); empty, none (initialize);
  // otherwise that checkpoint's step directory (.../checkpoints/<step>),
  // whatever enable_checkpointing says.
  std::optional<std::string> restore_from;
  // Told of every local device's steps; null: nobody. Not owned.
  DeviceActivity* activity = nullptr;
};

struct TrainingResult {
  int64_t restored_step = -1;      // steps already done by the restored checkpoint, -1 if none
  std::vector<StepMetrics> steps;  // the steps this call ran, in order
  bool stopped_early = false;      // should_stop ended the run before `steps`
};

// Trains as the config says. Errors: InvalidArgument for a config that does
// not fit the mesh or the environment (message names the key), Unavailable
// when the processes cannot join or a peer fails mid-training, and disk
// errors from restoring a checkpoint. To go on after a peer fails, use a
// TrainingSession (session.h).
absl::StatusOr<TrainingResult> RunTraining(const Config& config, const DistributedEnv& env,
                                           const RunOptions& options = {});

}  // namespace manta::train
