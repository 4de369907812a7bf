#include "runtime/core_worker/actor_submitter.h"

#include <future>

#include "common/logging.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

std::string DeathMessage(const rpc::ActorInfo& info) {
  return info.death_cause().message().empty() ? "the actor is dead" : info.death_cause().message();
}

// An incarnation goes from pending (created or restarting) to alive; death
// is final. A restart starts the next incarnation (num_restarts + 1).
int Phase(rpc::ActorInfo::State state) {
  switch (state) {
    case rpc::ActorInfo::ALIVE:
      return 1;
    case rpc::ActorInfo::DEAD:
      return 2;
    default:
      return 0;
  }
}

// A push failed with one of these would fail the same way again.
bool IsRefusal(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

// Replies (RegisterActor, GetActorInfo) and published changes reach the loop
// in any order: `info` is stale when it says less than what `held` says.
bool IsStale(const rpc::ActorInfo& held, const rpc::ActorInfo& info) {
  if (held.state() == rpc::ActorInfo::DEAD) return true;
  if (info.num_restarts() != held.num_restarts()) return info.num_restarts() < held.num_restarts();
  return Phase(info.state()) < Phase(held.state());
}

}  // namespace

std::unique_ptr<ActorSubmitter::Actor> ActorSubmitter::NewActor(const ActorId& id, int max_task_retries) {
  auto state = std::make_unique<Actor>();
  state->id = id;
  state->info.set_actor_id(id.Binary());
  state->info.set_state(rpc::ActorInfo::PENDING_CREATION);
  state->max_task_retries = max_task_retries;
  return state;
}

std::optional<ActorSubmitter::View> ActorSubmitter::Find(const ActorId& actor) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor);
  if (it == actors_.end()) return std::nullopt;
  return View{it->second->info.state(), static_cast<int>(it->second->pending.size())};
}

// ---------------------------------------------------------------- creation

absl::StatusOr<ActorId> ActorSubmitter::Create(rpc::TaskSpec creation, const std::vector<ObjectId>& contained) {
  // Creation arguments this process owns live as long as the actor may
  // (re)start: until it is dead.
  deps_.refs->HoldArgs(creation.actor_id(), creation, contained);
  if (!creation.actor_creation().name().empty()) return RegisterNamed(creation);
  // Known before this returns, so calls made right after wait for the actor
  // (pending) instead of following it as a handle from elsewhere.
  const ActorId id = *ActorId::FromBinary(creation.actor_id());
  {
    absl::MutexLock lock(&mu_);
    actors_[id] = NewActor(id, creation.actor_creation().max_task_retries());
  }
  deps_.loop->Post([this, creation = std::move(creation)]() mutable { RegisterOnLoop(std::move(creation)); });
  return id;
}

absl::StatusOr<ActorId> ActorSubmitter::RegisterNamed(const rpc::TaskSpec& creation) {
  // Named actors: the name must be free (or, get_if_exists, its actor is
  // the answer); the GCS decides, synchronously.
  auto registered = std::make_shared<std::promise<absl::StatusOr<ActorId>>>();
  deps_.loop->Post([this, creation, registered] {
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = creation;
    gcs_->RegisterActor(req, [this, creation, registered](const absl::Status& s, rpc::RegisterActorReply&& reply) {
      auto aid = ActorId::FromBinary(reply.actor().actor_id());
      if (!s.ok() || !aid.ok()) {
        deps_.refs->ReleaseHeld(creation.actor_id());
        return registered->set_value(s.ok() ? absl::InternalError("the GCS replied without an actor") : s);
      }
      const bool existing = reply.actor().actor_id() != creation.actor_id();
      // The name's existing actor: this creation's arguments are not needed.
      if (existing) deps_.refs->ReleaseHeld(creation.actor_id());
      {
        absl::MutexLock lock(&mu_);
        // Another thread may follow it already (by name, with calls
        // waiting): keep those.
        auto [it, inserted] = actors_.try_emplace(*aid);
        if (inserted) it->second = NewActor(*aid, 0);
        if (!existing) it->second->max_task_retries = creation.actor_creation().max_task_retries();
        if (!IsStale(it->second->info, reply.actor())) it->second->info = reply.actor();
      }
      SubscribeActor(*aid);
      registered->set_value(*aid);
    });
  });
  return registered->get_future().get();
}

