#include "state/gcs_reads.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/status.h"
#include "gcs/client/sync_gcs_client.h"

namespace manta::state {
namespace {

using gcs::GcsClient;
using gcs::SyncGcsClient;

// One call, waited for; its errors as GcsCallError's.
template <typename Reply>
absl::StatusOr<Reply> Call(SyncGcsClient& gcs, SyncGcsClient::Start<Reply> start) {
  auto reply = gcs.Call<Reply>(std::move(start));
  if (!reply.ok()) return GcsCallError(gcs.address(), reply.status());
  return reply;
}

std::unique_ptr<SyncGcsClient> Connect(const std::string& address, const std::string& token, absl::Duration timeout) {
  return SyncGcsClient::Connect(address, token, timeout);
}

std::map<std::string, double> ToMap(const google::protobuf::Map<std::string, double>& m) {
  return std::map<std::string, double>(m.begin(), m.end());
}

PlacementGroupView ToView(const rpc::PlacementGroupInfo& g) {
  PlacementGroupView v;
  v.placement_group_id = ToHex(g.placement_group_id());
  v.name = g.name();
  v.ray_namespace = g.ray_namespace();
  v.creator_job_id = ToHex(g.creator_job_id());
  v.strategy = rpc::PlacementGroupInfo::Strategy_Name(g.strategy());
  v.state = rpc::PlacementGroupInfo::State_Name(g.state());
  for (const rpc::Bundle& b : g.bundles()) {
    BundleView bv;
    bv.index = b.index();
    bv.resources = ToMap(b.resources());
    bv.label_selector = std::map<std::string, std::string>(b.label_selector().begin(), b.label_selector().end());
    bv.node_id = ToHex(b.node_id());
    v.bundles.push_back(std::move(bv));
  }
  v.detached = g.detached();
  v.state_message = g.state_message();
  v.infeasible = g.infeasible();
  v.create_time_ms = g.create_time_ms();
  v.ready_time_ms = g.ready_time_ms();
  v.remove_time_ms = g.remove_time_ms();
  v.num_reschedules = g.num_reschedules();
  return v;
}

TrainRunView ToView(const rpc::TrainRunInfo& r) {
  TrainRunView v;
  v.id = r.run_id();
  v.name = r.name();
  v.job_id = ToHex(r.job_id());
  v.controller_actor_id = ToHex(r.controller_actor_id());
  v.status = rpc::TrainRunInfo::State_Name(r.state());
  v.status_detail = r.status_detail();
  v.start_time_ms = r.start_time_ms();
  v.end_time_ms = r.end_time_ms();
  for (const rpc::TrainRunAttemptInfo& a : r.attempts()) {
    TrainAttemptView av;
    av.attempt_id = a.attempt_id();
    av.status = rpc::TrainRunAttemptInfo::State_Name(a.state());
    av.status_detail = a.status_detail();
    av.start_time_ms = a.start_time_ms();
    av.end_time_ms = a.end_time_ms();
    av.num_workers = a.num_workers();
    for (const rpc::TrainWorkerInfo& w : a.workers()) {
      TrainWorkerView wv;
      wv.world_rank = w.world_rank();
      wv.local_rank = w.local_rank();
      wv.node_rank = w.node_rank();
      wv.node_id = ToHex(w.node_id());
      wv.node_ip = w.node_ip();
      wv.pid = w.pid();
      wv.actor_id = ToHex(w.actor_id());
      wv.status = rpc::TrainWorkerInfo::Status_Name(w.status());
      wv.slice_id = w.slice_id();
      wv.slice_name = w.slice_name();
      av.workers.push_back(std::move(wv));
    }
    v.attempts.push_back(std::move(av));
  }
  v.num_failures = r.num_failures();
  v.max_failures = r.max_failures();
  v.latest_checkpoint = r.latest_checkpoint();
  for (const rpc::TrainMetricPoint& p : r.metrics()) {
    v.metrics.push_back({p.time_ms(), p.step(), std::map<std::string, double>(p.metrics().begin(), p.metrics().end())});
  }
  return v;
}

}  // namespace

absl::Status GcsCallError(const std::string& address, const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return absl::UnavailableError(absl::StrCat("cannot reach the GCS at ", address, ": ", s.message()));
    case absl::StatusCode::kUnauthenticated:
      return absl::UnauthenticatedError(absl::StrCat("the GCS at ", address, " refused the request (", s.message(),
                                                     "); set MANTA_TOKEN or use the cluster's token file"));
    default:
      return absl::Status(s.code(), absl::StrCat("the GCS at ", address, " failed: ", s.message()));
  }
}

