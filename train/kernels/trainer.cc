// RunTraining: one training session joined once and run to its end.
#include "common/status.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/session.h"
#include "train/kernels/train.h"

namespace manta::train {

absl::StatusOr<TrainingResult> RunTraining(const Config& config, const DistributedEnv& env, const RunOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingSession> session, TrainingSession::Create(config));
  JoinSpec join;
  join.env = env;
  join.parallelism = config.parallelism;
  join.source = StateSource::kInit;
  if (options.restore_from.has_value() && !options.restore_from->empty()) {
    join.source = StateSource::kRestore;
    join.restore_from = *options.restore_from;
  } else if (!options.restore_from.has_value() && config.enable_checkpointing) {
    const CheckpointStore store(config.base_output_directory + "/" + config.run_name + "/checkpoints");
    if (auto latest = store.LatestStep(); latest.ok()) {
      join.source = StateSource::kRestore;
      join.restore_from = store.StepDir(*latest);
    }
  }
  RETURN_IF_ERROR(session->Join(join, options));
  ASSIGN_OR_RETURN(SessionRun run, session->Run(options));
  if (run.end == SessionRun::kBroken) {
    return absl::UnavailableError("the collective group broke: " + run.error);
  }
  TrainingResult result;
  result.restored_step = session->restored_step();
  result.steps = std::move(run.steps);
  result.stopped_early = run.end == SessionRun::kStopped || run.end == SessionRun::kDiscarded;
  return result;
}

}  // namespace manta::train