void ActorSubmitter::RegisterOnLoop(rpc::TaskSpec creation) {
  ActorId id = *ActorId::FromBinary(creation.actor_id());
  // Creation arguments this process owns are resolved first.
  resolver_->Resolve(std::move(creation), [this, id](rpc::TaskSpec resolved, const absl::Status& failed) {
    if (!failed.ok()) {
      // An argument failed: so does the actor, and every call to it.
      deps_.FailTask(resolved, GetErrorType(failed), std::string(failed.message()));
      return FailActor(id, "an argument of the actor's constructor failed");
    }
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = std::move(resolved);
    gcs_->RegisterActor(req, [this, id](const absl::Status& s, rpc::RegisterActorReply&& reply) {
      if (s.ok()) return OnActorInfo(reply.actor());
      FailActor(id, "the actor could not be registered: " + std::string(s.message()));
    });
  });
  SubscribeActor(id);
}

void ActorSubmitter::FailActor(const ActorId& id, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(id);
  if (it == actors_.end()) return;
  it->second->info.set_state(rpc::ActorInfo::DEAD);
  it->second->info.mutable_death_cause()->set_message(why);
  FailCalls(*it->second, why);
  deps_.refs->ReleaseHeld(id.Binary());
}

// ---------------------------------------------------------------- following the actors

void ActorSubmitter::SubscribeActor(const ActorId& id) {
  // The next poll includes this actor; fetch its state now so nothing
  // published before that poll is missed.
  rpc::GetActorInfoRequest req;
  req.set_actor_id(id.Binary());
  gcs_->GetActorInfo(req, [this](const absl::Status& s, rpc::GetActorInfoReply&& reply) {
    if (s.ok() && reply.has_actor()) OnActorInfo(reply.actor());
  });
  if (!poll_running_) {
    poll_running_ = true;
    PollActors();
  }
}

void ActorSubmitter::PollActors() {
  bool none;
  {
    absl::MutexLock lock(&mu_);
    none = actors_.empty();
  }
  if (stopping_.load() || none) {
    poll_running_ = false;
    return;
  }
  // Every actor's changes, not just those we follow: a key filter fixed when
  // the poll starts would skip an actor added while it is held, since the
  // next poll continues after the sequence this one reports. Messages about
  // other actors are ignored.
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::ACTOR);
  req.set_after_sequence(poll_sequence_);
  req.set_gcs_incarnation(poll_incarnation_);
  req.set_max_wait_ms(kActorPollWaitMs);
  gcs_->Poll(req, [this](const absl::Status& s, rpc::PollReply&& reply) { OnPoll(s, reply); });
}

void ActorSubmitter::OnPoll(const absl::Status& s, const rpc::PollReply& reply) {
  if (stopping_.load()) return;
  if (!s.ok()) {
    deps_.loop->RunOnce(absl::Milliseconds(500), [this] { PollActors(); });
    return;
  }
  poll_incarnation_ = reply.gcs_incarnation();
  poll_sequence_ = reply.last_sequence();
  for (const auto& m : reply.messages()) {
    if (m.has_actor_info()) OnActorInfo(m.actor_info());
  }
  if (reply.gap()) {
    std::vector<ActorId> ids;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, a] : actors_) ids.push_back(id);
    }
    for (const ActorId& id : ids) SubscribeActor(id);
  }
  PollActors();
}

void ActorSubmitter::OnActorInfo(const rpc::ActorInfo& info) {
  auto id = ActorId::FromBinary(info.actor_id());
  if (!id.ok()) return;
  std::vector<PushCall*> to_start;
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(*id);
    if (it == actors_.end()) return;
    Actor& a = *it->second;
    if (IsStale(a.info, info)) return;
    bool restarted = info.num_restarts() > a.info.num_restarts();
    a.info = info;
    switch (info.state()) {
      case rpc::ActorInfo::ALIVE: {
        std::string address = AddressKey(info.address());
        if (address != a.address || restarted) OnNewIncarnation(a, address);
        SendCalls(a, &to_start);
        break;
      }
      case rpc::ActorInfo::RESTARTING:
        a.address.clear();
        a.send_cursor = 0;
        a.resend.clear();
        break;
      case rpc::ActorInfo::DEAD:
        a.address.clear();
        FailCalls(a, DeathMessage(info));
        deps_.refs->ReleaseHeld(info.actor_id());
        break;
      default:
        break;
    }
  }
  deps_.host->StartPushes(to_start);
}

