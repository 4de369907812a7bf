#include "gcs/actor_manager.h"

#include <algorithm>
#include <set>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/label_selector.h"
#include "common/logging.h"
#include "common/resources.h"

namespace manta::gcs {
namespace {

rpc::ErrorInfo ErrorOf(rpc::ErrorInfo::Type type, const std::string& message) {
  rpc::ErrorInfo e;
  e.set_type(type);
  e.set_message(message);
  return e;
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status CheckLength(const std::string& s, size_t max, const char* what) {
  if (s.size() > max) return Invalid(absl::StrCat(what, " exceeds ", max, " bytes"));
  return absl::OkStatus();
}

void LogStoreError(const char* what, const ActorId& id, const absl::Status& s) {
  if (!s.ok()) Logger("gcs")->error("cannot persist {} actor_id={}: {}", what, id.Hex(), s.ToString());
}

}  // namespace

absl::Status ValidateActorCreationSpec(const rpc::TaskSpec& spec) {
  if (spec.type() != rpc::TaskSpec::ACTOR_CREATION_TASK) return Invalid("the task must be ACTOR_CREATION_TASK");
  if (spec.actor_id().size() != ActorId::kSize)
    return Invalid(absl::StrCat("actor_id must be ", ActorId::kSize, " bytes"));
  if (spec.job_id().size() != JobId::kSize) return Invalid(absl::StrCat("job_id must be ", JobId::kSize, " bytes"));
  if (!spec.task_id().empty() && spec.task_id().size() != TaskId::kSize) {
    return Invalid(absl::StrCat("task_id must be ", TaskId::kSize, " bytes"));
  }
  if (spec.function_name().empty()) return Invalid("function_name is empty");
  if (auto s = CheckLength(spec.function_name(), 1024, "function_name"); !s.ok()) return s;
  if (spec.resources_size() > 1024) return Invalid("too many resources");
  std::map<std::string, double> resources(spec.resources().begin(), spec.resources().end());
  if (auto r = ResourceSet::FromMap(resources); !r.ok())
    return Invalid(absl::StrCat("resources: ", r.status().message()));
  if (auto selector = LabelSelector::Parse(spec.label_selector()); !selector.ok()) return selector.status();
  const rpc::ActorCreationOptions& o = spec.actor_creation();
  if (o.max_restarts() < -1) return Invalid("max_restarts must be -1 (unlimited) or more");
  if (o.max_task_retries() < -1) return Invalid("max_task_retries must be -1 (unlimited) or more");
  if (o.max_concurrency() < 0) return Invalid("max_concurrency must not be negative");
  if (auto s = CheckLength(o.name(), 1024, "name"); !s.ok()) return s;
  if (auto s = CheckLength(o.ray_namespace(), 1024, "namespace"); !s.ok()) return s;
  if (auto s = CheckLength(o.class_name(), 1024, "class_name"); !s.ok()) return s;
  if (auto s = ValidateAddress(spec.caller_address(), "caller_address"); !s.ok()) return s;
  if (auto s = CheckLength(spec.worker_executable(), 4096, "worker_executable"); !s.ok()) return s;
  if (spec.worker_args_size() > 1024) return Invalid("too many worker_args");
  if (spec.args_size() > 10000) return Invalid("too many args");
  if (!spec.placement_group_id().empty()) {
    if (spec.placement_group_id().size() != PlacementGroupId::kSize) {
      return Invalid(absl::StrCat("placement_group_id must be ", PlacementGroupId::kSize, " bytes"));
    }
    if (spec.bundle_index() < -1) return Invalid("bundle_index must be -1 (any bundle) or a bundle's index");
  }
  if (spec.ByteSizeLong() > ActorManager::kMaxSpecBytes) {
    return Invalid(absl::StrCat("the creation task exceeds ", ActorManager::kMaxSpecBytes,
                                " bytes; pass large arguments by reference"));
  }
  return absl::OkStatus();
}

ActorManager::ActorManager(Store* store, Publisher* publisher, ActorScheduler* scheduler, RayletClientPool* raylets,
                           CoreWorkerClientPool* workers, const JobManager* jobs, size_t max_dead_actors)
    : store_(store),
      publisher_(publisher),
      scheduler_(scheduler),
      raylets_(raylets),
      workers_(workers),
      jobs_(jobs),
      max_dead_actors_(max_dead_actors) {}

absl::Status ActorManager::Initialize() {
  MANTA_CHECK_THREAD(thread_);
  auto spec_rows = store_->ReadAll(kSpecTable);
  if (!spec_rows.ok()) return spec_rows.status();
  auto rows = store_->ReadAll(kActorTable);
  if (!rows.ok()) return rows.status();
  absl::flat_hash_map<std::string, rpc::TaskSpec> specs;
  for (auto& [key, value] : *spec_rows) {
    rpc::TaskSpec spec;
    if (spec.ParseFromString(value)) specs[key] = std::move(spec);
  }
  std::vector<ActorId> pending, lost, orphaned, dead;
  for (auto& [key, value] : *rows) {
    auto id = ActorId::FromBinary(key);
    Actor a;
    if (!id.ok() || !a.info.ParseFromString(value)) {
      Logger("gcs")->warn("skipping a corrupt actor row in the store");
      continue;
    }
    auto spec = specs.find(key);
    bool has_spec = spec != specs.end();
    if (has_spec) {
      a.spec = std::move(spec->second);
      specs.erase(spec);
    } else if (a.info.state() != rpc::ActorInfo::DEAD) {
      Logger("gcs")->warn("actor_id={} has no creation task in the store; marking it dead", id->Hex());
      a.info.set_state(rpc::ActorInfo::PENDING_CREATION);
      orphaned.push_back(*id);
    }
    a.order = next_order_++;
    const rpc::ActorInfo& info = a.info;
    if (info.state() == rpc::ActorInfo::DEAD) {
      dead.push_back(*id);
    } else {
      if (!info.name().empty()) names_[{info.ray_namespace(), info.name()}] = *id;
      if (info.state() == rpc::ActorInfo::ALIVE) {
        by_worker_[info.address().worker_id()] = *id;
        auto node = NodeId::FromBinary(info.address().node_id());
        if (!node.ok() || scheduler_->GetNode(*node) == nullptr) lost.push_back(*id);
      } else if (has_spec) {
        pending.push_back(*id);
      }
    }
    actors_[*id] = std::move(a);
  }
  std::sort(dead.begin(), dead.end(), [this](const ActorId& x, const ActorId& y) {
    return actors_.at(x).info.end_time_ms() < actors_.at(y).info.end_time_ms();
  });
  dead_order_.assign(dead.begin(), dead.end());
  // A spec written just before a crash, without its actor row.
  for (const auto& [key, spec] : specs) store_->Delete(kSpecTable, key, nullptr);
  Logger("gcs")->info("recovered {} actors ({} to schedule, {} dead)", actors_.size(), pending.size(), dead.size());
  for (const ActorId& id : orphaned) Die(id, "the actor's creation task was lost from the GCS store");
  for (const ActorId& id : lost) RestartOrDie(id, "the node died while the GCS was down");
  for (const ActorId& id : pending) Schedule(id);
  if (jobs_ != nullptr) {
    std::vector<ActorId> orphans_of_jobs;
    for (const auto& [id, a] : actors_) {
      auto job = JobId::FromBinary(a.info.job_id());
      if (a.info.state() != rpc::ActorInfo::DEAD && !a.info.detached() && job.ok() && jobs_->IsFinished(*job)) {
        orphans_of_jobs.push_back(id);
      }
    }
    for (const ActorId& id : orphans_of_jobs) {
      StopWorker(actors_.at(id), true);
      Die(id, "the actor's job finished");
    }
  }
  return absl::OkStatus();
}

void ActorManager::HandleRegisterActor(const rpc::RegisterActorRequest& request, rpc::RegisterActorReply* reply,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  const rpc::TaskSpec& spec = request.creation_task();
  if (auto s = ValidateActorCreationSpec(spec); !s.ok()) return done(s);
  ActorId id = *ActorId::FromBinary(spec.actor_id());
  if (auto it = actors_.find(id); it != actors_.end()) {
    *reply->mutable_actor() = it->second.info;
    return done(absl::OkStatus());
  }
  const rpc::ActorCreationOptions& o = spec.actor_creation();
  JobId job = *JobId::FromBinary(spec.job_id());
  if (jobs_ != nullptr && jobs_->IsFinished(job) && !o.detached()) {
    return done(absl::FailedPreconditionError("job " + job.Hex() + " has finished"));
  }
  if (!o.name().empty()) {
    auto it = names_.find(NameKey{o.ray_namespace(), o.name()});
    if (it != names_.end() && o.get_if_exists()) {
      // The name's actor instead of a new one: decided here, on the loop,
      // so creators racing for a name all get the same actor.
      *reply->mutable_actor() = actors_.at(it->second).info;
      return done(absl::OkStatus());
    }
    if (it != names_.end()) {
      return done(absl::AlreadyExistsError(absl::StrCat("the actor name '", o.name(), "' is taken in namespace '",
                                                        o.ray_namespace(), "' by actor ", it->second.Hex())));
    }
    names_[NameKey{o.ray_namespace(), o.name()}] = id;
  }
  Actor& a = actors_[id];
  a.spec = spec;
  a.order = next_order_++;
  rpc::ActorInfo& info = a.info;
  info.set_actor_id(spec.actor_id());
  info.set_job_id(spec.job_id());
  info.set_state(rpc::ActorInfo::PENDING_CREATION);
  info.set_name(o.name());
  info.set_ray_namespace(o.ray_namespace());
  info.set_class_name(o.class_name().empty() ? spec.function_name() : o.class_name());
  info.set_max_restarts(o.max_restarts());
  *info.mutable_resources() = spec.resources();
  info.set_detached(o.detached());
  *info.mutable_owner_address() = spec.caller_address();
  *reply->mutable_actor() = info;
  Logger("gcs")->debug("actor registered actor_id={} class={} job_id={} name={}", id.Hex(), info.class_name(),
                       job.Hex(), info.name());
  store_->Put(kSpecTable, spec.actor_id(), spec.SerializeAsString(), nullptr);
  // Writes apply in order: once the info is durable, so is the spec.
  PersistAndPublish(a, std::move(done));
  Schedule(id);
}

void ActorManager::HandleGetActorInfo(const rpc::GetActorInfoRequest& request, rpc::GetActorInfoReply* reply,
                                      rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = ActorId::FromBinary(request.actor_id());
  if (!id.ok()) return done(Invalid(absl::StrCat("actor_id must be ", ActorId::kSize, " bytes")));
  auto it = actors_.find(*id);
  if (it == actors_.end()) return done(absl::NotFoundError("no actor " + id->Hex()));
  *reply->mutable_actor() = it->second.info;
  done(absl::OkStatus());
}

void ActorManager::HandleGetNamedActor(const rpc::GetNamedActorRequest& request, rpc::GetNamedActorReply* reply,
                                       rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (request.name().empty()) return done(Invalid("name is empty"));
  if (request.name().size() > 1024 || request.ray_namespace().size() > 1024) {
    return done(Invalid("name or namespace is too long"));
  }
  auto it = names_.find(NameKey{request.ray_namespace(), request.name()});
  if (it == names_.end()) {
    return done(absl::NotFoundError(
        absl::StrCat("no live actor named '", request.name(), "' in namespace '", request.ray_namespace(), "'")));
  }
  const Actor& a = actors_.at(it->second);
  *reply->mutable_actor() = a.info;
  *reply->mutable_creation_task() = a.spec;
  done(absl::OkStatus());
}

void ActorManager::HandleListActors(const rpc::ListActorsRequest& request, rpc::ListActorsReply* reply,
                                    rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (!request.job_id().empty() && request.job_id().size() != JobId::kSize) {
    return done(Invalid(absl::StrCat("job_id must be ", JobId::kSize, " bytes")));
  }
  std::set<int> states;
  for (int state : request.states()) {
    if (!rpc::ActorInfo::State_IsValid(state)) return done(Invalid(absl::StrCat("unknown actor state ", state)));
    states.insert(state);
  }
  std::vector<const Actor*> out;
  for (const auto& [id, a] : actors_) {
    if (!request.job_id().empty() && a.info.job_id() != request.job_id()) continue;
    if (!states.empty() && states.count(a.info.state()) == 0) continue;
    out.push_back(&a);
  }
  // In registration order, sorted only as far as the limit: a count (limit
  // 1) over many actors sorts none of the rest.
  const size_t shown = request.limit() > 0 ? std::min(static_cast<size_t>(request.limit()), out.size()) : out.size();
  std::partial_sort(out.begin(), out.begin() + shown, out.end(),
                    [](const Actor* x, const Actor* y) { return x->order < y->order; });
  for (size_t i = 0; i < shown; ++i) *reply->add_actors() = out[i]->info;
  reply->set_total(static_cast<int64_t>(out.size()));
  done(absl::OkStatus());
}

void ActorManager::ForEachActor(const std::function<void(const rpc::ActorInfo&)>& visit) const {
  MANTA_CHECK_THREAD(thread_);
  for (const auto& [id, a] : actors_) visit(a.info);
}

void ActorManager::HandleKillActor(const rpc::KillActorRequest& request, rpc::KillActorReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  auto id = ActorId::FromBinary(request.actor_id());
  if (!id.ok()) return done(Invalid(absl::StrCat("actor_id must be ", ActorId::kSize, " bytes")));
  if (auto s = rpc::ValidateRequestId(request.request_id()); !s.ok()) return done(s);
  if (kills_.Replay(request.request_id(), reply, done)) return;
  done = kills_.Record(request.request_id(), reply, std::move(done));
  auto it = actors_.find(*id);
  if (it == actors_.end()) return done(absl::NotFoundError("no actor " + id->Hex()));
  Actor& a = it->second;
  if (a.info.state() == rpc::ActorInfo::DEAD) return done(absl::OkStatus());
  bool alive = a.info.state() == rpc::ActorInfo::ALIVE;
  if (request.worker_died()) {
    // Only an ALIVE actor has a worker to lose; a pending one is unaffected.
    if (alive) {
      StopWorker(a, /*no_restart=*/false);
      RestartOrDie(*id, "the actor's worker died (reported by a caller)");
    }
    return done(absl::OkStatus());
  }
  Logger("gcs")->info("killing actor_id={} no_restart={}", id->Hex(), request.no_restart());
  if (alive) StopWorker(a, request.no_restart());
  if (request.no_restart()) {
    Die(*id, "the actor was killed by KillActor");
  } else {
    RestartOrDie(*id, "the actor was killed by KillActor");
  }
  done(absl::OkStatus());
}

void ActorManager::OnPlacementGroupRemoved(const std::string& placement_group_id) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<ActorId> doomed;
  for (const auto& [id, a] : actors_) {
    if (a.spec.placement_group_id() == placement_group_id && a.info.state() != rpc::ActorInfo::DEAD) {
      doomed.push_back(id);
    }
  }
  for (const ActorId& id : doomed) {
    auto it = actors_.find(id);
    if (it == actors_.end() || it->second.info.state() == rpc::ActorInfo::DEAD) continue;
    if (it->second.info.state() == rpc::ActorInfo::ALIVE) StopWorker(it->second, /*no_restart=*/true);
    Die(id, "the actor's placement group was removed");
  }
}

void ActorManager::HandleReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                             rpc::ReportWorkerFailureReply*, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (request.worker_id().size() != WorkerId::kSize) {
    return done(Invalid(absl::StrCat("worker_id must be ", WorkerId::kSize, " bytes")));
  }
  if (!request.node_id().empty() && request.node_id().size() != NodeId::kSize) {
    return done(Invalid(absl::StrCat("node_id must be ", NodeId::kSize, " bytes")));
  }
  workers_->Forget(request.worker_id());
  // For the raylets: the leases it held as a caller end with it.
  if (reported_.Insert(request.worker_id())) {
    rpc::PubMessage msg;
    msg.set_channel(rpc::PubMessage::WORKER);
    msg.set_key(request.worker_id());
    msg.mutable_worker_death()->set_worker_id(request.worker_id());
    msg.mutable_worker_death()->set_node_id(request.node_id());
    publisher_->Publish(std::move(msg));
  }
  if (request.held_no_lease()) return done(absl::OkStatus());  // no actor's worker
  auto it = by_worker_.find(request.worker_id());
  if (it == by_worker_.end()) return done(absl::OkStatus());  // not an actor's worker, or already handled
  ActorId id = it->second;
  Actor& a = actors_.at(id);
  std::string detail = request.exit_detail().substr(0, 1024);
  std::string why = "the worker process died";
  if (!detail.empty()) absl::StrAppend(&why, ": ", detail);
  if (request.intentional()) absl::StrAppend(&why, " (stopped by its raylet)");
  Logger("gcs")->warn("actor_id={} lost its worker worker_id={} pid={}: {}", id.Hex(), ToHex(request.worker_id()),
                      request.pid(), why);
  // The worker is gone; release its lease on the raylet.
  auto node = NodeId::FromBinary(a.info.address().node_id());
  const rpc::NodeInfo* info = node.ok() ? scheduler_->GetNode(*node) : nullptr;
  if (info != nullptr) {
    rpc::ReturnWorkerRequest ret;
    ret.set_lease_id(a.info.lease_id());
    ret.set_worker_id(request.worker_id());
    ret.set_disconnect_worker(true);
    raylets_->ReturnWorker(*node, RayletAddress(*info), ret, [](const absl::Status&, rpc::ReturnWorkerReply&&) {});
  }
  RestartOrDie(id, why);
  done(absl::OkStatus());
}

