// ElasticDriver: forming each group (who is in, where its state comes
// from, each worker's place and environment), starting over, and ending.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "manta/api.h"
#include "train/controller_common.h"
#include "train/elastic.h"
#include "train/scaling.h"
#include "train/worker.h"

namespace manta::train {
namespace {

// The JAX variables of a worker in a group.
void AddJaxEnv(const TrainContext& c, bool user_sets_platforms, std::map<std::string, std::string>* env) {
  (*env)["JAX_COORDINATOR_ADDRESS"] = c.coordinator_address;
  (*env)["JAX_PROCESS_ID"] = std::to_string(c.world_rank);
  (*env)["JAX_NUM_PROCESSES"] = std::to_string(c.world_size);
  if (!user_sets_platforms) (*env)["JAX_PLATFORMS"] = "tpu,cpu";
}

}  // namespace

std::vector<std::pair<WorkerKey, WorkerRunRequest>> ElasticDriver::PlanGroup(const std::vector<std::string>& order,
                                                                             const JoinInstruction& survivors,
                                                                             const JoinInstruction& joiners) {
  const ControllerSpec& spec = c_->Spec();
  std::vector<tpu::SliceInfo> infos;
  std::vector<std::vector<std::string>> ips;
  std::vector<bool> joining;
  std::vector<ActorHandle<TrainWorker>> head;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& name : order) {
      const Held& h = slices_.at(name);
      infos.push_back(h.slice->info());
      ips.push_back(h.slice->host_ips());
      joining.push_back(h.role == SliceRole::kJoining);
      if (head.empty()) head.push_back(h.slice->workers().at(0).actor);
    }
  }
  // A port free on rank 0's host now, for the group's coordinator.
  int port = 0;
  auto setup = TryGet(head.at(0).Task(&TrainWorker::Setup).Remote(), absl::Seconds(10));
  if (setup.ok()) port = (*setup)->free_port;
  std::vector<std::pair<WorkerKey, WorkerRunRequest>> plan;
  const int n = static_cast<int>(order.size()) * hosts_;
  auto tpu = spec.scaling.resources_per_worker.find("TPU");
  absl::MutexLock lock(&mu_);
  for (int s = 0; s < static_cast<int>(order.size()); ++s) {
    for (int h = 0; h < hosts_; ++h) {
      WorkerRunRequest req;
      TrainContext& c = req.context;
      c.world_rank = s * hosts_ + h;
      c.world_size = n;
      c.local_rank = 0;
      c.local_world_size = 1;
      c.node_rank = c.world_rank;
      c.slice_id = s;
      c.num_slices = static_cast<int>(order.size());
      c.worker_id = h;
      c.chips = tpu == spec.scaling.resources_per_worker.end() ? 0 : static_cast<int>(tpu->second);
      c.coordinator_address = absl::StrCat(ips[0][0], ":", port);
      c.run_name = spec.run_name;
      c.run_id = spec.run_id;
      c.attempt_id = attempt_id_;
      c.attempt_number = c_->Attempts();
      c.storage_path = spec.run_dir;
      c.epoch = epoch_;
      c.max_world_size = spec.scaling.max_workers;
      c.max_slices = max_slices_;
      req.env = tpu::SliceProcessEnv(infos, ips, s, h);
      AddJaxEnv(c, spec.worker_env.count("JAX_PLATFORMS") > 0, &req.env);
      req.join = joining[s] ? joiners : survivors;
      req.worker_key = WorkerKey{order[s], h};
      req.loop_name = spec.loop_name;
      req.loop_args = spec.loop_args;
      req.loop_takes_config = spec.loop_takes_config;
      req.controller = self_;
      plan.emplace_back(req.worker_key, std::move(req));
    }
  }
  return plan;
}

