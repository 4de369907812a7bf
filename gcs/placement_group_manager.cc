#include "gcs/placement_group_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"

namespace manta::gcs {
namespace {

constexpr char kTable[] = "placement_groups";
constexpr absl::Duration kMinBackoff = absl::Milliseconds(10);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
constexpr absl::Duration kSyncRetry = absl::Seconds(1);
constexpr int kSyncAttempts = 5;

std::shared_ptr<spdlog::logger> Log() { return Logger("gcs"); }

// Writes a group's state into a create's reply.
std::function<void(const rpc::PlacementGroupInfo&)> CreateFill(rpc::CreatePlacementGroupReply* reply) {
  return [reply](const rpc::PlacementGroupInfo& info) { *reply->mutable_placement_group() = info; };
}

bool Waiting(const rpc::PlacementGroupInfo& info) {
  return info.state() == rpc::PlacementGroupInfo::PENDING || info.state() == rpc::PlacementGroupInfo::PREPARED ||
         info.state() == rpc::PlacementGroupInfo::RESCHEDULING;
}

}  // namespace

absl::Status ValidatePlacementGroupSpec(const rpc::PlacementGroupInfo& spec) {
  if (spec.placement_group_id().size() != PlacementGroupId::kSize) {
    return absl::InvalidArgumentError(absl::StrCat("placement_group_id must be ", PlacementGroupId::kSize, " bytes"));
  }
  if (spec.bundles().empty()) return absl::InvalidArgumentError("a placement group needs at least one bundle");
  if (spec.bundles_size() > static_cast<int>(PlacementGroupManager::kMaxBundles)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a placement group holds at most ", PlacementGroupManager::kMaxBundles, " bundles"));
  }
  if (!rpc::PlacementGroupInfo::Strategy_IsValid(spec.strategy())) {
    return absl::InvalidArgumentError("unknown strategy (PACK, SPREAD, STRICT_PACK or STRICT_SPREAD)");
  }
  if (spec.name().size() > 1024 || spec.ray_namespace().size() > 1024) {
    return absl::InvalidArgumentError("name and namespace are at most 1024 bytes");
  }
  if (!spec.creator_job_id().empty() && spec.creator_job_id().size() != JobId::kSize) {
    return absl::InvalidArgumentError(absl::StrCat("creator_job_id must be ", JobId::kSize, " bytes"));
  }
  for (int i = 0; i < spec.bundles_size(); ++i) {
    const rpc::Bundle& b = spec.bundles(i);
    if (b.index() != i) return absl::InvalidArgumentError(absl::StrCat("bundle ", i, " has index ", b.index()));
    if (b.resources_size() > 256 || b.label_selector_size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("bundle ", i, " has too many resources or labels"));
    }
    if (auto parsed = ParseBundle(b); !parsed.ok()) return parsed.status();
    if (b.label_domain() < 0 || b.label_domain() >= spec.bundles_size() ||
        (spec.same_label().empty() && b.label_domain() != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bundle ", i, " has label_domain ", b.label_domain(),
                                                     spec.same_label().empty() ? " without same_label" : ""));
    }
  }
  if (!spec.same_label().empty() &&
      !LabelSelector::Parse(std::map<std::string, std::string>{{spec.same_label(), "x"}}).ok()) {
    return absl::InvalidArgumentError("same_label is not a label key");
  }
  return absl::OkStatus();
}

PlacementGroupManager::PlacementGroupManager(Store* store, Publisher* publisher, PlacementGroupScheduler* scheduler,
                                             RayletClientPool* raylets, RunAfter run_after)
    : store_(store),
      publisher_(publisher),
      scheduler_(scheduler),
      raylets_(raylets),
      run_after_(std::move(run_after)) {}

PlacementGroupManager::~PlacementGroupManager() = default;

