#include "cli/gcs_client.h"
#include "cli/list_actors_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"

namespace manta::cli {
namespace {

absl::Status CallError(const std::string& address, const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::UnavailableError(absl::StrCat("cannot reach the GCS at ", address, ": ", s.error_message()));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(absl::StrCat("the GCS at ", address, " refused the request (",
                                                     s.error_message(),
                                                     "); set MANTA_TOKEN or use the cluster's token file"));
    default:
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("the GCS at ", address, " failed: ", s.error_message()));
  }
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
  return v;
}

}  // namespace

absl::StatusOr<ClusterView> FetchClusterView(const std::string& address, const std::string& token,
                                             absl::Duration timeout, bool summary) {
  // The calls go out together on one connection, so the whole costs one
  // round trip (and one GCS handler's time) rather than the sum.
  auto channel = rpc::MakeChannel(address);
  auto nodes_stub = rpc::NodeInfoGcsService::NewStub(channel);
  auto resources_stub = rpc::NodeResourceGcsService::NewStub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext nodes_ctx, resources_ctx, probe_ctx;
  rpc::PrepareContext(&nodes_ctx, token, timeout);
  rpc::PrepareContext(&resources_ctx, token, timeout);
  rpc::PrepareContext(&probe_ctx, "", timeout);  // no token: answered only by a GCS that checks none
  rpc::GetAllNodeInfoRequest nodes_request;
  nodes_request.set_brief(summary);
  rpc::GetClusterResourcesRequest resources_request;
  // Both: a GCS that predates `fold` sends unfolded totals, which the
  // status report folds itself.
  resources_request.set_totals_only(summary);
  resources_request.set_fold(summary);
  rpc::GetAllNodeInfoReply nodes;
  rpc::GetClusterResourcesReply resources;
  rpc::GetClusterIdReply probe;
  grpc::Status nodes_status, resources_status, probe_status;
  auto nodes_call = nodes_stub->AsyncGetAllNodeInfo(&nodes_ctx, nodes_request, &cq);
  auto resources_call = resources_stub->AsyncGetClusterResources(&resources_ctx, resources_request, &cq);
  nodes_call->Finish(&nodes, &nodes_status, &nodes);
  resources_call->Finish(&resources, &resources_status, &resources);
  int pending = 2;
  std::unique_ptr<grpc::ClientAsyncResponseReader<rpc::GetClusterIdReply>> probe_call;
  if (summary && !token.empty()) {
    probe_call = nodes_stub->AsyncGetClusterId(&probe_ctx, rpc::GetClusterIdRequest(), &cq);
    probe_call->Finish(&probe, &probe_status, &probe);
    ++pending;
  }
  void* tag = nullptr;
  bool ok = false;
  for (; pending > 0 && cq.Next(&tag, &ok); --pending) {
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!nodes_status.ok()) return CallError(address, nodes_status);
  if (!resources_status.ok()) return CallError(address, resources_status);

  ClusterView view;
  view.auth_disabled = summary && (token.empty() || probe_status.ok());
  for (const rpc::NodeInfo& n : nodes.nodes()) {
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
  for (const rpc::NodeResources& r : resources.nodes()) {
    view.usage.push_back({ToHex(r.node_id()), ToMap(r.total()), ToMap(r.available())});
  }
  if (summary) {
    view.usage.push_back({"", ToMap(resources.totals().total()), ToMap(resources.totals().available())});
    view.reserved = {"", ToMap(resources.reserved().total()), ToMap(resources.reserved().available())};
  }
  for (const rpc::ResourceDemand& d : resources.demands()) {
    view.demands.push_back({ToMap(d.shape()), d.num_ready_requests_queued(), d.num_infeasible_requests_queued()});
  }
  for (const rpc::PlacementGroupInfo& g : resources.pending_placement_groups()) {
    view.pending_placement_groups.push_back(ToView(g));
  }
  return view;
}

absl::StatusOr<std::string> FetchClusterId(const std::string& address, const std::string& token,
                                           absl::Duration timeout) {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::GetClusterIdReply reply;
  grpc::Status s = stub->GetClusterId(&ctx, rpc::GetClusterIdRequest(), &reply);
  if (!s.ok()) return CallError(address, s);
  return ToHex(reply.cluster_id());
}

absl::StatusOr<DrainNodeResult> DrainNode(const std::string& address, const std::string& token,
                                          absl::Duration timeout, const std::string& node_id_hex,
                                          const std::string& reason, int64_t deadline_ms) {
  auto id = FromHex(node_id_hex);
  if (!id.ok()) return absl::InvalidArgumentError("node id " + node_id_hex + " is not hexadecimal");
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::DrainNodeRequest request;
  request.set_node_id(*id);
  request.set_reason(reason);
  request.set_deadline_ms(deadline_ms);
  rpc::DrainNodeReply reply;
  grpc::Status s = stub->DrainNode(&ctx, request, &reply);
  if (!s.ok()) {
    // The GCS's own words for a request it refused (bad reason, unknown node).
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT || s.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    }
    return CallError(address, s);
  }
  return DrainNodeResult{reply.accepted(), reply.rejection_reason()};
}

absl::StatusOr<std::vector<ActorView>> FetchActors(const std::string& address, const std::string& token,
                                                   absl::Duration timeout, int limit) {
  auto stub = rpc::ActorGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::ListActorsRequest request;
  request.set_limit(limit);
  rpc::ListActorsReply reply;
  grpc::Status s = stub->ListActors(&ctx, request, &reply);
  if (!s.ok()) return CallError(address, s);
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
                                                                     const std::string& token,
                                                                     absl::Duration timeout, int limit) {
  auto stub = rpc::PlacementGroupGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::ListPlacementGroupsRequest request;
  request.set_limit(limit);
  rpc::ListPlacementGroupsReply reply;
  grpc::Status s = stub->ListPlacementGroups(&ctx, request, &reply);
  if (!s.ok()) return CallError(address, s);
  std::vector<PlacementGroupView> out;
  for (const rpc::PlacementGroupInfo& g : reply.placement_groups()) out.push_back(ToView(g));
  return out;
}

absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(const std::string& address, const std::string& token,
                                                         absl::Duration timeout, int limit) {
  auto stub = rpc::TrainRunGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::ListTrainRunsRequest request;
  request.set_limit(std::max(0, limit));
  rpc::ListTrainRunsReply reply;
  grpc::Status s = stub->ListTrainRuns(&ctx, request, &reply);
  if (!s.ok()) return CallError(address, s);
  std::vector<TrainRunView> out;
  for (const rpc::TrainRunInfo& r : reply.runs()) out.push_back(ToView(r));
  return out;
}

absl::StatusOr<TaskList> FetchTasks(const std::string& address, const std::string& token, absl::Duration timeout,
                                    int limit) {
  auto stub = rpc::TaskEventGcsService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, timeout);
  rpc::ListTasksRequest request;
  request.set_limit(limit);
  rpc::ListTasksReply reply;
  grpc::Status s = stub->ListTasks(&ctx, request, &reply);
  if (!s.ok()) return CallError(address, s);
  TaskList out;
  out.num_dropped = reply.num_dropped();
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

}  // namespace manta::cli