void ElasticDriver::Reform() {
  std::vector<std::string> active, joining, leaving;
  std::map<WorkerKey, AwaitRequest> arrived;
  bool everyone = true;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, h] : slices_) {
      (h.role == SliceRole::kActive ? active : h.role == SliceRole::kJoining ? joining : leaving).push_back(name);
    }
    arrived = arrived_;
    for (const WorkerKey& m : members_) everyone = everyone && arrived_.count(m) > 0;
  }
  CommitArrivedCheckpoint(arrived, everyone);
  for (const std::string& name : leaving) Drop(name);
  // An active slice counts only if every worker of it arrived with its state.
  std::vector<std::string> survivors;
  for (const std::string& name : active) {
    bool whole = true;
    for (int h = 0; h < hosts_; ++h) whole = whole && arrived.count(WorkerKey{name, h}) > 0;
    if (whole) {
      survivors.push_back(name);
    } else {
      Drop(name);
    }
  }
  while (survivors.size() + joining.size() > static_cast<size_t>(max_slices_)) {
    Drop(joining.back());
    joining.pop_back();
  }
  std::set<int64_t> steps;
  for (const std::string& name : survivors) {
    for (int h = 0; h < hosts_; ++h) steps.insert(arrived.at(WorkerKey{name, h}).next_step);
  }
  const RunControl::ReportState reports = c_->Snapshot();
  const int64_t committed = reports.committed_next_step;
  const std::optional<Checkpoint>& checkpoint = reports.latest_checkpoint;
  const bool keep =
      !survivors.empty() && reports.resizable && reports.replicated && steps.size() == 1 && *steps.begin() == committed;
  const int slices = static_cast<int>(survivors.size() + joining.size());
  if (slices < min_slices_) {
    // Below min: wait for slices. Survivors that hold the state wait in memory.
    if (!keep) {
      for (const std::string& name : survivors) Drop(name);
    }
    waiting_ = true;
    waiting_since_ = absl::Now();
    if (c_->State() != state::TrainRunState::kRescheduling) {
      c_->Log().info("Waiting for {} whole slice(s) of {}: {} held now ({}).", min_slices_, c_->Spec().scaling.pod_type,
                     slices, reform_why_);
      c_->Transition(state::TrainRunState::kRescheduling, reform_why_);
    }
    return;
  }
  JoinInstruction survive, join;
  if (keep) {
    survive.source = joining.empty() ? JoinInstruction::kKeep : JoinInstruction::kPeers;
    join.source = JoinInstruction::kPeers;
    survive.step = join.step = committed;
  } else {
    survive.source = join.source = checkpoint ? JoinInstruction::kRestore : JoinInstruction::kInit;
    if (checkpoint) survive.restore_from = join.restore_from = checkpoint->path;
  }
  std::vector<std::string> order = survivors;
  order.insert(order.end(), joining.begin(), joining.end());
  std::sort(order.begin(), order.end());
  for (int s = 0; s < static_cast<int>(order.size()); ++s) {
    if (keep && std::find(survivors.begin(), survivors.end(), order[s]) != survivors.end()) {
      survive.source_slices.push_back(s);
    }
  }
  join.source_slices = survive.source_slices;
  StartGroup(order, survive, join);
}

void ElasticDriver::CommitArrivedCheckpoint(const std::map<WorkerKey, AwaitRequest>& arrived, bool everyone) {
  // A checkpoint saved after the group's last step counts when every worker
  // of the group saved its part, as in a report round.
  if (!everyone || arrived.empty()) return;
  const std::optional<Checkpoint>& first = arrived.begin()->second.checkpoint;
  if (!first.has_value()) return;
  for (const auto& [key, a] : arrived) {
    if (!a.checkpoint.has_value() || a.checkpoint->path != first->path) return;
  }
  c_->CommitCheckpoint(*first);
}

void ElasticDriver::StartGroup(const std::vector<std::string>& order, const JoinInstruction& survive,
                               const JoinInstruction& join) {
  DropDemand();
  int64_t epoch;
  {
    absl::MutexLock lock(&mu_);
    epoch = ++epoch_;
  }
  const int n = static_cast<int>(order.size()) * hosts_;
  const std::string how = survive.source == JoinInstruction::kKeep      ? "keeping their state in memory"
                          : survive.source == JoinInstruction::kPeers   ? "new workers taking the state from peers"
                          : survive.source == JoinInstruction::kRestore ? "restoring checkpoint " + survive.restore_from
                                                                        : "from initial values";
  if (group_size_ > 0 && group_size_ != n) {
    c_->Log().info(
        "Detected changes in the cluster resources. Deciding to resize the worker group from {} -> {} "
        "workers.",
        group_size_, n);
  }
  group_size_ = n;
  LogStartingGroup(c_->Log(), n, c_->Spec().scaling.resources_per_worker);
  c_->Log().info("Forming group {} over {} ({}; {}; decided {:.3f} s after the event).", epoch,
                 absl::StrJoin(order, ", "), how, reform_why_.empty() ? "the run begins" : reform_why_,
                 Since(reform_event_));
  auto plan = PlanGroup(order, survive, join);
  c_->OpenReports(attempt_id_, epoch, n, reform_event_);
  std::vector<std::pair<WorkerKey, WorkerRunRequest>> starts;
  std::vector<state::TrainWorker> records;
  {
    absl::MutexLock lock(&mu_);
    members_.clear();
    ranks_.clear();
    for (auto& [key, req] : plan) {
      members_.insert(key);
      Held& h = slices_.at(key.slice);
      const HeldSlice::Worker& w = h.slice->workers().at(req.context.worker_id);
      records.push_back(c_->WorkerRecord(req.context, w.info, w.actor.ID(), key.slice));
      ranks_[key] = req.context.world_rank;
      if (h.role == SliceRole::kActive && arrived_.count(key)) {
        plans_[key] = AwaitReply{false, req.context, req.join, req.env};
      } else {
        starts.emplace_back(key, std::move(req));
      }
    }
    for (const std::string& name : order) slices_.at(name).role = SliceRole::kActive;
    arrived_.clear();
    ended_ = false;
  }
  for (auto& [key, req] : starts) {
    const std::string& slice = key.slice;
    ActorHandle<TrainWorker> actor;
    {
      absl::MutexLock lock(&mu_);
      actor = slices_.at(slice).slice->workers().at(req.context.worker_id).actor;
    }
    ObjectRef<void> run = actor.Task(&TrainWorker::Run).Remote(req);
    absl::MutexLock lock(&mu_);
    HeldSlice::Worker& w = slices_.at(slice).slice->workers().at(req.context.worker_id);
    w.run = run;
    w.running = true;
  }
  c_->RecordAttempt(attempt_id_, state::TrainAttemptState::kRunning, "", &records);
  c_->UpdateRecord([&](state::TrainRun& r) { r.max_workers = c_->Spec().scaling.max_workers; });
  waiting_ = false;
  pausing_ = false;
  reform_why_.clear();
  finished_.clear();
  if (c_->State() != state::TrainRunState::kRunning) c_->Transition(state::TrainRunState::kRunning, "");
}