void ActorSubmitter::OnNewIncarnation(Actor& a, const std::string& address) {
  // What was sent to the old one is sent again, numbered afresh from 0 (the
  // new process knows nothing of the old numbers, and calls completed
  // meanwhile would leave gaps).
  a.send_cursor = 0;
  a.resend.clear();
  a.address = address;
  a.next_wire_sequence = 0;
  a.skips.clear();  // numbers of the old incarnation
  for (auto& [order, p] : a.pending) {
    if (p.wire_sequence < 0) break;  // the pushed calls are a prefix
    p.wire_sequence = a.next_wire_sequence++;
  }
}

// ---------------------------------------------------------------- calls

void ActorSubmitter::Submit(const ActorId& actor, rpc::TaskSpec spec, const std::vector<ObjectId>& contained) {
  for (int i = 1; i <= NumReturns(spec); ++i) deps_.store->Expect(ReturnObjectId(spec.task_id(), i));
  // Its owned arguments are waited for; its references kept until it is done.
  const bool resolve = resolver_->HasOwnedRefArgs(spec);
  deps_.refs->HoldArgs(spec.task_id(), spec, contained);
  std::vector<PushCall*> to_start;
  bool follow = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(actor);
    if (it == actors_.end()) {
      // A handle from elsewhere (passed in, or by name): follow it from now.
      it = actors_.emplace(actor, NewActor(actor, 0)).first;
      follow = true;
    }
    Actor& a = *it->second;
    if (a.info.state() == rpc::ActorInfo::DEAD) {
      deps_.FailTask(spec, ErrorType::kActorDied, DeathMessage(a.info));
    } else {
      // Calls go out in the order they are made in.
      int64_t order = a.next_call++;
      spec.set_max_retries(a.max_task_retries);
      if (!resolve) {
        a.pending[order].spec = std::move(spec);
        SendCalls(a, &to_start);
      } else {
        // Meanwhile it holds back the calls made after it.
        PendingCall& p = a.pending[order];
        p.spec = spec;
        p.resolving = true;
        deps_.loop->Post(
            [this, actor, order, spec = std::move(spec)]() mutable { ResolveCall(actor, order, std::move(spec)); });
      }
    }
  }
  if (follow) deps_.loop->Post([this, actor] { SubscribeActor(actor); });
  deps_.host->StartPushes(to_start);
}

void ActorSubmitter::ResolveCall(const ActorId& actor, int64_t order, rpc::TaskSpec spec) {
  resolver_->Resolve(std::move(spec), [this, actor, order](rpc::TaskSpec resolved, const absl::Status& failed) {
    // A failed dependency fails the call with the same error.
    if (!failed.ok()) deps_.FailTask(resolved, GetErrorType(failed), std::string(failed.message()));
    std::vector<PushCall*> calls;
    {
      absl::MutexLock lock(&mu_);
      auto it = actors_.find(actor);
      if (it == actors_.end()) return;
      Actor& a = *it->second;
      auto p = a.pending.find(order);
      if (p == a.pending.end()) return;  // failed meanwhile (the actor died)
      if (failed.ok()) {
        p->second.spec = std::move(resolved);
        p->second.resolving = false;
      } else {
        a.pending.erase(p);  // failed with its argument
      }
      SendCalls(a, &calls);
    }
    deps_.host->StartPushes(calls);
  });
}

