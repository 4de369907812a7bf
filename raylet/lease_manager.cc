#include "raylet/lease_manager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "raylet/raylet_log.h"
#include "common/placement_group_resources.h"
#include "common/tpu.h"

namespace manta::raylet {
namespace {

using Reply = rpc::RequestWorkerLeaseReply;

constexpr size_t kMaxLeaseIdBytes = 64;
constexpr size_t kMaxPathBytes = 4096;
constexpr int kMaxWorkerArgs = 1024;

std::string DescribeSelector(const rpc::TaskSpec& spec) {
  if (spec.label_selector().empty()) return "";
  std::map<std::string, std::string> m(spec.label_selector().begin(), spec.label_selector().end());
  return " and label selector {" + absl::StrJoin(m, ", ", absl::PairFormatter(": ")) + "}";
}

absl::Status ValidateRequest(const rpc::RequestWorkerLeaseRequest& r) {
  if (r.lease_id().empty() || r.lease_id().size() > kMaxLeaseIdBytes) {
    return absl::InvalidArgumentError("lease_id must be 1 to 64 bytes");
  }
  const rpc::TaskSpec& spec = r.spec();
  if (auto job = JobId::FromBinary(spec.job_id()); !job.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.job_id: ", job.status().message()));
  }
  if (spec.worker_executable().empty() || spec.worker_executable().size() > kMaxPathBytes ||
      spec.worker_executable().find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("spec.worker_executable must be a path of 1 to 4096 bytes");
  }
  if (spec.worker_args_size() > kMaxWorkerArgs) return absl::InvalidArgumentError("too many worker_args");
  for (const auto& a : spec.worker_args()) {
    if (a.find('\0') != std::string::npos) return absl::InvalidArgumentError("worker_args may not hold NUL bytes");
  }
  if (spec.resources().size() > 256) return absl::InvalidArgumentError("too many resources in the demand");
  auto tpu = spec.resources().find(tpu::kTpuResource);
  if (tpu != spec.resources().end() && tpu->second != 0 && !tpu::IsValidTpuRequest(tpu->second)) {
    return absl::InvalidArgumentError(absl::StrCat("TPU: ", tpu->second, " is not a valid TPU request (1, 2, 4 or 8)"));
  }
  if (!spec.placement_group_id().empty()) {
    auto group = PlacementGroupId::FromBinary(spec.placement_group_id());
    if (!group.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("spec.placement_group_id: ", group.status().message()));
    }
    if (group->IsNil()) return absl::InvalidArgumentError("spec.placement_group_id is nil");
    if (spec.bundle_index() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.bundle_index ", spec.bundle_index(), " is invalid (-1 for any bundle, else >= 0)"));
    }
  }
  return absl::OkStatus();
}

// The demand a lease takes: its plain demand, or in a placement group the
// group's names for it.
absl::StatusOr<ResourceSet> LeaseDemand(const rpc::TaskSpec& spec) {
  auto plain = ResourceSet::FromPairs(spec.resources());
  if (!plain.ok() || spec.placement_group_id().empty()) return plain;
  PlacementGroupId group = *PlacementGroupId::FromBinary(spec.placement_group_id());  // validated
  ResourceSet demand = pg::BundleDemand(*plain, group, spec.bundle_index());
  for (const auto& [name, q] : demand.entries()) {
    if (auto s = ResourceSet::ValidateName(name); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("resource name too long for a placement group: ", name));
    }
  }
  return demand;
}

void AppendField(std::string* key, const std::string& field) {
  key->append(std::to_string(field.size())).append(":").append(field).append(";");
}

// What makes leases interchangeable (see LeaseQueue): equal keys, equal
// decisions. `demand` names the placement-group bundle, `kind` the worker.
std::string ShapeKey(const rpc::RequestWorkerLeaseRequest& request, const ResourceSet& demand,
                     const std::string& kind) {
  const rpc::TaskSpec& spec = request.spec();
  std::string key;
  AppendField(&key, demand.DebugString());
  AppendField(&key, DescribeSelector(spec));
  AppendField(&key, spec.scheduling_strategy().SerializeAsString());
  AppendField(&key, spec.placement_group_id());
  AppendField(&key, absl::StrCat(spec.bundle_index(), request.grant_or_reject() ? "r" : "-",
                                 request.fail_if_infeasible() ? "f" : "-"));
  AppendField(&key, kind);
  return key;
}

}  // namespace

