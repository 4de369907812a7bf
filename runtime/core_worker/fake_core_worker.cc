#include "runtime/core_worker/fake_core_worker.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/label_selector.h"
#include "common/placement_choice.h"
#include "common/resources.h"
#include "manta/internal/function_registry.h"

namespace manta::core {
// ---- The fake's factory -------------------------------------------------------

namespace {

class FakeFactory final : public CoreWorkerFactory {
 public:
  absl::StatusOr<CoreWorker*> InitDriver(const CoreWorkerOptions& options) override {
    auto* core = new FakeCoreWorker();
    SetCurrentClusterState(core);
    return core;
  }
  absl::Status RunWorker(const CoreWorkerOptions& options) override {
    return absl::UnimplementedError("the fake core worker cannot run a worker process");
  }
  void Shutdown(CoreWorker* core) override {
    auto* fake = static_cast<FakeCoreWorker*>(core);
    if (ClusterState::Current() == fake) SetCurrentClusterState(nullptr);
    delete fake;
  }
};

}  // namespace

CoreWorkerFactory* FakeCoreWorker::Factory() {
  static FakeFactory* factory = new FakeFactory();
  return factory;
}

// ---- FakeCoreWorker -----------------------------------------------------------

FakeCoreWorker::FakeCoreWorker()
    : job_id_(JobId::FromRandom()),
      worker_id_(WorkerId::FromRandom()),
      address_(absl::StrCat("fake:", worker_id_.Hex())) {}

FakeCoreWorker::~FakeCoreWorker() = default;

FakeCoreWorker* FakeCoreWorker::Install() {
  auto* core = new FakeCoreWorker();
  CurrentCoreWorker previous = SetCurrentCoreWorker({core, Factory()});
  if (previous.core != nullptr && previous.factory != nullptr) previous.factory->Shutdown(previous.core);
  SetCurrentClusterState(core);
  return core;
}

void FakeCoreWorker::Uninstall() {
  CurrentCoreWorker previous = SetCurrentCoreWorker({});
  if (previous.core != nullptr && previous.factory != nullptr) previous.factory->Shutdown(previous.core);
}

void FakeCoreWorker::InjectFailure(const std::string& name, ErrorType type, std::string message, int times) {
  absl::MutexLock lock(&mu_);
  if (message.empty()) message = absl::StrCat("injected failure of ", name);
  injected_[name] = Injected{type, std::move(message), times};
}

void FakeCoreWorker::ClearFailures() {
  absl::MutexLock lock(&mu_);
  injected_.clear();
}

void FakeCoreWorker::HoldTasks(const std::string& name) {
  absl::MutexLock lock(&mu_);
  held_names_.push_back(name);
}

void FakeCoreWorker::ReleaseHeldTasks() {
  std::deque<std::function<void()>> held;
  {
    absl::MutexLock lock(&mu_);
    held_names_.clear();
    held.swap(held_);
  }
  for (auto& run : held) run();
}

void FakeCoreWorker::KillActorProcess(const ActorId& actor) {
  bool restart = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(actor);
    if (it == actors_.end() || it->second.instance == nullptr) return;
    ActorState& state = it->second;
    state.instance.reset();
    const int max = state.options.max_restarts;
    restart = max < 0 || state.restarts < max;
    if (restart) {
      ++state.restarts;
    } else {
      state.death = MakeError(ErrorType::kActorDied,
                              absl::StrCat("actor ", state.options.class_name, " ", actor.Hex(),
                                           " died: its worker process exited and it has no restarts left"));
    }
  }
  if (restart) StartActor(actor);
}

int FakeCoreWorker::RunCount(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = run_counts_.find(name);
  return it == run_counts_.end() ? 0 : it->second;
}

TaskOptions FakeCoreWorker::last_task_options() const {
  absl::MutexLock lock(&mu_);
  return last_task_options_;
}

ActorOptions FakeCoreWorker::actor_options(const ActorId& actor) const {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor);
  return it == actors_.end() ? ActorOptions{} : it->second.options;
}

bool FakeCoreWorker::ActorAlive(const ActorId& actor) const {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor);
  return it != actors_.end() && it->second.instance != nullptr;
}

int FakeCoreWorker::LocalReferenceCount(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  return it == objects_.end() ? 0 : it->second.references;
}

