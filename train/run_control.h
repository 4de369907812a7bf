// RunControl: what an elastic run's driver (ElasticDriver, elastic.h) may
// ask of the controller that owns it. TrainController implements it; the
// driver sees nothing else of the controller.
//
//   RunControl::ReportState s = control->Snapshot();  // one consistent copy
//   if (!s.resizable) ...;                            // restart at the new size
//   control->Transition(state::TrainRunState::kResizing, "a host died");
//   control->Log().info("...");
//
// Threads: the calls under "Run thread only" are made from the controller's
// Run thread alone (the driver's Run); the others are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "manta/state.h"
#include "spdlog/logger.h"
#include "train/protocol.h"

namespace manta::train {

class RunControl {
 public:
  // What the completed report rounds left, as of one moment.
  struct ReportState {
    // From the latest completed round: its loop keeps its state across
    // groups (internal::CommitStep), and every slice holds the whole state.
    bool resizable = false;
    bool replicated = false;
    // The step after the latest one a resizable loop committed.
    int64_t committed_next_step = 0;
    std::optional<Checkpoint> latest_checkpoint;
  };

  virtual ~RunControl() = default;

  // Constant after construction.
  virtual const ControllerSpec& Spec() const = 0;
  virtual spdlog::logger& Log() const = 0;

  // The report state, copied under the controller's lock.
  virtual ReportState Snapshot() = 0;
  // Reports of group `epoch` of `attempt_id` (`world_size` ranks) are
  // accepted from now until CloseReports or the next OpenReports. `began`:
  // when the group was decided on.
  virtual void OpenReports(const std::string& attempt_id, int64_t epoch, int world_size, absl::Time began) = 0;
  // Reports waiting for their round return "ended"; later ones are refused.
  virtual void CloseReports() = 0;
  // The next round to complete answers pause: its step is the group's last.
  virtual void RequestPause() = 0;
  // Commits `checkpoint` (every worker of a group saved its part) as the
  // latest and records it.
  virtual void CommitCheckpoint(const Checkpoint& checkpoint) = 0;
  // Applies `change` to the run's record; sent at once.
  virtual void UpdateRecord(const std::function<void(state::TrainRun&)>& change) = 0;
  // Adds `took` to the run's time spent starting or shutting down worker
  // groups (Ray's ray_train_worker_group_*_total_time_s); sent within a second.
  enum class GroupOperation { kStart, kShutdown };
  virtual void AddGroupTime(GroupOperation op, absl::Duration took) = 0;
  // The record of attempt `attempt_id`: its state, detail and (when given) workers.
  virtual void RecordAttempt(const std::string& attempt_id, state::TrainAttemptState s, const std::string& detail,
                             const std::vector<state::TrainWorker>* workers) = 0;
  // The record of a worker of the run at its place `c` in a group.
  virtual state::TrainWorker WorkerRecord(const TrainContext& c, const WorkerInfo& info, const ActorId& actor,
                                          const std::string& slice_name) const = 0;

  // Run thread only.
  virtual state::TrainRunState State() const = 0;
  // Logs "[State Transition] A -> B." and records B with `detail`.
  virtual void Transition(state::TrainRunState to, const std::string& detail) = 0;
  // The attempts begun and the failures counted so far.
  virtual int Attempts() const = 0;
  virtual int Failures() const = 0;
  // Counts one more attempt.
  virtual void CountAttempt() = 0;
  // Counts a failure and logs Ray's lines; true to restart, false when
  // max_failures is exceeded.
  virtual bool DecideOnFailure(const std::string& errors, int failed_workers) = 0;
  // The workers whose failure ends the run, each with its loop's error
  // (and the front end's form of it): Finish hands them to the result.
  virtual void SetWorkerFailures(std::vector<WorkerFailure> failures) = 0;
  // Sends the record; returns the run's outcome, ending with `status`.
  virtual RunOutcome Finish(const absl::Status& status) = 0;
};

}  // namespace manta::train
