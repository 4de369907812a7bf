// ResourceManager: the cluster resource view.
//
// Owns, for every alive node, its total and available resources as last
// reported by its raylet, and the demands raylets could not place. A report
// with a version older than the one held is ignored. Publishes changes on
// NODE_RESOURCES. Not persisted: totals come back with node recovery and
// raylets report again when they see a new GCS incarnation.
//
// Thread: the GCS loop thread.
#pragma once

#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "gcs/node_manager.h"
#include "gcs/publisher.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class ResourceManager {
 public:
  ResourceManager(const NodeManager* nodes, Publisher* publisher);

  // Wired to NodeManager's listeners.
  void OnNodeAdded(const rpc::NodeInfo& info);
  void OnNodeDead(const rpc::NodeInfo& info);

  void HandleReportResources(const rpc::ReportResourcesRequest& request, rpc::ReportResourcesReply* reply,
                             rpc::Done done);
  void HandleGetClusterResources(const rpc::GetClusterResourcesRequest& request,
                                 rpc::GetClusterResourcesReply* reply, rpc::Done done);

  // Takes a node's view of itself (a report, or the view a raylet returns
  // with a bundle reply): ignored for an unknown or dead node, malformed
  // maps, or an older version. Returns whether it was taken. What is taken is
  // published: the raylet's own report of the same change may carry an
  // older version and be ignored, so it cannot be left to tell the
  // subscribers.
  bool Apply(const rpc::NodeResources& resources);

  const rpc::NodeResources* Get(const NodeId& node) const;

 private:
  struct Entry {
    rpc::NodeResources resources;
    std::vector<rpc::ResourceDemand> demands;
  };

  const NodeManager* const nodes_;
  Publisher* const publisher_;
  absl::flat_hash_map<NodeId, Entry> view_;
};

}  // namespace manta::gcs
