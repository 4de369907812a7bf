// SimNode: the books of one simulated raylet, as the GCS's calls see them:
// what the node offers, the worker leases it granted and the
// placement-group bundles it holds. It answers leases and the two-phase
// bundle calls with the raylet's rules (a lease is granted when the
// available resources hold it; a group's bundles are prepared all or none;
// a committed bundle adds its group resources, see
// common/placement_group_resources.h), and tracks whether its resources
// changed since the last report. No I/O.
//
//   SimNode node(NodeId::FromRandom(), 20001, *ResourceSet::FromMap({{"CPU", 8}}));
//   if (node.Lease(lease_id, demand)) ...;   // node.dirty() is now true
//   rpc::NodeResources report = node.TakeReport();
//
// Thread: not thread-safe; one owner (the simulator's loop thread).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/id.h"
#include "common/resources.h"
#include "proto/common.pb.h"

namespace manta::bench {

class SimNode {
 public:
  SimNode(NodeId id, int port, ResourceSet total);

  const NodeId& id() const { return id_; }
  int port() const { return port_; }

  // What RegisterNode carries: 127.0.0.1:port, the offered resources, this
  // process's pid.
  rpc::NodeInfo Info() const;
  // The current view at the last reported version (what bundle replies carry).
  rpc::NodeResources Resources() const;
  // Whether resources changed since the last TakeReport().
  bool dirty() const { return dirty_; }
  // The view under a new version; clears dirty().
  rpc::NodeResources TakeReport();
  // A report failed: send one again.
  void MarkDirty() { dirty_ = true; }

  // Grants `demand` to `lease` when the available resources hold it; a lease
  // granted before is granted again. False: rejected.
  bool Lease(const std::string& lease, const ResourceSet& demand);
  // Gives the lease's resources back (unknown leases: nothing).
  void Return(const std::string& lease);

  // Reserves every bundle (all of one group) or none; bundles already held
  // count as reserved. InvalidArgument for malformed bundles; false when
  // they do not fit.
  absl::StatusOr<bool> Prepare(const std::vector<rpc::Bundle>& bundles);
  // Makes prepared bundles usable. NotFound for a bundle not held.
  absl::Status Commit(const PlacementGroupId& group, const std::vector<int>& indices);
  // Returns the group's bundles (every one when `indices` is empty).
  void Cancel(const PlacementGroupId& group, const std::vector<int>& indices);
  // Returns every bundle not in `in_use`.
  void ReleaseUnused(const std::vector<std::pair<PlacementGroupId, int>>& in_use);

  size_t num_leases() const { return leases_.size(); }
  size_t num_bundles() const { return bundles_.size(); }

 private:
  using BundleKey = std::pair<PlacementGroupId, int>;
  struct Held {
    ResourceSet resources;
    bool committed = false;
  };

  void ReturnBundle(std::map<BundleKey, Held>::iterator it);

  const NodeId id_;
  const int port_;
  const ResourceSet offered_;
  ResourceSet total_;      // offered plus committed bundles' group resources
  ResourceSet available_;  // total less leases and reservations
  int64_t version_ = 0;
  bool dirty_ = true;  // the first report follows registration
  absl::flat_hash_map<std::string, ResourceSet> leases_;
  std::map<BundleKey, Held> bundles_;
};

}  // namespace manta::bench
