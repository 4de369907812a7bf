// Actors from the caller's side: registration with the GCS, following the
// actors' states (long poll of the ACTOR channel), and calls pushed straight
// to the actor's worker in sequence order, resent to a restarted actor while
// retries remain.
//
// The actor table is behind actors_mu_ rather than on the io loop: a call is
// pushed from the thread that makes it and its reply is taken on the gRPC
// thread that receives it, so a call in steady state wakes no other thread
// of this process. The loop follows the actors' states (GCS polls) and
// registers new actors. gRPC calls are never started with actors_mu_ held
// (a failing call may complete inline).
#include <future>
#include <optional>

#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "common/rpc/reply_cache.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
constexpr int kActorPollWaitMs = 30000;
constexpr absl::Duration kResendDelay = absl::Milliseconds(100);
// Resends of a call to an unreachable worker the GCS still calls alive that
// cost no retry: 10 s of them.
constexpr int kMaxFreeResends = 100;

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

std::unique_ptr<CoreWorkerImpl::ActorState> CoreWorkerImpl::NewActorState(const ActorId& id, int max_task_retries) {
  auto state = std::make_unique<ActorState>();
  state->id = id;
  state->info.set_actor_id(id.Binary());
  state->info.set_state(rpc::ActorInfo::PENDING_CREATION);
  state->max_task_retries = max_task_retries;
  return state;
}

absl::StatusOr<ActorId> CoreWorkerImpl::CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                                    const ActorOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_CREATION_TASK, factory_name, std::move(args), &contained);
  // The GCS has a worker started for the actor and owns it for this caller.
  AddCallerAndProgram(&spec);
  ActorId id = ActorId::FromRandom();
  spec.set_actor_id(id.Binary());
  for (const auto& [k, v] : options.resources) (*spec.mutable_resources())[k] = v;
  for (const auto& [k, v] : options.label_selector) (*spec.mutable_label_selector())[k] = v;
  rpc::ActorCreationOptions* o = spec.mutable_actor_creation();
  o->set_max_restarts(options.max_restarts);
  o->set_max_task_retries(options.max_task_retries);
  o->set_name(options.name);
  o->set_ray_namespace(options.ray_namespace.empty() ? job_id_.Hex() : options.ray_namespace);
  o->set_detached(options.detached);
  o->set_max_concurrency(std::max(1, options.max_concurrency));
  o->set_class_name(options.class_name);
  spec.set_placement_group_id(options.placement_group_id);
  spec.set_bundle_index(options.bundle_index);
  for (const auto& [k, v] : options.env_vars) (*spec.mutable_env_vars())[k] = v;
  // Creation arguments this process owns live as long as the actor may
  // (re)start: until it is dead.
  refs_.HoldArgs(spec.actor_id(), spec, contained);
  if (!options.name.empty()) {
    // Named actors: the name must be free; the GCS decides, synchronously.
    auto registered = std::make_shared<std::promise<absl::Status>>();
    loop_.Post([this, spec, registered]() mutable {
      rpc::RegisterActorRequest req;
      *req.mutable_creation_task() = spec;
      // Idempotent by actor id: made again if the connection breaks (giving
      // up fails the actor).
      rpc::RetryingUnaryCall<rpc::RegisterActorReply>(
          &loop_, options_.token, kRpcTimeout, rpc::RetryPolicy::Patient(), std::move(req),
          [stub = gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto done) {
            stub->async()->RegisterActor(ctx, r, reply, std::move(done));
          },
          [this, spec, registered](const absl::Status& s, rpc::RegisterActorReply&& reply) {
            if (s.ok()) {
              ActorId aid = *ActorId::FromBinary(spec.actor_id());
              {
                absl::MutexLock lock(&actors_mu_);
                // Another thread may follow it already (by name, with calls
                // waiting): keep those.
                auto [it, inserted] = actors_.try_emplace(aid);
                if (inserted) it->second = NewActorState(aid, 0);
                it->second->max_task_retries = spec.actor_creation().max_task_retries();
                if (!IsStale(it->second->info, reply.actor())) it->second->info = reply.actor();
              }
              SubscribeActor(aid);
            } else {
              refs_.ReleaseHeld(spec.actor_id());
            }
            registered->set_value(s);
          });
    });
    absl::Status s = registered->get_future().get();
    if (!s.ok()) return s;
    return id;
  }
  // Known before this returns, so calls made right after wait for the actor
  // (pending) instead of following it as a handle from elsewhere.
  {
    absl::MutexLock lock(&actors_mu_);
    actors_[id] = NewActorState(id, options.max_task_retries);
  }
  loop_.Post([this, spec = std::move(spec)]() mutable { RegisterActorOnLoop(std::move(spec)); });
  return id;
}

