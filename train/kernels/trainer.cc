// RunTraining: builds the mesh and collectives, restores or initializes the
// devices' shards, and runs one thread per local device through the steps.
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "train/kernels/blas.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/communicator.h"
#include "train/kernels/data.h"
#include "train/kernels/device_trainer.h"
#include "train/kernels/flops.h"
#include "train/kernels/train.h"

namespace manta::train {
namespace {

std::shared_ptr<spdlog::logger> Logger() {
  auto l = spdlog::get("train");
  return l ? l : spdlog::default_logger();
}

absl::StatusOr<int64_t> GlobalBatch(const Config& c, const Mesh& mesh) {
  const double exact = c.per_device_batch_size * mesh.num_devices();
  const int64_t gb = std::llround(exact);
  if (std::fabs(exact - gb) > 1e-9 || gb < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "config key 'per_device_batch_size': %g x %d devices is not a whole number of sequences",
        c.per_device_batch_size, mesh.num_devices()));
  }
  if (gb % mesh.batch_shards() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "config key 'per_device_batch_size': global batch %d does not split over %d batch shards "
        "(data x fsdp)", gb, mesh.batch_shards()));
  }
  return gb;
}

ShardView ViewOf(DeviceTrainer& d) {
  ShardView v;
  v.fields.resize(3);
  for (int b = 0; b < d.layout().num_blocks(); ++b) {
    for (int f = 0; f < 3; ++f) v.fields[f].push_back(d.shard(f, b));
    v.shard_sizes.push_back(d.shard_size(b));
  }
  return v;
}

// The collective save: every device calls it at the same step.
void SaveCheckpoint(const Config& config, const Mesh& mesh,
                    Communicator& comm, const CheckpointStore& store, DeviceTrainer& dev,
                    int64_t step, const RunOptions& options) {
  const bool leader = dev.device() == 0;
  auto report = [&](const absl::Status& s) {
    if (!s.ok()) Logger()->error("checkpoint save at step {} failed: {}", step, s.ToString());
  };
  if (leader) report(store.BeginSave(step));
  comm.Barrier(kAllAxes, dev.device());
  const DeviceCoord c = mesh.Coord(dev.device());
  if (c.data == 0) report(store.WriteShard(step, c.tensor, c.fsdp, ViewOf(dev)));
  comm.Barrier(kAllAxes, dev.device());
  if (leader) {
    if (options.save_fault_hook) options.save_fault_hook("shards_written", step);
    absl::Status s = store.FinishShards(step);
    if (s.ok() && options.save_fault_hook) options.save_fault_hook("renamed", step);
    if (s.ok()) {
      CheckpointManifest m;
      m.step = step;
      m.data_position = step;
      m.tensor = mesh.tensor();
      m.fsdp = mesh.fsdp();
      m.model = config.model;
      s = store.WriteManifest(m);
    }
    report(s);
    if (s.ok()) Logger()->info("saved checkpoint {}", store.StepDir(step));
  }
  comm.Barrier(kAllAxes, dev.device());
}

// One MaxText-style line per step, and a JSON line when a metrics file is open.
void LogStep(const StepMetrics& m, int64_t total_weights, std::ofstream* metrics) {
  Logger()->info(
      "completed step: {}, seconds: {:.3f}, TFLOP/s/device: {:.3f}, Tokens/s/device: {:.3f}, "
      "total_weights: {}, loss: {:.3f}",
      m.step, m.seconds, m.tflops_per_device, m.tokens_per_device_per_second, total_weights, m.loss);
  if (metrics) {
    *metrics << absl::StrFormat(
        "{\"step\": %d, \"loss\": %.9g, \"grad_norm\": %.9g, \"learning_rate\": %.9g, "
        "\"seconds\": %.6f, \"tflops_per_device\": %.6f, \"seconds_in_collectives\": %.6f, "
        "\"seconds_in_background_collectives\": %.6f}\n",
        m.step, m.loss, m.grad_norm, m.learning_rate, m.seconds, m.tflops_per_device,
        m.seconds_in_collectives, m.seconds_in_background_collectives);
    metrics->flush();
  }
}

// Fills the devices' shards from the checkpoint RunOptions::restore_from
// names (by default the latest complete one, when checkpointing), or
// initializes them. Returns the step to start at.
absl::StatusOr<int64_t> RestoreOrInit(const Config& config, const DistributedEnv& env, const CheckpointStore& store,
                                      const RunOptions& options,
                                      std::vector<std::unique_ptr<DeviceTrainer>>& devices, TrainingResult* result) {
  std::optional<CheckpointStore> chosen_store;
  int64_t step = -1;
  if (options.restore_from.has_value() && !options.restore_from->empty()) {
    const std::string& dir = *options.restore_from;
    const size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos || !absl::SimpleAtoi(dir.substr(slash + 1), &step) || step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore_from '", dir, "' is not a checkpoint's step directory (.../checkpoints/<step>)"));
    }
    chosen_store.emplace(dir.substr(0, slash));
  } else if (!options.restore_from.has_value() && config.enable_checkpointing) {
    if (auto latest = store.LatestStep(); latest.ok()) {
      step = *latest;
      chosen_store.emplace(store);
    }
  }
  if (!chosen_store.has_value()) {
    for (auto& d : devices) d->Init();
    return 0;
  }
  ASSIGN_OR_RETURN(CheckpointManifest manifest, chosen_store->ReadManifest(step));
  for (auto& d : devices) {
    RETURN_IF_ERROR(chosen_store->Restore(manifest, d->layout(), d->fsdp(), d->fsdp_rank(), ViewOf(*d)));
  }
  result->restored_step = manifest.step;
  if (env.process_id == 0) {
    Logger()->info("restored checkpoint {} (written by tensor {} x fsdp {})", chosen_store->StepDir(step),
                   manifest.tensor, manifest.fsdp);
  }
  return manifest.data_position;
}

}  // namespace

