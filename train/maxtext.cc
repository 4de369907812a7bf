#include "manta/maxtext.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "manta/errors.h"
#include "train/kernels/config.h"
#include "train/kernels/memory.h"
#include "train/kernels/train.h"

namespace manta::train {
namespace {

DistributedEnv EnvOf(const TrainContext& c) {
  DistributedEnv env;
  env.coordinator_address = c.coordinator_address;
  env.process_id = c.world_rank;
  env.num_processes = c.world_size;
  env.slice_id = c.slice_id;
  env.num_slices = c.num_slices;
  env.chips_per_host = c.chips > 0 ? c.chips : 1;
  return env;
}

std::map<std::string, double> StepReport(const StepMetrics& m, double total_weights) {
  return {{"step", static_cast<double>(m.step)},
          {"loss", m.loss},
          {"seconds", m.seconds},
          {"learning_rate", m.learning_rate},
          {"grad_norm", m.grad_norm},
          {"tflops_per_device", m.tflops_per_device},
          {"tokens_per_second_per_device", m.tokens_per_device_per_second},
          {"total_weights", total_weights}};
}

}  // namespace

absl::Status RunMaxText(const std::vector<std::string>& argv) {
  const auto began = std::chrono::steady_clock::now();
  auto config = LoadConfig(argv);
  if (!config.ok()) return config.status();
  const TrainContext& ctx = GetContext();
  RunOptions options;
  if (std::optional<Checkpoint> committed = GetCheckpoint(); committed.has_value()) {
    options.restore_from = committed->path;
  } else if (ctx.attempt_number > 1) {
    options.restore_from = "";  // nothing of this run was committed: start over
  }
  // A failed report ends the run at the next step; its error is the loop's.
  std::mutex mu;
  absl::Status report_error;
  std::atomic<bool> stop{false};
  bool first = true;
  const double total_weights = config->per_device_batch_size * EnvOf(ctx).num_devices() * config->max_target_length;
  options.should_stop = [&stop] { return stop.load(); };
  options.on_step_done = [&](const StepMetrics& m) {
    if (stop.load()) return;
    std::map<std::string, double> metrics = StepReport(m, total_weights);
    if (first) {
      first = false;
      const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      metrics["startup_seconds"] = since - m.seconds;  // joining the group and restoring
    }
    std::optional<Checkpoint> checkpoint;
    if (!m.checkpoint_dir.empty()) checkpoint = Checkpoint{m.checkpoint_dir};
    try {
      Report(metrics, checkpoint);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      report_error = absl::AbortedError(absl::StrCat("report of step ", m.step, " failed: ", e.what()));
      stop = true;
    }
  };
  auto result = RunTraining(*config, EnvOf(ctx), options);
  if (!result.ok()) return result.status();
  std::lock_guard<std::mutex> lock(mu);
  return report_error;
}

Preflight MaxTextPreflight(std::vector<std::string> argv) {
  return [argv = std::move(argv)](const WorkerGroupShape& shape) -> absl::Status {
    auto config = LoadConfig(argv);
    if (!config.ok()) return config.status();
    DistributedEnv env;
    env.num_processes = shape.num_workers;
    env.num_slices = std::max(1, shape.num_slices);
    env.chips_per_host = std::max(1, shape.chips_per_worker);
    auto estimate = EstimateMemory(*config, env);
    if (!estimate.ok()) {
      return absl::Status(estimate.status().code(),
                          absl::StrCat("at ", shape.num_workers, " worker(s) x ", env.chips_per_host, " device(s): ",
                                       estimate.status().message()));
    }
    if (shape.host_memory_bytes > 0 && estimate->per_process_bytes > shape.host_memory_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model_name=", config->model_name, " (", config->model.ParamCount(), " parameters) does not fit: at ",
          shape.num_workers, " worker(s) it needs ", estimate->DebugString(env.chips_per_host), ", but a host has ",
          FormatBytes(shape.host_memory_bytes), " (its memory resource)"));
    }
    return absl::OkStatus();
  };
}

}  // namespace manta::train
