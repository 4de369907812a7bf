// Training runs (GcsClusterState): blocking calls to the GCS's
// TrainRunGcsService on the caller's thread, never the GCS client's loop, and
// the conversions between TrainRunData and rpc::TrainRunInfo.
#include <algorithm>

#include "common/status.h"
#include "runtime/core_worker/gcs_cluster_state.h"

namespace manta::core {
namespace {

void ToProto(const std::map<std::string, double>& in, google::protobuf::Map<std::string, double>* out) {
  for (const auto& [k, v] : in) (*out)[k] = v;
}

void ToProto(const TrainMetricPointData& p, rpc::TrainMetricPoint* out) {
  out->set_time_ms(p.time_ms);
  out->set_step(p.step);
  ToProto(p.metrics, out->mutable_metrics());
}

rpc::TrainRunInfo ToProto(const TrainRunData& d, const JobId& job) {
  rpc::TrainRunInfo info;
  info.set_run_id(d.run_id);
  info.set_name(d.name);
  info.set_job_id(job.Binary());
  if (!d.controller_actor_id.IsNil()) info.set_controller_actor_id(d.controller_actor_id.Binary());
  info.set_state(static_cast<rpc::TrainRunInfo::State>(static_cast<int>(d.state)));
  info.set_status_detail(d.status_detail);
  info.set_start_time_ms(d.start_time_ms);
  info.set_end_time_ms(d.end_time_ms);
  for (const TrainAttemptData& a : d.attempts) {
    rpc::TrainRunAttemptInfo* out = info.add_attempts();
    out->set_attempt_id(a.attempt_id);
    out->set_state(static_cast<rpc::TrainRunAttemptInfo::State>(static_cast<int>(a.state)));
    out->set_status_detail(a.status_detail);
    out->set_start_time_ms(a.start_time_ms);
    out->set_end_time_ms(a.end_time_ms);
    out->set_num_workers(a.num_workers);
    for (const TrainWorkerData& w : a.workers) {
      rpc::TrainWorkerInfo* wo = out->add_workers();
      wo->set_world_rank(w.world_rank);
      wo->set_local_rank(w.local_rank);
      wo->set_node_rank(w.node_rank);
      if (!w.node_id.IsNil()) wo->set_node_id(w.node_id.Binary());
      wo->set_node_ip(w.node_ip);
      wo->set_pid(w.pid);
      if (!w.actor_id.IsNil()) wo->set_actor_id(w.actor_id.Binary());
      wo->set_slice_id(w.slice_id);
      wo->set_slice_name(w.slice_name);
      wo->set_status(w.alive ? rpc::TrainWorkerInfo::ACTIVE : rpc::TrainWorkerInfo::DEAD);
      ToProto(w.resources, wo->mutable_resources());
      wo->set_report_total_blocked_time_s(w.report_total_blocked_time_s);
    }
  }
  info.set_num_failures(d.num_failures);
  info.set_max_failures(d.max_failures);
  info.set_latest_checkpoint(d.latest_checkpoint);
  info.set_min_workers(d.min_workers);
  info.set_max_workers(d.max_workers);
  info.set_storage_path(d.storage_path);
  info.set_version(d.version);
  info.set_worker_group_start_total_time_s(d.worker_group_start_total_time_s);
  info.set_worker_group_shutdown_total_time_s(d.worker_group_shutdown_total_time_s);
  return info;
}

TrainRunData FromProto(const rpc::TrainRunInfo& info) {
  TrainRunData d;
  d.run_id = info.run_id();
  d.name = info.name();
  if (auto id = JobId::FromBinary(info.job_id()); id.ok()) d.job_id = *id;
  if (auto id = ActorId::FromBinary(info.controller_actor_id()); id.ok()) d.controller_actor_id = *id;
  d.state = static_cast<TrainRunState>(static_cast<int>(info.state()));
  d.status_detail = info.status_detail();
  d.start_time_ms = info.start_time_ms();
  d.end_time_ms = info.end_time_ms();
  for (const rpc::TrainRunAttemptInfo& a : info.attempts()) {
    TrainAttemptData out;
    out.attempt_id = a.attempt_id();
    out.state = static_cast<TrainAttemptState>(static_cast<int>(a.state()));
    out.status_detail = a.status_detail();
    out.start_time_ms = a.start_time_ms();
    out.end_time_ms = a.end_time_ms();
    out.num_workers = a.num_workers();
    for (const rpc::TrainWorkerInfo& w : a.workers()) {
      TrainWorkerData wo;
      wo.world_rank = w.world_rank();
      wo.local_rank = w.local_rank();
      wo.node_rank = w.node_rank();
      if (auto id = NodeId::FromBinary(w.node_id()); id.ok()) wo.node_id = *id;
      wo.node_ip = w.node_ip();
      wo.pid = w.pid();
      if (auto id = ActorId::FromBinary(w.actor_id()); id.ok()) wo.actor_id = *id;
      wo.slice_id = w.slice_id();
      wo.slice_name = w.slice_name();
      wo.alive = w.status() == rpc::TrainWorkerInfo::ACTIVE;
      wo.resources.insert(w.resources().begin(), w.resources().end());
      wo.report_total_blocked_time_s = w.report_total_blocked_time_s();
      out.workers.push_back(std::move(wo));
    }
    d.attempts.push_back(std::move(out));
  }
  for (const rpc::TrainMetricPoint& p : info.metrics()) {
    TrainMetricPointData point;
    point.time_ms = p.time_ms();
    point.step = p.step();
    point.metrics.insert(p.metrics().begin(), p.metrics().end());
    d.metrics.push_back(std::move(point));
  }
  d.num_failures = info.num_failures();
  d.max_failures = info.max_failures();
  d.latest_checkpoint = info.latest_checkpoint();
  d.min_workers = info.min_workers();
  d.max_workers = info.max_workers();
  d.storage_path = info.storage_path();
  d.version = info.version();
  d.worker_group_start_total_time_s = info.worker_group_start_total_time_s();
  d.worker_group_shutdown_total_time_s = info.worker_group_shutdown_total_time_s();
  return d;
}

}  // namespace

absl::Status GcsClusterState::ReportTrainRun(const TrainRunData& run,
                                             const std::vector<TrainMetricPointData>& new_metrics) {
  rpc::ReportTrainRunRequest req;
  *req.mutable_run() = ToProto(run, core_->job_id());
  for (const TrainMetricPointData& p : new_metrics) ToProto(p, req.add_new_metrics());
  return gcs_
      ->Call<rpc::ReportTrainRunReply>(
          [req](gcs::GcsClient& gcs, auto done) { gcs.ReportTrainRun(req, std::move(done)); },
          {absl::ZeroDuration(), reconnect_})
      .status();
}

absl::StatusOr<std::vector<TrainRunData>> GcsClusterState::ListTrainRuns(bool with_metrics, int limit) {
  rpc::ListTrainRunsRequest req;
  req.set_with_metrics(with_metrics);
  req.set_limit(std::max(0, limit));
  auto reply = gcs_->Call<rpc::ListTrainRunsReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.ListTrainRuns(req, std::move(done)); },
      {absl::ZeroDuration(), reconnect_});
  if (!reply.ok()) return reply.status();
  std::vector<TrainRunData> runs;
  runs.reserve(reply->runs_size());
  for (const rpc::TrainRunInfo& info : reply->runs()) runs.push_back(FromProto(info));
  return runs;
}

}  // namespace manta::core