void ElasticDriver::CreateDemand() {
  DropDemand();
  // A head of a slice that is whole and matches the run's selector: heads
  // of other slices are excluded, as ReserveSlices excludes them.
  std::set<std::string> all, whole;
  for (const NodeInfo& n : TryNodes().value_or(std::vector<NodeInfo>{})) {
    auto it = n.labels.find("manta.io/tpu-slice-name");
    if (n.alive && !n.draining && it != n.labels.end()) all.insert(it->second);
  }
  const ScalingSpec& sc = c_->Spec().scaling;
  auto slices = tpu::TryListSlices(sc.label_selector);
  const std::string& pod_type = sc.pod_type;
  if (slices.ok() && slices->count(pod_type)) {
    for (const tpu::SliceInfo& s : slices->at(pod_type)) whole.insert(s.name);
  }
  std::vector<std::string> broken;
  for (const std::string& name : all) {
    if (whole.count(name) == 0) broken.push_back(name);
  }
  PlacementGroupOptions o;
  BundleSpec b;
  b.resources = {{"TPU-" + pod_type + "-head", 1}};
  b.label_selector = sc.label_selector;
  if (!broken.empty() && sc.label_selector.count("manta.io/tpu-slice-name") == 0) {
    b.label_selector["manta.io/tpu-slice-name"] = "!in(" + absl::StrJoin(broken, ",") + ")";
  }
  o.bundles.push_back(b);
  auto g = TryCreatePlacementGroup(o);
  if (g.ok()) demand_ = *g;
}

bool ElasticDriver::DemandPlaced() {
  if (!demand_.has_value()) return false;
  try {
    return demand_->State() == PlacementGroupState::kCreated;
  } catch (const Error&) {
    return false;
  }
}

void ElasticDriver::DropDemand() {
  if (!demand_.has_value()) return;
  TryRemovePlacementGroup(*demand_).IgnoreError();
  demand_.reset();
}

void ElasticDriver::RestartAll(const std::string& why, bool counts_as_failure, std::vector<WorkerFailure> failed) {
  if (counts_as_failure && !c_->DecideOnFailure(why, static_cast<int>(std::max<size_t>(failed.size(), 1)))) {
    const std::string prefix = TrainingFailedPrefix(c_->Attempts(), c_->Failures(), c_->Spec().max_failures);
    c_->SetWorkerFailures(std::move(failed));
    Finish(absl::AbortedError(absl::StrCat(prefix, "The last failure:\n", why)));
    return;
  }
  if (!attempt_id_.empty()) {
    c_->CloseReports();
    c_->RecordAttempt(attempt_id_,
                      counts_as_failure ? state::TrainAttemptState::kErrored : state::TrainAttemptState::kAborted, why,
                      nullptr);
  }
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, h] : slices_) names.push_back(name);
  }
  for (const std::string& name : names) Drop(name);
  {
    absl::MutexLock lock(&mu_);
    members_.clear();
    for (const auto& [key, a] : arrived_) plans_[key].leave = true;
    arrived_.clear();
    ended_ = false;
    attempt_id_ = RandomHexId();
  }
  c_->CountAttempt();
  c_->RecordAttempt(attempt_id_, state::TrainAttemptState::kPending, "", nullptr);
  if (c_->State() != state::TrainRunState::kScheduling && c_->State() != state::TrainRunState::kInitializing) {
    c_->Transition(counts_as_failure ? state::TrainRunState::kRestarting : state::TrainRunState::kResizing, why);
    c_->Transition(state::TrainRunState::kScheduling, "");
  }
  reform_why_ = why;
  reform_event_ = absl::Now();
  waiting_ = true;
  waiting_since_ = absl::Now();
  pausing_ = false;
}

void ElasticDriver::Finish(const absl::Status& status) {
  DropDemand();
  c_->CloseReports();
  c_->RecordAttempt(attempt_id_, status.ok() ? state::TrainAttemptState::kFinished : state::TrainAttemptState::kErrored,
                    std::string(status.message()), nullptr);
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, h] : slices_) names.push_back(name);
    stopping_ = true;  // Await callers leave
  }
  for (const std::string& name : names) Drop(name);
  c_->Transition(status.ok() ? state::TrainRunState::kFinished : state::TrainRunState::kErrored,
                 std::string(status.message()));
  outcome_ = c_->Finish(status);
  done_ = true;
}

}  // namespace manta::train
