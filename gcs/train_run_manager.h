// TrainRunManager: the training-run table.
//
// Owns every run's TrainRunInfo, with its metrics series, kept in the store's
// "train_runs" table (key: run_id), so a restarted GCS recovers them. A run
// is reported whole by its controller on every change; the GCS keeps the
// newest version, appends the reported metric points, and freezes a run once
// it is terminal (FINISHED, ERRORED or ABORTED). A run whose job ends first is
// marked ABORTED here, since its controller died with the job.
//
//   TrainRunManager runs(store, jobs);
//   RETURN_IF_ERROR(runs.Initialize());
//   runs.AbortRunsOfFinishedJobs();           // after jobs->Initialize()
//   jobs->AddJobFinishedListener([&](const rpc::JobInfo& j) {
//     runs.OnJobFinished(*JobId::FromBinary(j.job_id()));
//   });
//
// Invariants: every run in runs_ passed validation; a terminal run never
// changes again; a run holds at most kMaxMetricPoints points, oldest first.
// The table holds at most kMaxRuns runs unless more than that are live.
//
// Thread: the GCS loop thread. No locks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/job_manager.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class TrainRunManager {
 public:
  using Clock = std::function<absl::Time()>;

  static constexpr char kTable[] = "train_runs";
  static constexpr size_t kMaxRuns = 1000;
  static constexpr size_t kMaxMetricPoints = 2000;
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxStatusBytes = 64 << 10;
  static constexpr size_t kMaxPathBytes = 4096;
  static constexpr int kMaxAttempts = 10000;
  static constexpr int kMaxWorkersPerAttempt = 100000;
  static constexpr int kMaxNewMetricPoints = 10000;
  static constexpr int kMaxMetricsPerPoint = 64;
  // A list reply stops before the run that would take it past this size.
  static constexpr size_t kMaxListReplyBytes = 32 << 20;
  static constexpr char kAbortedByJobEnd[] = "the job's driver exited before the run ended";

  // `jobs` must outlive this manager; it answers "known" and "finished".
  // `clock` stamps the end of runs this manager aborts.
  TrainRunManager(Store* store, const JobManager* jobs, Clock clock = absl::Now);

  // Loads the table from the store; corrupt rows are skipped with a warning.
  absl::Status Initialize();

  // Upserts request.run() by run_id, appending request.new_metrics() to the
  // stored series (keeping the newest kMaxMetricPoints). Replies OK once the
  // record is durable. Replies OK at once, changing nothing, when the run is
  // already terminal or the report's version is not newer than the stored
  // one. Errors, which change nothing: INVALID_ARGUMENT for a malformed
  // record (the message names the field) or a run_id already held for
  // another job; FAILED_PRECONDITION when the job is unknown or finished.
  void HandleReportTrainRun(const rpc::ReportTrainRunRequest& request, rpc::ReportTrainRunReply* reply, rpc::Done done);
  // Runs oldest first (by start_time_ms, then run_id), of request.job_id()
  // when it is set, the newest request.limit() of them when it is > 0, and
  // no more than fit in kMaxListReplyBytes (the newest kept). Metric series
  // only when request.with_metrics(). INVALID_ARGUMENT for a malformed
  // job_id or a negative limit.
  void HandleListTrainRuns(const rpc::ListTrainRunsRequest& request, rpc::ListTrainRunsReply* reply, rpc::Done done);

  // Marks every non-terminal run of `job` ABORTED (see AbortRun).
  void OnJobFinished(const JobId& job);
  // For start-up, after the job table is loaded: aborts the non-terminal runs
  // of jobs that are finished or unknown (the GCS may have missed their end).
  void AbortRunsOfFinishedJobs();

  // Null for an unknown run.
  const rpc::TrainRunInfo* Get(const std::string& run_id) const;
  size_t num_runs() const { return runs_.size(); }

  static bool IsTerminal(rpc::TrainRunInfo::State state);

 private:
  // Sets `run` ABORTED now, with kAbortedByJobEnd before its detail; ends
  // its non-terminal attempts and marks their workers DEAD; bumps the
  // version and persists.
  void AbortRun(rpc::TrainRunInfo& run);
  // Deletes the oldest terminal runs until a new one fits under kMaxRuns,
  // or none terminal is left.
  void EvictForNewRun();
  void Persist(const rpc::TrainRunInfo& run, rpc::Done done);

  Store* const store_;
  const JobManager* const jobs_;
  const Clock clock_;

  std::map<std::string, rpc::TrainRunInfo> runs_;  // by run_id
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Checks a report from outside: OK or INVALID_ARGUMENT naming the field.
// Does not look at whether the job exists.
absl::Status ValidateTrainRunReport(const rpc::ReportTrainRunRequest& request);

}  // namespace manta::gcs