LeaseManager::LeaseManager(LeaseManagerOptions options, LocalResourceManager* local, ClusterView* view,
                           WorkerPoolInterface* pool)
    : options_(std::move(options)), local_(local), view_(view), pool_(pool) {}

LeaseManager::~LeaseManager() = default;

void LeaseManager::HandleRequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request, Reply* reply,
                                            rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto invalid = [&](const absl::Status& s) {
    reply->set_outcome(Reply::INVALID);
    reply->set_message(std::string(s.message()));
    done(absl::OkStatus());
  };
  if (auto s = ValidateRequest(request); !s.ok()) return invalid(s);
  if (auto it = leases_.find(request.lease_id()); it != leases_.end()) {
    Lease& existing = *it->second;
    if (existing.state == State::kGranted) {
      FillGrant(existing, reply);
      return done(absl::OkStatus());
    }
    existing.waiters.push_back({reply, std::move(done)});
    return;
  }
  if (auto it = ended_.find(request.lease_id()); it != ended_.end()) {
    *reply = it->second.reply;
    return done(absl::OkStatus());
  }
  if (CallerGone(request.spec())) {
    reply->set_outcome(Reply::CANCELLED);  // sent before its caller exited
    reply->set_message("the lease's caller exited");
    return done(absl::OkStatus());
  }
  auto demand = LeaseDemand(request.spec());
  if (!demand.ok()) return invalid(demand.status());
  auto selector = LabelSelector::Parse(request.spec().label_selector());
  if (!selector.ok()) return invalid(selector.status());

  auto lease = std::make_unique<Lease>();
  lease->id = request.lease_id();
  lease->seq = next_seq_++;
  lease->spec = request.spec();
  lease->spec.clear_args();
  lease->demand = std::move(*demand);
  lease->selector = std::move(*selector);
  lease->grant_or_reject = request.grant_or_reject();
  lease->fail_if_infeasible = request.fail_if_infeasible();
  lease->waiters.push_back({reply, std::move(done)});
  std::string kind = WorkerKey(request.spec());
  std::string key = ShapeKey(request, lease->demand, kind);
  lease->queued = queue_.Push({std::move(key), lease->demand, std::move(kind)}, lease->seq, lease->id);
  leases_.emplace(lease->id, std::move(lease));
  Schedule();
}

void LeaseManager::HandleReturnWorker(const rpc::ReturnWorkerRequest& request, rpc::ReturnWorkerReply*,
                                      rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto it = leases_.find(request.lease_id());
  if (it == leases_.end()) return done(absl::OkStatus());
  Lease& lease = *it->second;
  if (lease.state != State::kGranted) {
    Finish(lease, Reply::CANCELLED, "the lease was returned before it was granted");
    Schedule();
    return done(absl::OkStatus());
  }
  if (!request.worker_id().empty() && request.worker_id() != lease.worker.worker_id.Binary()) {
    return done(absl::InvalidArgumentError("lease " + ToHex(lease.id) + " is held by worker " +
                                           lease.worker.worker_id.Hex() + ", not " + ToHex(request.worker_id())));
  }
  WorkerId worker = lease.worker.worker_id;
  // An actor's worker is dedicated to it; it is not reused for other leases.
  bool dedicated = lease.spec.type() == rpc::TaskSpec::ACTOR_CREATION_TASK;
  Erase(lease.id);
  if (request.disconnect_worker() || dedicated) {
    pool_->DisconnectWorker(worker, request.disconnect_worker() ? "returned with disconnect" : "its actor is gone");
  } else {
    pool_->PushWorker(worker);
  }
  Schedule();
  done(absl::OkStatus());
}

void LeaseManager::HandleCancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request,
                                           rpc::CancelWorkerLeaseReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto it = leases_.find(request.lease_id());
  if (it != leases_.end() && it->second->state != State::kGranted) {
    Finish(*it->second, Reply::CANCELLED, "the lease was cancelled", nullptr, /*cancelled=*/true);
    reply->set_cancelled(true);
    Schedule();
  } else if (auto e = ended_.find(request.lease_id()); e != ended_.end() && e->second.cancelled) {
    reply->set_cancelled(true);  // a retry
  }
  done(absl::OkStatus());
}

