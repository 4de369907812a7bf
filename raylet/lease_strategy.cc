// The scheduling strategies of a lease (rpc::SchedulingStrategy), decided
// before the default policy (LeaseManager::Decide):
//  * NODE_AFFINITY: hard leases run only on the named node: granted or
//    queued there (never spilled), spilled to it from elsewhere, and
//    answered INFEASIBLE when it is dead or unknown or can never hold the
//    demand. Soft ones go there when it has room now, else as DEFAULT.
//  * SPREAD: round robin over this node and the others, starting after the
//    last pick, taking the first where the demand fits now; as DEFAULT when
//    none has room. A spilled (grant_or_reject) lease is decided as
//    DEFAULT, so it is not passed on again.
#include "absl/strings/str_cat.h"
#include "raylet/lease_manager.h"

namespace manta::raylet {

using Reply = rpc::RequestWorkerLeaseReply;

std::optional<LeaseManager::Decision> LeaseManager::DecideByStrategy(Lease& lease) {
  switch (lease.spec.scheduling_strategy().kind()) {
    case rpc::SchedulingStrategy::NODE_AFFINITY:
      return DecideAffinity(lease);
    case rpc::SchedulingStrategy::SPREAD:
      return DecideSpread(lease);
    default:
      return std::nullopt;
  }
}

bool LeaseManager::TryGrantHere(Lease& lease) {
  auto a = local_->Allocate(lease.demand);
  if (!a) return false;
  queue_.Remove(lease.queued);
  lease.queued = {};
  lease.allocation = std::move(*a);
  lease.state = State::kWaitingForWorker;
  if (lease.spec.type() != rpc::TaskSpec::ACTOR_CREATION_TASK) ++running_by_worker_[WorkerKey(lease.spec)];
  return true;
}

std::optional<LeaseManager::Decision> LeaseManager::DecideAffinity(Lease& lease) {
  const rpc::SchedulingStrategy& s = lease.spec.scheduling_strategy();
  auto node = NodeId::FromBinary(s.node_id());
  if (!node.ok()) {
    Finish(lease, Reply::INVALID, "NODE_AFFINITY: malformed node id");
    return Decision::kReplied;
  }
  if (*node == options_.node_id) {
    const bool ever = local_->CanEverFit(lease.demand) && lease.selector.Matches(options_.labels);
    if (ever && TryGrantHere(lease)) return Decision::kGrant;
    if (s.soft()) return std::nullopt;
    if (!ever) {
      Finish(lease, Reply::INFEASIBLE,
             absl::StrCat("NODE_AFFINITY: node ", node->Hex(), " can never hold ", lease.demand.DebugString()));
      return Decision::kReplied;
    }
    return Decision::kBlocked;  // until room is freed here
  }
  if (lease.grant_or_reject) return std::nullopt;  // sent here by a spill: decided as DEFAULT
  auto it = view_->nodes().find(*node);
  const bool alive = it != view_->nodes().end() && !it->second.draining;
  if (s.soft()) {
    if (alive && it->second.available.Contains(lease.demand) && lease.selector.Matches(it->second.labels)) {
      return Spill(lease, it->second);
    }
    return std::nullopt;
  }
  if (!alive) {
    Finish(lease, Reply::INFEASIBLE,
           absl::StrCat("NODE_AFFINITY: node ", node->Hex(), " is dead, draining or unknown"));
    return Decision::kReplied;
  }
  if (!it->second.total.Contains(lease.demand) || !lease.selector.Matches(it->second.labels)) {
    Finish(lease, Reply::INFEASIBLE,
           absl::StrCat("NODE_AFFINITY: node ", node->Hex(), " can never hold ", lease.demand.DebugString()));
    return Decision::kReplied;
  }
  return Spill(lease, it->second);
}

std::optional<LeaseManager::Decision> LeaseManager::DecideSpread(Lease& lease) {
  if (lease.grant_or_reject) return std::nullopt;
  auto grant_here = [&] {
    const bool here = local_->CanFitNow(lease.demand) && lease.selector.Matches(options_.labels);
    return here && TryGrantHere(lease);
  };
  if (!MayHaveRoomElsewhere(lease)) {
    // No other node had room for the shape, and the view has not changed.
    if (!grant_here()) return std::nullopt;
    spread_cursor_ = 1;
    return Decision::kGrant;
  }
  // Candidates in a fixed order: this node, then the others by id.
  std::vector<const ClusterView::Node*> others;
  for (const auto& [id, n] : view_->nodes()) others.push_back(&n);
  const size_t count = others.size() + 1;
  for (size_t step = 0; step < count; ++step) {
    const size_t i = (spread_cursor_ + step) % count;
    if (i == 0) {
      if (grant_here()) {
        spread_cursor_ = i + 1;
        return Decision::kGrant;
      }
      continue;
    }
    const ClusterView::Node& n = *others[i - 1];
    if (n.draining || !n.available.Contains(lease.demand) || !lease.selector.Matches(n.labels)) continue;
    spread_cursor_ = i + 1;
    return Spill(lease, n);
  }
  return std::nullopt;
}

}  // namespace manta::raylet