void ActorManager::OnNodeDead(const rpc::NodeInfo& node) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<ActorId> lost;
  for (const auto& [id, a] : actors_) {
    if (a.info.state() == rpc::ActorInfo::ALIVE && a.info.address().node_id() == node.node_id()) lost.push_back(id);
  }
  std::string why = "the node died";
  if (!node.death_reason().empty()) absl::StrAppend(&why, " (", node.death_reason().substr(0, 1024), ")");
  for (const ActorId& id : lost) {
    workers_->Forget(actors_.at(id).info.address().worker_id());
    RestartOrDie(id, why);
  }
}

void ActorManager::OnJobFinished(const rpc::JobInfo& job) {
  MANTA_CHECK_THREAD(thread_);
  std::vector<ActorId> doomed;
  for (const auto& [id, a] : actors_) {
    if (a.info.job_id() == job.job_id() && !a.info.detached() && a.info.state() != rpc::ActorInfo::DEAD) {
      doomed.push_back(id);
    }
  }
  for (const ActorId& id : doomed) {
    Actor& a = actors_.at(id);
    if (a.info.state() == rpc::ActorInfo::ALIVE) StopWorker(a, /*no_restart=*/true);
    Die(id, "the actor's job " + ToHex(job.job_id()) + " finished");
  }
}