bool FakeCoreWorker::HasObject(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  return objects_.contains(id);
}

size_t FakeCoreWorker::ObjectCount() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

int64_t FakeCoreWorker::add_reference_calls() const {
  absl::MutexLock lock(&mu_);
  return add_calls_;
}

int64_t FakeCoreWorker::remove_reference_calls() const {
  absl::MutexLock lock(&mu_);
  return remove_calls_;
}

int64_t FakeCoreWorker::unbalanced_removes() const {
  absl::MutexLock lock(&mu_);
  return unbalanced_removes_;
}

absl::StatusOr<ObjectRefInfo> FakeCoreWorker::Put(std::string data) {
  ObjectId id = NewObject();
  Complete(id, std::move(data));
  return ObjectRefInfo{id, address_};
}

std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> FakeCoreWorker::Get(
    const std::vector<ObjectRefInfo>& refs, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> out;
  absl::MutexLock lock(&mu_);
  for (const ObjectRefInfo& ref : refs) {
    auto ready = [this, &ref]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = objects_.find(ref.id);
      return it == objects_.end() || it->second.ready;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      out.push_back(MakeError(ErrorType::kTimeout, absl::StrCat("Get timed out after ", absl::FormatDuration(timeout),
                                                                " waiting for object ", ref.id.Hex())));
      continue;
    }
    auto it = objects_.find(ref.id);
    if (it == objects_.end()) {
      out.push_back(MakeError(ErrorType::kObjectLost, absl::StrCat("object ", ref.id.Hex(), " was freed")));
    } else {
      out.push_back(it->second.value);
    }
  }
  return out;
}

std::vector<bool> FakeCoreWorker::Wait(const std::vector<ObjectRefInfo>& refs, int num_returns, absl::Duration timeout,
                                       bool /*fetch_local*/) {
  std::vector<bool> ready(refs.size(), false);
  auto count_ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int count = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      auto it = objects_.find(refs[i].id);
      ready[i] = it == objects_.end() || it->second.ready;
      count += ready[i] ? 1 : 0;
    }
    return count >= num_returns;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&count_ready), timeout);
  count_ready();
  return ready;
}

void FakeCoreWorker::AddLocalReference(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  ++add_calls_;
  auto it = objects_.find(id);
  if (it != objects_.end()) ++it->second.references;
}

void FakeCoreWorker::RemoveLocalReference(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  ++remove_calls_;
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.references <= 0) {
    ++unbalanced_removes_;
    return;
  }
  if (--it->second.references == 0) objects_.erase(it);
}

// ---- Nodes and placement groups ------------------------------------------------

