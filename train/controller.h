// TrainController: the actor that runs a training run, as Ray Train v2's
// controller does. Fit (in the driver) creates it next to the driver and
// calls Run, which returns when the run has ended; the workers call
// WorkerReport from their loops, and, in an elastic run, AwaitGroup when
// their group ends.
//
// States and their log lines are Ray Train's: INITIALIZING -> SCHEDULING
// (reserve the worker group and start it) -> RUNNING -> FINISHED. A run of
// fixed size tears a failed attempt down whole (a worker's error, its
// process's or host's death), counts it against max_failures, and starts a
// new attempt from the latest committed checkpoint (RESTARTING), or ends
// ERRORED. An elastic run (num_workers {min, max}) grows and shrinks in
// whole slices as the GCS reports nodes dying, draining and arriving
// (RESIZING), keeping the workers' state in memory where it is replicated
// (see elastic.h). Waiting for resources is RESCHEDULING, up to the
// scheduling timeout. Every transition is logged "[State Transition] A -> B."
// and recorded in the GCS.
//
// Threads: Run holds one of the actor's threads for the whole run; each
// WorkerReport and AwaitGroup holds another until it is answered (the actor
// has 2 x max_workers + 4 threads). The report state is behind mu_; the rest
// is the Run thread's (and, in an elastic run, the driver's own lock). An
// elastic run's driver sees the controller only as a RunControl
// (run_control.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"
#include "train/protocol.h"
#include "train/reports.h"
#include "train/run_control.h"
#include "train/run_recorder.h"
#include "train/worker_group.h"

namespace manta::train {

class ElasticDriver;

class TrainController : private RunControl {
 public:
  static TrainController* Create(ControllerSpec spec);
  ~TrainController() override;

  // Runs the whole run. `self` is this actor's handle, for the workers.
  RunOutcome Run(ActorHandle<TrainController> self);
  // One rank's report; returns when every rank of its group made its report
  // of the same round (ok), or when the group ended first (not ok).
  ReportReply WorkerReport(ReportRequest request) ABSL_LOCKS_EXCLUDED(mu_);
  // A worker of an elastic run whose group ended: returns how it goes on.
  AwaitReply AwaitGroup(AwaitRequest request);

 private:
  explicit TrainController(ControllerSpec spec);

  // RunControl, for the elastic driver (see run_control.h).
  const ControllerSpec& Spec() const override { return spec_; }
  spdlog::logger& Log() const override { return *log_; }
  ReportState Snapshot() override ABSL_LOCKS_EXCLUDED(mu_);
  void CommitCheckpoint(const Checkpoint& checkpoint) override ABSL_LOCKS_EXCLUDED(mu_);
  void UpdateRecord(const std::function<void(state::TrainRun&)>& change) override { recorder_.Update(change); }
  void AddGroupTime(GroupOperation op, absl::Duration took) override;
  state::TrainRunState State() const override { return state_; }
  int Attempts() const override { return attempts_; }
  int Failures() const override { return failures_; }
  void CountAttempt() override { ++attempts_; }