const rpc::ActorInfo* ActorManager::Get(const ActorId& actor) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = actors_.find(actor);
  return it == actors_.end() ? nullptr : &it->second.info;
}

void ActorManager::Schedule(const ActorId& id) {
  Actor& a = actors_.at(id);
  rpc::TaskSpec spec = a.spec;
  spec.set_attempt(a.info.num_restarts());
  ReportCreation(a, rpc::TaskEvent::PENDING_NODE_ASSIGNMENT);
  scheduler_->Schedule(id, spec, [this, id](ActorCreationResult result) { OnCreation(id, std::move(result)); });
}

void ActorManager::ReportCreation(Actor& a, rpc::TaskEvent::State state, const ActorCreationResult* r,
                                  const rpc::ErrorInfo* error) {
  const bool ends = state == rpc::TaskEvent::FINISHED || state == rpc::TaskEvent::FAILED;
  if (ends && !a.creating) return;  // this attempt was already reported ended
  a.creating = !ends;
  // Only specs from a core worker carry a task id; events are keyed by it.
  if (!task_events_ || a.spec.task_id().size() != TaskId::kSize) return;
  rpc::TaskEvent e;
  e.set_task_id(a.spec.task_id());
  e.set_job_id(a.spec.job_id());
  e.set_actor_id(a.spec.actor_id());
  e.set_name(a.spec.function_name());
  e.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  e.set_attempt(a.info.num_restarts());
  e.set_state(state);
  e.set_timestamp_ms(NowUnixMs());
  *e.mutable_resources() = a.spec.resources();
  if (r != nullptr && r->outcome != ActorCreationResult::kInvalid) {
    e.set_node_id(r->node.Binary());
    e.set_worker_id(r->worker_address.worker_id());
    e.set_worker_pid(r->pid);
  }
  if (error != nullptr) *e.mutable_error() = *error;
  task_events_(e);
}