absl::Status PlacementGroupManager::Initialize() {
  ASSIGN_OR_RETURN(auto rows, store_->ReadAll(kTable));
  std::vector<std::unique_ptr<Group>> recovered;
  for (auto& [key, value] : rows) {
    auto g = std::make_unique<Group>();
    if (!g->info.ParseFromString(value) || g->info.placement_group_id() != key) {
      return absl::DataLossError("the store holds a malformed placement group");
    }
    recovered.push_back(std::move(g));
  }
  std::sort(recovered.begin(), recovered.end(),
            [](const auto& a, const auto& b) { return a->info.create_time_ms() < b->info.create_time_ms(); });
  for (auto& g : recovered) {
    g->order = next_order_++;
    rpc::PlacementGroupInfo& info = g->info;
    if (info.state() == rpc::PlacementGroupInfo::PENDING || info.state() == rpc::PlacementGroupInfo::PREPARED) {
      // Nothing of an uncommitted attempt is kept: syncs return it.
      for (auto& b : *info.mutable_bundles()) b.clear_node_id();
      info.set_state(rpc::PlacementGroupInfo::PENDING);
    }
    if (info.state() == rpc::PlacementGroupInfo::REMOVED) {
      ++num_removed_;
    } else if (!info.name().empty()) {
      names_[{info.ray_namespace(), info.name()}] = *PlacementGroupId::FromBinary(info.placement_group_id());
    }
    groups_[*PlacementGroupId::FromBinary(info.placement_group_id())] = std::move(g);
  }
  if (!groups_.empty()) Log()->info("recovered {} placement groups", groups_.size());
  return absl::OkStatus();
}

void PlacementGroupManager::HandleCreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                                       rpc::CreatePlacementGroupReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidatePlacementGroupSpec(request.spec()); !s.ok()) return done(s);
  if (shut_down_) return done(absl::UnavailableError("the GCS is shutting down"));
  PlacementGroupId id = *PlacementGroupId::FromBinary(request.spec().placement_group_id());
  if (request.wait_ready_ms() < 0) return done(absl::InvalidArgumentError("wait_ready_ms must not be negative"));
  if (auto it = groups_.find(id); it != groups_.end()) {
    *reply->mutable_placement_group() = it->second->info;
    // A retry of a create whose write is still on its way waits for it too.
    if (auto c = creating_.find(id); c != creating_.end()) {
      c->second.push_back({reply, std::move(done), request.wait_ready_ms()});
      return;
    }
    return AddWaiter(*it->second, absl::Milliseconds(request.wait_ready_ms()), CreateFill(reply), std::move(done));
  }
  const rpc::PlacementGroupInfo& spec = request.spec();
  if (!spec.name().empty() && names_.count({spec.ray_namespace(), spec.name()}) > 0) {
    return done(absl::AlreadyExistsError("a placement group named '" + spec.name() + "' already exists"));
  }
  auto g = std::make_unique<Group>();
  g->order = next_order_++;
  rpc::PlacementGroupInfo& info = g->info;
  info.set_placement_group_id(spec.placement_group_id());
  info.set_name(spec.name());
  info.set_ray_namespace(spec.ray_namespace());
  info.set_strategy(spec.strategy());
  info.set_creator_job_id(spec.creator_job_id());
  info.set_detached(spec.detached());
  info.set_same_label(spec.same_label());
  info.set_state(rpc::PlacementGroupInfo::PENDING);
  info.set_create_time_ms(NowUnixMs());
  for (const rpc::Bundle& b : spec.bundles()) {
    rpc::Bundle* copy = info.add_bundles();
    copy->set_index(b.index());
    *copy->mutable_resources() = b.resources();
    *copy->mutable_label_selector() = b.label_selector();
    copy->set_label_domain(b.label_domain());
  }
  if (!info.name().empty()) names_[{info.ray_namespace(), info.name()}] = id;
  Group& ref = *g;
  groups_[id] = std::move(g);
  *reply->mutable_placement_group() = ref.info;
  // Answered once the group is in the store, so that a GCS killed after the
  // answer still has it when it restarts; the first placement attempt starts
  // meanwhile, and the caller need not wait for it. Writes are applied in
  // order: any later write of the group lands after this one.
  creating_[id].push_back({reply, std::move(done), request.wait_ready_ms()});
  PersistAndPublish(ref, [this, id](const absl::Status& s) { OnCreatePersisted(id, s); });
  TrySchedule(id);
}

void PlacementGroupManager::OnCreatePersisted(const PlacementGroupId& id, const absl::Status& status) {
  MANTA_CHECK_THREAD(thread_);
  auto it = creating_.find(id);
  if (it == creating_.end()) return;  // answered at shutdown
  std::vector<Creator> creators = std::move(it->second);
  creating_.erase(it);
  if (!status.ok()) Log()->error("cannot store placement_group_id={}: {}", id.Hex(), status.ToString());
  auto g = groups_.find(id);
  for (Creator& c : creators) {
    if (!status.ok() || g == groups_.end()) {
      c.done(status);
      continue;
    }
    AddWaiter(*g->second, absl::Milliseconds(c.wait_ready_ms), CreateFill(c.reply), std::move(c.done));
  }
}