void CoreWorkerImpl::RegisterActorOnLoop(rpc::TaskSpec creation) {
  ActorId id = *ActorId::FromBinary(creation.actor_id());
  // Creation arguments this process owns are resolved first.
  ResolveDependencies(std::move(creation), [this, id](std::optional<rpc::TaskSpec> resolved) {
    if (!resolved) {
      // An argument failed: so does the actor, and every call to it.
      absl::MutexLock lock(&actors_mu_);
      auto it = actors_.find(id);
      if (it == actors_.end()) return;
      it->second->info.set_state(rpc::ActorInfo::DEAD);
      it->second->info.mutable_death_cause()->set_message("an argument of the actor's constructor failed");
      FailActorTasks(*it->second, it->second->info.death_cause().message());
      refs_.ReleaseHeld(id.Binary());
      return;
    }
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = std::move(*resolved);
    rpc::RetryingUnaryCall<rpc::RegisterActorReply>(
        &loop_, options_.token, kRpcTimeout, rpc::RetryPolicy::Patient(), std::move(req),
        [stub = gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->RegisterActor(ctx, r, reply, std::move(done));
        },
        [this, id](const absl::Status& s, rpc::RegisterActorReply&& reply) {
          if (s.ok()) return OnActorInfo(reply.actor());
          absl::MutexLock lock(&actors_mu_);
          auto it = actors_.find(id);
          if (it == actors_.end()) return;
          it->second->info.set_state(rpc::ActorInfo::DEAD);
          FailActorTasks(*it->second, "the actor could not be registered: " + std::string(s.message()));
          refs_.ReleaseHeld(id.Binary());
        });
  });
  SubscribeActor(id);
}

void CoreWorkerImpl::SubscribeActor(const ActorId& id) {
  // The next poll includes this actor; fetch its state now so nothing
  // published before that poll is missed.
  rpc::GetActorInfoRequest req;
  req.set_actor_id(id.Binary());
  rpc::UnaryCall<rpc::GetActorInfoReply>(
      &loop_, options_.token, kRpcTimeout, std::move(req),
      [stub = gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->GetActorInfo(ctx, r, reply, std::move(done));
      },
      [this](const absl::Status& s, rpc::GetActorInfoReply&& reply) {
        if (s.ok() && reply.has_actor()) OnActorInfo(reply.actor());
      });
  if (!actor_poll_running_) {
    actor_poll_running_ = true;
    PollActors();
  }
}

void CoreWorkerImpl::PollActors() {
  bool none;
  {
    absl::MutexLock lock(&actors_mu_);
    none = actors_.empty();
  }
  if (stopping_ || none) {
    actor_poll_running_ = false;
    return;
  }
  // Every actor's changes, not just those we follow: a key filter fixed when
  // the poll starts would skip an actor added while it is held, since the
  // next poll continues after the sequence this one reports. Messages about
  // other actors are ignored.
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::ACTOR);
  req.set_after_sequence(actor_poll_sequence_);
  req.set_gcs_incarnation(actor_poll_incarnation_);
  req.set_max_wait_ms(kActorPollWaitMs);
  rpc::UnaryCall<rpc::PollReply>(
      &loop_, options_.token, absl::Milliseconds(kActorPollWaitMs) + kRpcTimeout, std::move(req),
      [stub = gcs_pubsub_.get()](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->Poll(ctx, r, reply, std::move(done));
      },
      [this](const absl::Status& s, rpc::PollReply&& reply) {
        if (stopping_) return;
        if (!s.ok()) {
          loop_.RunOnce(absl::Milliseconds(500), [this] { PollActors(); });
          return;
        }
        actor_poll_incarnation_ = reply.gcs_incarnation();
        actor_poll_sequence_ = reply.last_sequence();
        for (const auto& m : reply.messages()) {
          if (m.has_actor_info()) OnActorInfo(m.actor_info());
        }
        if (reply.gap()) {
          std::vector<ActorId> ids;
          {
            absl::MutexLock lock(&actors_mu_);
            for (const auto& [id, a] : actors_) ids.push_back(id);
          }
          for (const ActorId& id : ids) SubscribeActor(id);
        }
        PollActors();
      });
}

