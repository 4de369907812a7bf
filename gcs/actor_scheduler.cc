#include "gcs/actor_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/placement_group_resources.h"
#include "common/utf8.h"

namespace manta::gcs {
namespace {

// ResourceSet::Contains against a reported map, without building a set from
// it: a decision looks at every node, and 2,000 nodes made the conversion the
// GCS's main cost while actors were created.
bool Holds(const google::protobuf::Map<std::string, double>& have, const ResourceSet& demand) {
  for (const auto& [name, need] : demand.entries()) {
    auto it = have.find(name);
    if (it == have.end()) return false;  // a set holds no zero entries: need > 0
    auto q = Quantity::FromDouble(it->second);
    if (!q.ok() || *q < need) return false;
  }
  return true;
}

}  // namespace

ActorScheduler::ActorScheduler(ResourceView resources, RayletClientPool* raylets, CoreWorkerClientPool* workers,
                               RunAfter run_after, ActorSchedulerOptions options)
    : resources_(std::move(resources)),
      raylets_(raylets),
      workers_(workers),
      run_after_(std::move(run_after)),
      options_(options) {}

void ActorScheduler::OnNodeAdded(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(info.node_id());
  if (!id.ok()) return;
  auto total = ResourceSet::FromPairs(info.resources_total());
  nodes_[*id] = Node{info, total.ok() ? *total : ResourceSet()};
  std::vector<ActorId> waiting;
  for (auto& [actor, a] : attempts_) {
    if (a.phase == Attempt::kWaiting) waiting.push_back(actor);
  }
  for (const ActorId& actor : waiting) {
    auto it = attempts_.find(actor);
    if (it == attempts_.end()) continue;
    it->second.backoff = absl::ZeroDuration();
    TrySchedule(actor);
  }
}

void ActorScheduler::OnNodeDraining(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(info.node_id());
  if (!id.ok()) return;
  if (auto it = nodes_.find(*id); it != nodes_.end()) it->second.info = info;
}

void ActorScheduler::OnNodeDead(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  if (nodes_.erase(node) == 0) return;
  raylets_->Forget(node);
  std::vector<ActorId> leasing, pushing;
  for (auto& [actor, a] : attempts_) {
    if (a.node != node) continue;
    if (a.phase == Attempt::kLeasing) leasing.push_back(actor);
    if (a.phase == Attempt::kPushing) pushing.push_back(actor);
  }
  for (const ActorId& actor : leasing) {
    // The lease reply, if any, now carries a stale generation.
    attempts_.at(actor).generation = next_generation_++;
    TrySchedule(actor);
  }
  for (const ActorId& actor : pushing) {
    auto it = attempts_.find(actor);
    if (it == attempts_.end()) continue;
    ActorCreationResult r;
    r.outcome = ActorCreationResult::kWorkerDied;
    r.node = node;
    r.worker_address = it->second.worker;
    r.message = "the node died while the actor's constructor ran";
    workers_->Forget(it->second.worker.worker_id());
    Complete(actor, std::move(r));
  }
}

void ActorScheduler::OnResourcesChanged(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<ActorId> retry;
  auto n = nodes_.find(node);
  for (auto& [actor, a] : attempts_) {
    if (a.phase != Attempt::kWaiting) continue;
    // A node's total grows when a placement group commits a bundle on it.
    bool now_feasible = a.infeasible && n != nodes_.end() && Fits(n->first, n->second, a);
    if (now_feasible || (!a.infeasible && a.refused.contains(node) && AvailableFits(node, a.demand))) {
      retry.push_back(actor);
    }
  }
  for (const ActorId& actor : retry) {
    auto it = attempts_.find(actor);
    if (it == attempts_.end()) continue;
    it->second.refused.erase(node);
    TrySchedule(actor);
  }
}

void ActorScheduler::Schedule(const ActorId& actor, const rpc::TaskSpec& spec, Callback done) {
  MANTA_CHECK_THREAD(thread_);
  Cancel(actor);
  Attempt& a = attempts_[actor];
  a.spec = spec;
  a.done = std::move(done);
  a.generation = next_generation_++;
  auto demand = ResourceSet::FromPairs(spec.resources());
  if (!demand.ok()) {
    ActorCreationResult r;
    r.outcome = ActorCreationResult::kInvalid;
    r.message = std::string(demand.status().message());
    Complete(actor, std::move(r));
    return;
  }
  a.demand = *demand;
  if (!spec.placement_group_id().empty()) {
    auto group = PlacementGroupId::FromBinary(spec.placement_group_id());
    if (!group.ok()) {
      ActorCreationResult r;
      r.outcome = ActorCreationResult::kInvalid;
      r.message = "placement_group_id: " + std::string(group.status().message());
      Complete(actor, std::move(r));
      return;
    }
    a.demand = pg::BundleDemand(a.demand, *group, spec.bundle_index());
  }
  TrySchedule(actor);
}

void ActorScheduler::Cancel(const ActorId& actor) {
  MANTA_CHECK_THREAD(thread_);
  auto it = attempts_.find(actor);
  if (it == attempts_.end()) return;
  Attempt a = std::move(it->second);
  attempts_.erase(it);
  if (a.phase == Attempt::kPushing) {
    StopWorker(a.worker);
    ReturnLease(a.node, a.lease, a.worker.worker_id(), /*disconnect=*/true);
  }
  // kLeasing: a grant that arrives later finds no attempt and is returned.
}

bool ActorScheduler::Fits(const NodeId& id, const Node& node, const Attempt& a) const {
  if (node.info.draining()) return false;
  // A hard node affinity: that node only.
  const rpc::SchedulingStrategy& strategy = a.spec.scheduling_strategy();
  if (strategy.kind() == rpc::SchedulingStrategy::NODE_AFFINITY && !strategy.soft() &&
      strategy.node_id() != id.Binary()) {
    return false;
  }
  for (const auto& [key, value] : a.spec.label_selector()) {
    auto it = node.info.labels().find(key);
    if (it == node.info.labels().end() || it->second != value) return false;
  }
  // Reported totals include the node's committed placement-group bundles.
  const rpc::NodeResources* r = resources_(id);
  if (r != nullptr && !r->total().empty()) return Holds(r->total(), a.demand);
  return node.total.Contains(a.demand);
}

bool ActorScheduler::AvailableFits(const NodeId& node, const ResourceSet& demand) const {
  const rpc::NodeResources* r = resources_(node);
  if (r == nullptr) {
    auto it = nodes_.find(node);
    return it != nodes_.end() && it->second.total.Contains(demand);
  }
  return Holds(r->available(), demand);
}

std::optional<NodeId> ActorScheduler::FreeNode(const Attempt& a) {
  // A soft node affinity: that node when it has room now.
  const rpc::SchedulingStrategy& strategy = a.spec.scheduling_strategy();
  if (strategy.kind() == rpc::SchedulingStrategy::NODE_AFFINITY) {
    auto id = NodeId::FromBinary(strategy.node_id());
    auto it = id.ok() ? nodes_.find(*id) : nodes_.end();
    if (it != nodes_.end() && Fits(it->first, it->second, a) && !a.refused.contains(it->first) &&
        AvailableFits(it->first, a.demand)) {
      return it->first;
    }
  }
  // The first node with room now, going round from the one after the last
  // chosen: successive actors spread over equally good nodes, and a cluster
  // with room anywhere costs a step or two, not a scan of every node.
  auto start = next_node_ ? nodes_.lower_bound(*next_node_) : nodes_.begin();
  auto it = start;
  for (size_t seen = 0; seen < nodes_.size(); ++seen, ++it) {
    if (it == nodes_.end()) it = nodes_.begin();
    if (a.refused.contains(it->first) || !Fits(it->first, it->second, a) || !AvailableFits(it->first, a.demand)) {
      continue;
    }
    auto after = std::next(it);
    next_node_ = after == nodes_.end() ? std::nullopt : std::optional<NodeId>(after->first);
    return it->first;
  }
  return std::nullopt;
}

void ActorScheduler::TrySchedule(const ActorId& actor) {
  auto it = attempts_.find(actor);
  if (it == attempts_.end()) return;
  Attempt& a = it->second;
  a.retry.reset();
  a.phase = Attempt::kWaiting;
  if (std::optional<NodeId> node = FreeNode(a)) {
    a.infeasible = false;
    return Lease(actor, a, *node);
  }
  // No node has room by its last report.
  std::vector<NodeId> untried;
  a.infeasible = true;
  for (const auto& [id, node] : nodes_) {
    if (!Fits(id, node, a)) continue;
    a.infeasible = false;
    if (!a.refused.contains(id)) untried.push_back(id);
  }
  if (a.infeasible) return;  // OnNodeAdded tries again
  // A report may be stale: a node that looks full is still worth asking
  // before backing off.
  if (untried.empty()) {
    a.backoff =
        a.backoff == absl::ZeroDuration() ? options_.min_backoff : std::min(a.backoff * 2, options_.max_backoff);
    uint64_t generation = a.generation;
    a.retry = run_after_(a.backoff, [this, actor, generation] {
      auto it = attempts_.find(actor);
      if (it == attempts_.end() || it->second.generation != generation) return;
      it->second.refused.clear();
      TrySchedule(actor);
    });
    return;
  }
  Lease(actor, a, untried[rotation_++ % untried.size()]);
}

void ActorScheduler::Lease(const ActorId& actor, Attempt& a, const NodeId& node) {
  a.phase = Attempt::kLeasing;
  a.node = node;
  a.lease = LeaseId::FromRandom();
  a.generation = next_generation_++;
  rpc::RequestWorkerLeaseRequest request;
  request.set_lease_id(a.lease.Binary());
  *request.mutable_spec() = a.spec;
  request.mutable_spec()->clear_args();  // not needed to choose a worker
  request.set_grant_or_reject(true);
  request.set_reply_with_resources(apply_ != nullptr);
  raylets_->RequestWorkerLease(node, RayletAddress(nodes_.at(node).info), request,
                               [this, actor, generation = a.generation, node, lease = a.lease](
                                   const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) {
                                 rpc::NodeResources view;
                                 const bool has_view = s.ok() && reply.has_resources() && apply_ != nullptr;
                                 if (has_view) view.Swap(reply.mutable_resources());
                                 OnLeaseReply(actor, generation, node, lease, s, std::move(reply));
                                 // After the attempt moved on: taking the view may retry others here.
                                 if (has_view) apply_(view);
                               });
}

void ActorScheduler::OnLeaseReply(const ActorId& actor, uint64_t generation, const NodeId& node, const LeaseId& lease,
                                  const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) {
  MANTA_CHECK_THREAD(thread_);
  bool granted = s.ok() && reply.outcome() == rpc::RequestWorkerLeaseReply::GRANTED;
  auto it = attempts_.find(actor);
  if (it == attempts_.end() || it->second.generation != generation || it->second.phase != Attempt::kLeasing) {
    if (granted && nodes_.count(node) > 0) {
      ReturnLease(node, lease, reply.worker_address().worker_id(), /*disconnect=*/false);
    }
    return;
  }
  Attempt& a = it->second;
  if (granted) {
    rpc::Address worker = reply.worker_address();
    if (worker.worker_id().size() != WorkerId::kSize || worker.port() <= 0 || worker.port() > 65535 ||
        worker.ip().empty()) {
      Logger("gcs")->warn("raylet node_id={} granted a lease with a malformed worker address", node.Hex());
      ReturnLease(node, lease, worker.worker_id(), /*disconnect=*/true);
      a.refused.insert(node);
      TrySchedule(actor);
      return;
    }
    if (worker.node_id().empty()) worker.set_node_id(node.Binary());
    a.phase = Attempt::kPushing;
    a.worker = worker;
    a.generation = next_generation_++;
    rpc::PushTaskRequest push;
    *push.mutable_spec() = a.spec;
    push.set_intended_worker_id(worker.worker_id());
    *push.mutable_tpu_chip_ids() = reply.tpu_chip_ids();
    push.set_tpu_chips_per_host(reply.tpu_chips_per_host());
    workers_->PushTask(
        worker, push, options_.creation_timeout,
        [this, actor, generation = a.generation, pid = reply.worker_pid()](
            const absl::Status& s, rpc::PushTaskReply&& r) { OnPushReply(actor, generation, pid, s, std::move(r)); });
    return;
  }
  if (s.ok() && reply.outcome() == rpc::RequestWorkerLeaseReply::INVALID) {
    ActorCreationResult r;
    r.outcome = ActorCreationResult::kInvalid;
    r.node = node;
    r.message = "the raylet refused the actor's demand: " + reply.message().substr(0, 1024);
    Complete(actor, std::move(r));
    return;
  }
  if (!s.ok()) {
    Logger("gcs")->debug("lease for actor_id={} on node_id={} failed: {}", actor.Hex(), node.Hex(), s.ToString());
    // The raylet may have granted it with a reply that was lost: return it.
    ReturnLease(node, lease, /*worker_id=*/"", /*disconnect=*/false);
  }
  a.refused.insert(node);
  TrySchedule(actor);
}

void ActorScheduler::OnPushReply(const ActorId& actor, uint64_t generation, int32_t pid, const absl::Status& s,
                                 rpc::PushTaskReply&& reply) {
  MANTA_CHECK_THREAD(thread_);
  auto it = attempts_.find(actor);
  if (it == attempts_.end() || it->second.generation != generation || it->second.phase != Attempt::kPushing) {
    return;  // cancelled: the worker was already stopped and returned
  }
  Attempt& a = it->second;
  ActorCreationResult r;
  r.node = a.node;
  r.lease = a.lease;
  r.worker_address = a.worker;
  r.pid = pid;
  if (!s.ok()) {
    r.outcome = ActorCreationResult::kWorkerDied;
    r.message = absl::StrCat("the worker process died while the actor's constructor ran (", s.message(), ")");
    ReturnLease(a.node, a.lease, a.worker.worker_id(), /*disconnect=*/true);
    workers_->Forget(a.worker.worker_id());
  } else if (reply.error().type() != rpc::ErrorInfo::NONE) {
    r.outcome = ActorCreationResult::kConstructorFailed;
    r.error = reply.error();
    r.error.set_message(std::string(Utf8Prefix(r.error.message(), 64 * 1024)));
    r.message = "the actor's constructor failed: " + r.error.message();
    StopWorker(a.worker);
    ReturnLease(a.node, a.lease, a.worker.worker_id(), /*disconnect=*/true);
  } else {
    r.outcome = ActorCreationResult::kCreated;
  }
  Complete(actor, std::move(r));
}

void ActorScheduler::Complete(const ActorId& actor, ActorCreationResult result) {
  auto it = attempts_.find(actor);
  if (it == attempts_.end()) return;
  Callback done = std::move(it->second.done);
  attempts_.erase(it);
  if (done) done(std::move(result));
}

void ActorScheduler::ReturnLease(const NodeId& node, const LeaseId& lease, const std::string& worker_id,
                                 bool disconnect) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;  // a dead node's leases are gone with it
  rpc::ReturnWorkerRequest request;
  request.set_lease_id(lease.Binary());
  request.set_worker_id(worker_id);
  request.set_disconnect_worker(disconnect);
  raylets_->ReturnWorker(node, RayletAddress(it->second.info), request,
                         [node](const absl::Status& s, rpc::ReturnWorkerReply&&) {
                           if (!s.ok()) {
                             Logger("gcs")->warn("ReturnWorker to node_id={} failed: {}", node.Hex(), s.ToString());
                           }
                         });
}