void PlacementGroupManager::HandleRemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request,
                                                       rpc::RemovePlacementGroupReply*, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = PlacementGroupId::FromBinary(request.placement_group_id());
  if (!id.ok()) {
    return done(
        absl::InvalidArgumentError(absl::StrCat("placement_group_id must be ", PlacementGroupId::kSize, " bytes")));
  }
  if (!groups_.contains(*id)) return done(absl::NotFoundError("no placement group " + id->Hex()));
  Remove(*id, "removed by RemovePlacementGroup");
  // Answered when its nodes have returned the bundles (also for a second
  // remover of a group still being returned).
  auto returning = returning_.find(*id);
  if (returning == returning_.end() || shut_down_) return done(absl::OkStatus());
  returning->second.removers.push_back(std::move(done));
}

void PlacementGroupManager::HandleGetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                                                    rpc::GetPlacementGroupReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (request.placement_group_id().empty()) {
    auto it = names_.find({request.ray_namespace(), request.name()});
    if (request.name().empty() || it == names_.end()) {
      return done(absl::NotFoundError("no placement group named '" + request.name().substr(0, 256) + "'"));
    }
    *reply->mutable_placement_group() = groups_.at(it->second)->info;
    return done(absl::OkStatus());
  }
  auto id = PlacementGroupId::FromBinary(request.placement_group_id());
  if (!id.ok()) {
    return done(
        absl::InvalidArgumentError(absl::StrCat("placement_group_id must be ", PlacementGroupId::kSize, " bytes")));
  }
  const rpc::PlacementGroupInfo* info = Get(*id);
  if (info == nullptr) return done(absl::NotFoundError("no placement group " + id->Hex()));
  *reply->mutable_placement_group() = *info;
  done(absl::OkStatus());
}

void PlacementGroupManager::HandleListPlacementGroups(const rpc::ListPlacementGroupsRequest& request,
                                                      rpc::ListPlacementGroupsReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<const Group*> all;
  for (const auto& [id, g] : groups_) {
    if (request.job_id().empty() || g->info.creator_job_id() == request.job_id()) all.push_back(g.get());
  }
  std::sort(all.begin(), all.end(), [](const Group* a, const Group* b) { return a->order < b->order; });
  size_t limit = request.limit() > 0 ? static_cast<size_t>(request.limit()) : all.size();
  for (size_t i = 0; i < all.size() && i < limit; ++i) *reply->add_placement_groups() = all[i]->info;
  reply->set_total(static_cast<int64_t>(all.size()));
  done(absl::OkStatus());
}

void PlacementGroupManager::ForEachGroup(const std::function<void(const rpc::PlacementGroupInfo&)>& visit) const {
  MANTA_CHECK_THREAD(thread_);
  for (const auto& [id, g] : groups_) visit(g->info);
}

void PlacementGroupManager::HandleWaitPlacementGroupReady(const rpc::WaitPlacementGroupReadyRequest& request,
                                                          rpc::WaitPlacementGroupReadyReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = PlacementGroupId::FromBinary(request.placement_group_id());
  if (!id.ok()) {
    return done(
        absl::InvalidArgumentError(absl::StrCat("placement_group_id must be ", PlacementGroupId::kSize, " bytes")));
  }
  if (request.timeout_ms() < 0) return done(absl::InvalidArgumentError("timeout_ms must not be negative"));
  auto it = groups_.find(*id);
  if (it == groups_.end()) return done(absl::NotFoundError("no placement group " + id->Hex()));
  auto fill = [reply](const rpc::PlacementGroupInfo& info) {
    reply->set_ready(info.state() == rpc::PlacementGroupInfo::CREATED);
    *reply->mutable_placement_group() = info;
  };
  AddWaiter(*it->second, absl::Milliseconds(request.timeout_ms()), std::move(fill), std::move(done));
}

void PlacementGroupManager::AddWaiter(Group& g, absl::Duration wait,
                                      std::function<void(const rpc::PlacementGroupInfo&)> fill, rpc::Done done) {
  if (!Waiting(g.info) || wait <= absl::ZeroDuration() || shut_down_) {
    fill(g.info);
    return done(absl::OkStatus());
  }
  g.waiters.push_back({std::move(fill), std::move(done), nullptr});
  auto w = std::prev(g.waiters.end());
  PlacementGroupId id = *PlacementGroupId::FromBinary(g.info.placement_group_id());
  w->timer = run_after_(std::min(wait, kMaxWait), [this, id, w] {
    auto it = groups_.find(id);
    if (it == groups_.end()) return;
    w->fill(it->second->info);
    rpc::Done done = std::move(w->done);
    it->second->waiters.erase(w);  // destroys this timer after the callback returns
    done(absl::OkStatus());
  });
}