namespace {

bool Waiting(const PlacementGroupData& g) {
  return g.state == PlacementGroupState::kPending || g.state == PlacementGroupState::kPrepared ||
         g.state == PlacementGroupState::kRescheduling;
}

// As the GCS's ValidatePlacementGroupSpec, for what the struct can express.
absl::Status ValidateSpec(const PlacementGroupData& spec) {
  if (spec.bundles.empty()) return absl::InvalidArgumentError("a placement group needs at least one bundle");
  for (size_t i = 0; i < spec.bundles.size(); ++i) {
    const BundleData& b = spec.bundles[i];
    if (b.index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("bundle ", i, " has index ", b.index));
    }
    auto resources = ResourceSet::FromMap(b.resources);
    if (!resources.ok())
      return absl::InvalidArgumentError(absl::StrCat("bundle ", i, ": ", resources.status().message()));
    if (resources->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundle ", i, " is empty: a bundle must reserve at least one resource"));
    }
    auto selector = LabelSelector::Parse(b.label_selector);
    if (!selector.ok())
      return absl::InvalidArgumentError(absl::StrCat("bundle ", i, ": ", selector.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

NodeId FakeCoreWorker::AddNode(NodeData node) {
  if (node.node_id.IsNil()) node.node_id = NodeId::FromRandom();
  node.alive = true;
  NodeId id = node.node_id;
  {
    absl::MutexLock lock(&mu_);
    nodes_.push_back(std::move(node));
    PlacePendingLocked();
  }
  NotifyNodeWatches(NodeEvent::kAlive, id);
  return id;
}

void FakeCoreWorker::DrainNode(const NodeId& node, const std::string& reason, int64_t deadline_ms) {
  {
    absl::MutexLock lock(&mu_);
    for (NodeData& n : nodes_) {
      if (n.node_id != node) continue;
      n.draining = true;
      n.drain_reason = reason;
      n.drain_deadline_ms = deadline_ms;
    }
  }
  NotifyNodeWatches(NodeEvent::kDraining, node);
}

absl::StatusOr<int64_t> FakeCoreWorker::WatchNodes(std::function<void(const NodeEvent&)> on_event) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_watch_++;
  node_watches_[id] = std::move(on_event);
  return id;
}

void FakeCoreWorker::UnwatchNodes(int64_t id) {
  absl::MutexLock lock(&mu_);
  node_watches_.erase(id);
}

void FakeCoreWorker::NotifyNodeWatches(NodeEvent::Kind kind, const NodeId& node) {
  NodeEvent e;
  std::vector<std::function<void(const NodeEvent&)>> watches;
  {
    absl::MutexLock lock(&mu_);
    for (const NodeData& n : nodes_) {
      if (n.node_id == node) e.node = n;
    }
    for (const auto& [id, w] : node_watches_) watches.push_back(w);
  }
  e.kind = kind;
  e.received = absl::Now();
  for (const auto& w : watches) w(e);
}

void FakeCoreWorker::KillNode(const NodeId& node) {
  MarkNodeDead(node);
  NotifyNodeWatches(NodeEvent::kDead, node);
}

void FakeCoreWorker::MarkNodeDead(const NodeId& node) {
  absl::MutexLock lock(&mu_);
  for (NodeData& n : nodes_) {
    if (n.node_id == node) n.alive = false;
  }
  for (auto& [id, g] : groups_) {
    if (g.data.state != PlacementGroupState::kCreated) continue;
    bool hit = false;
    for (const BundleData& b : g.data.bundles) hit = hit || b.node_id == node;
    if (!hit) continue;
    for (BundleData& b : g.data.bundles) b.node_id = NodeId();
    g.data.state = PlacementGroupState::kPending;
    g.data.state_message = "a node holding bundles died";
  }
  PlacePendingLocked();
}

void FakeCoreWorker::InjectGcsError(const std::string& method, absl::Status status, int times) {
  absl::MutexLock lock(&mu_);
  gcs_errors_[method] = {std::move(status), times};
}

absl::Status FakeCoreWorker::TakeGcsError(const std::string& method) {
  absl::MutexLock lock(&mu_);
  auto it = gcs_errors_.find(method);
  if (it == gcs_errors_.end()) return absl::OkStatus();
  absl::Status error = it->second.first;
  if (it->second.second > 0 && --it->second.second == 0) gcs_errors_.erase(it);
  return error;
}

size_t FakeCoreWorker::LivePlacementGroupCount() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, g] : groups_) n += g.data.state != PlacementGroupState::kRemoved;
  return n;
}

std::vector<PlacementGroupData> FakeCoreWorker::CreatedPlacementGroups() const {
  absl::MutexLock lock(&mu_);
  std::vector<const FakeGroup*> all;
  for (const auto& [id, g] : groups_) all.push_back(&g);
  std::sort(all.begin(), all.end(), [](const FakeGroup* a, const FakeGroup* b) { return a->order < b->order; });
  std::vector<PlacementGroupData> out;
  for (const FakeGroup* g : all) out.push_back(g->data);
  return out;
}

bool FakeCoreWorker::AwaitCreatedPlacementGroups(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto created = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return groups_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&created), timeout);
}

std::map<std::string, double> FakeCoreWorker::AvailableLocked(const NodeId& node) const {
  ResourceSet available;
  for (const NodeData& n : nodes_) {
    if (n.node_id == node) available = ResourceSet::FromMap(n.resources_total).value_or(ResourceSet());
  }
  for (const auto& [id, g] : groups_) {
    if (g.data.state != PlacementGroupState::kCreated) continue;
    for (const BundleData& b : g.data.bundles) {
      if (b.node_id == node) available.Subtract(ResourceSet::FromMap(b.resources).value_or(ResourceSet()));
    }
  }
  return available.ToMap();
}