void ActorManager::OnCreation(const ActorId& id, ActorCreationResult r) {
  MANTA_CHECK_THREAD(thread_);
  auto it = actors_.find(id);
  if (it == actors_.end() || it->second.info.state() == rpc::ActorInfo::DEAD ||
      it->second.info.state() == rpc::ActorInfo::ALIVE) {
    return;  // the scheduler is cancelled on every such transition
  }
  Actor& a = it->second;
  switch (r.outcome) {
    case ActorCreationResult::kCreated: {
      rpc::ActorInfo& info = a.info;
      info.set_state(rpc::ActorInfo::ALIVE);
      *info.mutable_address() = r.worker_address;
      info.set_pid(r.pid);
      info.set_lease_id(r.lease.Binary());
      if (info.start_time_ms() == 0) info.set_start_time_ms(NowUnixMs());
      info.clear_death_cause();
      by_worker_[r.worker_address.worker_id()] = id;
      Logger("gcs")->debug("actor alive actor_id={} node_id={} pid={} restarts={}", id.Hex(), r.node.Hex(), r.pid,
                           info.num_restarts());
      ReportCreation(a, rpc::TaskEvent::FINISHED, &r);
      PersistAndPublish(a, nullptr);
      return;
    }
    case ActorCreationResult::kWorkerDied: {
      const rpc::ErrorInfo error = ErrorOf(rpc::ErrorInfo::WORKER_DIED, r.message);
      ReportCreation(a, rpc::TaskEvent::FAILED, &r, &error);
      RestartOrDie(id, r.message);
      return;
    }
    case ActorCreationResult::kConstructorFailed:
    case ActorCreationResult::kInvalid: {
      rpc::ErrorInfo error = r.error;
      if (r.outcome == ActorCreationResult::kInvalid) error.set_type(rpc::ErrorInfo::INVALID_ARGUMENT);
      if (error.message().empty()) error.set_message(r.message);
      ReportCreation(a, rpc::TaskEvent::FAILED, &r, &error);
      Die(id, r.message);
      return;
    }
  }
}

