#include "manta/maxtext.h"

#include <atomic>
#include <chrono>

#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "manta/errors.h"
#include "train/chip_publisher.h"
#include "train/kernels/config.h"
#include "train/kernels/memory.h"
#include "train/kernels/session.h"
#include "train/kernels/train.h"
#include "train/worker_session.h"

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
          {"total_weights", total_weights},
          // of this rank's first chip: time blocked waiting for its peers
          {"seconds_in_collectives", m.seconds_in_collectives}};
}

// A fixed-size run: the kernels' RunTraining, reporting every step.
absl::Status RunFixed(const Config& config, const TrainContext& ctx) {
  const auto began = std::chrono::steady_clock::now();
  RunOptions options;
  std::unique_ptr<ChipPublisher> chips = ChipPublisher::FromEnvironment(ctx.chips);
  options.activity = chips.get();
  if (std::optional<Checkpoint> committed = GetCheckpoint(); committed.has_value()) {
    options.restore_from = committed->path;
  } else if (ctx.attempt_number > 1) {
    options.restore_from = "";  // nothing of this run was committed: start over
  }
  // A failed report ends the run at the next step; its error is the loop's.
  absl::Mutex mu;
  absl::Status report_error;  // guarded by mu
  std::atomic<bool> stop{false};
  bool first = true;
  const double total_weights = config.per_device_batch_size * EnvOf(ctx).num_devices() * config.max_target_length;
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
      absl::MutexLock lock(&mu);
      report_error = absl::AbortedError(absl::StrCat("report of step ", m.step, " failed: ", e.what()));
      stop = true;
    }
  };
  auto result = RunTraining(config, EnvOf(ctx), options);
  if (!result.ok()) return result.status();
  absl::MutexLock lock(&mu);
  return report_error;
}

// What an elastic run trains with: with elastic_fixed_global_batch, the
// same model at every size (the global batch of its largest size, summed
// exactly); else each device's per_device_batch_size at every size
// (global_batch 0).
struct ElasticRun {
  Config config;
  int64_t global_batch = 0;
};
ElasticRun ForElasticRun(Config config, int max_workers, int chips) {
  ElasticRun run;
  if (config.elastic_fixed_global_batch) {
    config.exact_gradient_sums = true;
    run.global_batch = std::llround(config.per_device_batch_size * max_workers * std::max(1, chips));
  }
  run.config = std::move(config);
  return run;
}

// The elastic run's loop: one session whose state outlives its groups.
class ElasticLoop {
 public:
  explicit ElasticLoop(ElasticRun run) : config_(std::move(run.config)), global_batch_(run.global_batch) {}

  absl::Status Run() {
    const TrainContext& first = GetContext();
    auto session = TrainingSession::Create(config_, global_batch_);
    if (!session.ok()) return session.status();
    session_ = std::move(*session);
    chips_ = ChipPublisher::FromEnvironment(first.chips);
    internal::SetInterruptHandler([this](const std::string& why) { session_->Interrupt(why); });
    JoinInstruction join = internal::CurrentJoin();
    while (true) {
      began_ = std::chrono::steady_clock::now();
      first_step_ = true;
      const TrainContext& ctx = GetContext();
      auto parallelism = ElasticParallelism(config_.parallelism, ctx.num_slices);
      if (!parallelism.ok()) return parallelism.status();
      JoinSpec spec;
      spec.env = EnvOf(ctx);
      spec.parallelism = *parallelism;
      spec.source = static_cast<StateSource>(join.source);
      spec.restore_from = join.restore_from;
      spec.step = join.step;
      spec.source_slices = join.source_slices;
      absl::Status joined = session_->Join(spec, Options());
      std::string why;
      if (!joined.ok()) {
        // A group that could not form (a peer died, or an interrupt) is the
        // controller's to re-form; anything else is this loop's error.
        if (!absl::IsUnavailable(joined) && !absl::IsCancelled(joined)) return joined;
        why = absl::StrCat("could not join the group: ", joined.message());
      } else {
        auto run = session_->Run(Options());
        if (!run.ok()) return run.status();
        if (run->end == SessionRun::kFinished) return Finish();
        why = run->end == SessionRun::kBroken      ? run->error
              : run->end == SessionRun::kDiscarded ? "discarded"
                                                   : "paused";
      }
      std::optional<JoinInstruction> next = internal::AwaitNextGroup(session_->next_step(), why, pending_checkpoint_);
      pending_checkpoint_.reset();                     // the controller has it now
      if (!next.has_value()) return absl::OkStatus();  // not in the next group
      join = *next;
    }
  }

