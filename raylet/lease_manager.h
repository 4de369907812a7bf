// LeaseManager: grants worker leases on this node, spills them to a better
// node, queues them, or reports them infeasible.
//
// A lease whose spec names a placement group asks for the group's resources
// (pg::BundleDemand of its plain demand), so it is granted, spilled, queued
// or held infeasible by the same rules as any other.
//
// Owns every lease this raylet knows, by client-chosen lease id: queued ones
// (waiting for local resources, or for room on another node), infeasible
// ones (no node could ever hold them), granted ones waiting for a worker,
// and granted ones holding resources and a worker until ReturnWorker, the
// worker's death, or its caller's (EndLeasesOfCaller). A held
// RequestWorkerLease call is answered when its lease leaves the queue.
//
// The queue (LeaseQueue) is one FIFO per shape: leases with the same demand
// (placement-group bundle included), label selector, scheduling strategy,
// worker (job, program and arguments, which fix its environment) and
// request flags get the same decision, so only each shape's head is
// decided, heads in the order their leases arrived (which is the order of
// one FIFO of every lease: the oldest waiting lease that can run gets the
// resources first, and a shape that cannot run holds up no other). A shape
// that must wait is not decided again until something it could use
// changes: resources it demands freed here while it fits (a return, a
// cancel, a worker's death), this node's totals (bundles committed or
// returned), the cluster view (a node added, changed or gone), or a drain.
// Another node is searched for room (ClusterView::PickNode) only when the
// view changed since the shape last found none. A new lease of a waiting
// shape costs O(1) (its key aside), a release O(shapes it wakes).
//
// Draining (StartDraining): no lease is granted here any more. A new or
// queued lease is refused (REJECTED for grant_or_reject), or spilled to a
// node that is not draining and has room for it now; while none has room but
// one could ever hold it, it waits here and is spilled when one has; when no
// other node could ever hold it, it is infeasible (INFEASIBLE with
// fail_if_infeasible). Granted leases keep their workers.
//
// Every handler is idempotent by lease id: a retried RequestWorkerLease
// joins its lease (a granted one is answered with the same grant), and one
// for a lease that has ended (answered, returned, cancelled, its worker
// dead) gets the lease's last answer again (CANCELLED once it was granted
// and returned) instead of a second lease. The last kMaxEndedLeases ended
// leases are remembered. A request from a caller gone is answered
// CANCELLED, and not remembered.
//
// Invariants: a lease holds resources from the moment it is chosen for this
// node until it is returned, cancelled, fails to get a worker, or its worker
// or caller dies; a worker serves at most one lease. Thread: the raylet's loop thread;
// no locks. Compiles without gRPC.
//
//   LeaseManager leases(options, &local, &view, &pool);
//   leases.HandleRequestWorkerLease(request, &reply, done);   // maybe held
//   leases.OnClusterChanged();                                 // view updated
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/id.h"
#include "common/label_selector.h"
#include "common/recent_set.h"
#include "common/rpc/done.h"
#include "common/thread_checker.h"
#include "proto/node_manager.pb.h"
#include "raylet/cluster_view.h"
#include "raylet/lease_queue.h"
#include "raylet/local_resource_manager.h"
#include "raylet/worker_pool_interface.h"

namespace manta::raylet {

struct LeaseManagerOptions {
  NodeId node_id;
  std::string node_ip;
  std::map<std::string, std::string> labels;  // this node's
};

class LeaseManager {
 public:
  static constexpr size_t kMaxEndedLeases = 10000;

  LeaseManager(LeaseManagerOptions options, LocalResourceManager* local, ClusterView* view, WorkerPoolInterface* pool);
  ~LeaseManager();