void CoreWorkerImpl::OnActorInfo(const rpc::ActorInfo& info) {
  auto id = ActorId::FromBinary(info.actor_id());
  if (!id.ok()) return;
  std::vector<PushCall*> to_start;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(*id);
    if (it == actors_.end()) return;
    ActorState& a = *it->second;
    if (IsStale(a.info, info)) return;
    bool restarted = info.num_restarts() > a.info.num_restarts();
    a.info = info;
    switch (info.state()) {
      case rpc::ActorInfo::ALIVE: {
        std::string address = AddressKey(info.address());
        if (address != a.address || restarted) {
          // A new incarnation: what was sent to the old one is sent again,
          // numbered afresh from 0 (the new process knows nothing of the
          // old numbers, and calls completed meanwhile would leave gaps).
          a.send_cursor = 0;
          a.resend.clear();
          a.address = address;
          a.stub = pool_.Worker(address);
          a.next_wire_sequence = 0;
          a.skips.clear();  // numbers of the old incarnation
          for (auto& [order, p] : a.pending) {
            if (p.wire_sequence < 0) break;  // the pushed calls are a prefix
            p.wire_sequence = a.next_wire_sequence++;
          }
        }
        SendActorTasks(a, &to_start);
        break;
      }
      case rpc::ActorInfo::RESTARTING:
        a.address.clear();
        a.send_cursor = 0;
        a.resend.clear();
        break;
      case rpc::ActorInfo::DEAD:
        a.address.clear();
        FailActorTasks(a, DeathMessage(info));
        refs_.ReleaseHeld(info.actor_id());
        break;
      default:
        break;
    }
  }
  StartPushes(to_start);
}

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                              std::vector<Arg> args) {
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_TASK, method_name, std::move(args), &contained);
  spec.set_actor_id(actor.Binary());
  ObjectId ret = ReturnObjectId(spec.task_id(), 1);
  store_.Expect(ret);
  // Its owned arguments are waited for; its references kept until it is done.
  const bool resolve = HasOwnedRefArgs(spec);
  refs_.HoldArgs(spec.task_id(), spec, contained);
  std::vector<PushCall*> to_start;
  bool follow = false;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(actor);
    if (it == actors_.end()) {
      // A handle from elsewhere (passed in, or by name): follow it from now.
      it = actors_.emplace(actor, NewActorState(actor, 0)).first;
      follow = true;
    }
    ActorState& a = *it->second;
    if (a.info.state() == rpc::ActorInfo::DEAD) {
      FailTask(spec, ErrorType::kActorDied, DeathMessage(a.info));
    } else {
      // Calls go out in the order they are made in.
      int64_t order = a.next_call++;
      spec.set_max_retries(a.max_task_retries);
      if (!resolve) {
        a.pending[order].spec = std::move(spec);
        SendActorTasks(a, &to_start);
      } else {
        // Meanwhile it holds back the calls made after it.
        PendingActorCall& p = a.pending[order];
        p.spec = spec;
        p.resolving = true;
        loop_.Post([this, actor, order, spec = std::move(spec)]() mutable {
          ResolveDependencies(std::move(spec), [this, actor, order](std::optional<rpc::TaskSpec> resolved) {
            std::vector<PushCall*> calls;
            {
              absl::MutexLock lock(&actors_mu_);
              auto it2 = actors_.find(actor);
              if (it2 == actors_.end()) return;
              ActorState& state = *it2->second;
              auto p2 = state.pending.find(order);
              if (p2 == state.pending.end()) return;  // failed meanwhile (the actor died)
              if (resolved) {
                p2->second.spec = std::move(*resolved);
                p2->second.resolving = false;
              } else {
                state.pending.erase(p2);  // failed with its argument
              }
              SendActorTasks(state, &calls);
            }
            StartPushes(calls);
          });
        });
      }
    }
  }
  if (follow) loop_.Post([this, actor] { SubscribeActor(actor); });
  StartPushes(to_start);
  // Owned here: an empty owner address means this process.
  return ObjectRefInfo{ret, std::string()};
}

void CoreWorkerImpl::SendActorTasks(ActorState& a, std::vector<PushCall*>* to_start) {
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
    PendingActorCall& p = a.pending.at(order);
    auto* call = new PushCall;
    call->actor = a.id;
    call->address = a.address;
    call->sequence = order;
    call->stub = a.stub;
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
    p.pushed = call;
    RecordTaskEvent(req.spec(), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &a.info.address(), a.info.pid());
    to_start->push_back(call);
  }
}

