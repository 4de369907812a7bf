// Actors from the caller's side: registration with the GCS, following the
// actors' states (long poll of the ACTOR channel), and calls pushed straight to the actor's worker in
// sequence order, resent to a restarted actor while retries remain.
#include <future>

#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
constexpr int kActorPollWaitMs = 30000;
}  // namespace

absl::StatusOr<ActorId> CoreWorkerImpl::CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                                    const ActorOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_CREATION_TASK, factory_name, std::move(args));
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
  if (!options.name.empty()) {
    // Named actors: the name must be free; the GCS decides, synchronously.
    std::promise<absl::Status> registered;
    loop_.Post([this, spec, &registered]() mutable {
      rpc::RegisterActorRequest req;
      *req.mutable_creation_task() = spec;
      rpc::UnaryCall<rpc::RegisterActorReply>(
          &loop_, options_.token, kRpcTimeout, std::move(req),
          [stub = gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto done) {
            stub->async()->RegisterActor(ctx, r, reply, std::move(done));
          },
          [this, spec, &registered](const absl::Status& s, rpc::RegisterActorReply&& reply) {
            if (s.ok()) {
              auto state = std::make_unique<ActorState>();
              state->id = *ActorId::FromBinary(spec.actor_id());
              state->info = reply.actor();
              state->max_task_retries = spec.actor_creation().max_task_retries();
              ActorId aid = state->id;
              actors_[aid] = std::move(state);
              SubscribeActor(aid);
            }
            registered.set_value(s);
          });
    });
    absl::Status s = registered.get_future().get();
    if (!s.ok()) return s;
    return id;
  }
  loop_.Post([this, spec = std::move(spec)]() mutable { RegisterActorOnLoop(std::move(spec)); });
  return id;
}

