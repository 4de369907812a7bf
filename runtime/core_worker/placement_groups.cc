// Placement groups and the node table from the core worker's side: blocking
// calls to the GCS made on the caller's thread, never the io loop.
#include <algorithm>
#include <chrono>
#include <future>

#include "common/status.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {

// The GCS holds a WaitPlacementGroupReady call at most this long.
constexpr absl::Duration kMaxHeldWait = absl::Seconds(60);
// Added to a held call's wait: the call's own timeout and the round trip.
constexpr absl::Duration kWaitSlack = absl::Seconds(15);
// The GCS answers a removal once the group's nodes have returned its
// bundles, each within its own 10 s call.
constexpr absl::Duration kRemoveTimeout = absl::Seconds(30);

rpc::PlacementGroupInfo ToProto(const PlacementGroupData& d, const JobId& job, const std::string& ray_namespace) {
  rpc::PlacementGroupInfo info;
  info.set_placement_group_id(d.id.Binary());
  info.set_name(d.name);
  info.set_ray_namespace(ray_namespace);
  info.set_strategy(static_cast<rpc::PlacementGroupInfo::Strategy>(static_cast<int>(d.strategy)));
  info.set_creator_job_id(job.Binary());
  info.set_detached(d.detached);
  info.set_same_label(d.same_label);
  for (const BundleData& b : d.bundles) {
    rpc::Bundle* out = info.add_bundles();
    out->set_placement_group_id(d.id.Binary());
    out->set_index(b.index);
    for (const auto& [k, v] : b.resources) (*out->mutable_resources())[k] = v;
    for (const auto& [k, v] : b.label_selector) (*out->mutable_label_selector())[k] = v;
    out->set_label_domain(b.label_domain);
  }
  return info;
}

PlacementGroupData FromProto(const rpc::PlacementGroupInfo& info) {
  PlacementGroupData d;
  if (auto id = PlacementGroupId::FromBinary(info.placement_group_id()); id.ok()) d.id = *id;
  d.name = info.name();
  d.ray_namespace = info.ray_namespace();
  d.strategy = static_cast<PlacementStrategy>(static_cast<int>(info.strategy()));
  d.detached = info.detached();
  d.same_label = info.same_label();
  d.state = static_cast<PlacementGroupState>(static_cast<int>(info.state()));
  d.state_message = info.state_message();
  d.infeasible = info.infeasible();
  for (const rpc::Bundle& b : info.bundles()) {
    BundleData out;
    out.index = b.index();
    out.resources.insert(b.resources().begin(), b.resources().end());
    out.label_selector.insert(b.label_selector().begin(), b.label_selector().end());
    if (auto node = NodeId::FromBinary(b.node_id()); node.ok()) out.node_id = *node;
    out.label_domain = b.label_domain();
    d.bundles.push_back(std::move(out));
  }
  return d;
}

}  // namespace

absl::StatusOr<PlacementGroupData> CoreWorkerImpl::CreatePlacementGroup(const PlacementGroupData& spec) {
  rpc::CreatePlacementGroupRequest req;
  *req.mutable_spec() = ToProto(spec, job_id_, spec.ray_namespace.empty() ? job_id_.Hex() : spec.ray_namespace);
  auto reply = GcsCall<rpc::CreatePlacementGroupReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.CreatePlacementGroup(req, std::move(done)); });
  if (!reply.ok()) return reply.status();
  return FromProto(reply->placement_group());
}

absl::Status CoreWorkerImpl::RemovePlacementGroup(const PlacementGroupId& id) {
  // Workers this process leased in the group and no longer uses go back to
  // their raylets first: the next group's tasks reuse them, where removing
  // the group would stop them.
  auto returned = std::make_shared<std::promise<void>>();
  tasks_.ReturnIdleLeasesOf(id.Binary(), [returned] { returned->set_value(); });
  returned->get_future().wait_for(std::chrono::seconds(2));
  rpc::RemovePlacementGroupRequest req;
  req.set_placement_group_id(id.Binary());
  return GcsCall<rpc::RemovePlacementGroupReply>(
             [req](gcs::GcsClient& gcs, auto done) { gcs.RemovePlacementGroup(req, kRemoveTimeout, std::move(done)); },
             kRemoveTimeout + kWaitSlack)
      .status();
}

