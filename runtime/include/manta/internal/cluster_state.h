// ClusterState: node-table watches, training-run records and the GCS's
// key-value store, one layer above the core worker (core_worker.h). The core worker holds what every program
// needs; what a trainer, and the tools that show its runs, need of the GCS
// beyond that is here: the node table's changes as the GCS publishes them,
// and the training-run records the GCS keeps for `manta list train-runs` and
// the dashboard. The public API (manta/state.h) is a thin layer over it.
//
// Implementations: GcsClusterState (runtime/core_worker/gcs_cluster_state.h),
// over the core worker's GCS client and its seam (job id, GetAllNodes),
// which the real CoreWorkerFactory installs beside the core worker it makes
// and removes, its watches stopped, before that core worker stops; and
// FakeCoreWorker, over its own node table.
//
// Thread-safety: every method may be called from any thread. Statuses carry
// the GCS's code and message.
//
//   core::ClusterState* cluster = core::ClusterState::Current();   // after manta::Init
//   ASSIGN_OR_RETURN(int64_t watch, cluster->WatchNodes([](const core::NodeEvent& e) { ... }));
//   ...
//   cluster->UnwatchNodes(watch);   // returns once no call runs
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/id.h"
#include "manta/internal/core_worker.h"

namespace manta::core {

// A change of the node table, as the GCS publishes it.
struct NodeEvent {
  enum Kind { kAlive = 0, kDraining = 1, kDead = 2 };
  Kind kind = kAlive;   // kAlive: registered or registered again
  NodeData node;        // the node as it is after the change
  absl::Time received;  // when this process got it
};

// ---- Training runs (mirrors rpc::TrainRunInfo; see the GCS's TrainRunGcsService) ----

enum class TrainRunState {
  kInitializing = 0,
  kScheduling = 1,
  kRunning = 2,
  kRestarting = 3,
  kRescheduling = 4,
  kResizing = 5,
  kShuttingDown = 6,
  kFinished = 7,
  kErrored = 8,
  kAborted = 9,
};
enum class TrainAttemptState { kPending = 0, kRunning = 1, kFinished = 2, kErrored = 3, kAborted = 4 };

struct TrainWorkerData {
  int world_rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  NodeId node_id;
  std::string node_ip;
  int pid = 0;
  ActorId actor_id;
  int slice_id = -1;  // -1: not on TPU slices
  std::string slice_name;
  bool alive = true;
  std::map<std::string, double> resources;
  double report_total_blocked_time_s = 0;  // waiting for the controller's answers
};

struct TrainAttemptData {
  std::string attempt_id;
  TrainAttemptState state = TrainAttemptState::kPending;
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  int num_workers = 0;
  std::vector<TrainWorkerData> workers;  // by world rank
};

struct TrainMetricPointData {
  int64_t time_ms = 0;
  int64_t step = 0;
  std::map<std::string, double> metrics;
};

struct TrainRunData {
  std::string run_id;  // 32 hex digits
  std::string name;
  JobId job_id;  // filled on report: the reporting process's job
  ActorId controller_actor_id;
  TrainRunState state = TrainRunState::kInitializing;
  std::string status_detail;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  std::vector<TrainAttemptData> attempts;
  std::vector<TrainMetricPointData> metrics;  // from ListTrainRuns with metrics
  int num_failures = 0;
  int max_failures = 0;
  std::string latest_checkpoint;
  int min_workers = 0;
  int max_workers = 0;
  std::string storage_path;
  int64_t version = 0;
  // Seconds spent starting and shutting down worker groups, all attempts.
  double worker_group_start_total_time_s = 0;
  double worker_group_shutdown_total_time_s = 0;
};

class ClusterState {
 public:
  virtual ~ClusterState() = default;

  // The process's; null before Init and after Shutdown.
  static ClusterState* Current();

  // ---- Node events ----
  // Calls `on_event` for every change of the node table published after this
  // call (in the GCS's order), from a thread of its own; when the GCS
  // dropped events (a restart, a gap) it calls it once for every node as the
  // table stands. Returns an id for UnwatchNodes. Errors: the GCS cannot be
  // reached.
  virtual absl::StatusOr<int64_t> WatchNodes(std::function<void(const NodeEvent&)> on_event) = 0;
  // Stops the calls; returns once none runs. Unknown ids are ignored.
  virtual void UnwatchNodes(int64_t id) = 0;

  // ---- Training runs (blocking GCS calls) ----
  // Upserts `run` (its job is this process's; its metrics are ignored) and
  // appends `new_metrics` to its series. The GCS ignores a version not newer
  // than the one it holds. InvalidArgument for a malformed record.
  virtual absl::Status ReportTrainRun(const TrainRunData& run,
                                      const std::vector<TrainMetricPointData>& new_metrics) = 0;
  // Every run (of every job), oldest first; the newest `limit` (0: all).
  virtual absl::StatusOr<std::vector<TrainRunData>> ListTrainRuns(bool with_metrics, int limit) = 0;

  // ---- The GCS's key-value store (blocking calls): what a front end exports
  // for its workers, e.g. Python's functions by content hash ----
  // Stores `value` under (ns, key) unless the key exists and !overwrite;
  // returns whether it was added.
  virtual absl::StatusOr<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                                     bool overwrite) = 0;
  // The value, or nullopt when the key is absent.
  virtual absl::StatusOr<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key) = 0;
};

// Makes `state` the process's ClusterState (null clears it) and returns the
// one it replaces. The CoreWorkerFactory that makes a core worker installs
// the ClusterState that goes with it, and clears it before ending it.
ClusterState* SetCurrentClusterState(ClusterState* state);

}  // namespace manta::core