int64_t CoreWorkerImpl::LowestUnacked(const ActorState& a) {
  // The calls pushed so far are a prefix of `pending`: below the first
  // pending one's number, the caller has every reply.
  if (a.pending.empty() || a.pending.begin()->second.wire_sequence < 0) return a.next_wire_sequence;
  return a.pending.begin()->second.wire_sequence;
}

CoreWorkerImpl::PushCall* CoreWorkerImpl::SkipPush(const ActorState& a, const std::string& task_id,
                                                   int64_t wire_sequence) {
  auto* call = new PushCall;
  call->actor = a.id;
  call->address = a.address;
  call->sequence = -1;  // no pending call: its reply settles nothing
  call->stub = a.stub;
  call->incarnation = a.info.num_restarts();
  rpc::PushTaskRequest& req = call->request;
  req.set_intended_worker_id(a.info.address().worker_id());
  req.set_caller_lowest_unacked(LowestUnacked(a));
  req.set_skip(true);
  rpc::TaskSpec* spec = req.mutable_spec();
  spec->set_type(rpc::TaskSpec::ACTOR_TASK);
  spec->set_task_id(task_id);
  spec->set_actor_id(a.id.Binary());
  spec->set_caller_worker_id(address_proto_.worker_id());
  spec->set_sequence_number(wire_sequence);
  return call;
}

void CoreWorkerImpl::ScheduleResend(ActorState& a) {
  if (a.resend_timer_armed) return;
  a.resend_timer_armed = true;
  // A little later: the GCS may meanwhile say the worker died, and a push
  // that fails at once must not spin.
  loop_.Post([this, id = a.id] {
    loop_.RunOnce(kResendDelay, [this, id] {
      if (stopping_) return;
      std::vector<PushCall*> calls;
      {
        absl::MutexLock lock(&actors_mu_);
        auto it = actors_.find(id);
        if (it == actors_.end()) return;
        it->second->resend_timer_armed = false;
        SendActorTasks(*it->second, &calls);
      }
      StartPushes(calls);
    });
  });
}

void CoreWorkerImpl::OnActorTaskReply(PushCall& call, std::vector<PushCall*>* to_start) {
  auto it = actors_.find(call.actor);
  if (it == actors_.end()) return;
  ActorState& a = *it->second;
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
    RecordTaskEvent(call.request.spec(), failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                    failed ? &reply.error() : nullptr);
    a.pending.erase(p);
    return;
  }
  // A newer push of this call is out (to a new incarnation): it decides.
  if (!latest) return;
  // This push is over: the spec comes back to the pending call.
  PendingActorCall& pc = p->second;
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
    FailTask(pc.Spec(), ErrorType::kInvalidArgument,
             "the actor's worker refused this call: " + std::string(call.status.message()));
  } else {
    FailTask(pc.Spec(), ErrorType::kActorDied,
             "the actor's worker died while running this call: " + std::string(call.status.message()));
  }
  a.pending.erase(p);
  // The worker may hold later calls until this one's number comes.
  if (wire >= 0 && same_worker) to_start->push_back(SkipPush(a, task_id, wire));
}

void CoreWorkerImpl::FailActorTasks(ActorState& a, const std::string& why) {
  for (auto& [seq, p] : a.pending) FailTask(p.Spec(), ErrorType::kActorDied, why);
  a.pending.clear();
  a.send_cursor = 0;
  a.resend.clear();
}

absl::StatusOr<ActorId> CoreWorkerImpl::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  rpc::GetNamedActorRequest req;
  req.set_name(name);
  req.set_ray_namespace(ray_namespace.empty() ? job_id_.Hex() : ray_namespace);
  auto reply = GcsCall<rpc::GetNamedActorReply>(
      options_.token, [&](auto* ctx, auto* r) { return gcs_actors_->GetNamedActor(ctx, req, r); });
  if (!reply.ok()) return reply.status();
  auto id = ActorId::FromBinary(reply->actor().actor_id());
  if (!id.ok()) return absl::NotFoundError("no actor named '" + name + "'");
  return *id;
}

absl::Status CoreWorkerImpl::KillActor(const ActorId& actor, bool no_restart) {
  rpc::KillActorRequest req;
  req.set_actor_id(actor.Binary());
  req.set_no_restart(no_restart);
  // The same on every retry: a retried kill with restart restarts once.
  req.set_request_id(rpc::NewRequestId());
  return GcsCall<rpc::KillActorReply>(options_.token,
                                       [&](auto* ctx, auto* r) { return gcs_actors_->KillActor(ctx, req, r); })
      .status();
}

}  // namespace manta::core