absl::StatusOr<ClusterView> FetchClusterView(const std::string& address, const std::string& token,
                                             absl::Duration timeout, bool summary) {
  // No token: answered only by a GCS that checks none.
  std::unique_ptr<SyncGcsClient> tokenless;
  if (summary && !token.empty()) tokenless = Connect(address, "", timeout);
  ClusterViewOptions options;
  options.summary = summary;
  options.wait = timeout + absl::Seconds(5);
  auto view = FetchClusterView(*Connect(address, token, timeout), options, tokenless.get());
  if (view.ok() && summary && token.empty()) view->auth_disabled = true;
  return view;
}

absl::StatusOr<ClusterView> FetchClusterView(SyncGcsClient& gcs, const ClusterViewOptions& options,
                                             SyncGcsClient* tokenless) {
  const bool summary = options.summary;
  const std::string& address = gcs.address();
  // The calls go out together, so the whole costs one round trip (and one
  // GCS handler's time) rather than the sum.
  rpc::GetAllNodeInfoRequest nodes_request;
  nodes_request.set_brief(summary);
  rpc::GetClusterResourcesRequest resources_request;
  // Both: a GCS that predates `fold` sends unfolded totals, which the
  // status report folds itself.
  resources_request.set_totals_only(summary);
  resources_request.set_fold(summary);
  auto nodes_call = gcs.Begin<rpc::GetAllNodeInfoReply>(
      [nodes_request](GcsClient& c, auto done) { c.GetAllNodeInfo(nodes_request, std::move(done)); });
  auto resources_call = gcs.Begin<rpc::GetClusterResourcesReply>(
      [resources_request](GcsClient& c, auto done) { c.GetClusterResources(resources_request, std::move(done)); });
  std::shared_ptr<SyncGcsClient::Pending<rpc::GetClusterIdReply>> probe_call;
  if (tokenless != nullptr) {
    probe_call =
        tokenless->Begin<rpc::GetClusterIdReply>([](GcsClient& c, auto done) { c.GetClusterId(std::move(done)); });
  }
  const absl::Duration wait = options.wait;
  auto nodes = nodes_call->Wait(wait);
  auto resources = resources_call->Wait(wait);
  const bool probe_ok = probe_call != nullptr && probe_call->Wait(wait).ok();
  if (!nodes.ok()) return GcsCallError(address, nodes.status());
  if (!resources.ok()) return GcsCallError(address, resources.status());

  ClusterView view;
  view.auth_disabled = summary && probe_ok;
  for (const rpc::NodeInfo& n : nodes->nodes()) {
    NodeView v;
    v.node_id = ToHex(n.node_id());
    v.node_ip = n.node_ip();
    v.node_name = n.node_name();
    v.is_head = n.is_head();
    v.alive = n.state() == rpc::NodeInfo::ALIVE;
    v.resources_total = ToMap(n.resources_total());
    v.labels = std::map<std::string, std::string>(n.labels().begin(), n.labels().end());
    v.start_time_ms = n.start_time_ms();
    v.end_time_ms = n.end_time_ms();
    v.death_reason = n.death_reason();
    v.death_expected = n.death_expected();
    v.pid = n.pid();
    v.draining = n.draining();
    v.drain_reason = n.drain_reason();
    v.drain_deadline_ms = n.drain_deadline_ms();
    view.nodes.push_back(std::move(v));
  }
  for (const rpc::NodeResources& r : resources->nodes()) {
    view.usage.push_back({ToHex(r.node_id()), ToMap(r.total()), ToMap(r.available())});
  }
  if (summary) {
    view.usage.push_back({"", ToMap(resources->totals().total()), ToMap(resources->totals().available())});
    view.reserved = {"", ToMap(resources->reserved().total()), ToMap(resources->reserved().available())};
  }
  for (const rpc::ResourceDemand& d : resources->demands()) {
    view.demands.push_back({ToMap(d.shape()), d.num_ready_requests_queued(), d.num_infeasible_requests_queued()});
  }
  for (const rpc::PlacementGroupInfo& g : resources->pending_placement_groups()) {
    view.pending_placement_groups.push_back(ToView(g));
  }
  return view;
}

absl::StatusOr<std::string> FetchClusterId(const std::string& address, const std::string& token,
                                           absl::Duration timeout) {
  auto reply = Call<rpc::GetClusterIdReply>(*Connect(address, token, timeout),
                                            [](GcsClient& c, auto done) { c.GetClusterId(std::move(done)); });
  if (!reply.ok()) return reply.status();
  return ToHex(reply->cluster_id());
}

absl::StatusOr<std::vector<ActorView>> FetchActors(const std::string& address, const std::string& token,
                                                   absl::Duration timeout, int limit) {
  return FetchActors(*Connect(address, token, timeout), limit);
}

