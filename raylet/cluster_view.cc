#include "raylet/cluster_view.h"

namespace manta::raylet {
namespace {

// The smallest fraction left over, across the demanded resources, after
// taking `demand` from `available`: higher is less loaded.
double Headroom(const ResourceSet& demand, const ResourceSet& available, const ResourceSet& total) {
  double h = 1.0;
  for (const auto& [name, q] : demand.entries()) {
    double t = total.Get(name).ToDouble();
    if (t <= 0) continue;
    h = std::min(h, (available.Get(name).ToDouble() - q.ToDouble()) / t);
  }
  return h;
}

}  // namespace

bool ClusterView::OnNodeInfo(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(info.node_id());
  if (!id.ok() || *id == self_) return false;
  ++version_;
  if (info.state() == rpc::NodeInfo::DEAD) return nodes_.erase(*id) > 0;
  auto total = ResourceSet::FromPairs(info.resources_total());
  if (!total.ok()) return false;
  auto [it, added] = nodes_.try_emplace(*id);
  Node& n = it->second;
  n.id = *id;
  n.address.set_ip(info.node_ip());
  n.address.set_port(info.node_manager_port());
  n.address.set_node_id(info.node_id());
  n.labels = std::map<std::string, std::string>(info.labels().begin(), info.labels().end());
  n.draining = info.draining();
  // Only a changed NodeInfo total resets the view: the reported total also
  // holds group resources the NodeInfo never has.
  if (added || !(n.registered_total == *total)) {
    n.registered_total = *total;
    n.total = *total;
    n.available = *total;
    n.version = -1;
  }
  return true;
}

bool ClusterView::OnNodeResources(const rpc::NodeResources& resources) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(resources.node_id());
  if (!id.ok()) return false;
  auto it = nodes_.find(*id);
  if (it == nodes_.end()) return false;
  Node& n = it->second;
  // A restarted raylet is a new node; a restarted GCS may replay older
  // versions, which must not hide newer ones.
  if (resources.version() < n.version) return false;
  auto total = ResourceSet::FromPairs(resources.total());
  auto available = ResourceSet::FromPairs(resources.available());
  if (!total.ok() || !available.ok()) return false;
  ++version_;
  n.version = resources.version();
  n.total = *total;
  n.available = *available;
  return true;
}

void ClusterView::Reset() {
  MANTA_CHECK_THREAD(thread_);
  ++version_;
  nodes_.clear();
}

const ClusterView::Node* ClusterView::PickNode(const ResourceSet& demand, const LabelSelector& selector,
                                               bool require_available) const {
  MANTA_CHECK_THREAD(thread_);
  const Node* best = nullptr;
  bool best_now = false;
  double best_headroom = 0;
  for (const auto& [id, n] : nodes_) {
    if (n.draining || !n.total.Contains(demand) || !selector.Matches(n.labels)) continue;
    bool now = n.available.Contains(demand);
    if (require_available && !now) continue;
    double headroom = now ? Headroom(demand, n.available, n.total) : 0;
    if (best == nullptr || (now && !best_now) || (now == best_now && headroom > best_headroom)) {
      best = &n;
      best_now = now;
      best_headroom = headroom;
    }
  }
  return best;
}

void ClusterView::SubtractAvailable(const NodeId& node, const ResourceSet& demand) {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  ResourceSet& a = it->second.available;
  for (const auto& [name, q] : demand.entries()) {
    Quantity have = a.Get(name);
    a.Set(name, q < have ? have - q : Quantity());
  }
}

}  // namespace manta::raylet