void ActorSubmitter::SendCalls(Actor& a, std::vector<PushCall*>* to_start) {
  if (a.address.empty() || a.info.state() != rpc::ActorInfo::ALIVE) return;
  // Only what was never pushed to this incarnation, or must be pushed
  // again: no rescans of the calls already in flight.
  std::vector<int64_t> to_send;
  for (int64_t order : a.resend) {
    auto it = a.pending.find(order);
    if (it != a.pending.end() && order < a.send_cursor && it->second.pushed == nullptr) to_send.push_back(order);
  }
  a.resend.clear();
  for (auto it = a.pending.lower_bound(a.send_cursor); it != a.pending.end(); ++it) {
    if (it->second.resolving) break;  // the calls after it wait for it
    if (it->second.wire_sequence < 0) it->second.wire_sequence = a.next_wire_sequence++;
    to_send.push_back(it->first);
    a.send_cursor = it->first + 1;
  }
  const int64_t lowest_unacked = LowestUnacked(a);
  for (const auto& [wire, task_id] : a.skips) to_start->push_back(SkipPush(a, task_id, wire));
  a.skips.clear();
  for (int64_t order : to_send) {
    PendingCall& p = a.pending.at(order);
    auto* call = new PushCall;
    call->actor = a.id;
    call->address = a.address;
    call->worker_id = a.info.address().worker_id();
    call->sequence = order;
    rpc::PushTaskRequest& req = call->request;
    req.set_intended_worker_id(a.info.address().worker_id());
    req.set_caller_lowest_unacked(lowest_unacked);
    if (p.pushed == nullptr) {
      *req.mutable_spec() = std::move(p.spec);
    } else {
      // Pushed again while an earlier push is still out (a new incarnation):
      // that push keeps its spec.
      *req.mutable_spec() = p.pushed->request.spec();
    }
    req.mutable_spec()->set_sequence_number(p.wire_sequence);
    call->incarnation = a.info.num_restarts();
    if (p.pushed_incarnation >= 0 && p.pushed_incarnation != call->incarnation) {
      req.mutable_spec()->set_attempt(req.spec().attempt() + 1);
    }
    p.pushed_incarnation = call->incarnation;
    p.pushed = call;
    deps_.host->RecordTaskEvent(req.spec(), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &a.info.address(),
                                a.info.pid());
    to_start->push_back(call);
  }
}

int64_t ActorSubmitter::LowestUnacked(const Actor& a) {
  // The calls pushed so far are a prefix of `pending`: below the first
  // pending one's number, the caller has every reply.
  if (a.pending.empty() || a.pending.begin()->second.wire_sequence < 0) return a.next_wire_sequence;
  return a.pending.begin()->second.wire_sequence;
}

PushCall* ActorSubmitter::SkipPush(const Actor& a, const std::string& task_id, int64_t wire_sequence) {
  auto* call = new PushCall;
  call->actor = a.id;
  call->address = a.address;
  call->worker_id = a.info.address().worker_id();
  call->sequence = -1;  // no pending call: its reply settles nothing
  call->incarnation = a.info.num_restarts();
  rpc::PushTaskRequest& req = call->request;
  req.set_intended_worker_id(a.info.address().worker_id());
  req.set_caller_lowest_unacked(LowestUnacked(a));
  req.set_skip(true);
  rpc::TaskSpec* spec = req.mutable_spec();
  spec->set_type(rpc::TaskSpec::ACTOR_TASK);
  spec->set_task_id(task_id);
  spec->set_actor_id(a.id.Binary());
  spec->set_caller_worker_id(self_);
  spec->set_sequence_number(wire_sequence);
  return call;
}

void ActorSubmitter::ScheduleResend(Actor& a) {
  if (a.resend_timer_armed) return;
  a.resend_timer_armed = true;
  // A little later: the GCS may meanwhile say the worker died, and a push
  // that fails at once must not spin.
  deps_.loop->Post([this, id = a.id] {
    deps_.loop->RunOnce(kResendDelay, [this, id] {
      if (stopping_.load()) return;
      std::vector<PushCall*> calls;
      {
        absl::MutexLock lock(&mu_);
        auto it = actors_.find(id);
        if (it == actors_.end()) return;
        it->second->resend_timer_armed = false;
        SendCalls(*it->second, &calls);
      }
      deps_.host->StartPushes(calls);
    });
  });
}

