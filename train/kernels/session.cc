// TrainingSession: joining groups, getting the devices' state, and running
// one thread per local device through the steps.
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "train/kernels/session.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "train/kernels/device_trainer.h"
#include "train/kernels/flops.h"
#include "train/kernels/progress_log.h"

namespace manta::train {
namespace {

std::shared_ptr<spdlog::logger> Logger() {
  auto l = spdlog::get("train");
  return l ? l : spdlog::default_logger();
}

// Tells a DeviceActivity (if any) that a device's step ended: at Now(), or
// on leaving the scope for a step that was discarded or broke.
class StepEnd {
 public:
  StepEnd(DeviceActivity* activity, int local, std::function<double()> transfer_seconds,
          std::function<int64_t()> bytes_held)
      : activity_(activity), local_(local), transfer_(std::move(transfer_seconds)), bytes_(std::move(bytes_held)) {}
  ~StepEnd() { Now(); }
  void Now() {
    if (activity_ == nullptr || done_) return;
    done_ = true;
    activity_->StepEnded(local_, transfer_(), bytes_());
  }

 private:
  DeviceActivity* const activity_;
  const int local_;
  const std::function<double()> transfer_;
  const std::function<int64_t()> bytes_;
  bool done_ = false;
};

absl::Status CheckBatch(int64_t gb, const Mesh& mesh) {
  if (gb < 1 || gb % mesh.batch_shards() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "config key 'per_device_batch_size': global batch %d does not split over %d batch shards (data x fsdp)", gb,
        mesh.batch_shards()));
  }
  return absl::OkStatus();
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
        m.step, m.loss, m.grad_norm, m.learning_rate, m.seconds, m.tflops_per_device, m.seconds_in_collectives,
        m.seconds_in_background_collectives);
    metrics->flush();
  }
}

// The bytes of a device's shard: parameters and both moments.
int64_t ShardBytes(const ShardView& v) {
  int64_t floats = 0;
  for (int64_t n : v.shard_sizes) floats += n;
  return static_cast<int64_t>(sizeof(float)) * floats * static_cast<int64_t>(v.fields.size());
}

}  // namespace

// The local devices' agreement on each step: the last to arrive decides
// for all. Abort makes waiters (and later arrivals) throw CollectiveError.
struct TrainingSession::StepSync {
  explicit StepSync(int count) : count(count) {}

  StepDecision Agree(const std::function<StepDecision()>& decide) {
    absl::MutexLock lock(&mu);
    if (!failure.empty()) throw CollectiveError(failure);
    const int64_t mine = generation;
    if (++arrived == count) {
      deciding = true;
      mu.Unlock();
      StepDecision d = StepDecision::kApply;
      try {
        d = decide();  // may block on the trainer's controller
      } catch (const std::exception& e) {
        mu.Lock();  // the lock's guard releases it
        FailDecision(e.what());
        throw;
      } catch (...) {
        mu.Lock();
        FailDecision("the step decision failed");
        throw;
      }
      mu.Lock();
      decision = d;
      arrived = 0;
      deciding = false;
      ++generation;
      cv.SignalAll();
    } else {
      // Once the decision is being made every local device waits for it, so
      // they all apply the step or none does, even if the group breaks now.
      while (generation == mine && (failure.empty() || deciding)) cv.Wait(&mu);
    }
    if (generation == mine) throw CollectiveError(failure);
    return decision;
  }
  // The deciding device's decision threw: the others stop waiting for it
  // and see the failure.
  void FailDecision(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (failure.empty()) failure = why;
    deciding = false;
    arrived = 0;
    cv.SignalAll();
  }
  void Abort(const std::string& why) {
    absl::MutexLock lock(&mu);
    if (failure.empty()) failure = why;
    cv.SignalAll();
  }