void ActorManager::RestartOrDie(const ActorId& id, const std::string& why) {
  Actor& a = actors_.at(id);
  if (a.info.state() == rpc::ActorInfo::DEAD) return;
  int32_t max = a.info.max_restarts();
  if (max != -1 && a.info.num_restarts() >= max) {
    Die(id, absl::StrCat(why, "; the actor has no restarts left (max_restarts=", max, ")"));
    return;
  }
  // An attempt still under way (a kill with restart while it was placed or
  // constructing) ends here; the restart is the next one.
  const rpc::ErrorInfo stopped = ErrorOf(rpc::ErrorInfo::TASK_CANCELLED, why);
  ReportCreation(a, rpc::TaskEvent::FAILED, nullptr, &stopped);
  if (stopped_) stopped_(id, ErrorOf(rpc::ErrorInfo::WORKER_DIED, why));
  Detach(a);
  a.info.set_num_restarts(a.info.num_restarts() + 1);
  a.info.set_state(rpc::ActorInfo::RESTARTING);
  a.info.clear_address();
  a.info.clear_pid();
  a.info.clear_lease_id();
  a.info.mutable_death_cause()->set_type(rpc::ErrorInfo::NONE);
  a.info.mutable_death_cause()->set_message(why);
  Logger("gcs")->warn("actor restarting actor_id={} restart={} of {}: {}", id.Hex(), a.info.num_restarts(),
                      max == -1 ? std::string("unlimited") : std::to_string(max), why);
  PersistAndPublish(a, nullptr);
  Schedule(id);
}