bool FakeCoreWorker::TryPlaceLocked(PlacementGroupData& group) {
  // The GCS's algorithm (common/placement_choice.h) over the alive nodes
  // that do not drain; the whole group is placed at once.
  std::vector<pg::BundleWant> wants;
  std::vector<LabelSelector> selectors;
  for (size_t i = 0; i < group.bundles.size(); ++i) {
    const BundleData& b = group.bundles[i];
    ResourceSet demand = ResourceSet::FromMap(b.resources).value_or(ResourceSet());
    std::string what = absl::StrCat("bundle ", i, " ", demand.DebugString());
    wants.push_back({static_cast<int>(i), std::move(demand), std::move(what), b.label_domain});
    selectors.push_back(LabelSelector::Parse(b.label_selector).value_or(LabelSelector()));
  }
  std::vector<pg::NodeOption> nodes;
  for (const NodeData& n : nodes_) {
    if (!n.alive || n.draining) continue;
    pg::NodeOption o{n.node_id,
                     ResourceSet::FromMap(n.resources_total).value_or(ResourceSet()),
                     ResourceSet::FromMap(AvailableLocked(n.node_id)).value_or(ResourceSet()),
                     {}};
    for (const LabelSelector& s : selectors) o.matches.push_back(s.Matches(n.labels));
    if (auto l = n.labels.find(group.same_label); !group.same_label.empty() && l != n.labels.end()) {
      o.label_value = l->second;
    }
    nodes.push_back(std::move(o));
  }
  const pg::Strategy strategy = group.strategy == PlacementStrategy::kStrictPack     ? pg::Strategy::kStrictPack
                                : group.strategy == PlacementStrategy::kSpread       ? pg::Strategy::kSpread
                                : group.strategy == PlacementStrategy::kStrictSpread ? pg::Strategy::kStrictSpread
                                                                                     : pg::Strategy::kPack;
  pg::Choice choice = group.same_label.empty() ? pg::ChoosePlacement(strategy, wants, std::move(nodes), {})
                                               : pg::ChoosePlacementByLabel(strategy, wants, std::move(nodes), {}, {});
  if (!choice.placed) {
    group.infeasible = choice.infeasible;
    group.state_message = choice.message;
    return false;
  }
  for (size_t i = 0; i < group.bundles.size(); ++i) group.bundles[i].node_id = choice.nodes.at(static_cast<int>(i));
  group.state = PlacementGroupState::kCreated;
  group.state_message.clear();
  group.infeasible = false;
  return true;
}

void FakeCoreWorker::PlacePendingLocked() {
  std::vector<FakeGroup*> pending;
  for (auto& [id, g] : groups_) {
    if (Waiting(g.data)) pending.push_back(&g);
  }
  std::sort(pending.begin(), pending.end(), [](const FakeGroup* a, const FakeGroup* b) { return a->order < b->order; });
  for (FakeGroup* g : pending) TryPlaceLocked(g->data);
}