void CoreWorkerImpl::RegisterActorOnLoop(rpc::TaskSpec creation) {
  ActorId id = *ActorId::FromBinary(creation.actor_id());
  auto state = std::make_unique<ActorState>();
  state->id = id;
  state->info.set_actor_id(creation.actor_id());
  state->info.set_state(rpc::ActorInfo::PENDING_CREATION);
  state->max_task_retries = creation.actor_creation().max_task_retries();
  actors_[id] = std::move(state);
  // Creation arguments this process owns are resolved first.
  ResolveDependencies(std::move(creation), [this, id](rpc::TaskSpec resolved) {
    rpc::RegisterActorRequest req;
    *req.mutable_creation_task() = std::move(resolved);
    rpc::UnaryCall<rpc::RegisterActorReply>(
        &loop_, options_.token, kRpcTimeout, std::move(req),
        [stub = gcs_actors_.get()](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->RegisterActor(ctx, r, reply, std::move(done));
        },
        [this, id](const absl::Status& s, rpc::RegisterActorReply&& reply) {
          auto it = actors_.find(id);
          if (it == actors_.end()) return;
          if (!s.ok()) {
            it->second->info.set_state(rpc::ActorInfo::DEAD);
            FailActorTasks(*it->second, "the actor could not be registered: " + std::string(s.message()));
            return;
          }
          OnActorInfo(reply.actor());
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
  if (stopping_ || actors_.empty()) {
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
          auto timer = std::make_shared<std::unique_ptr<EventLoop::Timer>>();
          *timer = loop_.RunAfter(absl::Milliseconds(500), [this, timer]() mutable {
            PollActors();
            timer->reset();
          });
          return;
        }
        actor_poll_incarnation_ = reply.gcs_incarnation();
        actor_poll_sequence_ = reply.last_sequence();
        for (const auto& m : reply.messages()) {
          if (m.has_actor_info()) OnActorInfo(m.actor_info());
        }
        if (reply.gap()) {
          for (const auto& [id, a] : actors_) SubscribeActor(id);
        }
        PollActors();
      });
}

void CoreWorkerImpl::OnActorInfo(const rpc::ActorInfo& info) {
  auto id = ActorId::FromBinary(info.actor_id());
  if (!id.ok()) return;
  auto it = actors_.find(*id);
  if (it == actors_.end()) return;
  ActorState& a = *it->second;
  bool restarted = info.num_restarts() > a.info.num_restarts();
  a.info = info;
  switch (info.state()) {
    case rpc::ActorInfo::ALIVE: {
      std::string address = AddressKey(info.address());
      if (address != a.address || restarted) {
        // A new incarnation: what was sent to the old one is sent again.
        a.send_cursor = 0;
        a.resend.clear();
        a.address = address;
      }
      SendActorTasks(a);
      break;
    }
    case rpc::ActorInfo::RESTARTING:
      a.address.clear();
      a.send_cursor = 0;
      a.resend.clear();
      break;
    case rpc::ActorInfo::DEAD:
      a.address.clear();
      FailActorTasks(a, info.death_cause().message().empty() ? "the actor is dead" : info.death_cause().message());
      break;
    default:
      break;
  }
}

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::SubmitActorTask(const ActorId& actor, const std::string& method_name,
                                                              std::vector<Arg> args) {
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_TASK, method_name, std::move(args));
  spec.set_actor_id(actor.Binary());
  ObjectId ret = ReturnObjectId(*TaskId::FromBinary(spec.task_id()), 1);
  store_.Expect(ret);
  loop_.Post([this, actor, spec = std::move(spec)]() mutable {
    auto it = actors_.find(actor);
    if (it == actors_.end()) {
      // A handle from elsewhere (passed in, or by name): follow it from now.
      auto state = std::make_unique<ActorState>();
      state->id = actor;
      state->info.set_actor_id(actor.Binary());
      state->info.set_state(rpc::ActorInfo::PENDING_CREATION);
      it = actors_.emplace(actor, std::move(state)).first;
      SubscribeActor(actor);
    }
    ActorState& a = *it->second;
    if (a.info.state() == rpc::ActorInfo::DEAD) {
      FailTask(spec, ErrorType::kActorDied,
               a.info.death_cause().message().empty() ? "the actor is dead" : a.info.death_cause().message());
      return;
    }
    int64_t seq = a.next_sequence++;
    spec.set_sequence_number(seq);
    spec.set_max_retries(a.max_task_retries);

    ResolveDependencies(std::move(spec), [this, actor, seq](rpc::TaskSpec resolved) {
      auto it2 = actors_.find(actor);
      if (it2 == actors_.end()) return;
      ActorState& state = *it2->second;
      state.pending[seq] = std::move(resolved);
      // Resolved after later calls were pushed: push it on its own.
      if (seq < state.send_cursor) state.resend.insert(seq);
      SendActorTasks(state);
    });
  });
  return ObjectRefInfo{ret, address_};
}

void CoreWorkerImpl::SendActorTasks(ActorState& a) {
  if (a.address.empty() || a.info.state() != rpc::ActorInfo::ALIVE) return;
  int64_t lowest_unacked = a.pending.empty() ? a.next_sequence : a.pending.begin()->first;
  // Only what was never pushed, or must be pushed again: no rescans of the
  // calls already in flight.
  std::vector<int64_t> to_send;
  for (int64_t seq : a.resend) {
    if (a.pending.count(seq) > 0 && seq < a.send_cursor) to_send.push_back(seq);
  }
  a.resend.clear();
  for (auto it = a.pending.lower_bound(a.send_cursor); it != a.pending.end(); ++it) to_send.push_back(it->first);
  if (!a.pending.empty()) a.send_cursor = std::max(a.send_cursor, a.pending.rbegin()->first + 1);
  for (int64_t seq : to_send) {
    const rpc::TaskSpec& spec = a.pending.at(seq);
    RecordTaskEvent(spec, rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &a.info.address(), a.info.pid());
    rpc::PushTaskRequest req;
    req.set_intended_worker_id(a.info.address().worker_id());
    req.set_caller_lowest_unacked(lowest_unacked);
    *req.mutable_spec() = spec;
    ActorId actor = a.id;
    std::string address = a.address;
    int64_t s = seq;
    // Returns are stored on the gRPC thread (waking a waiting Get at once);
    // the actor's bookkeeping runs on the loop.
    rpc::UnaryCall<rpc::PushTaskReply>(
        nullptr, options_.token, absl::Hours(24 * 365), std::move(req),
        [stub = pool_.Worker(address)](auto* ctx, auto* r, auto* reply, auto done) {
          stub->async()->PushTask(ctx, r, reply, std::move(done));
        },
        [this, actor, address, s](const absl::Status& status, rpc::PushTaskReply&& reply) {
          if (status.ok()) HandleReturns(reply);
          loop_.Post([this, actor, address, s, status, reply = std::move(reply)] {
            OnActorTaskReply(actor, address, s, status, reply);
          });
        });
  }
}

void CoreWorkerImpl::OnActorTaskReply(const ActorId& actor, const std::string& address, int64_t s,
                                      const absl::Status& status, const rpc::PushTaskReply& reply) {
  auto it = actors_.find(actor);
  if (it == actors_.end()) return;
  ActorState& a = *it->second;
  auto p = a.pending.find(s);
  if (p == a.pending.end()) return;
  if (status.ok()) {
    bool failed = reply.error().type() != rpc::ErrorInfo::NONE;
    RecordTaskEvent(p->second, failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                    failed ? &reply.error() : nullptr);
    a.pending.erase(p);
    a.retries_used.erase(s);
    return;
  }
  // The actor's worker is unreachable: resend to its next incarnation
  // if this call may be retried; the GCS tells us what happened.
  int& used = a.retries_used[s];
  if (a.max_task_retries < 0 || used < a.max_task_retries) {
    ++used;
    if (a.address == address) a.resend.insert(s);
    return;
  }
  FailTask(p->second, ErrorType::kActorDied,
           "the actor's worker died while running this call: " + std::string(status.message()));
  a.pending.erase(p);
}

void CoreWorkerImpl::FailActorTasks(ActorState& a, const std::string& why) {
  for (auto& [seq, spec] : a.pending) FailTask(spec, ErrorType::kActorDied, why);
  a.pending.clear();
  a.send_cursor = 0;
  a.resend.clear();
}

absl::StatusOr<ActorId> CoreWorkerImpl::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  rpc::GetNamedActorRequest req;
  req.set_name(name);
  req.set_ray_namespace(ray_namespace.empty() ? job_id_.Hex() : ray_namespace);
  auto reply = SyncCall<rpc::GetNamedActorReply>(
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
  return SyncCall<rpc::KillActorReply>(options_.token,
                                       [&](auto* ctx, auto* r) { return gcs_actors_->KillActor(ctx, req, r); })
      .status();
}

}  // namespace manta::core
