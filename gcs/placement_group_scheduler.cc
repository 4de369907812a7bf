#include "gcs/placement_group_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/placement_choice.h"
#include "common/placement_group_resources.h"

namespace manta::gcs {
namespace {

std::string Describe(const rpc::Bundle& b) {
  auto r = ResourceSet::FromPairs(b.resources());
  std::string s = absl::StrCat("bundle ", b.index(), " ", r.ok() ? r->DebugString() : "{?}");
  if (!b.label_selector().empty()) {
    std::map<std::string, std::string> m(b.label_selector().begin(), b.label_selector().end());
    s += " with labels {";
    bool first = true;
    for (const auto& [k, v] : m) {
      absl::StrAppend(&s, first ? "" : ", ", k, ": ", v);
      first = false;
    }
    s += "}";
  }
  return s;
}

}  // namespace

absl::StatusOr<std::pair<ResourceSet, LabelSelector>> ParseBundle(const rpc::Bundle& bundle) {
  auto resources = ResourceSet::FromPairs(bundle.resources());
  if (!resources.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bundle ", bundle.index(), ": ", resources.status().message()));
  }
  if (resources->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle ", bundle.index(), " is empty: a bundle must reserve ", "at least one resource"));
  }
  for (const auto& [name, q] : resources->entries()) {
    if (pg::ParseGroupResource(name)) {
      return absl::InvalidArgumentError(absl::StrCat("bundle ", bundle.index(), ": '", name,
                                                     "' is a placement-group resource; a bundle reserves plain ones"));
    }
  }
  auto selector = LabelSelector::Parse(bundle.label_selector());
  if (!selector.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bundle ", bundle.index(), ": ", selector.status().message()));
  }
  return std::make_pair(std::move(*resources), std::move(*selector));
}

PlacementGroupScheduler::PlacementGroupScheduler(ResourceView view, ApplyResources apply, RayletClientPool* raylets)
    : view_(std::move(view)), apply_(std::move(apply)), raylets_(raylets) {}

void PlacementGroupScheduler::OnNodeAdded(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(info.node_id());
  if (!id.ok()) return;
  Node& n = nodes_[*id];
  n.info = info;
  n.synced = false;
  parsed_.erase(*id);
}

void PlacementGroupScheduler::MarkSynced(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  if (auto it = nodes_.find(node); it != nodes_.end()) it->second.synced = true;
}

void PlacementGroupScheduler::OnNodeDraining(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  auto id = NodeId::FromBinary(info.node_id());
  if (!id.ok()) return;
  if (auto it = nodes_.find(*id); it != nodes_.end()) it->second.info = info;
}

void PlacementGroupScheduler::OnNodeDead(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  if (nodes_.erase(node) == 0) return;
  flight_.erase(node);
  parsed_.erase(node);
  // Cancels still due from the node need not land: nothing is placed on a
  // dead node again, so none can return a later attempt's bundles.
  for (auto it = returning_.begin(); it != returning_.end();) {
    it->second.erase(node);
    if (it->second.empty()) {
      returning_.erase(it++);
    } else {
      ++it;
    }
  }
  std::vector<PlacementGroupId> affected;
  for (auto& [group, a] : attempts_) {
    if (a.by_node.count(node) > 0) affected.push_back(group);
  }
  for (const PlacementGroupId& group : affected) {
    Attempt& a = attempts_.at(group);
    a.failed = true;
    a.message = "a node chosen for the group died";
    a.reserving.erase(node);
    a.by_node.erase(node);
    if (a.outstanding.erase(node) > 0 && a.outstanding.empty()) {
      CancelOnRaylets(a);
      PlacementResult r;
      r.outcome = PlacementResult::kFailed;
      r.message = a.message;
      Finish(group, std::move(r));
    }
  }
  for (auto it = zombies_.begin(); it != zombies_.end();) {
    Attempt& a = it->second;
    a.by_node.erase(node);
    a.reserving.erase(node);
    a.outstanding.erase(node);
    if (a.outstanding.empty()) {
      CancelOnRaylets(a);
      it = zombies_.erase(it);
    } else {
      ++it;
    }
  }
}

const PlacementGroupScheduler::Parsed& PlacementGroupScheduler::Parse(const NodeId& node) const {
  const rpc::NodeResources* r = view_(node);
  Parsed& p = parsed_[node];
  int64_t version = r == nullptr ? -1 : r->version();
  if (p.valid && p.version == version) return p;
  // Only plain resources matter for placing bundles: a node's committed
  // group resources are skipped.
  auto plain = [](const google::protobuf::Map<std::string, double>& m) {
    ResourceSet out;
    for (const auto& [name, value] : m) {
      if (name.find("_group_") != std::string::npos && pg::ParseGroupResource(name).has_value()) continue;
      if (!ResourceSet::ValidateName(name).ok()) continue;
      if (auto q = Quantity::FromDouble(value); q.ok()) out.Set(name, *q);
    }
    return out;
  };
  if (r != nullptr && !r->total().empty()) {
    p.total = plain(r->total());
    p.available = plain(r->available());
  } else {
    auto it = nodes_.find(node);
    p.total = it == nodes_.end() ? ResourceSet() : plain(it->second.info.resources_total());
    p.available = p.total;
  }
  p.version = version;
  p.valid = true;
  return p;
}

ResourceSet PlacementGroupScheduler::Total(const NodeId& node) const { return Parse(node).total; }

ResourceSet PlacementGroupScheduler::Available(const NodeId& node) const {
  ResourceSet available = Parse(node).available;
  if (auto it = flight_.find(node); it != flight_.end()) {
    for (const auto& [name, q] : it->second.entries()) {
      Quantity have = available.Get(name);
      available.Set(name, q < have ? have - q : Quantity());
    }
  }
  return available;
}

namespace {

pg::Strategy ToStrategy(rpc::PlacementGroupInfo::Strategy s) {
  switch (s) {
    case rpc::PlacementGroupInfo::STRICT_PACK:
      return pg::Strategy::kStrictPack;
    case rpc::PlacementGroupInfo::SPREAD:
      return pg::Strategy::kSpread;
    case rpc::PlacementGroupInfo::PACK:
      return pg::Strategy::kPack;
    case rpc::PlacementGroupInfo::STRICT_SPREAD:
      return pg::Strategy::kStrictSpread;
    default:  // validated at creation; a record from elsewhere spreads
      return pg::Strategy::kSpread;
  }
}

}  // namespace

PlacementResult PlacementGroupScheduler::Choose(const rpc::PlacementGroupInfo& group) const {
  MANTA_CHECK_THREAD(thread_);
  PlacementResult result;
  result.outcome = PlacementResult::kNoFit;
  std::vector<pg::BundleWant> wants;
  std::vector<LabelSelector> selectors;
  absl::flat_hash_set<NodeId> used;  // nodes of bundles already placed
  std::map<int, std::string> fixed;  // same_label: the value of domains with bundles placed
  const std::string& same = group.same_label();
  auto label_of = [this, &same](const NodeId& id) -> std::string {
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return "";
    auto l = it->second.info.labels().find(same);
    return l == it->second.info.labels().end() ? "" : l->second;
  };
  for (const rpc::Bundle& b : group.bundles()) {
    if (!b.node_id().empty()) {
      if (auto n = NodeId::FromBinary(b.node_id()); n.ok()) {
        used.insert(*n);
        if (!same.empty()) fixed[b.label_domain()] = label_of(*n);
      }
      continue;
    }
    auto parsed = ParseBundle(b);
    if (!parsed.ok()) {
      result.infeasible = true;
      result.message = std::string(parsed.status().message());
      return result;
    }
    wants.push_back({b.index(), std::move(parsed->first), Describe(b), b.label_domain()});
    selectors.push_back(std::move(parsed->second));
  }
  // Synced nodes, with what each has left.
  std::vector<pg::NodeOption> nodes;
  for (const auto& [id, n] : nodes_) {
    if (!n.synced || n.info.draining()) continue;
    pg::NodeOption o{id, Total(id), Available(id), {}};
    for (const LabelSelector& s : selectors) o.matches.push_back(s.Matches(n.info.labels()));
    if (!same.empty()) o.label_value = label_of(id);
    nodes.push_back(std::move(o));
  }
  pg::Choice choice =
      same.empty() ? pg::ChoosePlacement(ToStrategy(group.strategy()), wants, std::move(nodes), used)
                   : pg::ChoosePlacementByLabel(ToStrategy(group.strategy()), wants, std::move(nodes), used, fixed);
  result.outcome = choice.placed ? PlacementResult::kCreated : PlacementResult::kNoFit;
  result.infeasible = choice.infeasible;
  result.message = std::move(choice.message);
  result.nodes = std::move(choice.nodes);
  return result;
}

void PlacementGroupScheduler::Schedule(const rpc::PlacementGroupInfo& group, Callback done,
                                       std::function<void()> prepared) {
  MANTA_CHECK_THREAD(thread_);
  auto id = PlacementGroupId::FromBinary(group.placement_group_id());
  if (!id.ok()) {
    PlacementResult r;
    r.outcome = PlacementResult::kNoFit;
    r.infeasible = true;
    r.message = "malformed placement_group_id";
    return done(std::move(r));
  }
  Cancel(*id);
  if (auto r = returning_.find(*id); r != returning_.end()) {
    // A late cancel of the earlier attempt would return this one's bundles
    // (the same group and indices): place again once they are all back.
    PlacementResult wait;
    wait.outcome = PlacementResult::kFailed;
    wait.message = "bundles of an earlier attempt are still being returned";
    return done(std::move(wait));
  }
  PlacementResult choice = Choose(group);
  if (choice.outcome != PlacementResult::kCreated) return done(std::move(choice));
  Attempt& a = attempts_[*id];
  a.generation = next_generation_++;
  a.group = *id;
  a.done = std::move(done);
  a.prepared = std::move(prepared);
  for (const rpc::Bundle& b : group.bundles()) {
    if (!b.node_id().empty()) {
      if (auto n = NodeId::FromBinary(b.node_id()); n.ok()) a.all_nodes[b.index()] = *n;
      continue;
    }
    const NodeId& node = choice.nodes.at(b.index());
    rpc::Bundle placed = b;
    placed.set_placement_group_id(group.placement_group_id());
    placed.set_node_id(node.Binary());
    a.bundles.push_back(std::move(placed));
    a.by_node[node].push_back(b.index());
    a.all_nodes[b.index()] = node;
    a.reserving[node].Add(*ResourceSet::FromPairs(b.resources()));
  }
  if (a.bundles.empty()) {
    PlacementResult r;
    r.nodes = a.all_nodes;
    return Finish(*id, std::move(r));
  }
  for (const auto& [node, r] : a.reserving) flight_[node].Add(r);
  Prepare(a);
}

void PlacementGroupScheduler::Prepare(Attempt& a) {
  std::map<NodeId, rpc::PrepareBundlesRequest> requests;
  for (const rpc::Bundle& b : a.bundles) *requests[*NodeId::FromBinary(b.node_id())].add_bundles() = b;
  for (const auto& [node, _] : requests) a.outstanding.insert(node);
  // One node holds every new bundle, and no other bundle of the group is
  // elsewhere being committed: prepare and commit in one call.
  a.one_phase = requests.size() == 1;
  if (a.one_phase) requests.begin()->second.set_commit(true);
  for (auto& [node, request] : requests) {
    raylets_->PrepareBundles(node, RayletAddress(nodes_.at(node).info), request,
                             [this, group = a.group, generation = a.generation, node = node](
                                 const absl::Status& s, rpc::PrepareBundlesReply&& reply) {
                               OnPrepared(group, generation, node, s, reply);
                             });
  }
}

PlacementGroupScheduler::Attempt* PlacementGroupScheduler::Find(const PlacementGroupId& group, uint64_t generation) {
  if (auto it = attempts_.find(group); it != attempts_.end() && it->second.generation == generation) {
    return &it->second;
  }
  if (auto it = zombies_.find(generation); it != zombies_.end()) return &it->second;
  return nullptr;
}

void PlacementGroupScheduler::OnPrepared(const PlacementGroupId& group, uint64_t generation, const NodeId& node,
                                         const absl::Status& s, const rpc::PrepareBundlesReply& reply) {
  MANTA_CHECK_THREAD(thread_);
  if (s.ok() && reply.has_resources()) apply_(reply.resources());
  Attempt* a = Find(group, generation);
  if (a == nullptr || a->outstanding.erase(node) == 0) return;
  ReleaseFlight(*a, node);
  if (!s.ok() || !reply.success()) {
    a->failed = true;
    a->message =
        absl::StrCat("node ", node.Hex().substr(0, 8),
                     " refused the bundles: ", s.ok() ? reply.message().substr(0, 512) : std::string(s.message()));
  }
  if (!a->outstanding.empty()) return;
  if (a->failed || a->cancelled) return Abandon(*a);
  if (a->one_phase) {
    if (!reply.committed()) {
      a->failed = true;
      a->message = "the raylet did not commit the bundles";
      return Abandon(*a);
    }
    PlacementResult r;
    r.nodes = a->all_nodes;
    return Finish(group, std::move(r));
  }
  if (a->prepared) a->prepared();
  Commit(*a);
}

void PlacementGroupScheduler::Commit(Attempt& a) {
  a.committing = true;
  for (const auto& [node, indices] : a.by_node) {
    rpc::CommitBundlesRequest request;
    request.set_placement_group_id(a.group.Binary());
    for (int i : indices) request.add_indices(i);
    a.outstanding.insert(node);
    raylets_->CommitBundles(node, RayletAddress(nodes_.at(node).info), request,
                            [this, group = a.group, generation = a.generation, node = node](
                                const absl::Status& s, rpc::CommitBundlesReply&& reply) {
                              OnCommitted(group, generation, node, s, reply);
                            });
  }
}

void PlacementGroupScheduler::OnCommitted(const PlacementGroupId& group, uint64_t generation, const NodeId& node,
                                          const absl::Status& s, const rpc::CommitBundlesReply& reply) {
  MANTA_CHECK_THREAD(thread_);
  if (s.ok() && reply.has_resources()) apply_(reply.resources());
  Attempt* a = Find(group, generation);
  if (a == nullptr || a->outstanding.erase(node) == 0) return;
  if (!s.ok()) {
    a->failed = true;
    a->message = absl::StrCat("node ", node.Hex().substr(0, 8), " could not commit the bundles: ", s.message());
  }
  if (!a->outstanding.empty()) return;
  if (a->failed || a->cancelled) return Abandon(*a);
  PlacementResult r;
  r.nodes = a->all_nodes;
  Finish(group, std::move(r));
}

void PlacementGroupScheduler::Abandon(Attempt& a) {
  CancelOnRaylets(a);
  if (a.cancelled) {
    zombies_.erase(a.generation);
    return;
  }
  PlacementResult r;
  r.outcome = PlacementResult::kFailed;
  r.message = a.message;
  Finish(a.group, std::move(r));
}

void PlacementGroupScheduler::ReleaseFlight(Attempt& a, const NodeId& node) {
  auto r = a.reserving.find(node);
  if (r == a.reserving.end()) return;
  auto f = flight_.find(node);
  if (f != flight_.end()) {
    for (const auto& [name, q] : r->second.entries()) {
      Quantity have = f->second.Get(name);
      f->second.Set(name, q < have ? have - q : Quantity());
    }
    if (f->second.empty()) flight_.erase(f);
  }
  a.reserving.erase(r);
}

void PlacementGroupScheduler::CancelOnRaylets(const Attempt& a) {
  for (const auto& [node, indices] : a.by_node) {
    auto it = nodes_.find(node);
    if (it == nodes_.end()) continue;  // a dead node's bundles are gone with it
    rpc::CancelBundlesRequest request;
    request.set_placement_group_id(a.group.Binary());
    for (int i : indices) request.add_indices(i);
    ++returning_[a.group][node];
    raylets_->CancelBundles(
        node, RayletAddress(it->second.info), request,
        [this, node = node, group = a.group](const absl::Status& s, rpc::CancelBundlesReply&& reply) {
          if (nodes_.count(node) == 0) return;  // died meanwhile: OnNodeDead counted it
          if (auto r = returning_.find(group); r != returning_.end()) {
            if (auto n = r->second.find(node); n != r->second.end() && --n->second == 0) r->second.erase(n);
            if (r->second.empty()) returning_.erase(r);
          }
          if (s.ok() && reply.has_resources()) apply_(reply.resources());
          if (!s.ok()) {
            Logger("gcs")->warn("CancelBundles on node_id={} failed: {}", node.Hex(), s.ToString());
          }
        });
  }
}

void PlacementGroupScheduler::Cancel(const PlacementGroupId& group) {
  MANTA_CHECK_THREAD(thread_);
  auto it = attempts_.find(group);
  if (it == attempts_.end()) return;
  Attempt a = std::move(it->second);
  attempts_.erase(it);
  a.cancelled = true;
  a.done = nullptr;
  if (a.outstanding.empty()) {
    for (const auto& [node, _] : a.by_node) ReleaseFlight(a, node);
    CancelOnRaylets(a);
    return;
  }
  // Cancel only once every reply is in, so that no prepare lands after it.
  uint64_t generation = a.generation;
  zombies_.emplace(generation, std::move(a));
}

void PlacementGroupScheduler::Finish(const PlacementGroupId& group, PlacementResult result) {
  auto it = attempts_.find(group);
  if (it == attempts_.end()) return;
  for (const auto& [node, _] : it->second.by_node) ReleaseFlight(it->second, node);
  Callback done = std::move(it->second.done);
  attempts_.erase(it);
  if (done) done(std::move(result));
}

const rpc::NodeInfo* PlacementGroupScheduler::GetNode(const NodeId& node) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : &it->second.info;
}

}  // namespace manta::gcs