absl::StatusOr<PlacementGroupData> FakeCoreWorker::CreatePlacementGroup(const PlacementGroupData& spec) {
  if (auto s = TakeGcsError("CreatePlacementGroup"); !s.ok()) return s;
  if (auto s = ValidateSpec(spec); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (auto it = groups_.find(spec.id); it != groups_.end()) return it->second.data;
  const std::string ns = spec.ray_namespace.empty() ? job_id_.Hex() : spec.ray_namespace;
  if (!spec.name.empty()) {
    auto key = std::make_pair(ns, spec.name);
    if (group_names_.count(key) > 0) {
      return absl::AlreadyExistsError("a placement group named '" + spec.name + "' already exists");
    }
    group_names_[key] = spec.id;
  }
  FakeGroup& g = groups_[spec.id];
  g.order = next_group_order_++;
  g.data = spec;
  g.data.ray_namespace = ns;
  g.data.state = PlacementGroupState::kPending;
  for (BundleData& b : g.data.bundles) b.node_id = NodeId();
  PlacePendingLocked();
  return g.data;
}

absl::Status FakeCoreWorker::RemovePlacementGroup(const PlacementGroupId& id) {
  if (auto s = TakeGcsError("RemovePlacementGroup"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError("no placement group " + id.Hex());
  PlacementGroupData& g = it->second.data;
  if (g.state == PlacementGroupState::kRemoved) return absl::OkStatus();
  g.state = PlacementGroupState::kRemoved;
  g.state_message = "removed by RemovePlacementGroup";
  for (BundleData& b : g.bundles) b.node_id = NodeId();
  if (!g.name.empty()) group_names_.erase({g.ray_namespace, g.name});
  PlacePendingLocked();
  return absl::OkStatus();
}

absl::StatusOr<PlacementGroupData> FakeCoreWorker::GetPlacementGroup(const PlacementGroupId& id) {
  if (auto s = TakeGcsError("GetPlacementGroup"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError("no placement group " + id.Hex());
  return it->second.data;
}

absl::StatusOr<PlacementGroupData> FakeCoreWorker::GetNamedPlacementGroup(const std::string& name,
                                                                          const std::string& ray_namespace) {
  if (auto s = TakeGcsError("GetNamedPlacementGroup"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = group_names_.find({ray_namespace.empty() ? job_id_.Hex() : ray_namespace, name});
  if (name.empty() || it == group_names_.end()) {
    return absl::NotFoundError("no placement group named '" + name + "'");
  }
  return groups_.at(it->second).data;
}

absl::StatusOr<PlacementGroupData> FakeCoreWorker::CreatePlacementGroupAndWait(const PlacementGroupData& spec,
                                                                               absl::Duration timeout) {
  auto created = CreatePlacementGroup(spec);
  if (!created.ok()) return created.status();
  return WaitPlacementGroupReady(spec.id, timeout);
}

absl::StatusOr<PlacementGroupData> FakeCoreWorker::WaitPlacementGroupReady(const PlacementGroupId& id,
                                                                           absl::Duration timeout) {
  if (auto s = TakeGcsError("WaitPlacementGroupReady"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (!groups_.contains(id)) return absl::NotFoundError("no placement group " + id.Hex());
  auto settled = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !Waiting(groups_.at(id).data); };
  mu_.AwaitWithTimeout(absl::Condition(&settled), timeout);
  return groups_.at(id).data;
}

absl::StatusOr<std::vector<NodeData>> FakeCoreWorker::GetAllNodes() {
  if (auto s = TakeGcsError("GetAllNodes"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return nodes_;
}

absl::StatusOr<std::vector<NodeResourcesData>> FakeCoreWorker::GetClusterResources() {
  if (auto s = TakeGcsError("GetClusterResources"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<NodeResourcesData> out;
  for (const NodeData& n : nodes_) {
    if (!n.alive) continue;
    out.push_back({n.node_id, n.resources_total, AvailableLocked(n.node_id)});
  }
  return out;
}

// ---------------------------------------------------------------- training runs

absl::Status FakeCoreWorker::ReportTrainRun(const TrainRunData& run,
                                            const std::vector<TrainMetricPointData>& new_metrics) {
  if (auto s = TakeGcsError("ReportTrainRun"); !s.ok()) return s;
  if (run.run_id.size() != 32) return absl::InvalidArgumentError("run_id must be 32 hex digits");
  absl::MutexLock lock(&mu_);
  auto it = train_runs_.find(run.run_id);
  if (it != train_runs_.end()) {
    const TrainRunState held = it->second.state;
    const bool terminal =
        held == TrainRunState::kFinished || held == TrainRunState::kErrored || held == TrainRunState::kAborted;
    if (terminal || run.version <= it->second.version) return absl::OkStatus();
  }
  std::vector<TrainMetricPointData> series =
      it == train_runs_.end() ? std::vector<TrainMetricPointData>{} : std::move(it->second.metrics);
  series.insert(series.end(), new_metrics.begin(), new_metrics.end());
  TrainRunData& stored = train_runs_[run.run_id];
  stored = run;
  stored.job_id = job_id_;
  stored.metrics = std::move(series);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrainRunData>> FakeCoreWorker::ListTrainRuns(bool with_metrics, int limit) {
  if (auto s = TakeGcsError("ListTrainRuns"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<TrainRunData> runs;
  for (const auto& [id, run] : train_runs_) runs.push_back(run);
  std::stable_sort(runs.begin(), runs.end(),
                   [](const TrainRunData& a, const TrainRunData& b) { return a.start_time_ms < b.start_time_ms; });
  if (limit > 0 && static_cast<int>(runs.size()) > limit) runs.erase(runs.begin(), runs.end() - limit);
  if (!with_metrics) {
    for (TrainRunData& r : runs) r.metrics.clear();
  }
  return runs;
}

}  // namespace manta::core
