// ActorScheduler: places actors' creation tasks on nodes.
//
// Owns the alive nodes (from NodeManager's listeners) and, per actor being
// created, its attempt: choose a node whose total resources hold the demand
// and whose labels match the selector, and that is not draining (nodes whose
// available resources hold it first), lease a worker there (grant_or_reject), push the creation task
// to the worker, and report the outcome. A lease that is rejected, or a
// raylet that cannot be reached, moves the attempt to the next node; when
// every fitting node has refused, it retries after a backoff, or sooner when
// a node is added or reports free resources. An actor no alive node could
// ever hold waits, without a timer, for a node to be added; it is counted as
// an infeasible demand until then.
//
// Invariants: each actor has at most one attempt; a callback is invoked at
// most once per Schedule() and never after Cancel(); a lease granted to a
// cancelled attempt is returned. On kCreated the lease passes to the caller;
// on every other outcome the scheduler has returned it.
//
// Thread: the GCS loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "common/resources.h"
#include "common/thread_checker.h"
#include "gcs/core_worker_client.h"
#include "gcs/raylet_client.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

struct ActorSchedulerOptions {
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // How long a constructor may run before its worker counts as hung.
  absl::Duration creation_timeout = absl::Minutes(10);
};

struct ActorCreationResult {
  enum Outcome {
    kCreated,            // ALIVE on `worker_address`
    kConstructorFailed,  // the constructor returned an error (`error`)
    kWorkerDied,         // the worker or its node died while constructing
    kInvalid,            // the raylet refused the demand as malformed
  };
  Outcome outcome = kCreated;
  NodeId node;
  LeaseId lease;
  rpc::Address worker_address;  // node_id filled in
  int32_t pid = 0;
  rpc::ErrorInfo error;  // kConstructorFailed
  std::string message;   // why, for every outcome but kCreated
};

class ActorScheduler {
 public:
  using Callback = std::function<void(ActorCreationResult)>;
  using RunAfter = std::function<std::unique_ptr<EventLoop::Timer>(absl::Duration, std::function<void()>)>;
  // The latest resource report of an alive node; null when none.
  using ResourceView = std::function<const rpc::NodeResources*(const NodeId&)>;

  // Takes a raylet's view of itself from a lease reply.
  using ApplyResources = std::function<void(const rpc::NodeResources&)>;

  ActorScheduler(ResourceView resources, RayletClientPool* raylets, CoreWorkerClientPool* workers, RunAfter run_after,
                 ActorSchedulerOptions options = {});
  // From now on leases ask for the node's view in their reply and hand it to
  // `apply` (the raylet then does not report it): one report fewer per actor.
  void SetApplyResources(ApplyResources apply) { apply_ = std::move(apply); }

  void OnNodeAdded(const rpc::NodeInfo& info);
  // The node drains: no new attempt goes to it (attempts already there go on).
  void OnNodeDraining(const rpc::NodeInfo& info);
  // Attempts on the node fail over (leasing) or end with kWorkerDied (pushing).
  void OnNodeDead(const NodeId& node);
  // `node` reported resources: attempts it refused may try it again.
  void OnResourcesChanged(const NodeId& node);

  // Starts creating `actor` from `spec` (validated by the caller). Replaces
  // an attempt already running for it.
  void Schedule(const ActorId& actor, const rpc::TaskSpec& spec, Callback done);
  // Stops the attempt; a worker already leased is told to exit and returned.
  void Cancel(const ActorId& actor);

  // Adds the actors waiting for a node to `reply`'s demands: infeasible ones
  // as infeasible, the others as ready, merged with shapes already there.
  void AppendDemands(rpc::GetClusterResourcesReply* reply) const;

  const rpc::NodeInfo* GetNode(const NodeId& node) const;
  std::vector<rpc::NodeInfo> AliveNodes() const;
  bool IsScheduling(const ActorId& actor) const { return attempts_.contains(actor); }
  size_t num_scheduling() const { return attempts_.size(); }

 private:
  struct Node {
    rpc::NodeInfo info;
    ResourceSet total;
  };

  struct Attempt {
    enum Phase { kWaiting, kLeasing, kPushing };
    rpc::TaskSpec spec;
    ResourceSet demand;
    Callback done;
    uint64_t generation = 0;  // callbacks of older RPCs carry another
    Phase phase = kWaiting;
    bool infeasible = false;
    NodeId node;
    LeaseId lease;
    rpc::Address worker;
    absl::flat_hash_set<NodeId> refused;  // nodes tried since the last backoff
    absl::Duration backoff = absl::ZeroDuration();
    std::unique_ptr<EventLoop::Timer> retry;
  };

  bool Fits(const NodeId& id, const Node& node, const Attempt& a) const;
  bool AvailableFits(const NodeId& node, const ResourceSet& demand) const;
  void TrySchedule(const ActorId& actor);
  // A node that fits `a`, has not refused it and has room now by its last
  // report; nullopt when none has.
  std::optional<NodeId> FreeNode(const Attempt& a);
  void Lease(const ActorId& actor, Attempt& a, const NodeId& node);
  void OnLeaseReply(const ActorId& actor, uint64_t generation, const NodeId& node, const LeaseId& lease,
                    const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply);
  void OnPushReply(const ActorId& actor, uint64_t generation, int32_t pid, const absl::Status& s,
                   rpc::PushTaskReply&& reply);
  // Ends the attempt and invokes its callback.
  void Complete(const ActorId& actor, ActorCreationResult result);
  void ReturnLease(const NodeId& node, const LeaseId& lease, const std::string& worker_id, bool disconnect);
  void StopWorker(const rpc::Address& worker);

  const ResourceView resources_;
  ApplyResources apply_;
  RayletClientPool* const raylets_;
  CoreWorkerClientPool* const workers_;
  const RunAfter run_after_;
  const ActorSchedulerOptions options_;

  std::map<NodeId, Node> nodes_;  // alive; ordered, for a stable rotation
  absl::flat_hash_map<ActorId, Attempt> attempts_;
  uint64_t next_generation_ = 1;
  size_t rotation_ = 0;  // spreads retries over nodes that look full
  // Where the next search for a node with room starts (the node after the
  // last chosen; none: the first).
  std::optional<NodeId> next_node_;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

}  // namespace manta::gcs