  const int count;
  absl::Mutex mu;
  absl::CondVar cv;
  int arrived ABSL_GUARDED_BY(mu) = 0;
  bool deciding ABSL_GUARDED_BY(mu) = false;
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  StepDecision decision ABSL_GUARDED_BY(mu) = StepDecision::kApply;
  std::string failure ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::Create(const Config& config, int64_t global_batch) {
  if (global_batch < 0) return absl::InvalidArgumentError("global batch must not be negative");
  ASSIGN_OR_RETURN(RunData data, MakeRunData(config));
  if (data.tokenizer) {
    Logger()->info("text dataset {}: {} tokens, {} windows of {}; tokenizer of {} ids", config.dataset_path,
                   static_cast<const TextDataset&>(*data.dataset).tokens(),
                   static_cast<const TextDataset&>(*data.dataset).windows(), config.max_target_length,
                   data.tokenizer->vocab_size());
  }
  return std::unique_ptr<TrainingSession>(new TrainingSession(config, std::move(data), global_batch));
}

TrainingSession::TrainingSession(const Config& config, RunData data, int64_t global_batch)
    : config_(config), data_(std::move(data)), global_batch_(global_batch) {}

TrainingSession::~TrainingSession() { Leave(); }

void TrainingSession::Interrupt(const std::string& why) {
  absl::MutexLock lock(&comm_mu_);
  if (comm_) comm_->Abort(why);
  if (sync_) sync_->Abort(why);
}

void TrainingSession::Leave() {
  if (!devices_.empty()) {
    states_.clear();
    for (auto& d : devices_) states_.push_back(d->TakeState());
  }
  devices_.clear();  // joins the reducers before the communicator goes
  absl::MutexLock lock(&comm_mu_);
  comm_.reset();
  sync_.reset();
}

absl::Status TrainingSession::Join(const JoinSpec& spec, const RunOptions& options) {
  RETURN_IF_ERROR(spec.env.Validate());
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(spec.parallelism, spec.env));
  RETURN_IF_ERROR(ParamLayout::CheckTensorSplit(config_.model, mesh.tensor()));
  int64_t gb = global_batch_;
  if (gb == 0) {
    ASSIGN_OR_RETURN(gb, GlobalBatch(config_, mesh.num_devices()));
  }
  RETURN_IF_ERROR(CheckBatch(gb, mesh));
  Leave();
  global_batch_ = gb;
  mesh_ = std::make_unique<Mesh>(mesh);
  env_ = spec.env;
  if (options.blas_threads > 0) {
    SetBlasThreads(options.blas_threads);
  } else if (env_.chips_per_host > 1) {
    SetBlasThreads(1);
  }
  {
    absl::MutexLock lock(&comm_mu_);
    comm_ = Communicator::Make(*mesh_, env_);
    sync_ = std::make_unique<StepSync>(env_.chips_per_host);
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status connected = comm_->Connect(absl::Seconds(options.join_timeout_seconds));
  if (!connected.ok()) return connected;
  const auto t1 = std::chrono::steady_clock::now();
  const int64_t rows = gb / mesh_->batch_shards();
  for (int i = 0; i < env_.chips_per_host; ++i) {
    std::unique_ptr<DeviceState> held = i < static_cast<int>(states_.size()) ? std::move(states_[i]) : nullptr;
    devices_.push_back(std::make_unique<DeviceTrainer>(config_, *mesh_, comm_.get(), env_.first_device() + i, gb,
                                                       MicroRows(config_, rows), std::move(held)));
  }
  states_.clear();
  store_ = std::make_unique<CheckpointStore>(
      absl::StrCat(config_.base_output_directory, "/", config_.run_name, "/checkpoints"));
  if (env_.process_id == 0) {
    Logger()->info("mesh: {}; {} processes x {} chips, {} slices; global batch {} x {}; {} params",
                   mesh_->DebugString(), env_.num_processes, env_.chips_per_host, env_.num_slices, gb,
                   config_.max_target_length, config_.model.ParamCount());
  }
  const auto t2 = std::chrono::steady_clock::now();
  absl::Status filled = Fill(spec);
  const auto t3 = std::chrono::steady_clock::now();
  if (!filled.ok()) return filled;
  // Where a join's time goes: a process joining late makes the others wait
  // in their state transfer, and a fresh process pays for its buffers.
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const char* state = spec.source == StateSource::kInit      ? "initialized"
                      : spec.source == StateSource::kKeep    ? "kept"
                      : spec.source == StateSource::kRestore ? "restored"
                                                             : "taken from peers";
  Logger()->info("process {} joined in {:.2f} s: connected in {:.2f} s, buffers in {:.2f} s, state {} in {:.2f} s",
                 env_.process_id, secs(t0, t3), secs(t0, t1), secs(t1, t2), state, secs(t2, t3));
  return filled;
}

absl::Status TrainingSession::Fill(const JoinSpec& spec) {
  switch (spec.source) {
    case StateSource::kInit:
      for (auto& d : devices_) d->Init();
      next_step_ = 0;
      return absl::OkStatus();
    case StateSource::kKeep:
      for (auto& d : devices_) {
        if (!d->state_reused()) {
          return absl::FailedPreconditionError(
              absl::StrCat("device ", d->device(), " holds no state for mesh ", mesh_->DebugString(),
                           " (its tensor or fsdp shards changed): restore a checkpoint or take the state from peers"));
        }
      }
      next_step_ = spec.step;
      return absl::OkStatus();
    case StateSource::kRestore: {
      const std::string& dir = spec.restore_from;
      const size_t slash = dir.find_last_of('/');
      int64_t step = -1;
      if (slash == std::string::npos || !absl::SimpleAtoi(dir.substr(slash + 1), &step) || step < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("restore_from '", dir, "' is not a checkpoint's step directory (.../checkpoints/<step>)"));
      }
      const CheckpointStore from(dir.substr(0, slash));
      ASSIGN_OR_RETURN(CheckpointManifest manifest, from.ReadManifest(step));
      int64_t total = 0;
      for (auto& d : devices_) total += ShardBytes(d->View());
      ProgressLog progress(absl::StrCat("checkpoint restore from ", dir), total,
                           [](const std::string& line) { Logger()->info(line); });
      for (auto& d : devices_) {
        RETURN_IF_ERROR(from.Restore(manifest, d->layout(), d->fsdp(), d->fsdp_rank(), d->View(),
                                     [&](int64_t bytes) { progress.Add(bytes); }));
      }
      progress.Done();
      next_step_ = manifest.data_position;
      restored_step_ = manifest.step;
      if (env_.process_id == 0) {
        Logger()->info("restored checkpoint {} (written by tensor {} x fsdp {})", dir, manifest.tensor, manifest.fsdp);
      }
      return absl::OkStatus();
    }
    case StateSource::kPeers:
      break;
  }
  // kPeers: every device takes its shards from a member of its data group
  // on a source slice; all members take part (the sources send).
  std::vector<std::thread> threads;
  std::vector<std::string> errors(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    threads.emplace_back([&, i] {
      DeviceTrainer& d = *devices_[i];
      std::vector<int> members = mesh_->GroupMembers(kDataAxis, d.device());
      int root = -1;
      for (size_t m = 0; m < members.size() && root < 0; ++m) {
        for (int s : spec.source_slices) {
          if (mesh_->SliceOf(members[m]) == s) root = static_cast<int>(m);
        }
      }
      if (root < 0) {
        errors[i] = absl::StrCat("no member of device ", d.device(), "'s data group is on a source slice");
        return;
      }
      try {
        d.BroadcastState(root);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) return absl::UnavailableError("taking the state from peers: " + e);
  }
  next_step_ = spec.step;
  return absl::OkStatus();
}

void TrainingSession::SaveCheckpoint(DeviceTrainer& dev, int64_t step, const RunOptions& options) {
  const bool leader = dev.device() == 0;
  auto report = [&](const absl::Status& s) {
    if (!s.ok()) Logger()->error("checkpoint save at step {} failed: {}", step, s.ToString());
  };
  absl::Status begun;
  if (leader) {
    begun = store_->BeginSave(step);
    // The tokenizer travels with the weights: a served checkpoint reads text.
    if (begun.ok() && data_.tokenizer) {
      begun = store_->WriteExtra(step, "tokenizer.json", data_.tokenizer->ToJson());
    }
    report(begun);
  }
  comm_->Barrier(kAllAxes, dev.device());
  const DeviceCoord c = mesh_->Coord(dev.device());
  if (c.data == 0) {
    // One device per process tells the log how a long write goes.
    std::optional<ProgressLog> progress;
    if (dev.device() == devices_.front()->device()) {
      progress.emplace(absl::StrCat("checkpoint save at step ", step, " (tensor ", c.tensor, ", fsdp ", c.fsdp, ")"),
                       ShardBytes(dev.View()), [](const std::string& line) { Logger()->info(line); });
    }
    report(store_->WriteShard(step, c.tensor, c.fsdp, dev.View(), [&](int64_t bytes) {
      if (progress) progress->Add(bytes);
    }));
    if (progress) progress->Done();
  }
  comm_->Barrier(kAllAxes, dev.device());
  if (leader) {
    if (options.save_fault_hook) options.save_fault_hook("shards_written", step);
    absl::Status s = begun.ok() ? store_->FinishShards(step) : begun;
    if (s.ok() && options.save_fault_hook) options.save_fault_hook("renamed", step);
    if (s.ok()) {
      CheckpointManifest m;
      m.step = step;
      m.data_position = step;
      m.tensor = mesh_->tensor();
      m.fsdp = mesh_->fsdp();
      m.model = config_.model;
      s = store_->WriteManifest(m);
    }
    if (begun.ok()) report(s);
    if (s.ok()) Logger()->info("saved checkpoint {}", store_->StepDir(step));
  }
  comm_->Barrier(kAllAxes, dev.device());
}

absl::StatusOr<SessionRun> TrainingSession::Run(const RunOptions& options) {
  if (devices_.empty()) return absl::FailedPreconditionError("Run before a successful Join");
  SessionRun run;
  std::unique_ptr<std::ofstream> metrics;
  if (env_.process_id == 0 && !config_.metrics_file.empty()) {
    // Its directory is made now that something is written there.
    const std::filesystem::path parent = std::filesystem::path(config_.metrics_file).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    metrics = std::make_unique<std::ofstream>(config_.metrics_file, std::ios::app);
    if (ec || !*metrics) {
      return absl::InvalidArgumentError(absl::StrCat("config key 'metrics_file': cannot write ", config_.metrics_file,
                                                     ec ? ": " + ec.message() : std::string()));
    }
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < static_cast<int>(devices_.size()); ++i) {
    threads.emplace_back([this, i, &options, &run, &metrics] { DeviceLoop(i, options, metrics.get(), &run); });
  }
  for (std::thread& t : threads) t.join();
  run.next_step = next_step_;
  if (run.end != SessionRun::kBroken) {
    // Nobody tears down the coordinator or its gloo pairs while a peer may
    // still be finishing its last exchange. The barrier cannot fail the run:
    // every step's collectives completed here, so every peer completed them
    // too. Its root leaves first and may close its pairs while another peer
    // still waits for the root's last message, which gloo then reports as a
    // closed connection although the message arrived.
    std::vector<std::thread> final_barrier;
    for (auto& d : devices_) {
      final_barrier.emplace_back([this, id = d->device()] {
        try {
          comm_->Barrier(kAllAxes, id);
        } catch (const CollectiveError& e) {
          Logger()->info("a peer left the closing barrier first (the run is complete): {}", e.what());
        }
      });
    }
    for (std::thread& t : final_barrier) t.join();
  }
  return run;
}

void TrainingSession::Broke(SessionRun* run, const std::string& why) {
  {
    absl::MutexLock lock(&run_mu_);
    if (run->end != SessionRun::kBroken) {
      run->end = SessionRun::kBroken;
      run->error = why;
    }
  }
  Interrupt(why);  // local devices waiting on this one fail at once
}

StepMetrics TrainingSession::Measure(int64_t step, const DeviceStepResult& r, DeviceTrainer& dev,
                                     std::chrono::steady_clock::time_point t0, const StepSnapshot& before) const {
  StepMetrics m;
  m.step = step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.learning_rate = r.learning_rate;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A device of a smaller group runs more rows of the same global batch.
  const double rows_factor = static_cast<double>(dev.rows()) / std::max(1e-9, config_.per_device_batch_size);
  m.tflops_per_device = TrainingFlopsPerDevice(config_).total() * rows_factor / m.seconds / 1e12;
  m.tokens_per_device_per_second = static_cast<double>(dev.rows()) * config_.max_target_length / m.seconds;
  // The communicator counts the reducer thread's calls too; those ran
  // behind compute, and only the wait for them to drain blocked the step.
  m.seconds_in_background_collectives = dev.reducer().busy_seconds() - before.busy;
  m.seconds_in_collectives = comm_->SecondsInCollectives(dev.device()) - before.comm -
                             m.seconds_in_background_collectives + (dev.reducer().drain_seconds() - before.drain);
  return m;
}

void TrainingSession::DeviceLoop(int local, const RunOptions& options, std::ofstream* metrics, SessionRun* run) {
  DeviceTrainer& dev = *devices_[local];
  const Dataset& data = *data_.dataset;
  const int64_t total_weights = global_batch_ * config_.max_target_length;
  try {
    for (int64_t step = next_step_; step < config_.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const StepSnapshot before{comm_->SecondsInCollectives(dev.device()), dev.reducer().busy_seconds(),
                                dev.reducer().drain_seconds()};
      if (options.activity != nullptr) options.activity->StepBegan(local);
      // Ends the step for the activity however it ends (applied, discarded, broken).
      StepEnd ended(
          options.activity, local, [&] { return comm_->SecondsInCollectives(dev.device()) - before.comm; },
          [&] { return dev.BytesHeld(); });
      const DeviceStepResult r = dev.ComputeGradients(step, data);
      // A trainer's commit decides before anything changes; without one the
      // processes vote on stopping once the step is applied, as before.
      StepDecision decision = StepDecision::kApply;
      if (options.commit) {
        decision = sync_->Agree([&] { return options.commit(Measure(step, r, dev, t0, before)); });
      }
      if (decision == StepDecision::kDiscard) {
        absl::MutexLock lock(&run_mu_);
        if (run->end == SessionRun::kFinished) run->end = SessionRun::kDiscarded;
        return;
      }
      dev.ApplyUpdate(step, r);
      ended.Now();
      StepMetrics m;
      if (local == 0) {
        next_step_ = step + 1;
        m = Measure(step, r, dev, t0, before);
        run->steps.push_back(m);
        LogStep(m, total_weights, metrics);
        if (options.on_step) options.on_step(m);
      }
      bool stop = false;
      if (!options.commit) {
        // Every process takes part, so all agree on stopping after this step.
        float vote = local == 0 && options.should_stop && options.should_stop() ? 1.0f : 0.0f;
        comm_->AllReduce(kAllAxes, dev.device(), &vote, 1);
        stop = vote > 0;
      }
      const bool last = stop || step + 1 == config_.steps;
      // Every checkpoint_period steps, and after the last step (as MaxText does).
      const bool save = config_.enable_checkpointing && ((step + 1) % config_.checkpoint_period == 0 || last);
      if (save) SaveCheckpoint(dev, step + 1, options);
      if (local == 0 && options.on_step_done) {
        // A save that failed somewhere left no manifest: nothing to report.
        if (save && store_->ReadManifest(step + 1).ok()) m.checkpoint_dir = store_->StepDir(step + 1);
        options.on_step_done(m);
      }
      if (stop || decision == StepDecision::kApplyThenPause) {
        absl::MutexLock lock(&run_mu_);
        if (run->end == SessionRun::kFinished && step + 1 < config_.steps) run->end = SessionRun::kStopped;
        return;
      }
    }
  } catch (const CollectiveError& e) {
    Broke(run, e.what());
  }
}

}  // namespace manta::train