  // Replies (status OK) GRANTED, SPILLBACK, REJECTED, INFEASIBLE (only with
  // fail_if_infeasible), INVALID or WORKER_START_FAILED, or holds the call
  // until one of those or CANCELLED. A retried lease id joins the existing
  // lease: a granted one is answered again with the same grant; an ended one
  // with its last answer.
  void HandleRequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request, rpc::RequestWorkerLeaseReply* reply,
                                rpc::Done done);
  // Idempotent. InvalidArgument when worker_id names another worker.
  void HandleReturnWorker(const rpc::ReturnWorkerRequest& request, rpc::ReturnWorkerReply* reply, rpc::Done done);
  // A queued lease, or one still waiting for its worker, is answered
  // CANCELLED and its resources freed; a granted one is left alone
  // (cancelled = false). Asked again, cancelled is true again.
  void HandleCancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request, rpc::CancelWorkerLeaseReply* reply,
                               rpc::Done done);
  // Cancels the job's waiting leases and stops its workers, except those
  // running detached actors (their lease's spec says detached).
  void HandleKillJobWorkers(const rpc::KillJobWorkersRequest& request, rpc::KillJobWorkersReply* reply, rpc::Done done);

  // Ends the leases of `group` that run or wait in bundles being returned,
  // before the bundles' resources go: a granted lease's worker is
  // disconnected (stopped) and the lease forgotten; a queued one, or one
  // waiting for its worker, is answered CANCELLED (`why`). A lease is in a
  // returned bundle when `in_returned(spec.bundle_index)` holds; a lease in
  // "any bundle" (-1) when its allocation was taken from a bundle for which
  // `in_returned` holds, or, while it holds none, when `in_returned(-1)`
  // does (the caller returns every bundle of the group held here).
  // Infeasible leases (waiting for the group to land somewhere) stay. Does
  // not schedule: call OnLocalResourcesChanged() once the bundles are gone.
  void EndLeasesInGroup(const PlacementGroupId& group, const std::function<bool(int bundle)>& in_returned,
                        const std::string& why);
  // The caller of leases is gone (a worker, or every worker of a node): its
  // normal-task leases end as in EndLeasesInGroup, their tasks having no
  // owner left. Actor creations, which the GCS asks for, stay; so do a
  // driver's leases on its node's death (it may live on). A request
  // of a caller gone (one of the last kDeadCallers) that arrives later is
  // answered CANCELLED. Neither schedules (the caller does, once it has
  // applied what it learned): each returns whether a lease ended.
  bool EndLeasesOfCaller(const WorkerId& worker);
  bool EndLeasesOfCallerNode(const NodeId& node);
  // Answers every lease not yet granted with CANCELLED (`why`): no call is
  // left held. For shutdown.
  void CancelAll(const std::string& why);
  // This node drains (`reason` goes into refusals): from now on nothing is
  // granted here; waiting leases are re-examined at once. Idempotent; the
  // latest reason is kept.
  void StartDraining(const std::string& reason);
  bool draining() const { return draining_; }
  // A worker process exited: frees the lease it held. Returns whether it
  // held one.
  bool OnWorkerExit(const WorkerId& worker);
  // The cluster view changed: queued and infeasible leases are re-examined.
  // (A change of view_->version() seen by any later event does the same.)
  void OnClusterChanged();
  // This node's total or available resources changed other than through a
  // lease (bundles committed or returned): queued and infeasible leases are
  // re-examined.
  void OnLocalResourcesChanged();

  // Asked (one call in flight per group) when a lease in a placement group
  // finds no node holding that group's resources, and again on each
  // RecheckGroups(): `check(group, answer)` calls answer(false) if the group
  // does not exist or was removed, and the group's waiting leases are then
  // answered INVALID.
  using GroupCheck = std::function<void(const PlacementGroupId&, std::function<void(bool exists)>)>;
  void SetGroupCheck(GroupCheck fn) { group_check_ = std::move(fn); }
  // Asks again about every group that infeasible leases wait for (a group
  // removed before it was ever placed changes no resources). For a timer.
  void RecheckGroups();

  // Called when a lease is granted, with its spec and worker.
  void SetGrantListener(std::function<void(const rpc::TaskSpec&, const LeasedWorker&)> fn) {
    on_grant_ = std::move(fn);
  }

  // Waiting demand by resource shape, for ReportResources.
  std::vector<rpc::ResourceDemand> Demands() const;
  // Called whenever Demands() changes.
  void SetDemandsListener(std::function<void()> fn) { on_demands_ = std::move(fn); }

  size_t num_leases() const { return leases_.size(); }
  // Queued and infeasible leases.
  size_t num_queued() const { return queue_.size(); }
  size_t num_shapes() const { return queue_.num_shapes(); }
  // Leases holding this node's resources: granted, or waiting for a worker.
  size_t num_granted() const { return leases_.size() - queue_.size(); }
  // How many times a shape's head lease has been decided (for tests and
  // benchmarks: a shape that waits is not decided again until woken).
  uint64_t num_decisions() const { return decisions_; }

 private:
  // kQueued: in queue_ (its shape's verdict says whether infeasible).
  enum class State { kQueued, kWaitingForWorker, kGranted };
  struct Waiter {
    rpc::RequestWorkerLeaseReply* reply;
    rpc::Done done;
  };
  struct Lease {
    std::string id;
    uint64_t seq = 0;    // unique per lease object: tells a reused id apart
    rpc::TaskSpec spec;  // without args
    ResourceSet demand;
    LabelSelector selector;
    bool grant_or_reject = false;
    bool fail_if_infeasible = false;
    State state = State::kQueued;
    LeaseQueue::Handle queued;  // while kQueued
    Allocation allocation;
    LeasedWorker worker;
    std::vector<Waiter> waiters;
  };
  // What became of a queued shape's head: it waits for room (kBlocked) or
  // for a node that could ever hold it (kInfeasible), and its shape with
  // it; or it left the queue.
  enum class Decision { kBlocked, kInfeasible, kGrant, kReplied };

  void Schedule();
  void SchedulePass();
  // Decides a shape's head lease.
  Decision Decide(Lease& lease);
  Decision DecideWhileDraining(Lease& lease);
  // The lease's scheduling strategy (lease_strategy.cc): its decision, or
  // nullopt when the default policy decides (DEFAULT, or a soft affinity
  // or SPREAD with nowhere better now).
  std::optional<Decision> DecideByStrategy(Lease& lease);
  std::optional<Decision> DecideAffinity(Lease& lease);
  std::optional<Decision> DecideSpread(Lease& lease);
  // Grants `lease` here when its demand fits now.
  bool TryGrantHere(Lease& lease);
  // Whether another node may have room now for the lease's shape: false
  // when it found none at the view's current version.
  bool MayHaveRoomElsewhere(const Lease& lease) const;
  // The node with room now for a queued lease (PickNode), unless its shape
  // found none at the view's current version; null when none.
  const ClusterView::Node* RoomElsewhere(Lease& lease);
  // Answers the lease SPILLBACK to `node`, counting it in the view.
  Decision Spill(Lease& lease, const ClusterView::Node& node);
  // Keeps a lease that no node can ever hold (or answers INFEASIBLE).
  Decision KeepInfeasible(Lease& lease, const std::string& why);
  // Whether a lease waits as infeasible.
  static bool Infeasible(const Lease& lease) {
    return lease.state == State::kQueued && lease.queued.shape->verdict() == LeaseQueue::Verdict::kInfeasible;
  }
  void StartGrant(Lease& lease);
  void OnWorkerPopped(const std::string& id, uint64_t seq, absl::StatusOr<LeasedWorker> worker);
  void FillGrant(const Lease& lease, rpc::RequestWorkerLeaseReply* reply) const;
  // Answers every waiter with `outcome` and forgets the lease (freeing its
  // resources and dequeuing it).
  void Finish(Lease& lease, rpc::RequestWorkerLeaseReply::Outcome outcome, const std::string& message,
              const rpc::Address* retry_at = nullptr, bool cancelled = false);
  // Forgets the lease, freeing what it holds; `last` is what a retried
  // request for it is answered (CANCELLED when null).
  void Erase(const std::string& id, const rpc::RequestWorkerLeaseReply* last = nullptr, bool cancelled = false);
  // Ends each of `ids` (in leases_): a granted one's worker is stopped and
  // the lease forgotten, any other answered CANCELLED (`why`).
  void EndLeases(const std::vector<std::string>& ids, const std::string& why);
  // Whether a lease of `spec` has no caller left: not an actor creation, and
  // its caller is among dead_callers_, or (not a driver) on a node among
  // dead_caller_nodes_.
  bool CallerGone(const rpc::TaskSpec& spec) const;
  // Ends every lease whose caller is gone; whether any ended. Those of
  // callers gone before ended then, so only the newest one's are found.
  bool EndLeasesOfGoneCallers(const std::string& why);
  // The lease is infeasible and in a group: ask whether the group exists.
  void CheckGroup(const Lease& lease);
  void OnGroupChecked(const PlacementGroupId& group, bool exists);
  void PrestartForBacklog();
  void NotifyDemandsIfChanged();

  const LeaseManagerOptions options_;
  LocalResourceManager* const local_;
  ClusterView* const view_;
  // SPREAD's round robin: where the next SPREAD lease starts looking (an
  // index into this node followed by the view's nodes).
  size_t spread_cursor_ = 0;
  WorkerPoolInterface* const pool_;

  absl::flat_hash_map<std::string, std::unique_ptr<Lease>> leases_;
  // Queued and infeasible leases, by shape. After Schedule() no shape is
  // ready: each waits (blocked or infeasible) until woken.
  LeaseQueue queue_;
  // The view's version when queued shapes were last woken for it.
  uint64_t woken_at_view_version_ = 0;
  uint64_t decisions_ = 0;
  // Normal-task leases holding resources here, by WorkerKey.
  absl::flat_hash_map<std::string, int> running_by_worker_;
  absl::flat_hash_map<WorkerId, std::string> lease_of_worker_;  // granted leases
  // Callers (worker ids) and callers' nodes (node ids) whose leases ended
  // with them, the latest kDeadCallers of each.
  static constexpr size_t kDeadCallers = 4096;
  RecentSet dead_callers_{kDeadCallers};
  RecentSet dead_caller_nodes_{kDeadCallers};
  // Leases that have ended, with the answer a retried request gets, and
  // whether a CancelWorkerLease ended it.
  struct Ended {
    rpc::RequestWorkerLeaseReply reply;
    bool cancelled = false;
  };
  absl::flat_hash_map<std::string, Ended> ended_;
  std::deque<std::string> ended_order_;  // oldest first
  uint64_t next_seq_ = 1;
  bool draining_ = false;
  std::string drain_reason_;
  bool scheduling_ = false;
  bool schedule_again_ = false;
  std::function<void()> on_demands_;
  std::function<void(const rpc::TaskSpec&, const LeasedWorker&)> on_grant_;
  GroupCheck group_check_;
  absl::flat_hash_set<PlacementGroupId> groups_checking_;  // calls in flight
  // The loop thread, which every handler and callback runs on.
  ThreadChecker thread_;
};

}  // namespace manta::raylet
