// TrainController: the actor that runs a training run, as Ray Train v2's
// controller does. Fit (in the driver) creates it next to the driver and
// calls Run, which returns when the run has ended; the workers call
// WorkerReport from their loops.
//
// States and their log lines are Ray Train's: INITIALIZING -> SCHEDULING
// (reserve the worker group and start it) -> RUNNING -> FINISHED; an
// attempt that fails (a worker's error, its process's or host's death) is
// torn down whole, counted against max_failures, and followed by RESTARTING
// -> SCHEDULING and a new attempt from the latest committed checkpoint, or by
// ERRORED. Waiting for resources is RESCHEDULING, up to the scheduling
// timeout. Every transition is logged "[State Transition] A -> B." and
// recorded in the GCS.
//
// Threads: Run holds one of the actor's threads for the whole run; each
// WorkerReport holds another until its round completes (the actor has
// max_workers + 4 threads). The report state is behind mu_; the rest is
// the Run thread's.
#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"
#include "train/protocol.h"
#include "train/reports.h"
#include "train/run_recorder.h"
#include "train/worker_group.h"

namespace manta::train {

class TrainController {
 public:
  static TrainController* Create(ControllerSpec spec);

  // Runs the whole run. `self` is this actor's handle, for the workers.
  RunOutcome Run(ActorHandle<TrainController> self);
  // One rank's report; returns when every rank of the attempt made its
  // report of the same round (ok), or when the attempt ended (not ok).
  ReportReply WorkerReport(ReportRequest request) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit TrainController(ControllerSpec spec);

  // Logs "[State Transition] A -> B." and records B with `detail`.
  void Transition(state::TrainRunState to, const std::string& detail = "");
  // Reserves and starts a group of `n` for `attempt_id`, waiting in
  // RESCHEDULING while the resources are not there, up to the scheduling
  // timeout (DeadlineExceeded then).
  absl::StatusOr<std::unique_ptr<WorkerGroup>> Schedule(int n, const std::string& attempt_id);
  // Runs the loops of a started group to their end.
  WorkerGroup::Outcome RunAttempt(WorkerGroup& group, const std::string& attempt_id,
                                  const ActorHandle<TrainController>& self);
  // Counts a failed attempt, logs Ray's lines; true to restart.
  bool DecideOnFailure(const std::string& errors, int failed_workers);
  // The record of attempt `attempt_id`: its workers, state and detail.
  void RecordAttempt(const std::string& attempt_id, state::TrainAttemptState s, const std::string& detail,
                     const WorkerGroup* group);
  RunOutcome Finish(const absl::Status& error);

  // Reports of `attempt_id` are accepted from now until CloseReports.
  void OpenReports(const std::string& attempt_id, int world_size) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseReports() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const ControllerSpec spec_;
  const std::shared_ptr<spdlog::logger> log_;

  // The Run thread's.
  state::TrainRunState state_ = state::TrainRunState::kInitializing;
  int failures_ = 0;
  int attempts_ = 0;

  RunRecorder recorder_;  // thread-safe
  absl::Mutex mu_;
  std::string open_attempt_ ABSL_GUARDED_BY(mu_);  // empty: no attempt takes reports
  std::unique_ptr<ReportRounds> rounds_ ABSL_GUARDED_BY(mu_);
  CheckpointManager checkpoints_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> latest_metrics_ ABSL_GUARDED_BY(mu_);
  absl::Time attempt_began_ ABSL_GUARDED_BY(mu_);  // when the current attempt started scheduling
  absl::Time workers_started_ ABSL_GUARDED_BY(mu_);
  bool first_round_logged_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::train
