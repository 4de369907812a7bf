// ClusterView: the other nodes' resources and labels, for spillback.
//
// Owns one entry per alive remote node (this node is left out): its raylet
// address, total and available resources and labels. Totals come from the
// node's resource reports (they hold its placement-group bundles' resources),
// and from its NodeInfo until it first reports. Fed from the GCS's
// NODE_INFO and NODE_RESOURCES channels, and re-read in full after a gap.
// Available resources are lowered optimistically when a lease is spilled to a
// node, until that node's next report. Thread: the raylet's loop thread.
//
//   ClusterView view(self_id);
//   view.OnNodeInfo(info);
//   view.OnNodeResources(resources);
//   const ClusterView::Node* n = view.PickNode(demand, selector, /*require_available=*/false);
#pragma once

#include <map>
#include <string>

#include "common/id.h"
#include "common/label_selector.h"
#include "common/resources.h"
#include "common/thread_checker.h"
#include "proto/common.pb.h"

namespace manta::raylet {

class ClusterView {
 public:
  struct Node {
    NodeId id;
    rpc::Address address;  // the node's raylet
    // As last reported: include the group resources of committed bundles.
    ResourceSet total;
    ResourceSet available;
    ResourceSet registered_total;  // NodeInfo.resources_total (no groups)
    std::map<std::string, std::string> labels;
    int64_t version = -1;   // of the last resource report applied
    bool draining = false;  // takes no new work: never picked
  };

  explicit ClusterView(NodeId self) : self_(self) {}

  // Each returns whether the view changed. Malformed entries are ignored.
  bool OnNodeInfo(const rpc::NodeInfo& info);
  bool OnNodeResources(const rpc::NodeResources& resources);
  // Replaces everything with a full read (after a poll gap).
  void Reset();

  // The node to spill `demand` to: one that is not draining, whose total
  // holds it and whose labels match. Prefers nodes where it fits now, the least loaded (most of the
  // demanded resources left over) first, ties to the lowest id. With
  // `require_available`, only nodes where it fits now. Null when none.
  const Node* PickNode(const ResourceSet& demand, const LabelSelector& selector, bool require_available) const;
  // Whether any node's total could hold `demand` with matching labels.
  bool AnyCanEverFit(const ResourceSet& demand, const LabelSelector& selector) const {
    return PickNode(demand, selector, false) != nullptr;
  }
  // Lowers a node's available resources by a spilled `demand` (clamped at 0).
  void SubtractAvailable(const NodeId& node, const ResourceSet& demand);

  const std::map<NodeId, Node>& nodes() const { return nodes_; }
  // Bumped by every change that may give a node more room or make a node
  // able to hold more (OnNodeInfo or OnNodeResources returning true,
  // Reset), not by SubtractAvailable. Starts at 1.
  uint64_t version() const { return version_; }

 private:
  const NodeId self_;
  std::map<NodeId, Node> nodes_;  // ordered: deterministic choices
  uint64_t version_ = 1;
  // The loop thread, which every call comes from.
  ThreadChecker thread_;
};

}  // namespace manta::raylet
