// MaxText on the trainer: the training kernels' RunTraining as a JaxTrainer
// loop, as maxtext_ray_trainer.py calls MaxText's train.py main from Ray
// Train's train_loop_per_worker.
//
//   void TrainLoop(std::vector<std::string> argv) { manta::train::ThrowIfError(manta::train::RunMaxText(argv)); }
//   MANTA_REMOTE(TrainLoop);
//   ...
//   manta::train::JaxTrainer trainer(TrainLoop, argv, scaling, run);
//   trainer.SetPreflight(manta::train::MaxTextPreflight(argv));
//
// `argv` is MaxText's: the base YAML file, then key=value overrides.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "manta/train.h"

namespace manta::train {

// In a worker while its loop runs: trains as `argv` says, with the
// distributed environment of GetContext() (coordinator, process id and
// count, slice id and count, the worker's TPU chips as local devices).
// Every step is reported (loss, step time, tokens/s, TFLOP/s), with the
// checkpoint saved after it, if any. Starts from GetCheckpoint() when one
// was committed; on a run's first attempt without one, from the latest
// checkpoint under base_output_directory/run_name (as MaxText resumes);
// otherwise from scratch. Errors: the config's (InvalidArgument naming the
// key), the kernels', or Aborted when a report failed.
absl::Status RunMaxText(const std::vector<std::string>& argv);

// Checks `argv` for each worker group shape Fit may use: the config loads,
// its mesh matches the group's devices, and the parameters, optimizer state
// and activations of a host fit the host's memory (ResourceExhausted with
// both figures when not).
Preflight MaxTextPreflight(std::vector<std::string> argv);

// Checks that `argv` loads as a config (every key known, every size within
// its bound, every string UTF-8 text), before anything is reserved; the
// error names the key.
absl::Status CheckMaxTextConfig(const std::vector<std::string>& argv);

}  // namespace manta::train