void ActorManager::Die(const ActorId& id, const std::string& why) {
  Actor& a = actors_.at(id);
  if (a.info.state() == rpc::ActorInfo::DEAD) return;
  scheduler_->Cancel(id);
  Detach(a);
  if (!a.info.name().empty()) {
    auto it = names_.find(NameKey{a.info.ray_namespace(), a.info.name()});
    if (it != names_.end() && it->second == id) names_.erase(it);
  }
  a.info.set_state(rpc::ActorInfo::DEAD);
  a.info.set_end_time_ms(NowUnixMs());
  a.info.clear_lease_id();
  a.info.mutable_death_cause()->set_type(rpc::ErrorInfo::ACTOR_DIED);
  a.info.mutable_death_cause()->set_message(why);
  ReportCreation(a, rpc::TaskEvent::FAILED, nullptr, &a.info.death_cause());  // died before it was created
  if (stopped_) stopped_(id, a.info.death_cause());
  Logger("gcs")->info("actor dead actor_id={}: {}", id.Hex(), why);
  PersistAndPublish(a, nullptr);
  dead_order_.push_back(id);
  TrimDead();
}

void ActorManager::StopWorker(const Actor& actor, bool no_restart) {
  const rpc::Address& worker = actor.info.address();
  if (worker.worker_id().empty()) return;
  rpc::KillActorOnWorkerRequest kill;
  kill.set_actor_id(actor.info.actor_id());
  kill.set_no_restart(no_restart);
  workers_->KillActor(worker, kill, [this, worker](const absl::Status&, rpc::KillActorOnWorkerReply&&) {
    // Whether or not the worker heard, make sure it goes.
    rpc::ExitRequest exit;
    exit.set_force(true);
    workers_->Exit(worker, exit,
                   [this, id = worker.worker_id()](const absl::Status&, rpc::ExitReply&&) { workers_->Forget(id); });
  });
  auto node = NodeId::FromBinary(worker.node_id());
  const rpc::NodeInfo* info = node.ok() ? scheduler_->GetNode(*node) : nullptr;
  if (info == nullptr) return;
  rpc::ReturnWorkerRequest ret;
  ret.set_lease_id(actor.info.lease_id());
  ret.set_worker_id(worker.worker_id());
  ret.set_disconnect_worker(true);
  raylets_->ReturnWorker(*node, RayletAddress(*info), ret,
                         [node = *node](const absl::Status& s, rpc::ReturnWorkerReply&&) {
                           if (!s.ok())
                             Logger("gcs")->warn("ReturnWorker to node_id={} failed: {}", node.Hex(), s.ToString());
                         });
}