void LeaseManager::HandleKillJobWorkers(const rpc::KillJobWorkersRequest& request, rpc::KillJobWorkersReply*,
                                        rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto job = JobId::FromBinary(request.job_id());
  if (!job.ok()) return done(absl::InvalidArgumentError(absl::StrCat("job_id: ", job.status().message())));
  absl::flat_hash_set<WorkerId> keep;
  std::vector<std::string> cancel;
  for (const auto& [id, lease] : leases_) {
    if (lease->spec.job_id() != request.job_id()) continue;
    bool detached = lease->spec.type() == rpc::TaskSpec::ACTOR_CREATION_TASK && lease->spec.actor_creation().detached();
    if (lease->state == State::kGranted) {
      if (detached) keep.insert(lease->worker.worker_id);
    } else if (!detached) {
      cancel.push_back(id);
    }
  }
  for (const auto& id : cancel) Finish(*leases_.at(id), Reply::CANCELLED, "the job finished");
  pool_->KillJobWorkers(*job, keep);
  Schedule();
  done(absl::OkStatus());
}

void LeaseManager::EndLeasesInGroup(const PlacementGroupId& group, const std::function<bool(int)>& in_returned,
                                    const std::string& why) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<std::string> ended;
  for (const auto& [id, lease] : leases_) {
    if (lease->spec.placement_group_id() != group.Binary() || Infeasible(*lease)) continue;
    bool hit = false;
    if (lease->spec.bundle_index() >= 0) {
      hit = in_returned(lease->spec.bundle_index());
    } else if (lease->allocation.id != 0) {
      for (const BundleKey& b : lease->allocation.bundles) hit |= b.first == group && in_returned(b.second);
    } else {
      hit = in_returned(-1);
    }
    if (hit) ended.push_back(id);
  }
  EndLeases(ended, why);  // frees the leases' resources before the bundles go
}

bool LeaseManager::EndLeasesOfCaller(const WorkerId& worker) {
  MANTA_CHECK_THREAD(thread_);
  if (!dead_callers_.Insert(worker.Binary())) return false;  // ended already
  return EndLeasesOfGoneCallers("its caller worker_id=" + worker.Hex() + " exited");
}

bool LeaseManager::EndLeasesOfCallerNode(const NodeId& node) {
  MANTA_CHECK_THREAD(thread_);
  if (!dead_caller_nodes_.Insert(node.Binary())) return false;
  return EndLeasesOfGoneCallers("its caller's node_id=" + node.Hex() + " died");
}

bool LeaseManager::CallerGone(const rpc::TaskSpec& spec) const {
  if (spec.type() == rpc::TaskSpec::ACTOR_CREATION_TASK) return false;
  const rpc::Address& caller = spec.caller_address();
  return dead_callers_.Contains(caller.worker_id()) ||
         (!spec.caller_is_driver() && dead_caller_nodes_.Contains(caller.node_id()));
}

bool LeaseManager::EndLeasesOfGoneCallers(const std::string& why) {
  std::vector<std::string> ended;
  for (const auto& [id, lease] : leases_) {
    if (CallerGone(lease->spec)) ended.push_back(id);
  }
  EndLeases(ended, why);
  return !ended.empty();
}

void LeaseManager::EndLeases(const std::vector<std::string>& ids, const std::string& why) {
  for (const auto& id : ids) {
    Lease& lease = *leases_.at(id);
    if (lease.state != State::kGranted) {
      Finish(lease, Reply::CANCELLED, why);
      continue;
    }
    WorkerId worker = lease.worker.worker_id;
    Log()->info("stopping worker_id={} of lease_id={}: {}", worker.Hex(), ToHex(id), why);
    Erase(id);
    pool_->DisconnectWorker(worker, why);
  }
}

void LeaseManager::CancelAll(const std::string& why) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<std::string> waiting;
  for (const auto& [id, lease] : leases_) {
    if (lease->state != State::kGranted) waiting.push_back(id);
  }
  for (const auto& id : waiting) Finish(*leases_.at(id), Reply::CANCELLED, why);
}

void LeaseManager::StartDraining(const std::string& reason) {
  MANTA_CHECK_THREAD(thread_);
  drain_reason_ = reason;
  if (draining_) return;
  draining_ = true;
  Log()->info("draining: no new leases here ({} queued or infeasible re-examined)", queue_.size());
  queue_.WakeAll();
  Schedule();
}