void PlacementGroupManager::AnswerWaiters(Group& g) {
  std::list<Waiter> waiters = std::move(g.waiters);
  g.waiters.clear();
  for (Waiter& w : waiters) {
    w.timer.reset();
    w.fill(g.info);
    w.done(absl::OkStatus());
  }
}

void PlacementGroupManager::Shutdown() {
  MANTA_CHECK_THREAD(thread_);
  // Only groups not yet CREATED have waiters: each is answered not ready,
  // and so is every wait that comes later (the server's shutdown waits for
  // each call it has taken).
  shut_down_ = true;
  for (auto& [id, g] : groups_) AnswerWaiters(*g);
  for (auto& [id, r] : returning_) {
    for (rpc::Done& done : r.removers) done(absl::OkStatus());
  }
  returning_.clear();
  // Creates whose write has not landed: the caller makes the call again (it
  // is idempotent), on this GCS's successor.
  for (auto& [id, creators] : creating_) {
    for (Creator& c : creators) c.done(absl::UnavailableError("the GCS is shutting down"));
  }
  creating_.clear();
}

void PlacementGroupManager::OnNodeAdded(const rpc::NodeInfo& info) {
  MANTA_CHECK_THREAD(thread_);
  scheduler_->OnNodeAdded(info);
  SyncNode(info, 0);
}

void PlacementGroupManager::SyncNode(const rpc::NodeInfo& info, int attempt) {
  NodeId node = *NodeId::FromBinary(info.node_id());
  rpc::ReleaseUnusedBundlesRequest request;
  for (const auto& [id, g] : groups_) {
    if (g->info.state() == rpc::PlacementGroupInfo::REMOVED) continue;
    for (const rpc::Bundle& b : g->info.bundles()) {
      if (b.node_id() != info.node_id()) continue;
      rpc::Bundle* in_use = request.add_bundles_in_use();
      in_use->set_placement_group_id(g->info.placement_group_id());
      in_use->set_index(b.index());
    }
  }
  raylets_->ReleaseUnusedBundles(
      node, RayletAddress(info), request,
      [this, info, node, attempt](const absl::Status& s, rpc::ReleaseUnusedBundlesReply&& reply) {
        if (scheduler_->GetNode(node) == nullptr) return;  // died meanwhile
        if (!s.ok() && attempt + 1 < kSyncAttempts) {
          sync_retries_[node] = run_after_(kSyncRetry, [this, info, attempt] {
            if (scheduler_->GetNode(*NodeId::FromBinary(info.node_id())) != nullptr) SyncNode(info, attempt + 1);
          });
          return;
        }
        if (!s.ok()) Log()->warn("cannot sync bundles with node_id={}: {}", node.Hex(), s.ToString());
        if (s.ok() && reply.has_resources()) scheduler_->Apply(reply.resources());
        sync_retries_.erase(node);
        scheduler_->MarkSynced(node);
        SchedulePending();
      });
}

void PlacementGroupManager::OnNodeDead(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  sync_retries_.erase(node);
  // Removals waiting on the node: its bundles went with it.
  std::vector<PlacementGroupId> returned;
  for (const auto& [id, r] : returning_) {
    if (r.nodes.count(node) > 0) returned.push_back(id);
  }
  for (const PlacementGroupId& id : returned) OnBundlesReturned(id, node);
  std::string binary = node.Binary();
  std::vector<PlacementGroupId> affected;
  for (auto& [id, g] : groups_) {
    if (g->info.state() == rpc::PlacementGroupInfo::REMOVED) continue;
    bool hit = false;
    for (auto& b : *g->info.mutable_bundles()) {
      if (b.node_id() != binary) continue;
      b.clear_node_id();
      hit = true;
    }
    if (hit) affected.push_back(id);
  }
  for (const PlacementGroupId& id : affected) {
    Group& g = *groups_.at(id);
    if (g.info.state() == rpc::PlacementGroupInfo::CREATED) {
      g.info.set_num_reschedules(g.info.num_reschedules() + 1);
      Log()->info("placement_group_id={} lost bundles on dead node_id={}; rescheduling", id.Hex(), node.Hex());
      SetState(g, rpc::PlacementGroupInfo::RESCHEDULING, "a node holding bundles died");
    }
    TrySchedule(id);
  }
}