void ActorManager::Detach(Actor& actor) {
  const std::string& worker = actor.info.address().worker_id();
  if (worker.empty()) return;
  auto it = by_worker_.find(worker);
  if (it != by_worker_.end() && it->second == *ActorId::FromBinary(actor.info.actor_id())) by_worker_.erase(it);
}

void ActorManager::PersistAndPublish(const Actor& actor, rpc::Done done) {
  ActorId id = *ActorId::FromBinary(actor.info.actor_id());
  if (!done) done = [id](const absl::Status& s) { LogStoreError("the state of", id, s); };
  store_->Put(kActorTable, actor.info.actor_id(), actor.info.SerializeAsString(), std::move(done));
  rpc::PubMessage msg;
  msg.set_channel(rpc::PubMessage::ACTOR);
  msg.set_key(actor.info.actor_id());
  *msg.mutable_actor_info() = actor.info;
  publisher_->Publish(std::move(msg));
}

void ActorManager::TrimDead() {
  while (dead_order_.size() > max_dead_actors_) {
    ActorId oldest = dead_order_.front();
    dead_order_.pop_front();
    auto it = actors_.find(oldest);
    if (it == actors_.end() || it->second.info.state() != rpc::ActorInfo::DEAD) continue;
    actors_.erase(it);
    store_->Delete(kActorTable, oldest.Binary(), nullptr);
    store_->Delete(kSpecTable, oldest.Binary(), nullptr);
  }
}

}  // namespace manta::gcs
