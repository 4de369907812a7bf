// ResourceManager: the cluster resource view.
//
// Owns, for every alive node, its total and available resources as last
// reported by its raylet, and the demands raylets could not place. A report
// with a version older than the one held is ignored. Publishes changes on
// NODE_RESOURCES. Not persisted: totals come back with node recovery and
// raylets report again when they see a new GCS incarnation.
//
// A raylet answers each bundle call with its view, and does not report
// that view again (ToldView): the GCS publishes such views itself, together,
// kPublishApplied after the first of them, as the raylets' own reports
// would have been throttled.
//
// Thread: the GCS loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/node_manager.h"
#include "gcs/publisher.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class ResourceManager {
 public:
  using RunAfter = std::function<std::unique_ptr<EventLoop::Timer>(absl::Duration, std::function<void()>)>;
  // Views taken from bundle replies go out this long after the first.
  static constexpr absl::Duration kPublishApplied = absl::Milliseconds(100);

  ResourceManager(const NodeManager* nodes, Publisher* publisher, RunAfter run_after);

  // Wired to NodeManager's listeners.
  void OnNodeAdded(const rpc::NodeInfo& info);
  void OnNodeDead(const rpc::NodeInfo& info);

  void HandleReportResources(const rpc::ReportResourcesRequest& request, rpc::ReportResourcesReply* reply,
                             rpc::Done done);
  void HandleGetClusterResources(const rpc::GetClusterResourcesRequest& request, rpc::GetClusterResourcesReply* reply,
                                 rpc::Done done);

  // Takes the view of itself a raylet returns with a bundle reply: ignored
  // for an unknown or dead node, malformed maps, or an older version.
  // Returns whether it was taken. Published kPublishApplied after the first
  // such view not yet published (so one reservation does not wake every
  // raylet several times), or sooner by the node's next report: every report
  // publishes the newest view held, even when the report itself is older
  // than this one and is ignored.
  bool Apply(const rpc::NodeResources& resources);

  const rpc::NodeResources* Get(const NodeId& node) const;

 private:
  struct Entry {
    rpc::NodeResources resources;
    bool published = false;  // `resources` went out on NODE_RESOURCES
    std::vector<rpc::ResourceDemand> demands;
  };
  // Takes `r` unless it is older than the view held, or the same (false
  // then: nothing changed).
  static bool Take(Entry& e, const rpc::NodeResources& r);
  void PublishIfNew(Entry& e);
  // Publishes the views taken from replies since the last time.
  void PublishApplied();

  const NodeManager* const nodes_;
  Publisher* const publisher_;
  const RunAfter run_after_;
  absl::flat_hash_map<NodeId, Entry> view_;
  std::vector<NodeId> applied_;                      // taken from replies, maybe not published
  std::unique_ptr<EventLoop::Timer> publish_timer_;  // set while applied_ waits
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

}  // namespace manta::gcs