absl::StatusOr<std::vector<ActorView>> FetchActors(SyncGcsClient& gcs, int limit, int64_t* total) {
  rpc::ListActorsRequest request;
  request.set_limit(limit);
  ASSIGN_OR_RETURN(rpc::ListActorsReply reply, Call<rpc::ListActorsReply>(gcs, [request](GcsClient& c, auto done) {
                     c.ListActors(request, std::move(done));
                   }));
  if (total != nullptr) *total = reply.total();
  std::vector<ActorView> out;
  for (const rpc::ActorInfo& a : reply.actors()) {
    ActorView v;
    v.actor_id = ToHex(a.actor_id());
    v.class_name = a.class_name();
    v.state = rpc::ActorInfo::State_Name(a.state());
    v.job_id = ToHex(a.job_id());
    v.name = a.name();
    v.ray_namespace = a.ray_namespace();
    v.node_id = ToHex(a.address().node_id());
    v.ip = a.address().ip();
    v.pid = a.pid();
    v.num_restarts = a.num_restarts();
    v.max_restarts = a.max_restarts();
    v.detached = a.detached();
    v.death_cause = a.death_cause().message();
    v.resources = ToMap(a.resources());
    v.start_time_ms = a.start_time_ms();
    v.end_time_ms = a.end_time_ms();
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<std::vector<PlacementGroupView>> FetchPlacementGroups(const std::string& address,
                                                                     const std::string& token, absl::Duration timeout,
                                                                     int limit) {
  return FetchPlacementGroups(*Connect(address, token, timeout), limit);
}

absl::StatusOr<std::vector<PlacementGroupView>> FetchPlacementGroups(SyncGcsClient& gcs, int limit, int64_t* total) {
  rpc::ListPlacementGroupsRequest request;
  request.set_limit(limit);
  ASSIGN_OR_RETURN(rpc::ListPlacementGroupsReply reply,
                   Call<rpc::ListPlacementGroupsReply>(
                       gcs, [request](GcsClient& c, auto done) { c.ListPlacementGroups(request, std::move(done)); }));
  if (total != nullptr) *total = reply.total();
  std::vector<PlacementGroupView> out;
  for (const rpc::PlacementGroupInfo& g : reply.placement_groups()) out.push_back(ToView(g));
  return out;
}

absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(const std::string& address, const std::string& token,
                                                         absl::Duration timeout, int limit) {
  return FetchTrainRuns(*Connect(address, token, timeout), limit);
}

absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(SyncGcsClient& gcs, int limit, bool with_metrics) {
  rpc::ListTrainRunsRequest request;
  request.set_limit(std::max(0, limit));
  request.set_with_metrics(with_metrics);
  ASSIGN_OR_RETURN(rpc::ListTrainRunsReply reply,
                   Call<rpc::ListTrainRunsReply>(
                       gcs, [request](GcsClient& c, auto done) { c.ListTrainRuns(request, std::move(done)); }));
  std::vector<TrainRunView> out;
  for (const rpc::TrainRunInfo& r : reply.runs()) {
    out.push_back(ToView(r));
    out.back().with_metrics = with_metrics;
  }
  return out;
}

absl::StatusOr<TaskList> FetchTasks(const std::string& address, const std::string& token, absl::Duration timeout,
                                    int limit) {
  return FetchTasks(*Connect(address, token, timeout), limit);
}

absl::StatusOr<TaskList> FetchTasks(SyncGcsClient& gcs, int limit) {
  rpc::ListTasksRequest request;
  request.set_limit(limit);
  ASSIGN_OR_RETURN(rpc::ListTasksReply reply, Call<rpc::ListTasksReply>(gcs, [request](GcsClient& c, auto done) {
                     c.ListTasks(request, std::move(done));
                   }));
  TaskList out;
  out.num_dropped = reply.num_dropped();
  out.total = reply.total();
  for (const rpc::TaskEvent& t : reply.tasks()) {
    TaskView v;
    v.task_id = ToHex(t.task_id());
    v.attempt = t.attempt();
    v.name = t.name();
    v.state = rpc::TaskEvent::State_Name(t.state());
    v.job_id = ToHex(t.job_id());
    v.actor_id = ToHex(t.actor_id());
    v.type = rpc::TaskSpec::Type_Name(t.type());
    v.node_id = ToHex(t.node_id());
    v.worker_id = ToHex(t.worker_id());
    v.worker_pid = t.worker_pid();
    if (t.error().type() != rpc::ErrorInfo::NONE) v.error_type = rpc::ErrorInfo::Type_Name(t.error().type());
    v.error_message = t.error().message();
    v.resources = ToMap(t.resources());
    out.tasks.push_back(std::move(v));
  }
  return out;
}

}  // namespace manta::state