void ActorSubmitter::Settle(PushCall& call, std::vector<PushCall*>* to_start) {
  auto it = actors_.find(call.actor);
  if (it == actors_.end()) return;
  Actor& a = *it->second;
  const int64_t s = call.sequence;
  // Still the incarnation (and worker) this push went to.
  const bool same_worker = a.address == call.address && a.info.num_restarts() == call.incarnation;
  auto p = s < 0 ? a.pending.end() : a.pending.find(s);
  if (p == a.pending.end()) {
    // A skip, or a push of a call settled by another push. If it failed, the
    // worker may wait on its number: skip it (again, after a while).
    if (!call.status.ok() && same_worker) {
      a.skips[call.request.spec().sequence_number()] = call.request.spec().task_id();
      ScheduleResend(a);
    }
    return;
  }
  const bool latest = p->second.pushed == &call;
  if (call.status.ok()) {
    const rpc::PushTaskReply& reply = call.reply;
    bool failed = reply.error().type() != rpc::ErrorInfo::NONE;
    deps_.host->RecordTaskEvent(call.request.spec(), failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                                failed ? &reply.error() : nullptr);
    a.pending.erase(p);
    return;
  }
  // A newer push of this call is out (to a new incarnation): it decides.
  if (!latest) return;
  // This push is over: the spec comes back to the pending call.
  PendingCall& pc = p->second;
  pc.spec = std::move(*call.request.mutable_spec());
  pc.pushed = nullptr;
  // A push refused for what it is fails for good. Otherwise it may be
  // pushed again, to this worker while the GCS says it is alive, else to the
  // next incarnation, if the call has retries left. An unreachable worker
  // costs one retry per incarnation (the GCS is about to report its death),
  // for a while; any other failure costs one each time.
  const bool refused = IsRefusal(call.status.code());
  const bool costless = absl::IsUnavailable(call.status) && pc.charged_incarnation == call.incarnation &&
                        pc.free_resends < kMaxFreeResends;
  if (!refused && (costless || a.max_task_retries < 0 || pc.retries_used < a.max_task_retries)) {
    if (costless) {
      ++pc.free_resends;
    } else {
      pc.charged_incarnation = call.incarnation;
      pc.free_resends = 0;
      ++pc.retries_used;
    }
    if (same_worker) {
      a.resend.insert(s);
      ScheduleResend(a);
    }
    return;
  }
  const std::string task_id = pc.Spec().task_id();
  const int64_t wire = pc.wire_sequence;
  if (refused) {
    deps_.FailTask(pc.Spec(), ErrorType::kInvalidArgument,
                   "the actor's worker refused this call: " + std::string(call.status.message()));
  } else {
    deps_.FailTask(pc.Spec(), ErrorType::kActorDied,
                   "the actor's worker died while running this call: " + std::string(call.status.message()));
  }
  a.pending.erase(p);
  // The worker may hold later calls until this one's number comes.
  if (wire >= 0 && same_worker) to_start->push_back(SkipPush(a, task_id, wire));
}

void ActorSubmitter::FailCalls(Actor& a, const std::string& why) {
  for (auto& [seq, p] : a.pending) deps_.FailTask(p.Spec(), ErrorType::kActorDied, why);
  a.pending.clear();
  a.send_cursor = 0;
  a.resend.clear();
}

void ActorSubmitter::OnPushDone(PushCall& call, std::vector<PushCall*>* to_start) {
  absl::MutexLock lock(&mu_);
  Settle(call, to_start);
}

absl::Status ActorSubmitter::Cancel(const std::string& task_id, bool force, bool recursive) {
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    bool found = false;
    for (auto& [id, actor] : actors_) {
      for (auto& [order, call] : actor->pending) {
        if (call.Spec().task_id() != task_id) continue;
        found = true;
        address = actor->address;
        break;
      }
      if (found) break;
    }
    if (!found) return absl::NotFoundError("no pending actor call of that id");
  }
  if (force) return absl::InvalidArgumentError("force cancel is not supported for actor tasks");
  if (address.empty()) return absl::FailedPreconditionError("the actor has no worker yet: cancel once it is alive");
  deps_.host->CancelOnWorker(address, task_id, recursive, /*force=*/false);
  return absl::OkStatus();
}

bool ActorSubmitter::IsPending(const ActorId& actor, const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor);
  if (it == actors_.end()) return false;
  for (const auto& [order, call] : it->second->pending) {
    if (call.Spec().task_id() == task_id) return true;
  }
  return false;
}

}  // namespace manta::core
