// `manta list train-runs`: the GCS's training runs, one row per run, in the
// layout of the other `manta list` tables.
//
//   ASSIGN_OR_RETURN(auto runs, FetchTrainRuns(address, token, absl::Seconds(5), 100));
//   std::cout << FormatTrainRunList(runs, 100, /*detail=*/false, absl::Now(), absl::LocalTimeZone());
//
//   ======== List: 2026-04-21 10:20:20.945431 ========
//   Stats:
//   ------------------------------
//   Total: 1
//
//   Table:
//   ------------------------------
//       RUN_ID     NAME   STATE    JOB_ID    ATTEMPTS  WORKERS  FAILURES  STATUS_DETAIL  LATEST_CHECKPOINT
//    0  5e0c...    llama  RUNNING  00000001  2         4        1/inf     worker 2 died  /ckpt/checkpoint_000010
//
// WORKERS counts the workers of the latest attempt; FAILURES is
// "num_failures/max_failures" ("inf" when unlimited); STATUS_DETAIL shows the
// detail's first line. With `detail`, ATTEMPTS lists every attempt on a line
// of its own ("<attempt_id> <STATUS> workers=<n>") and WORKERS every worker
// of the latest attempt ("<rank>: <node_ip> pid=<pid> slice=<id>/<name>
// <STATUS>"; slice only when set). Runs are listed in the order given (the
// GCS's: oldest first).
//
// Plain types only, so formatting and its tests need neither gRPC nor
// protobuf; FetchTrainRuns in state/gcs_reads.h fetches them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace manta::state {

struct TrainWorkerView {
  int world_rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string node_id;  // hex, as every id here; empty when unknown
  std::string node_ip;
  int pid = 0;
  std::string actor_id;
  std::string status;  // ACTIVE or DEAD
  int slice_id = -1;   // -1: not on TPU slices
  std::string slice_name;
};

struct TrainAttemptView {
  std::string attempt_id;
  std::string status;  // PENDING, RUNNING, FINISHED, ERRORED, ABORTED
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;  // 0: not ended
  int num_workers = 0;
  std::vector<TrainWorkerView> workers;  // by world rank
};

// One point of a run's metrics series.
struct TrainMetricView {
  int64_t time_ms = 0;
  int64_t step = 0;
  std::map<std::string, double> values;  // e.g. loss, tokens_per_second
};

struct TrainRunView {
  std::string id;  // 32 hex digits
  std::string name;
  std::string job_id;
  std::string controller_actor_id;
  std::string status;  // INITIALIZING ... FINISHED, ERRORED, ABORTED
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;                 // 0: not ended
  std::vector<TrainAttemptView> attempts;  // oldest first
  int num_failures = 0;
  int max_failures = 0;  // -1: unlimited
  std::string latest_checkpoint;
  // Read only when asked for (the dashboard's plots).
  bool with_metrics = false;
  std::vector<TrainMetricView> metrics;  // oldest first
};

// `limit` is what was asked for: when the list reached it, a note says it
// may be truncated.
std::string FormatTrainRunList(const std::vector<TrainRunView>& runs, int limit, bool detail, absl::Time now,
                               absl::TimeZone tz);

// Every run, detail or not, as a pretty-printed JSON array of records in the
// shape of Ray's train state API: {id, name, job_id, controller_actor_id,
// status, status_detail, start_time_ms, end_time_ms, attempts: [{attempt_id,
// status, status_detail, start_time_ms, end_time_ms, workers: [{world_rank,
// local_rank, node_rank, node_id, node_ip, pid, actor_id, status, slice_id,
// slice_name}]}], num_failures, max_failures, latest_checkpoint}. An empty
// status_detail or latest_checkpoint and an end_time_ms of 0 are null, as
// Ray's optional fields are. A run read with its metrics also has
// "metrics": [{time_ms, step, <name>: value...}].
std::string FormatTrainRunListJson(const std::vector<TrainRunView>& runs);
// The same as a JSON array (the dashboard's State API serves it).
nlohmann::json TrainRunListJson(const std::vector<TrainRunView>& runs);

}  // namespace manta::state