void PlacementGroupManager::OnResourcesChanged() {
  MANTA_CHECK_THREAD(thread_);
  // Coalesced, and never inside a scheduler callback.
  if (kick_) return;
  kick_ = run_after_(absl::ZeroDuration(), [this] {
    auto keep = std::move(kick_);  // destroyed after this callback returns
    SchedulePending();
  });
}

void PlacementGroupManager::OnJobFinished(const std::string& job_id) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<PlacementGroupId> doomed;
  for (const auto& [id, g] : groups_) {
    if (g->info.creator_job_id() == job_id && !g->info.detached() &&
        g->info.state() != rpc::PlacementGroupInfo::REMOVED) {
      doomed.push_back(id);
    }
  }
  for (const PlacementGroupId& id : doomed) Remove(id, "its job finished");
}

void PlacementGroupManager::SchedulePending() {
  if (scheduling_pending_) return;  // re-entered from a callback
  scheduling_pending_ = true;
  std::vector<std::pair<uint64_t, PlacementGroupId>> pending;
  for (const auto& [id, g] : groups_) {
    if (Waiting(g->info) && !g->retry && !scheduler_->IsScheduling(id)) pending.emplace_back(g->order, id);
  }
  std::sort(pending.begin(), pending.end());
  for (const auto& [order, id] : pending) TrySchedule(id);
  scheduling_pending_ = false;
}

void PlacementGroupManager::TrySchedule(const PlacementGroupId& id) {
  auto it = groups_.find(id);
  if (it == groups_.end() || !Waiting(it->second->info) || scheduler_->IsScheduling(id)) return;
  it->second->retry.reset();
  scheduler_->Schedule(
      it->second->info, [this, id](PlacementResult r) { OnScheduled(id, std::move(r)); },
      [this, id] {
        auto it = groups_.find(id);
        if (it == groups_.end() || it->second->info.state() != rpc::PlacementGroupInfo::PENDING) return;
        // Not persisted: a restarted GCS treats PREPARED as PENDING.
        it->second->info.set_state(rpc::PlacementGroupInfo::PREPARED);
        rpc::PubMessage msg;
        msg.set_channel(rpc::PubMessage::PLACEMENT_GROUP);
        msg.set_key(id.Binary());
        *msg.mutable_placement_group_info() = it->second->info;
        publisher_->Publish(std::move(msg));
      });
}

void PlacementGroupManager::OnScheduled(const PlacementGroupId& id, PlacementResult r) {
  MANTA_CHECK_THREAD(thread_);
  auto it = groups_.find(id);
  if (it == groups_.end() || !Waiting(it->second->info)) return;
  Group& g = *it->second;
  switch (r.outcome) {
    case PlacementResult::kCreated: {
      for (auto& b : *g.info.mutable_bundles()) {
        if (auto n = r.nodes.find(b.index()); n != r.nodes.end()) b.set_node_id(n->second.Binary());
      }
      g.backoff = absl::ZeroDuration();
      g.info.set_infeasible(false);
      g.info.set_ready_time_ms(NowUnixMs());
      SetState(g, rpc::PlacementGroupInfo::CREATED, "");
      AnswerWaiters(g);
      return;
    }
    case PlacementResult::kNoFit: {
      if (g.info.state() == rpc::PlacementGroupInfo::PREPARED) g.info.set_state(rpc::PlacementGroupInfo::PENDING);
      if (g.info.infeasible() == r.infeasible && g.info.state_message() == r.message) return;
      g.info.set_infeasible(r.infeasible);
      SetState(g, g.info.state(), r.message);
      return;
    }
    case PlacementResult::kFailed: {
      if (g.info.state() == rpc::PlacementGroupInfo::PREPARED) g.info.set_state(rpc::PlacementGroupInfo::PENDING);
      g.info.set_state_message(r.message);
      g.backoff = g.backoff == absl::ZeroDuration() ? kMinBackoff : std::min(g.backoff * 2, kMaxBackoff);
      g.retry = run_after_(g.backoff, [this, id] {
        auto it = groups_.find(id);
        if (it == groups_.end()) return;
        it->second->retry.reset();
        TrySchedule(id);
      });
      return;
    }
  }
}

