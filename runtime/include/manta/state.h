// Cluster state a program may read, and the training-run records a trainer
// keeps in the GCS.
//
//   for (const manta::NodeInfo& n : manta::Nodes()) {
//     if (n.alive) std::cout << n.ip << " " << n.resources_total.at("CPU") << "\n";
//   }
//   manta::RuntimeContext here = manta::GetRuntimeContext();   // node, job, pid of this process
//
//   manta::state::TrainRun run;   // what a controller reports on each change
//   run.run_id = ...; run.name = "llama"; run.state = manta::state::TrainRunState::kRunning; run.version = 3;
//   manta::state::ReportTrainRun(run, {{.time_ms = now, .step = 10, .metrics = {{"loss", 2.1}}}});
//
// Every call throws manta::Error when the cluster cannot answer (the Try*
// forms return the status); InvalidArgument for a malformed record.
// Thread-safety: every call may be made from any thread after Init.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/internal/cluster_state.h"
#include "manta/internal/core_worker.h"

namespace manta {

// A node as the GCS knows it.
struct NodeInfo {
  std::string node_id;  // hex
  std::string ip;
  bool alive = false;
  bool is_head = false;
  std::map<std::string, double> resources_total;
  std::map<std::string, std::string> labels;
  bool draining = false;          // alive, but going away: takes no new work
  std::string drain_reason;       // "preemption", ...
  int64_t drain_deadline_ms = 0;  // unix epoch; 0: none
  std::string death_reason;       // dead nodes
};

// Every node the GCS knows, alive or dead.
std::vector<NodeInfo> Nodes();
absl::StatusOr<std::vector<NodeInfo>> TryNodes();

// A change of the node table: a node registered (again), began to drain,
// or died.
struct NodeEvent {
  enum Kind { kAlive, kDraining, kDead };
  Kind kind = kAlive;
  NodeInfo node;        // as it is after the change
  absl::Time received;  // when this process got it
};

// Watches the node table: `on_event` runs for every change published after
// WatchNodes returns, in order, on a thread of the watch's own (keep it
// short; hand work elsewhere). When the GCS lost events (it restarted, or
// the watcher fell behind) it runs once per node with the table as it
// stands. Destroying the watch stops the calls and waits for a running one.
class NodeWatch {
 public:
  explicit NodeWatch(int64_t id) : id_(id) {}
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

 private:
  int64_t id_;
};
std::unique_ptr<NodeWatch> WatchNodes(std::function<void(const NodeEvent&)> on_event);
absl::StatusOr<std::unique_ptr<NodeWatch>> TryWatchNodes(std::function<void(const NodeEvent&)> on_event);

// Where this process runs.
struct RuntimeContext {
  std::string job_id;   // hex
  std::string node_id;  // hex; empty before the node is known
  std::string node_ip;
  std::string worker_id;  // hex; nil (zeros) in a driver
  int pid = 0;
  bool is_worker = false;  // started by a raylet (runs tasks or an actor)
};
// Throws manta::Error (FailedPrecondition) before Init.
RuntimeContext GetRuntimeContext();

namespace state {

using TrainRunState = core::TrainRunState;
using TrainAttemptState = core::TrainAttemptState;
using TrainWorker = core::TrainWorkerData;
using TrainAttempt = core::TrainAttemptData;
using TrainMetricPoint = core::TrainMetricPointData;
using TrainRun = core::TrainRunData;

// "RUNNING", "ERRORED", ... as Ray Train names them.
std::string TrainRunStateName(TrainRunState s);
std::string TrainAttemptStateName(TrainAttemptState s);
bool IsTerminal(TrainRunState s);

// Upserts `run` for this job (its metrics field is ignored) and appends
// `new_metrics` to its series. The GCS ignores a version not newer than
// the one it holds, and every report once the run is terminal.
void ReportTrainRun(const TrainRun& run, const std::vector<TrainMetricPoint>& new_metrics = {});
absl::Status TryReportTrainRun(const TrainRun& run, const std::vector<TrainMetricPoint>& new_metrics = {});

// Runs of every job, oldest first: the newest `limit` (0: all), with their
// metrics series when `with_metrics`.
std::vector<TrainRun> ListTrainRuns(bool with_metrics = false, int limit = 0);
absl::StatusOr<std::vector<TrainRun>> TryListTrainRuns(bool with_metrics = false, int limit = 0);

}  // namespace state
}  // namespace manta