void LeaseManager::OnClusterChanged() {
  MANTA_CHECK_THREAD(thread_);
  queue_.WakeAll();
  Schedule();
}

void LeaseManager::OnLocalResourcesChanged() {
  MANTA_CHECK_THREAD(thread_);
  queue_.WakeAll();
  Schedule();
}

bool LeaseManager::OnWorkerExit(const WorkerId& worker) {
  MANTA_CHECK_THREAD(thread_);
  auto it = lease_of_worker_.find(worker);
  if (it == lease_of_worker_.end()) return false;
  Log()->info("leased worker exited worker_id={} lease_id={}", worker.Hex(), ToHex(it->second));
  Erase(it->second);
  Schedule();
  return true;
}

void LeaseManager::Schedule() {
  MANTA_CHECK_THREAD(thread_);
  if (scheduling_) {
    schedule_again_ = true;
    return;
  }
  scheduling_ = true;
  do {
    schedule_again_ = false;
    if (view_->version() != woken_at_view_version_) {
      // Nodes may have more room, or fewer can hold a shape at all.
      woken_at_view_version_ = view_->version();
      queue_.WakeAll();
    }
    SchedulePass();
  } while (schedule_again_);
  scheduling_ = false;
  PrestartForBacklog();
  NotifyDemandsIfChanged();
}

void LeaseManager::SchedulePass() {
  std::vector<std::pair<std::string, uint64_t>> granted;
  while (LeaseQueue::Shape* shape = queue_.Front()) {
    Lease& lease = *leases_.at(shape->head().id);
    ++decisions_;
    switch (Decide(lease)) {
      case Decision::kGrant:
        granted.emplace_back(lease.id, lease.seq);
        break;
      case Decision::kBlocked:
        queue_.Park(shape, LeaseQueue::Verdict::kBlocked);
        break;
      case Decision::kInfeasible:
        queue_.Park(shape, LeaseQueue::Verdict::kInfeasible);
        CheckGroup(lease);  // last: its answer may end the lease
        break;
      case Decision::kReplied:
        break;
    }
  }
  for (const auto& [id, seq] : granted) {
    auto l = leases_.find(id);
    if (l != leases_.end() && l->second->seq == seq && l->second->state == State::kWaitingForWorker) {
      StartGrant(*l->second);
    }
  }
}

LeaseManager::Decision LeaseManager::Decide(Lease& lease) {
  if (draining_) return DecideWhileDraining(lease);
  if (auto d = DecideByStrategy(lease)) return *d;
  bool local_ok = local_->CanEverFit(lease.demand) && lease.selector.Matches(options_.labels);
  if (local_ok) {
    if (TryGrantHere(lease)) return Decision::kGrant;
    if (lease.grant_or_reject) {
      Finish(lease, Reply::REJECTED, "this node cannot hold " + lease.demand.DebugString() + " now");
      return Decision::kReplied;
    }
    if (const ClusterView::Node* n = RoomElsewhere(lease)) return Spill(lease, *n);
    return Decision::kBlocked;
  }
  if (lease.grant_or_reject) {
    Finish(lease, Reply::REJECTED,
           "this node can never hold " + lease.demand.DebugString() + DescribeSelector(lease.spec));
    return Decision::kReplied;
  }
  if (const ClusterView::Node* n = view_->PickNode(lease.demand, lease.selector, /*require_available=*/false)) {
    return Spill(lease, *n);
  }
  return KeepInfeasible(
      lease, "no node in the cluster can ever hold " + lease.demand.DebugString() + DescribeSelector(lease.spec));
}

bool LeaseManager::MayHaveRoomElsewhere(const Lease& lease) const {
  return lease.queued.shape->no_room_version != view_->version();
}

const ClusterView::Node* LeaseManager::RoomElsewhere(Lease& lease) {
  if (!MayHaveRoomElsewhere(lease)) return nullptr;
  const ClusterView::Node* n = view_->PickNode(lease.demand, lease.selector, /*require_available=*/true);
  if (n == nullptr) lease.queued.shape->no_room_version = view_->version();
  return n;
}

