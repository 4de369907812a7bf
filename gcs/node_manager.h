// NodeManager: the GCS node table.
//
// Owns every node's NodeInfo, alive and recently dead, and keeps it in the
// store's "nodes" table so a restarted GCS recovers it. Registration is
// idempotent by node id: a raylet that registers again (after a GCS restart)
// keeps its entry, and the same registration repeated to this GCS (a retry
// whose reply was lost) changes nothing and tells no listener again. A node
// once DEAD stays dead; its raylet must exit.
// A node may be marked draining (DrainNode): it stays ALIVE, its NodeInfo
// says draining with a reason and deadline, the mark is persisted and kept
// across re-registration, and the node's raylet is told (DrainRaylet) so it
// takes no new work and exits when idle or at the deadline.
// Publishes every change on the NODE_INFO channel and tells listeners.
//
// Thread: the GCS loop thread.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/publisher.h"
#include "gcs/raylet_client.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class NodeManager {
 public:
  using Listener = std::function<void(const rpc::NodeInfo&)>;
  static constexpr size_t kMaxDeadNodes = 1000;
  static constexpr char kTable[] = "nodes";
  static constexpr size_t kMaxDrainReasonBytes = 256;
  // A drain deadline this far in the past is still taken (clock skew).
  static constexpr int64_t kDeadlineSlackMs = 1000;

  // `raylets` (may be null: no DrainRaylet is sent) carries DrainRaylet.
  NodeManager(Store* store, Publisher* publisher, ClusterId cluster_id, std::string incarnation,
              RayletClientPool* raylets = nullptr);

  // Loads the table from the store. Alive nodes are announced to the
  // added-listeners, so their health is checked again.
  absl::Status Initialize();

  void AddNodeAddedListener(Listener l) { added_listeners_.push_back(std::move(l)); }
  void AddNodeDeadListener(Listener l) { dead_listeners_.push_back(std::move(l)); }
  // Called with the node's new NodeInfo each time a DrainNode is accepted.
  void AddNodeDrainingListener(Listener l) { draining_listeners_.push_back(std::move(l)); }

  void HandleGetClusterId(const rpc::GetClusterIdRequest& request, rpc::GetClusterIdReply* reply, rpc::Done done);
  void HandleRegisterNode(const rpc::RegisterNodeRequest& request, rpc::RegisterNodeReply* reply, rpc::Done done);
  void HandleUnregisterNode(const rpc::UnregisterNodeRequest& request, rpc::UnregisterNodeReply* reply, rpc::Done done);
  void HandleGetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, rpc::GetAllNodeInfoReply* reply, rpc::Done done);
  // Marks an alive node draining: persisted (the reply waits for the store),
  // published on NODE_INFO at once, draining listeners told, DrainRaylet
  // sent to its raylet. Idempotent; a repeated drain keeps the earlier of
  // the two deadlines (0 counts as none, i.e. the latest) and takes the new
  // reason. A dead node: OK with accepted = false and the rejection reason.
  // Errors (nothing changes): InvalidArgument for a malformed node id, an
  // empty, too long (> 256 bytes) or non-UTF-8 reason, or a deadline that is
  // negative or more than a second in the past; NotFound for an unknown node.
  void HandleDrainNode(const rpc::DrainNodeRequest& request, rpc::DrainNodeReply* reply, rpc::Done done);

  // Marks an alive node dead (health checks failed). No-op otherwise.
  void MarkNodeDead(const NodeId& node, const std::string& reason, bool expected);

  // Null unless `node` is alive.
  const rpc::NodeInfo* GetAliveNode(const NodeId& node) const;
  size_t num_alive() const { return alive_.size(); }
  // Every node, alive then dead, read in place (the metrics count them).
  void ForEachNode(const std::function<void(const rpc::NodeInfo&)>& visit) const;

 private:
  void Persist(const rpc::NodeInfo& info, rpc::Done done);
  void PublishNode(const rpc::NodeInfo& info);
  void TrimDeadNodes();
  void SendDrainRaylet(const rpc::NodeInfo& info);

  Store* const store_;
  Publisher* const publisher_;
  const ClusterId cluster_id_;
  const std::string incarnation_;
  RayletClientPool* const raylets_;  // may be null

  absl::flat_hash_map<NodeId, rpc::NodeInfo> alive_;
  // What each alive node's raylet sent in its latest RegisterNode to this
  // process (not recovered from the store).
  absl::flat_hash_map<NodeId, rpc::NodeInfo> registered_;
  absl::flat_hash_map<NodeId, rpc::NodeInfo> dead_;
  std::deque<NodeId> dead_order_;  // oldest first; same ids as dead_
  std::vector<Listener> added_listeners_;
  std::vector<Listener> dead_listeners_;
  std::vector<Listener> draining_listeners_;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Checks a DrainNodeRequest against the wall clock `now_ms`; the error names
// the field.
absl::Status ValidateDrainRequest(const rpc::DrainNodeRequest& request, int64_t now_ms);

// Checks a NodeInfo from a raylet; the error names the field.
absl::Status ValidateNodeInfo(const rpc::NodeInfo& info);

}  // namespace manta::gcs
