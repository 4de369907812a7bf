// The node table and the runtime context (through the core worker), node
// watches and training-run records (through the ClusterState above it).
#include "manta/state.h"

#include <unistd.h>

#include "manta/errors.h"
#include "manta/internal/core.h"

namespace manta {

namespace {

NodeInfo ToNodeInfo(const core::NodeData& n) {
  return NodeInfo{n.node_id.Hex(), n.ip,       n.alive,        n.is_head,           n.resources_total,
                  n.labels,        n.draining, n.drain_reason, n.drain_deadline_ms, n.death_reason};
}

}  // namespace

absl::StatusOr<std::vector<NodeInfo>> TryNodes() {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) return absl::FailedPreconditionError("manta::Init() has not been called");
  auto nodes = core->GetAllNodes();
  if (!nodes.ok()) return nodes.status();
  std::vector<NodeInfo> out;
  out.reserve(nodes->size());
  for (const core::NodeData& n : *nodes) out.push_back(ToNodeInfo(n));
  return out;
}

NodeWatch::~NodeWatch() {
  if (core::ClusterState* cluster = core::ClusterState::Current()) cluster->UnwatchNodes(id_);
}

absl::StatusOr<std::unique_ptr<NodeWatch>> TryWatchNodes(std::function<void(const NodeEvent&)> on_event) {
  core::ClusterState* cluster = core::ClusterState::Current();
  if (cluster == nullptr) return absl::FailedPreconditionError("manta::Init() has not been called");
  auto id = cluster->WatchNodes([on_event = std::move(on_event)](const core::NodeEvent& e) {
    on_event(NodeEvent{static_cast<NodeEvent::Kind>(e.kind), ToNodeInfo(e.node), e.received});
  });
  if (!id.ok()) return id.status();
  return std::make_unique<NodeWatch>(*id);
}

std::unique_ptr<NodeWatch> WatchNodes(std::function<void(const NodeEvent&)> on_event) {
  auto watch = TryWatchNodes(std::move(on_event));
  internal::ThrowIfError(watch.status());
  return *std::move(watch);
}

std::vector<NodeInfo> Nodes() {
  auto nodes = TryNodes();
  internal::ThrowIfError(nodes.status());
  return *std::move(nodes);
}

RuntimeContext GetRuntimeContext() {
  core::CoreWorker& core = internal::RequireCoreWorker();
  RuntimeContext c;
  c.job_id = core.job_id().Hex();
  const NodeId node = core.node_id();
  if (!node.IsNil()) c.node_id = node.Hex();
  c.node_ip = core.node_ip();
  c.worker_id = core.worker_id().Hex();
  c.pid = static_cast<int>(getpid());
  c.is_worker = core::CoreWorker::IsWorkerProcess();
  return c;
}

namespace state {

std::string TrainRunStateName(TrainRunState s) {
  switch (s) {
    case TrainRunState::kInitializing:
      return "INITIALIZING";
    case TrainRunState::kScheduling:
      return "SCHEDULING";
    case TrainRunState::kRunning:
      return "RUNNING";
    case TrainRunState::kRestarting:
      return "RESTARTING";
    case TrainRunState::kRescheduling:
      return "RESCHEDULING";
    case TrainRunState::kResizing:
      return "RESIZING";
    case TrainRunState::kShuttingDown:
      return "SHUTTING_DOWN";
    case TrainRunState::kFinished:
      return "FINISHED";
    case TrainRunState::kErrored:
      return "ERRORED";
    case TrainRunState::kAborted:
      return "ABORTED";
  }
  return "UNKNOWN";
}

std::string TrainAttemptStateName(TrainAttemptState s) {
  switch (s) {
    case TrainAttemptState::kPending:
      return "PENDING";
    case TrainAttemptState::kRunning:
      return "RUNNING";
    case TrainAttemptState::kFinished:
      return "FINISHED";
    case TrainAttemptState::kErrored:
      return "ERRORED";
    case TrainAttemptState::kAborted:
      return "ABORTED";
  }
  return "UNKNOWN";
}

bool IsTerminal(TrainRunState s) {
  return s == TrainRunState::kFinished || s == TrainRunState::kErrored || s == TrainRunState::kAborted;
}

absl::Status TryReportTrainRun(const TrainRun& run, const std::vector<TrainMetricPoint>& new_metrics) {
  core::ClusterState* cluster = core::ClusterState::Current();
  if (cluster == nullptr) return absl::FailedPreconditionError("manta::Init() has not been called");
  return cluster->ReportTrainRun(run, new_metrics);
}

void ReportTrainRun(const TrainRun& run, const std::vector<TrainMetricPoint>& new_metrics) {
  internal::ThrowIfError(TryReportTrainRun(run, new_metrics));
}

absl::StatusOr<std::vector<TrainRun>> TryListTrainRuns(bool with_metrics, int limit) {
  core::ClusterState* cluster = core::ClusterState::Current();
  if (cluster == nullptr) return absl::FailedPreconditionError("manta::Init() has not been called");
  return cluster->ListTrainRuns(with_metrics, limit);
}

std::vector<TrainRun> ListTrainRuns(bool with_metrics, int limit) {
  auto runs = TryListTrainRuns(with_metrics, limit);
  internal::ThrowIfError(runs.status());
  return *std::move(runs);
}

}  // namespace state
}  // namespace manta