  // Logs "[State Transition] A -> B." and records B with `detail`.
  void Transition(state::TrainRunState to, const std::string& detail) override;
  void Transition(state::TrainRunState to) { Transition(to, ""); }
  // The fixed-size run: attempts of a whole group.
  RunOutcome RunFixed(const ActorHandle<TrainController>& self);
  // Reserves and starts a group of `n` for `attempt_id`, waiting in
  // RESCHEDULING while the resources are not there, up to the scheduling
  // timeout (DeadlineExceeded then).
  absl::StatusOr<std::unique_ptr<WorkerGroup>> Schedule(int n, const std::string& attempt_id);
  // Shuts `group` down, counting the time it took.
  void ShutdownGroup(WorkerGroup& group);
  // Runs the loops of a started group to their end.
  WorkerGroup::Outcome RunAttempt(WorkerGroup& group, const std::string& attempt_id,
                                  const ActorHandle<TrainController>& self);
  // Counts a failed attempt, logs Ray's lines; true to restart.
  bool DecideOnFailure(const std::string& errors, int failed_workers) override;
  void SetWorkerFailures(std::vector<WorkerFailure> failures) override { last_failures_ = std::move(failures); }
  // The record of attempt `attempt_id`: its state, detail and (when given) workers.
  void RecordAttempt(const std::string& attempt_id, state::TrainAttemptState s, const std::string& detail,
                     const std::vector<state::TrainWorker>* workers) override;
  std::vector<state::TrainWorker> WorkersOf(const WorkerGroup& group) const;
  // The record of a worker of the run at its place `c` in a group.
  state::TrainWorker WorkerRecord(const TrainContext& c, const WorkerInfo& info, const ActorId& actor,
                                  const std::string& slice_name) const override;
  RunOutcome Finish(const absl::Status& error) override;
  // A node of the current group began to drain: adds it to preemption_.
  void NotePreemption(const NodeInfo& node) ABSL_LOCKS_EXCLUDED(mu_);

  // Reports of group `epoch` of `attempt_id` are accepted from now until
  // CloseReports or the next OpenReports. A round that completes with a
  // pause tells the elastic driver (OnPaused) once mu_ is released.
  void OpenReports(const std::string& attempt_id, int64_t epoch, int world_size, absl::Time began) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void CloseReports() override ABSL_LOCKS_EXCLUDED(mu_);
  // The next round to complete answers pause: its step is the group's last.
  void RequestPause() override ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a completed round's metrics and checkpoint; true when it paused.
  bool CompleteRound(const RoundOutcome& done, const ReportRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const ControllerSpec spec_;
  const std::shared_ptr<spdlog::logger> log_;

  // The Run thread's.
  state::TrainRunState state_ = state::TrainRunState::kInitializing;
  int failures_ = 0;
  int attempts_ = 0;
  std::unique_ptr<ElasticDriver> elastic_;    // set before Run's first group, for elastic runs
  std::vector<WorkerFailure> last_failures_;  // the failed workers of the last attempt, for Finish

  RunRecorder recorder_;  // thread-safe
  absl::Mutex mu_;
  std::string open_attempt_ ABSL_GUARDED_BY(mu_);  // empty: no group takes reports
  int64_t open_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<ReportRounds> rounds_ ABSL_GUARDED_BY(mu_);
  CheckpointManager checkpoints_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> latest_metrics_ ABSL_GUARDED_BY(mu_);
  absl::Time group_began_ ABSL_GUARDED_BY(mu_);  // when the current group was decided on
  absl::Time workers_started_ ABSL_GUARDED_BY(mu_);
  bool first_round_logged_ ABSL_GUARDED_BY(mu_) = false;
  bool pause_requested_ ABSL_GUARDED_BY(mu_) = false;
  int64_t paused_seq_ ABSL_GUARDED_BY(mu_) = -1;  // the round of this group that paused
  // From completed rounds of resizable loops.
  int64_t committed_next_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool resizable_ ABSL_GUARDED_BY(mu_) = false;
  bool replicated_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ ABSL_GUARDED_BY(mu_) = false;  // a round of the current attempt completed
  // The current group's ranks by node (hex id), and the preemption notice
  // its draining nodes gave, handed to every report of the group.
  std::map<std::string, std::vector<int>> group_nodes_ ABSL_GUARDED_BY(mu_);
  std::optional<PreemptionInfo> preemption_ ABSL_GUARDED_BY(mu_);
  // preemption_ as the latest round completed: what every rank of that round
  // is answered, however late it wakes (a notice arriving while the ranks
  // wake would else reach some of them a round before the others, and the
  // others would wait in the next round for ranks that stopped).
  std::optional<PreemptionInfo> round_preemption_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<NodeWatch> drain_watch_;  // set by Run: drain notices for preemption_
};

}  // namespace manta::train