LeaseManager::Decision LeaseManager::DecideWhileDraining(Lease& lease) {
  if (lease.grant_or_reject) {
    Finish(lease, Reply::REJECTED, "this node is draining (" + drain_reason_ + ")");
    return Decision::kReplied;
  }
  // Only to a node with room now: a spilled lease is grant_or_reject there,
  // and a refusal would bring the caller straight back here.
  if (const ClusterView::Node* n = RoomElsewhere(lease)) return Spill(lease, *n);
  // Else spilled when a report shows room.
  if (view_->AnyCanEverFit(lease.demand, lease.selector)) return Decision::kBlocked;
  return KeepInfeasible(lease, "this node is draining (" + drain_reason_ + ") and no other node can ever hold " +
                                   lease.demand.DebugString() + DescribeSelector(lease.spec));
}

LeaseManager::Decision LeaseManager::Spill(Lease& lease, const ClusterView::Node& node) {
  rpc::Address at = node.address;
  view_->SubtractAvailable(node.id, lease.demand);
  Finish(lease, Reply::SPILLBACK, "spilled to node " + node.id.Hex(), &at);
  return Decision::kReplied;
}

LeaseManager::Decision LeaseManager::KeepInfeasible(Lease& lease, const std::string& why) {
  if (lease.fail_if_infeasible) {
    Finish(lease, Reply::INFEASIBLE, why);
    return Decision::kReplied;
  }
  const LeaseQueue::Shape& shape = *lease.queued.shape;
  if (shape.verdict() != LeaseQueue::Verdict::kInfeasible) {
    Log()->warn("infeasible leases queued until a node that can hold them joins lease_id={} count={}: {}",
                ToHex(lease.id), shape.size(), why);
  }
  return Decision::kInfeasible;
}

void LeaseManager::CheckGroup(const Lease& lease) {
  if (!group_check_ || lease.spec.placement_group_id().empty()) return;
  auto group = PlacementGroupId::FromBinary(lease.spec.placement_group_id());
  if (!group.ok() || !groups_checking_.insert(*group).second) return;
  group_check_(*group, [this, group = *group](bool exists) { OnGroupChecked(group, exists); });
}

void LeaseManager::RecheckGroups() {
  MANTA_CHECK_THREAD(thread_);
  // Every lease of a shape is in the same group: its head speaks for it.
  std::vector<const Lease*> waiting;
  queue_.ForEachShape([&](const LeaseQueue::Shape& shape) {
    const Lease& head = *leases_.at(shape.head().id);
    if (Infeasible(head) && !head.spec.placement_group_id().empty()) waiting.push_back(&head);
  });
  for (const Lease* lease : waiting) CheckGroup(*lease);
}

void LeaseManager::OnGroupChecked(const PlacementGroupId& group, bool exists) {
  MANTA_CHECK_THREAD(thread_);
  groups_checking_.erase(group);
  if (exists) return;
  std::vector<std::string> doomed;
  for (const auto& [id, lease] : leases_) {
    if (Infeasible(*lease) && lease->spec.placement_group_id() == group.Binary()) doomed.push_back(id);
  }
  for (const auto& id : doomed) {
    Finish(*leases_.at(id), Reply::INVALID, "placement group " + group.Hex() + " does not exist or was removed");
  }
  if (!doomed.empty()) Schedule();
}

void LeaseManager::StartGrant(Lease& lease) {
  pool_->PopWorker(lease.spec, [this, id = lease.id, seq = lease.seq](absl::StatusOr<LeasedWorker> w) {
    OnWorkerPopped(id, seq, std::move(w));
  });
}

void LeaseManager::OnWorkerPopped(const std::string& id, uint64_t seq, absl::StatusOr<LeasedWorker> worker) {
  MANTA_CHECK_THREAD(thread_);
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second->seq != seq || it->second->state != State::kWaitingForWorker) {
    // Cancelled meanwhile: the worker is idle again.
    if (worker.ok()) pool_->PushWorker(worker->worker_id);
    return;
  }
  Lease& lease = *it->second;
  if (!worker.ok()) {
    Log()->warn("no worker for lease_id={}: {}", ToHex(id), std::string(worker.status().message()));
    Finish(lease, Reply::WORKER_START_FAILED, std::string(worker.status().message()));
    Schedule();
    return;
  }
  lease.state = State::kGranted;
  lease.worker = *worker;
  lease_of_worker_[worker->worker_id] = id;
  if (on_grant_) on_grant_(lease.spec, lease.worker);
  for (Waiter& w : lease.waiters) {
    FillGrant(lease, w.reply);
    w.done(absl::OkStatus());
  }
  lease.waiters.clear();
}