void ActorScheduler::StopWorker(const rpc::Address& worker) {
  rpc::ExitRequest request;
  request.set_force(true);
  std::string id = worker.worker_id();
  workers_->Exit(worker, request, [this, id](const absl::Status&, rpc::ExitReply&&) { workers_->Forget(id); });
}

void ActorScheduler::AppendDemands(rpc::GetClusterResourcesReply* reply) const {
  MANTA_CHECK_THREAD(thread_);
  std::map<std::map<std::string, double>, std::pair<int64_t, int64_t>> counts;  // ready, infeasible
  for (const auto& [actor, a] : attempts_) {
    if (a.phase != Attempt::kWaiting || a.demand.empty()) continue;
    auto& c = counts[a.demand.ToMap()];
    (a.infeasible ? c.second : c.first) += 1;
  }
  for (const auto& [shape, c] : counts) {
    rpc::ResourceDemand* d = nullptr;
    for (auto& existing : *reply->mutable_demands()) {
      if (std::map<std::string, double>(existing.shape().begin(), existing.shape().end()) == shape) d = &existing;
    }
    if (d == nullptr) {
      d = reply->add_demands();
      d->mutable_shape()->insert(shape.begin(), shape.end());
    }
    d->set_num_ready_requests_queued(d->num_ready_requests_queued() + c.first);
    d->set_num_infeasible_requests_queued(d->num_infeasible_requests_queued() + c.second);
  }
}

const rpc::NodeInfo* ActorScheduler::GetNode(const NodeId& node) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : &it->second.info;
}

std::vector<rpc::NodeInfo> ActorScheduler::AliveNodes() const {
  MANTA_CHECK_THREAD(thread_);
  std::vector<rpc::NodeInfo> out;
  for (const auto& [id, node] : nodes_) out.push_back(node.info);
  return out;
}

}  // namespace manta::gcs
