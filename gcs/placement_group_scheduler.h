// PlacementGroupScheduler: places a group's bundles on nodes and reserves
// them with two-phase commit on the raylets.
//
// Owns the alive nodes (from NodeManager's listeners), which of them have
// been synced (told which bundles the GCS believes they hold, so stale ones
// are returned before anything new is placed there), the reservations in
// flight per node, and one attempt per group being scheduled.
//
// An attempt chooses a node for every bundle that has none (bundles already
// placed stay where they are), prepares the bundles on every chosen raylet
// at once, and when every prepare succeeded commits them all; when all the
// new bundles go to one node, that node prepares and commits them in one
// call (atomic by itself). If any prepare or commit fails, or a chosen node
// dies, it cancels every bundle it sent and reports kFailed so the caller
// retries; a retry reports kFailed again until those cancels have landed (a
// cancel retried after a lost reply must not return the next attempt's
// bundles, which have the same keys; a dead node's cancels are not waited
// for, as nothing is placed there again). Node choice per strategy:
//   STRICT_PACK    every bundle on one node
//   PACK           one node if possible, else as few as possible
//   STRICT_SPREAD  every bundle on a node of its own (a bipartite matching)
//   SPREAD         distinct nodes where possible
// Each bundle goes only to a node that is not draining, whose labels match
// its selector and whose available resources (last report, less
// reservations in flight) hold it; among equals the least loaded node wins
// (most of its resources free), so a slice head on a busy slice is chosen
// last.
//
// Invariants: at most one attempt per group; a callback runs at most once
// per Schedule() and never after Cancel(); whatever a cancelled or failed
// attempt reserved is returned. Thread: the GCS loop thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/id.h"
#include "common/label_selector.h"
#include "common/placement_group_resources.h"
#include "common/resources.h"
#include "common/thread_checker.h"
#include "gcs/raylet_client.h"
#include "proto/common.pb.h"

namespace manta::gcs {

struct PlacementResult {
  enum Outcome {
    kCreated,  // every bundle committed; `nodes` holds each bundle's node
    kNoFit,    // no placement now (`infeasible`: none ever, on these nodes)
    kFailed,   // a raylet refused or died; nothing of the attempt is held
  };
  Outcome outcome = kCreated;
  bool infeasible = false;
  std::string message;
  std::map<int, NodeId> nodes;  // bundle index -> node
};

class PlacementGroupScheduler {
 public:
  using Callback = std::function<void(PlacementResult)>;
  // The latest resource report of an alive node; null when none.
  using ResourceView = std::function<const rpc::NodeResources*(const NodeId&)>;
  // Takes a raylet's view of itself from a reply.
  using ApplyResources = std::function<void(const rpc::NodeResources&)>;

  PlacementGroupScheduler(ResourceView view, ApplyResources apply, RayletClientPool* raylets);

  // A node joins unsynced: nothing is placed on it until MarkSynced.
  void OnNodeAdded(const rpc::NodeInfo& info);
  void MarkSynced(const NodeId& node);
  // The node drains: no new bundle is placed on it (attempts already
  // preparing there go on; the raylet refuses them if it must).
  void OnNodeDraining(const rpc::NodeInfo& info);
  // Attempts using the node fail at once (and return what they reserved).
  void OnNodeDead(const NodeId& node);

  // Places `group`'s bundles that have no node_id. `done` runs once, on this
  // thread, possibly before Schedule returns (kNoFit). `prepared` (may be
  // null) runs when every prepare succeeded, before the commits go out.
  void Schedule(const rpc::PlacementGroupInfo& group, Callback done, std::function<void()> prepared = nullptr);
  // Takes a raylet's view of itself from a reply outside an attempt.
  void Apply(const rpc::NodeResources& resources) { apply_(resources); }
  // Ends the attempt; what it prepared or committed is returned.
  void Cancel(const PlacementGroupId& group);
  bool IsScheduling(const PlacementGroupId& group) const { return attempts_.contains(group); }

  // The choice alone (no RPC): bundle index -> node for the unplaced
  // bundles, or kNoFit with a message. Exposed for tests.
  PlacementResult Choose(const rpc::PlacementGroupInfo& group) const;

  const rpc::NodeInfo* GetNode(const NodeId& node) const;

 private:
  struct Node {
    rpc::NodeInfo info;
    bool synced = false;
  };
  struct Attempt {
    uint64_t generation = 0;
    PlacementGroupId group;
    std::vector<rpc::Bundle> bundles;            // the ones this attempt places
    std::map<NodeId, std::vector<int>> by_node;  // node -> bundle indices
    std::map<NodeId, ResourceSet> reserving;     // counted in flight_
    std::set<NodeId> outstanding;                // replies still due
    bool failed = false;
    bool committing = false;
    bool cancelled = false;  // kept only until its replies are in
    bool one_phase = false;  // one node: prepared and committed in one call
    std::string message;
    Callback done;
    std::function<void()> prepared;
    std::map<int, NodeId> all_nodes;  // every bundle's node, for kCreated
  };

  // A node's plain (not placement-group) resources as last reported, parsed
  // once per report version.
  struct Parsed {
    bool valid = false;
    int64_t version = -1;
    ResourceSet total;
    ResourceSet available;
  };
  const Parsed& Parse(const NodeId& node) const;
  // Resources a node can still give bundles: reported available less
  // reservations in flight.
  ResourceSet Available(const NodeId& node) const;
  ResourceSet Total(const NodeId& node) const;
  void Prepare(Attempt& a);
  void OnPrepared(const PlacementGroupId& group, uint64_t generation, const NodeId& node, const absl::Status& s,
                  const rpc::PrepareBundlesReply& reply);
  void Commit(Attempt& a);
  void OnCommitted(const PlacementGroupId& group, uint64_t generation, const NodeId& node, const absl::Status& s,
                   const rpc::CommitBundlesReply& reply);
  Attempt* Find(const PlacementGroupId& group, uint64_t generation);
  // Every reply is in and the attempt failed or was cancelled: return what
  // it reserved and report.
  void Abandon(Attempt& a);
  void ReleaseFlight(Attempt& a, const NodeId& node);
  // Returns every bundle of the attempt on every node it used (idempotent on
  // the raylets).
  void CancelOnRaylets(const Attempt& a);
  void Finish(const PlacementGroupId& group, PlacementResult result);

  const ResourceView view_;
  const ApplyResources apply_;
  RayletClientPool* const raylets_;

  std::map<NodeId, Node> nodes_;  // alive; ordered for stable choices
  absl::flat_hash_map<NodeId, ResourceSet> flight_;
  mutable absl::flat_hash_map<NodeId, Parsed> parsed_;
  absl::flat_hash_map<PlacementGroupId, Attempt> attempts_;
  // Cancelled attempts whose replies are still due, by generation.
  std::map<uint64_t, Attempt> zombies_;
  // Groups with CancelBundles calls in flight (how many, per alive node): no
  // new attempt starts for them until those have landed or their node died.
  absl::flat_hash_map<PlacementGroupId, std::map<NodeId, int>> returning_;
  uint64_t next_generation_ = 1;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Validates a bundle's resources and selector; the error names the bundle.
absl::StatusOr<std::pair<ResourceSet, LabelSelector>> ParseBundle(const rpc::Bundle& bundle);

}  // namespace manta::gcs