void LeaseManager::FillGrant(const Lease& lease, Reply* reply) const {
  reply->set_outcome(Reply::GRANTED);
  rpc::Address* a = reply->mutable_worker_address();
  a->set_ip(options_.node_ip);
  a->set_port(lease.worker.port);
  a->set_worker_id(lease.worker.worker_id.Binary());
  a->set_node_id(options_.node_id.Binary());
  reply->set_worker_pid(lease.worker.pid);
  for (int chip : lease.allocation.tpu_chip_ids) reply->add_tpu_chip_ids(chip);
  reply->set_tpu_chips_per_host(local_->tpu_chips_per_host());
}

void LeaseManager::Finish(Lease& lease, Reply::Outcome outcome, const std::string& message,
                          const rpc::Address* retry_at, bool cancelled) {
  std::vector<Waiter> waiters = std::move(lease.waiters);
  Reply last;
  last.set_outcome(outcome);
  last.set_message(message);
  if (retry_at != nullptr) *last.mutable_retry_at() = *retry_at;
  Erase(lease.id, &last, cancelled);  // `lease` is gone from here on
  for (Waiter& w : waiters) {
    *w.reply = last;
    w.done(absl::OkStatus());
  }
}

void LeaseManager::Erase(const std::string& id, const Reply* last, bool cancelled) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  std::unique_ptr<Lease> lease = std::move(it->second);
  leases_.erase(it);
  Ended& ended = ended_[id];
  if (last != nullptr) {
    ended.reply = *last;
  } else {
    ended.reply.set_outcome(Reply::CANCELLED);
    ended.reply.set_message("lease " + ToHex(id) + " has ended (returned, or its worker exited)");
  }
  ended.cancelled = cancelled;
  ended_order_.push_back(id);
  while (ended_order_.size() > kMaxEndedLeases) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  if (lease->state == State::kQueued) queue_.Remove(lease->queued);
  if (lease->state == State::kGranted) lease_of_worker_.erase(lease->worker.worker_id);
  if (lease->allocation.id != 0) {
    if (lease->spec.type() != rpc::TaskSpec::ACTOR_CREATION_TASK) {
      auto running = running_by_worker_.find(WorkerKey(lease->spec));
      if (--running->second == 0) running_by_worker_.erase(running);
    }
    const ResourceSet freed = local_->AllocatedResources(lease->allocation.id);
    local_->Release(lease->allocation.id);
    // Nothing is granted here while draining: the freed room wakes no shape.
    if (!draining_) {
      queue_.WakeFreed(freed, [this](const ResourceSet& demand) { return local_->CanFitNow(demand); });
    }
  }
}

void LeaseManager::PrestartForBacklog() {
  if (draining_) return;  // nothing queued here will run here
  // Queued leases per worker kind, less the normal-task leases of that kind
  // already running (their workers come back when returned).
  std::map<std::string, std::pair<const rpc::TaskSpec*, int>> backlog;
  queue_.ForEachShape([&](const LeaseQueue::Shape& shape) {
    if (shape.verdict() == LeaseQueue::Verdict::kInfeasible) return;
    auto& [spec, n] = backlog[shape.spec().kind];
    if (spec == nullptr) spec = &leases_.at(shape.head().id)->spec;
    n += static_cast<int>(shape.size());
  });
  for (auto& [kind, entry] : backlog) {
    auto running = running_by_worker_.find(kind);
    if (running != running_by_worker_.end()) entry.second -= running->second;
    if (entry.second > 0) pool_->Prestart(*entry.first, entry.second);
  }
}

std::vector<rpc::ResourceDemand> LeaseManager::Demands() const {
  MANTA_CHECK_THREAD(thread_);
  std::vector<rpc::ResourceDemand> out;
  for (const auto& [shape, counts] : queue_.Demands()) {
    rpc::ResourceDemand d;
    for (const auto& [k, v] : shape) (*d.mutable_shape())[k] = v;
    d.set_num_ready_requests_queued(counts.first);
    d.set_num_infeasible_requests_queued(counts.second);
    out.push_back(std::move(d));
  }
  return out;
}

void LeaseManager::NotifyDemandsIfChanged() {
  if (queue_.TakeDemandsChanged() && on_demands_) on_demands_();
}

}  // namespace manta::raylet