absl::StatusOr<PlacementGroupData> CoreWorkerImpl::GetPlacementGroup(const PlacementGroupId& id) {
  rpc::GetPlacementGroupRequest req;
  req.set_placement_group_id(id.Binary());
  auto reply = GcsCall<rpc::GetPlacementGroupReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetPlacementGroup(req, std::move(done)); });
  if (!reply.ok()) return reply.status();
  return FromProto(reply->placement_group());
}

absl::StatusOr<PlacementGroupData> CoreWorkerImpl::GetNamedPlacementGroup(const std::string& name,
                                                                          const std::string& ray_namespace) {
  if (name.empty()) return absl::InvalidArgumentError("a placement group name must not be empty");
  rpc::GetPlacementGroupRequest req;
  req.set_name(name);
  req.set_ray_namespace(ray_namespace.empty() ? job_id_.Hex() : ray_namespace);
  auto reply = GcsCall<rpc::GetPlacementGroupReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetPlacementGroup(req, std::move(done)); });
  if (!reply.ok()) return reply.status();
  return FromProto(reply->placement_group());
}

absl::StatusOr<PlacementGroupData> CoreWorkerImpl::WaitPlacementGroupReady(const PlacementGroupId& id,
                                                                           absl::Duration timeout) {
  const absl::Time deadline = timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + std::max(timeout, absl::ZeroDuration());
  while (true) {
    // Held calls of at most a minute each, until the deadline.
    absl::Duration hold = std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kMaxHeldWait);
    rpc::WaitPlacementGroupReadyRequest req;
    req.set_placement_group_id(id.Binary());
    req.set_timeout_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(hold)));
    auto reply = GcsCall<rpc::WaitPlacementGroupReadyReply>(
        [req](gcs::GcsClient& gcs, auto done) { gcs.WaitPlacementGroupReady(req, std::move(done)); },
        hold + kWaitSlack);
    if (!reply.ok()) return reply.status();
    PlacementGroupData data = FromProto(reply->placement_group());
    if (reply->ready() || data.state == PlacementGroupState::kRemoved || absl::Now() >= deadline) return data;
  }
}

absl::StatusOr<PlacementGroupData> CoreWorkerImpl::CreatePlacementGroupAndWait(const PlacementGroupData& spec,
                                                                               absl::Duration timeout) {
  // Time plus an infinite duration is the infinite future.
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration());
  const absl::Duration hold = std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kMaxHeldWait);
  rpc::CreatePlacementGroupRequest req;
  *req.mutable_spec() = ToProto(spec, job_id_, spec.ray_namespace.empty() ? job_id_.Hex() : spec.ray_namespace);
  req.set_wait_ready_ms(absl::ToInt64Milliseconds(hold));
  auto reply = GcsCall<rpc::CreatePlacementGroupReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.CreatePlacementGroup(req, std::move(done)); }, hold + kWaitSlack);
  if (!reply.ok()) return reply.status();
  PlacementGroupData data = FromProto(reply->placement_group());
  if (data.state == PlacementGroupState::kCreated || data.state == PlacementGroupState::kRemoved ||
      absl::Now() >= deadline) {
    return data;
  }
  return WaitPlacementGroupReady(spec.id, deadline - absl::Now());
}

absl::StatusOr<std::vector<NodeData>> CoreWorkerImpl::GetAllNodes() {
  rpc::GetAllNodeInfoRequest req;
  auto reply = GcsCall<rpc::GetAllNodeInfoReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetAllNodeInfo(req, std::move(done)); });
  if (!reply.ok()) return reply.status();
  std::vector<NodeData> nodes;
  nodes.reserve(reply->nodes_size());
  for (const rpc::NodeInfo& n : reply->nodes()) nodes.push_back(NodeDataFromProto(n));
  return nodes;
}

absl::StatusOr<std::vector<NodeResourcesData>> CoreWorkerImpl::GetClusterResources() {
  rpc::GetClusterResourcesRequest req;
  auto reply = GcsCall<rpc::GetClusterResourcesReply>(
      [req](gcs::GcsClient& gcs, auto done) { gcs.GetClusterResources(req, std::move(done)); });
  if (!reply.ok()) return reply.status();
  std::vector<NodeResourcesData> nodes;
  nodes.reserve(reply->nodes_size());
  for (const rpc::NodeResources& n : reply->nodes()) {
    NodeResourcesData d;
    if (auto id = NodeId::FromBinary(n.node_id()); id.ok()) d.node_id = *id;
    d.total.insert(n.total().begin(), n.total().end());
    d.available.insert(n.available().begin(), n.available().end());
    nodes.push_back(std::move(d));
  }
  return nodes;
}

}  // namespace manta::core