void PlacementGroupManager::Remove(const PlacementGroupId& id, const std::string& why) {
  auto it = groups_.find(id);
  if (it == groups_.end() || it->second->info.state() == rpc::PlacementGroupInfo::REMOVED) return;
  Group& g = *it->second;
  Log()->debug("removing placement_group_id={}: {}", id.Hex(), why);
  scheduler_->Cancel(id);
  g.retry.reset();
  ReturnBundles(id, g.info);
  if (!g.info.name().empty()) {
    auto n = names_.find({g.info.ray_namespace(), g.info.name()});
    if (n != names_.end() && n->second == id) names_.erase(n);
  }
  g.info.set_remove_time_ms(NowUnixMs());
  g.info.set_infeasible(false);
  SetState(g, rpc::PlacementGroupInfo::REMOVED, why);
  AnswerWaiters(g);
  ++num_removed_;
  if (on_removed_) on_removed_(id.Binary());
  TrimRemoved();
}

void PlacementGroupManager::ReturnBundles(const PlacementGroupId& id, const rpc::PlacementGroupInfo& info) {
  std::map<NodeId, rpc::CancelBundlesRequest> requests;
  for (const rpc::Bundle& b : info.bundles()) {
    auto node = NodeId::FromBinary(b.node_id());
    if (!node.ok()) continue;
    rpc::CancelBundlesRequest& r = requests[*node];
    r.set_placement_group_id(info.placement_group_id());
    r.add_indices(b.index());
  }
  for (auto& [node, request] : requests) {
    const rpc::NodeInfo* n = scheduler_->GetNode(node);
    if (n == nullptr) continue;  // a dead node's bundles are gone with it
    returning_[id].nodes.insert(node);
    raylets_->CancelBundles(node, RayletAddress(*n), request,
                            [this, id, node = node](const absl::Status& s, rpc::CancelBundlesReply&& reply) {
                              // A node that died meanwhile neither reports nor counts.
                              if (scheduler_->GetNode(node) == nullptr) return;
                              if (s.ok() && reply.has_resources()) scheduler_->Apply(reply.resources());
                              if (!s.ok()) Log()->warn("CancelBundles on node_id={}: {}", node.Hex(), s.ToString());
                              OnBundlesReturned(id, node);
                            });
  }
}

void PlacementGroupManager::OnBundlesReturned(const PlacementGroupId& id, const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  auto it = returning_.find(id);
  if (it == returning_.end() || it->second.nodes.erase(node) == 0 || !it->second.nodes.empty()) return;
  std::vector<rpc::Done> removers = std::move(it->second.removers);
  returning_.erase(it);
  for (rpc::Done& done : removers) done(absl::OkStatus());
}

void PlacementGroupManager::SetState(Group& g, rpc::PlacementGroupInfo::State state, const std::string& message) {
  g.info.set_state(state);
  g.info.set_state_message(message);
  PersistAndPublish(g);
}

void PlacementGroupManager::PersistAndPublish(const Group& g, Store::Done persisted) {
  const std::string& id = g.info.placement_group_id();
  // Without `persisted` nothing waits for the write, and the store logs failures.
  store_->Put(kTable, id, g.info.SerializeAsString(), std::move(persisted));
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::PLACEMENT_GROUP);
  msg.set_key(id);
  *msg.mutable_placement_group_info() = g.info;
  publisher_->Publish(std::move(msg));
}

void PlacementGroupManager::TrimRemoved() {
  if (num_removed_ <= kMaxRemovedKept + kMaxRemovedKept / 10) return;  // trim in batches
  std::vector<std::pair<uint64_t, PlacementGroupId>> removed;
  for (const auto& [id, g] : groups_) {
    if (g->info.state() == rpc::PlacementGroupInfo::REMOVED) removed.emplace_back(g->order, id);
  }
  std::sort(removed.begin(), removed.end());
  for (size_t i = 0; i + kMaxRemovedKept < removed.size(); ++i) {
    const PlacementGroupId& id = removed[i].second;
    store_->Delete(kTable, id.Binary(), nullptr);
    groups_.erase(id);
    --num_removed_;
  }
}

void PlacementGroupManager::AppendPending(rpc::GetClusterResourcesReply* reply) const {
  MANTA_CHECK_THREAD(thread_);
  std::vector<const Group*> pending;
  for (const auto& [id, g] : groups_) {
    if (Waiting(g->info)) pending.push_back(g.get());
  }
  std::sort(pending.begin(), pending.end(), [](const Group* a, const Group* b) { return a->order < b->order; });
  for (const Group* g : pending) *reply->add_pending_placement_groups() = g->info;
}

const rpc::PlacementGroupInfo* PlacementGroupManager::Get(const PlacementGroupId& id) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second->info;
}

}  // namespace manta::gcs
