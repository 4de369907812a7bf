#include "bench/gcs/sim_node.h"

#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "common/placement_group_resources.h"

namespace manta::bench {
namespace {

void CopyTo(const ResourceSet& from, google::protobuf::Map<std::string, double>* to) {
  for (const auto& [name, value] : from.ToMap()) (*to)[name] = value;
}

}  // namespace

SimNode::SimNode(NodeId id, int port, ResourceSet total)
    : id_(id), port_(port), offered_(total), total_(total), available_(std::move(total)) {}

rpc::NodeInfo SimNode::Info() const {
  rpc::NodeInfo info;
  info.set_node_id(id_.Binary());
  info.set_node_ip("127.0.0.1");
  info.set_node_manager_port(port_);
  info.set_node_name(absl::StrCat("sim-", port_));
  info.set_pid(getpid());
  CopyTo(offered_, info.mutable_resources_total());
  return info;
}

rpc::NodeResources SimNode::Resources() const {
  rpc::NodeResources r;
  r.set_node_id(id_.Binary());
  r.set_version(version_);
  CopyTo(total_, r.mutable_total());
  CopyTo(available_, r.mutable_available());
  return r;
}

rpc::NodeResources SimNode::TakeReport() {
  ++version_;
  dirty_ = false;
  return Resources();
}

bool SimNode::Lease(const std::string& lease, const ResourceSet& demand) {
  if (leases_.contains(lease)) return true;
  if (!available_.Contains(demand)) return false;
  available_.Subtract(demand);
  leases_[lease] = demand;
  dirty_ = true;
  return true;
}

void SimNode::Return(const std::string& lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  available_.Add(it->second);
  leases_.erase(it);
  dirty_ = true;
}

absl::StatusOr<bool> SimNode::Prepare(const std::vector<rpc::Bundle>& bundles) {
  std::vector<std::pair<BundleKey, ResourceSet>> wanted;
  ResourceSet needed;
  for (const rpc::Bundle& b : bundles) {
    auto group = PlacementGroupId::FromBinary(b.placement_group_id());
    if (!group.ok() || b.index() < 0) return absl::InvalidArgumentError("malformed bundle");
    auto resources = ResourceSet::FromPairs(b.resources());
    if (!resources.ok()) return resources.status();
    BundleKey key{*group, b.index()};
    if (bundles_.count(key) > 0) continue;
    needed.Add(*resources);
    wanted.emplace_back(key, std::move(*resources));
  }
  if (!available_.Contains(needed)) return false;
  available_.Subtract(needed);
  for (auto& [key, resources] : wanted) bundles_[key] = Held{std::move(resources), false};
  if (!wanted.empty()) dirty_ = true;
  return true;
}

absl::Status SimNode::Commit(const PlacementGroupId& group, const std::vector<int>& indices) {
  for (int index : indices) {
    if (bundles_.count({group, index}) == 0) {
      return absl::NotFoundError(absl::StrCat("bundle ", index, " of ", group.Hex(), " is not held here"));
    }
  }
  for (int index : indices) {
    Held& held = bundles_.at({group, index});
    if (held.committed) continue;
    ResourceSet added = pg::CommittedResources(held.resources, group, index);
    total_.Add(added);
    available_.Add(added);
    held.committed = true;
    dirty_ = true;
  }
  return absl::OkStatus();
}

void SimNode::Cancel(const PlacementGroupId& group, const std::vector<int>& indices) {
  std::set<int> wanted(indices.begin(), indices.end());
  for (auto it = bundles_.lower_bound({group, -1}); it != bundles_.end() && it->first.first == group;) {
    auto next = std::next(it);
    if (wanted.empty() || wanted.count(it->first.second) > 0) ReturnBundle(it);
    it = next;
  }
}

void SimNode::ReleaseUnused(const std::vector<std::pair<PlacementGroupId, int>>& in_use) {
  std::set<BundleKey> keep(in_use.begin(), in_use.end());
  for (auto it = bundles_.begin(); it != bundles_.end();) {
    auto next = std::next(it);
    if (keep.count(it->first) == 0) ReturnBundle(it);
    it = next;
  }
}

void SimNode::ReturnBundle(std::map<BundleKey, Held>::iterator it) {
  const Held& held = it->second;
  if (held.committed) {
    // Nothing leases inside the benchmark's groups, so all of it is free.
    ResourceSet added = pg::CommittedResources(held.resources, it->first.first, it->first.second);
    if (total_.Contains(added) && available_.Contains(added)) {
      total_.Subtract(added);
      available_.Subtract(added);
    }
  }
  available_.Add(held.resources);
  bundles_.erase(it);
  dirty_ = true;
}

}  // namespace manta::bench