absl::StatusOr<TrainingResult> RunTraining(const Config& config, const DistributedEnv& env,
                                           const RunOptions& options) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(config.parallelism, env));
  RETURN_IF_ERROR(ParamLayout::CheckTensorSplit(config.model, mesh.tensor()));
  ASSIGN_OR_RETURN(const int64_t global_batch, GlobalBatch(config, mesh));
  if (options.blas_threads > 0) {
    SetBlasThreads(options.blas_threads);
  } else if (env.chips_per_host > 1) {
    SetBlasThreads(1);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Communicator::Create(mesh, env, absl::Seconds(options.join_timeout_seconds)));
  if (env.process_id == 0) {
    Logger()->info("mesh: {}; {} processes x {} chips, {} slices; global batch {} x {}; {} params",
                   mesh.DebugString(), env.num_processes, env.chips_per_host, env.num_slices,
                   global_batch, config.max_target_length, config.model.ParamCount());
  }
  std::vector<std::unique_ptr<DeviceTrainer>> devices;
  for (int i = 0; i < env.chips_per_host; ++i) {
    devices.push_back(std::make_unique<DeviceTrainer>(config, mesh, comm.get(),
                                                      env.first_device() + i, global_batch));
  }
  const CheckpointStore store(absl::StrCat(config.base_output_directory, "/", config.run_name,
                                           "/checkpoints"));
  TrainingResult result;
  ASSIGN_OR_RETURN(const int64_t start, RestoreOrInit(config, env, store, options, devices, &result));
  const SyntheticDataset data(config.data_shuffle_seed, config.model.vocab_size,
                              config.max_target_length);
  const StepFlops flops = TrainingFlopsPerDevice(config);
  const double tokens_per_device = config.per_device_batch_size * config.max_target_length;
  std::unique_ptr<std::ofstream> metrics;
  if (env.process_id == 0 && !config.metrics_file.empty()) {
    metrics = std::make_unique<std::ofstream>(config.metrics_file, std::ios::app);
  }
  auto run_device = [&](int local) {
    DeviceTrainer& dev = *devices[local];
    for (int64_t step = start; step < config.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const double comm_before = comm->SecondsInCollectives(dev.device());
      const double busy_before = dev.reducer().busy_seconds();
      const double drain_before = dev.reducer().drain_seconds();
      DeviceStepResult r = dev.Step(step, data);
      if (local == 0) {
        StepMetrics m;
        m.step = step;
        m.loss = r.loss;
        m.grad_norm = r.grad_norm;
        m.learning_rate = r.learning_rate;
        m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        m.tflops_per_device = flops.total() / m.seconds / 1e12;
        m.tokens_per_device_per_second = tokens_per_device / m.seconds;
        // The communicator counts the reducer thread's calls too; those ran
        // behind compute, and only the wait for them to drain blocked the step.
        m.seconds_in_background_collectives = dev.reducer().busy_seconds() - busy_before;
        m.seconds_in_collectives = comm->SecondsInCollectives(dev.device()) - comm_before -
                                   m.seconds_in_background_collectives +
                                   (dev.reducer().drain_seconds() - drain_before);
        result.steps.push_back(m);
        LogStep(m, global_batch * config.max_target_length, metrics.get());
        if (options.on_step) options.on_step(m);
      }
      // Every process takes part, so all agree on stopping after this step.
      float stop = local == 0 && options.should_stop && options.should_stop() ? 1.0f : 0.0f;
      comm->AllReduce(kAllAxes, dev.device(), &stop, 1);
      // Every checkpoint_period steps, and after the last step (as MaxText does).
      const bool last = stop > 0 || step + 1 == config.steps;
      const bool save = config.enable_checkpointing && ((step + 1) % config.checkpoint_period == 0 || last);
      if (save) SaveCheckpoint(config, mesh, *comm, store, dev, step + 1, options);
      if (local == 0 && options.on_step_done) {
        StepMetrics done = result.steps.back();
        // A save that failed somewhere left no manifest: nothing to report.
        if (save && store.ReadManifest(step + 1).ok()) done.checkpoint_dir = store.StepDir(step + 1);
        options.on_step_done(done);
      }
      if (stop > 0) {
        if (local == 0) result.stopped_early = step + 1 < config.steps;
        break;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < env.chips_per_host; ++i) threads.emplace_back(run_device, i);
  for (std::thread& t : threads) t.join();
  // Nobody tears down the coordinator or its gloo pairs while a peer may
  // still be finishing its last exchange.
  std::vector<std::thread> final_barrier;
  for (auto& d : devices) {
    final_barrier.emplace_back([&comm, id = d->device()] { comm->Barrier(kAllAxes, id); });
  }
  for (std::thread& t : final_barrier) t.join();
  return result;
}

}  // namespace manta::train