  // The dcn axes for `num_slices` slices: the data axis takes the change
  // when fsdp and tensor do not span slices (the state is then replicated
  // across slices), else the fsdp axis.
  static absl::StatusOr<ParallelismConfig> ElasticParallelism(ParallelismConfig p, int num_slices) {
    if (p.dcn_data == -1 || p.dcn_fsdp == -1 || p.dcn_tensor == -1) return p;  // filled by the mesh
    if (p.dcn_data * p.dcn_fsdp * p.dcn_tensor == num_slices) return p;
    if (p.dcn_fsdp == 1 && p.dcn_tensor == 1) {
      p.dcn_data = num_slices;
    } else if (p.dcn_data == 1 && p.dcn_tensor == 1) {
      p.dcn_fsdp = num_slices;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("dcn_data_parallelism=", p.dcn_data, " dcn_fsdp_parallelism=", p.dcn_fsdp,
                       " dcn_tensor_parallelism=", p.dcn_tensor, " cannot follow an elastic run to ", num_slices,
                       " slice(s): let one dcn axis span the slices"));
    }
    return p;
  }

 private:
  RunOptions Options() {
    RunOptions o;
    o.activity = chips_.get();
    const bool replicated =
        session_->mesh() != nullptr && session_->mesh()->dcn(1) == 1 && session_->mesh()->dcn(2) == 1;
    const double total_weights = static_cast<double>(session_->global_batch() * config_.max_target_length);
    o.commit = [this, replicated, total_weights](const StepMetrics& m) {
      std::map<std::string, double> metrics = StepReport(m, total_weights);
      last_metrics_ = metrics;
      if (first_step_) {
        first_step_ = false;
        const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
        metrics["startup_seconds"] = since - m.seconds;  // joining the group and getting the state
      }
      std::optional<Checkpoint> saved;
      saved.swap(pending_checkpoint_);
      internal::CommitReply c = internal::CommitStep(metrics, saved, replicated);
      if (!c.commit) return StepDecision::kDiscard;
      return c.pause ? StepDecision::kApplyThenPause : StepDecision::kApply;
    };
    o.on_step_done = [this](const StepMetrics& m) {
      if (!m.checkpoint_dir.empty()) pending_checkpoint_ = Checkpoint{m.checkpoint_dir};
    };
    return o;
  }

  // Every rank reports the last checkpoint once more, so it is committed.
  absl::Status Finish() {
    try {
      Report(last_metrics_, pending_checkpoint_);
    } catch (const std::exception& e) {
      return absl::AbortedError(absl::StrCat("the final report failed: ", e.what()));
    }
    return absl::OkStatus();
  }

  const Config config_;
  const int64_t global_batch_;            // 0: each device's per_device_batch_size
  std::unique_ptr<ChipPublisher> chips_;  // before the session, which calls it
  std::unique_ptr<TrainingSession> session_;
  std::optional<Checkpoint> pending_checkpoint_;  // saved after a step, reported with the next
  std::map<std::string, double> last_metrics_;    // of the last step this worker reported
  std::chrono::steady_clock::time_point began_;
  bool first_step_ = true;
};

}  // namespace

absl::Status RunMaxText(const std::vector<std::string>& argv) {
  auto config = LoadConfig(argv);
  if (!config.ok()) return config.status();
  if (internal::CurrentJoin().source == JoinInstruction::kDefault) return RunFixed(*config, GetContext());
  const TrainContext& first = GetContext();
  ElasticLoop loop(ForElasticRun(*std::move(config), first.max_world_size, first.chips));
  return loop.Run();
}

absl::Status CheckMaxTextConfig(const std::vector<std::string>& argv) { return LoadConfig(argv).status(); }

Preflight MaxTextPreflight(std::vector<std::string> argv) {
  return [argv = std::move(argv)](const WorkerGroupShape& shape) -> absl::Status {
    auto config = LoadConfig(argv);
    if (!config.ok()) return config.status();
    DistributedEnv env;
    env.num_processes = shape.num_workers;
    env.num_slices = std::max(1, shape.num_slices);
    env.chips_per_host = std::max(1, shape.chips_per_worker);
    // Estimated as the run trains (an elastic run's copies in double, its
    // global batch the largest size's).
    int64_t global_batch = 0;
    if (shape.elastic) {
      ElasticRun run = ForElasticRun(*std::move(config), shape.max_workers, env.chips_per_host);
      *config = std::move(run.config);
      global_batch = run.global_batch;
    }
    auto parallelism = ElasticLoop::ElasticParallelism(config->parallelism, env.num_slices);
    if (!parallelism.ok()) return parallelism.status();
    config->parallelism = *parallelism;
    auto estimate = EstimateMemory(*config, env, global_batch);
    if (!estimate.ok()) {
      return absl::Status(estimate.status().code(),
                          absl::StrCat("at ", shape.num_workers, " worker(s) x ", env.chips_per_host,
                                       " device(s): ", estimate.status().message()));
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
