// PlacementGroupManager: the placement group table.
//
// Owns every placement group by id, the name directory, the groups waiting
// to be placed, the calls waiting for a group to be ready, and each node's
// sync (ReleaseUnusedBundles, sent when a node is added so a raylet returns
// bundles the GCS does not know, e.g. after a GCS restart). Scheduling goes
// through PlacementGroupScheduler. Groups are persisted on every state change;
// a restarted GCS keeps CREATED groups where they are and places the others
// again from scratch (their half-made reservations are released by the sync).
//
// CreatePlacementGroup is answered once the new group is in the store (a GCS
// killed after the answer still has the group when it restarts), not after
// its first placement attempt.
//
// States: PENDING -> (PREPARED while committing) -> CREATED; CREATED ->
// RESCHEDULING when a node holding bundles dies (its bundles are placed
// again, the others stay); any -> REMOVED (final). Every change is published
// on PLACEMENT_GROUP. RemovePlacementGroup is answered once every node
// holding a bundle has returned it (and sent SIGTERM to the workers using
// it), or its call failed, or the node was declared dead (its bundles and
// workers went with it, and a dead node never comes back): after the answer
// no new work runs in the group. A node killed just before the removal thus
// holds the caller only until its death is processed, not for the call's
// retries.
//
// Thread: the GCS loop thread.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "gcs/placement_group_scheduler.h"
#include "gcs/publisher.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class PlacementGroupManager {
 public:
  static constexpr size_t kMaxBundles = 10000;
  static constexpr size_t kMaxRemovedKept = 1000;
  static constexpr absl::Duration kMaxWait = absl::Seconds(60);
  using RunAfter = std::function<std::unique_ptr<EventLoop::Timer>(absl::Duration, std::function<void()>)>;

  PlacementGroupManager(Store* store, Publisher* publisher, PlacementGroupScheduler* scheduler,
                        RayletClientPool* raylets, RunAfter run_after);
  ~PlacementGroupManager();

  // Recovers the table (before serving).
  absl::Status Initialize();

  void HandleCreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                  rpc::CreatePlacementGroupReply* reply, rpc::Done done);
  void HandleRemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request,
                                  rpc::RemovePlacementGroupReply* reply, rpc::Done done);
  void HandleGetPlacementGroup(const rpc::GetPlacementGroupRequest& request, rpc::GetPlacementGroupReply* reply,
                               rpc::Done done);
  void HandleListPlacementGroups(const rpc::ListPlacementGroupsRequest& request, rpc::ListPlacementGroupsReply* reply,
                                 rpc::Done done);
  void HandleWaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                                     rpc::WaitPlacementGroupReadyReply* reply, rpc::Done done);

  // Wired to the node table, the resource view and the job table.
  void OnNodeAdded(const rpc::NodeInfo& info);
  void OnNodeDead(const NodeId& node);
  void OnResourcesChanged();
  void OnJobFinished(const std::string& job_id);
  // Called with the id of every group that is removed.
  void SetRemovedListener(std::function<void(const std::string&)> fn) { on_removed_ = std::move(fn); }

  // Answers every held WaitPlacementGroupReady and RemovePlacementGroup
  // call, and every later one at once, so that the server can shut down.
  void Shutdown();

  // Adds the groups waiting for nodes to `reply`.
  void AppendPending(rpc::GetClusterResourcesReply* reply) const;

  const rpc::PlacementGroupInfo* Get(const PlacementGroupId& id) const;
  // Every group, in no order, read in place (the metrics count them).
  void ForEachGroup(const std::function<void(const rpc::PlacementGroupInfo&)>& visit) const;

 private:
  // A call answered once its group is CREATED or REMOVED, or its time is
  // up: `fill` writes the group's state into the call's reply.
  struct Waiter {
    std::function<void(const rpc::PlacementGroupInfo&)> fill;
    rpc::Done done;
    std::unique_ptr<EventLoop::Timer> timer;
  };
  struct Group {
    rpc::PlacementGroupInfo info;
    uint64_t order = 0;  // creation order, for listing and fairness
    std::list<Waiter> waiters;
    std::unique_ptr<EventLoop::Timer> retry;
    absl::Duration backoff = absl::ZeroDuration();
  };
  using NameKey = std::pair<std::string, std::string>;  // namespace, name

  // Tries every waiting group that is not being scheduled, oldest first.
  void SchedulePending();
  void TrySchedule(const PlacementGroupId& id);
  void OnScheduled(const PlacementGroupId& id, PlacementResult result);
  void Remove(const PlacementGroupId& id, const std::string& why);
  // Returns the group's committed bundles on their nodes; counts the calls
  // in returning_.
  void ReturnBundles(const PlacementGroupId& id, const rpc::PlacementGroupInfo& info);
  // `node` answered the group's CancelBundles, its call failed, or it died.
  void OnBundlesReturned(const PlacementGroupId& id, const NodeId& node);
  void SetState(Group& g, rpc::PlacementGroupInfo::State state, const std::string& message);
  // `persisted` (may be null) runs once the write is in the store.
  void PersistAndPublish(const Group& g, Store::Done persisted = nullptr);
  // Answers the group's CreatePlacementGroup calls once its first write landed.
  void OnCreatePersisted(const PlacementGroupId& id, const absl::Status& status);
  void AnswerWaiters(Group& g);
  // Answers `done` (through `fill`) now when `g` is not waiting to be placed,
  // else once it is CREATED or REMOVED or `wait` has passed.
  void AddWaiter(Group& g, absl::Duration wait, std::function<void(const rpc::PlacementGroupInfo&)> fill,
                 rpc::Done done);
  void SyncNode(const rpc::NodeInfo& info, int attempt);
  void TrimRemoved();

  Store* const store_;
  Publisher* const publisher_;
  PlacementGroupScheduler* const scheduler_;
  RayletClientPool* const raylets_;
  const RunAfter run_after_;
  bool shut_down_ = false;  // waits are answered at once: the server is draining

  absl::flat_hash_map<PlacementGroupId, std::unique_ptr<Group>> groups_;
  std::map<NameKey, PlacementGroupId> names_;  // live groups only
  std::map<NodeId, std::unique_ptr<EventLoop::Timer>> sync_retries_;
  // Removed groups whose nodes have not all answered CancelBundles: the
  // alive nodes whose calls are still due, and the RemovePlacementGroup
  // calls waiting for them. An entry goes when its last node answers or
  // dies.
  struct Returning {
    std::set<NodeId> nodes;
    std::vector<rpc::Done> removers;
  };
  absl::flat_hash_map<PlacementGroupId, Returning> returning_;
  // New groups whose first write has not landed yet, and the
  // CreatePlacementGroup calls waiting for it (the first and any retry).
  struct Creator {
    rpc::CreatePlacementGroupReply* reply;
    rpc::Done done;
    int64_t wait_ready_ms;  // then waits for CREATED this long, as a Waiter
  };
  absl::flat_hash_map<PlacementGroupId, std::vector<Creator>> creating_;
  std::unique_ptr<EventLoop::Timer> kick_;  // a SchedulePending on its way
  uint64_t next_order_ = 1;
  size_t num_removed_ = 0;
  bool scheduling_pending_ = false;
  std::function<void(const std::string&)> on_removed_;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

// Validates a creation spec: id, 1..10000 bundles whose index is their
// position, each with valid non-empty resources and selector, a known
// strategy, bounded name and namespace.
absl::Status ValidatePlacementGroupSpec(const rpc::PlacementGroupInfo& spec);

}  // namespace manta::gcs
