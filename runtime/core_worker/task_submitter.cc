// Normal tasks: submission, dependency resolution, worker leases (reused
// for tasks of the same shape, returned when idle), direct pushes, retries;
// and the PushTask calls actor calls share.
//
// The scheduling queues are behind tasks_mu_ rather than on the io loop: a
// task is pushed from the thread that submits it, and the reply of a push is
// settled (and the next queued task pushed) on the gRPC thread that gets it,
// so a burst of tasks wakes no other thread of this process. The loop runs
// lease requests' replies, the idle-lease timer and dependency resolution.
// gRPC calls whose completion takes tasks_mu_ are never started with it
// held (a failing call may complete inline).
#include <cstring>

#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "common/rpc/rpc_chaos.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/push_stream.h"

namespace manta::core {
namespace {

// A normal task's push counts as this call for fault injection.
constexpr char kPushTaskMethod[] = "/manta.rpc.CoreWorkerService/PushTask";

// Tasks pushed to one leased worker before the first completes: keeps the
// worker busy across the round trip. Only once more workers cannot be had
// quickly (lease requests outstanding longer than kPipelineAfter): until
// then each task gets a worker of its own, so tasks holding a device each
// get a different one.
constexpr int kPipelineDepth = 32;
constexpr absl::Duration kPipelineAfter = absl::Milliseconds(10);
// Lease requests in flight per shape.
constexpr int kMaxLeaseRequests = 4;
// A lease with nothing to run is returned after this long.
constexpr absl::Duration kLeaseIdle = absl::Milliseconds(500);
// How long lease requests to the local raylet are retried while they fail: a
// stalled raylet answers again; a dead one is declared dead well before.
constexpr absl::Duration kLocalRayletPatience = absl::Seconds(30);
constexpr int kMaxSpillbacks = 8;
// A push of a normal task whose connection broke (UNAVAILABLE) goes to the
// same worker again, at once, this many times before the worker counts as
// dead (a dead worker refuses the connection, so this costs little); the
// worker runs an attempt once and answers a resend with its reply.
constexpr int kPushResends = 9;

// Raylet calls are idempotent by lease id: made again when the connection
// broke. Returning a lease is tried longer (a miss leaks it until the job
// ends).
rpc::RetryPolicy LeaseRetry() { return rpc::RetryPolicy{}; }
rpc::RetryPolicy ReturnRetry() { return rpc::RetryPolicy::Patient(); }

void AppendDouble(std::string* out, double v) {
  char bytes[sizeof(v)];
  std::memcpy(bytes, &v, sizeof(v));
  out->append(bytes, sizeof(v));
}

}  // namespace

// ---------------------------------------------------------------- submission

TaskId CoreWorkerImpl::NextTaskId() {
  uint64_t n = task_counter_.fetch_add(1, std::memory_order_relaxed);
  char bytes[TaskId::kSize];
  static_assert(TaskId::kSize == 16 + sizeof(n));
  std::memcpy(bytes, task_id_prefix_.data(), 16);
  for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>(n >> (8 * (7 - i)));
  return *TaskId::FromBinary(std::string_view(bytes, sizeof(bytes)));
}

rpc::TaskSpec CoreWorkerImpl::BaseSpec(rpc::TaskSpec::Type type, const std::string& function_name,
                                       std::vector<Arg> args, std::vector<ObjectId>* contained) {
  // Only what the worker running the task needs: the program to start and
  // the demand travel in lease requests (a queue's shape) and actor
  // registrations, not with every push.
  rpc::TaskSpec spec;
  spec.set_type(type);
  spec.set_task_id(NextTaskId().Binary());
  spec.set_job_id(job_id_.Binary());
  spec.set_function_name(function_name);
  spec.set_caller_worker_id(address_proto_.worker_id());
  // Where the worker registers this process as a borrower of refs inside
  // the return value.
  *spec.mutable_caller_address() = address_proto_;
  for (Arg& a : args) {
    for (const ObjectRefInfo& r : a.contained) contained->push_back(r.id);
    rpc::TaskArg* out = spec.add_args();
    if (a.ref) {
      out->set_object_id(a.ref->id.Binary());
      rpc::Address owner;
      if (a.ref->owner_address.empty() || !owner.ParseFromString(a.ref->owner_address)) owner = address_proto_;
      *out->mutable_owner() = owner;
    } else if (a.data.size() > kInlineLimit && type != rpc::TaskSpec::ACTOR_CREATION_TASK) {
      // A large value travels as an object this process owns, fetched in
      // chunks by the worker, as a Put value would: no push carries it, so
      // none nears the message limit. The task's hold (HoldArgs) is its only
      // reference. (Not for constructors: a detached actor may restart after
      // this process is gone.)
      ObjectId id = ObjectId::FromRandom();
      store_.Put(id, std::make_shared<const std::string>(std::move(a.data)));
      out->set_object_id(id.Binary());
      *out->mutable_owner() = address_proto_;
    } else {
      out->set_data(std::move(a.data));
    }
  }
  return spec;
}

void CoreWorkerImpl::AddCallerAndProgram(rpc::TaskSpec* spec) const {
  *spec->mutable_caller_address() = address_proto_;
  spec->set_worker_executable(options_.worker_executable);
  for (const auto& a : options_.worker_args) spec->add_worker_args(a);
}

std::string CoreWorkerImpl::SchedulingKey(const TaskOptions& options) {
  // The options' maps are ordered, so equal shapes give equal keys.
  std::string key;
  if (options.resources.empty()) {
    key = "CPU=";
    AppendDouble(&key, 1);
  }
  for (const auto& [k, v] : options.resources) {
    key += k;
    key += '=';
    AppendDouble(&key, v);
  }
  key += '|';
  for (const auto& [k, v] : options.label_selector) key += k + "=" + v + ";";
  key += '|';
  key += options.placement_group_id;
  key += '#';
  key += std::to_string(options.bundle_index);
  // Tasks with different environments queue (and lease) separately.
  key += '|';
  for (const auto& [k, v] : options.env_vars) key += k + "=" + v + ";";
  return key;
}

void CoreWorkerImpl::InitQueue(SchedulingQueue& q, const TaskOptions& options) {
  auto shape = std::make_shared<rpc::TaskSpec>();
  shape->set_type(rpc::TaskSpec::NORMAL_TASK);
  shape->set_job_id(job_id_.Binary());
  AddCallerAndProgram(shape.get());
  if (options.resources.empty()) {
    (*shape->mutable_resources())["CPU"] = 1;
  } else {
    for (const auto& [k, v] : options.resources) (*shape->mutable_resources())[k] = v;
  }
  for (const auto& [k, v] : options.label_selector) (*shape->mutable_label_selector())[k] = v;
  shape->set_placement_group_id(options.placement_group_id);
  shape->set_bundle_index(options.bundle_index);
  for (const auto& [k, v] : options.env_vars) (*shape->mutable_env_vars())[k] = v;
  q.fungible = true;
  for (const auto& [name, qty] : shape->resources()) q.fungible &= name == "CPU" || name == "memory";
  q.resources = TaskEventBuffer::ResourcesOf(*shape);
  q.shape = std::move(shape);
}

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                         const TaskOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::NORMAL_TASK, function_name, std::move(args), &contained);
  spec.set_max_retries(options.max_retries);
  // The worker sets these while the task runs.
  for (const auto& [k, v] : options.env_vars) (*spec.mutable_env_vars())[k] = v;
  std::string key = SchedulingKey(options);
  ObjectId ret = ReturnObjectId(spec.task_id(), 1);
  store_.Expect(ret);
  const bool resolve = HasOwnedRefArgs(spec);
  refs_.HoldArgs(spec.task_id(), spec, contained);
  SchedulingQueue* q;
  std::vector<PushCall*> to_start;
  {
    absl::MutexLock lock(&tasks_mu_);
    q = &queues_[key];
    if (!q->shape) InitQueue(*q, options);
    if (!resolve) {
      q->tasks.push_back(std::move(spec));
      Pump(*q, &to_start);
    }
  }
  StartPushes(to_start);
  if (resolve) {
    loop_.Post([this, q, spec = std::move(spec)]() mutable {
      ResolveDependencies(std::move(spec), [this, q](std::optional<rpc::TaskSpec> resolved) {
        if (!resolved) return;  // failed with its argument
        std::vector<PushCall*> calls;
        {
          absl::MutexLock lock(&tasks_mu_);
          q->tasks.push_back(std::move(*resolved));
          Pump(*q, &calls);
        }
        StartPushes(calls);
      });
    });
  }
  // Owned here: an empty owner address means this process.
  return ObjectRefInfo{ret, std::string()};
}

bool CoreWorkerImpl::IsOwnedRefArg(const rpc::TaskArg& a) const {
  return !a.object_id().empty() && a.owner().worker_id() == address_proto_.worker_id();
}

bool CoreWorkerImpl::HasOwnedRefArgs(const rpc::TaskSpec& spec) const {
  for (const auto& a : spec.args()) {
    if (IsOwnedRefArg(a)) return true;
  }
  return false;
}

void CoreWorkerImpl::ResolveDependencies(rpc::TaskSpec spec,
                                         std::function<void(std::optional<rpc::TaskSpec>)> then) {
  // Arguments this process owns are waited for; small ones are inlined, so
  // the worker needs no round trip back to us.
  std::vector<int> owned;
  for (int i = 0; i < spec.args_size(); ++i) {
    if (IsOwnedRefArg(spec.args(i))) owned.push_back(i);
  }
  if (owned.empty()) return then(std::move(spec));
  auto state = std::make_shared<std::pair<rpc::TaskSpec, int>>(std::move(spec), static_cast<int>(owned.size()));
  auto shared_then = std::make_shared<std::function<void(std::optional<rpc::TaskSpec>)>>(std::move(then));
  for (int i : owned) {
    ObjectId id = *ObjectId::FromBinary(state->first.args(i).object_id());
    store_.OnReady(id, [this, state, shared_then, i](const absl::StatusOr<Value>& v) {
      loop_.Post([this, state, shared_then, i, v] {
        if (state->second <= 0) return;  // failed already
        rpc::TaskArg* arg = state->first.mutable_args(i);
        if (!v.ok()) {
          // A failed dependency fails the task with the same error.
          FailTask(state->first, GetErrorType(v.status()), std::string(v.status().message()));
          state->second = -1;
          (*shared_then)(std::nullopt);
          return;
        }
        if ((*v)->size() <= kInlineLimit) {
          arg->set_data(**v);
          arg->clear_object_id();
          arg->clear_owner();
        }
        if (--state->second == 0) (*shared_then)(std::move(state->first));
      });
    });
  }
}

// ---------------------------------------------------------------- queues and leases

void CoreWorkerImpl::Pump(SchedulingQueue& q, std::vector<PushCall*>* to_start) {
  // Ask for enough workers that every queued task could have its own
  // (bounded), counting the idle leases we hold.
  int idle = 0;
  for (auto& lease : q.leases) idle += !lease->dead && lease->in_flight == 0;
  int need = std::min<int>(static_cast<int>(q.tasks.size()) - idle, kMaxLeaseRequests);
  while (q.lease_requests_in_flight < need && q.leases.size() < 256) {
    if (q.lease_requests_in_flight++ == 0) q.oldest_lease_request = absl::Now();
    RequestLease(&q, raylet_address_, false, 0);
  }
  // Tasks that hold devices (TPU chips, custom resources) never queue behind
  // one another on a worker while other devices may be free: each runs on a
  // lease of its own. CPU-only tasks are fungible and pipeline once more
  // workers cannot be had at once.
  if (!q.tasks.empty()) {
    bool saturated = q.lease_requests_in_flight == 0 || absl::Now() - q.oldest_lease_request >= kPipelineAfter;
    int depth = q.fungible && saturated ? kPipelineDepth : 1;
    while (!q.tasks.empty()) {
      std::shared_ptr<Lease>* best = nullptr;
      for (auto& lease : q.leases) {
        if (!lease->dead && lease->in_flight < depth && (!best || lease->in_flight < (*best)->in_flight)) {
          best = &lease;
        }
      }
      if (best == nullptr) break;
      rpc::TaskSpec spec = std::move(q.tasks.front());
      q.tasks.pop_front();
      to_start->push_back(PushNormalTask(q, *best, std::move(spec)));
    }
  }
  if (q.tasks.empty() && !idle_lease_timer_armed_) {
    idle_lease_timer_armed_ = true;
    loop_.Post([this] {
      if (!idle_lease_timer_) idle_lease_timer_ = loop_.RunEvery(kLeaseIdle / 2, [this] { ReturnIdleLeases(); });
    });
  }
}

void CoreWorkerImpl::RequestLease(SchedulingQueue* q, const std::string& raylet, bool grant_or_reject, int spillbacks,
                                  std::string lease_id) {
  rpc::RequestWorkerLeaseRequest req;
  req.set_lease_id(lease_id.empty() ? LeaseId::FromRandom().Binary() : std::move(lease_id));
  *req.mutable_spec() = *q->shape;
  req.set_grant_or_reject(grant_or_reject);
  req.set_spillback_count(spillbacks);
  std::string id = req.lease_id();
  // The reply is delivered on the loop (never inline), so this may be
  // called with tasks_mu_ held.
  rpc::RetryingUnaryCall<rpc::RequestWorkerLeaseReply>(
      &loop_, options_.token, absl::Hours(24), LeaseRetry(), std::move(req),
      [stub = pool_.Raylet(raylet)](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->RequestWorkerLease(ctx, r, reply, std::move(done));
      },
      [this, q, raylet, spillbacks, id](const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) {
        if (stopping_) return;
        std::vector<PushCall*> to_start;
        {
          absl::MutexLock lock(&tasks_mu_);
          OnLeaseReply(q, raylet, spillbacks, id, s, reply, &to_start);
        }
        StartPushes(to_start);
      });
}

void CoreWorkerImpl::OnLeaseReply(SchedulingQueue* q, const std::string& raylet, int spillbacks,
                                  const std::string& lease_id, const absl::Status& s,
                                  const rpc::RequestWorkerLeaseReply& reply, std::vector<PushCall*>* to_start) {
  if (!s.ok()) {
    Logger("core_worker")->warn("lease request to {} failed: {}", raylet, s.ToString());
    if (raylet != raylet_address_) {  // spilled-to node gone: start over locally
      // It may have granted the lease with a reply that was lost.
      ReleaseLease(raylet, lease_id);
      --q->lease_requests_in_flight;
      return Pump(*q, to_start);
    }
    absl::Time now = absl::Now();
    if (local_raylet_failing_since_ == absl::InfiniteFuture()) local_raylet_failing_since_ = now;
    // The same lease id: a grant whose reply was lost is answered again.
    if (now - local_raylet_failing_since_ < kLocalRayletPatience) {
      return RetryLocalLease(q, absl::Milliseconds(200), lease_id);
    }
    --q->lease_requests_in_flight;
    FailQueue(*q, ErrorType::kNodeDied,
              "the local raylet at " + raylet + " is unreachable: " + std::string(s.message()));
    return;
  }
  if (raylet == raylet_address_) local_raylet_failing_since_ = absl::InfiniteFuture();
  switch (reply.outcome()) {
    case rpc::RequestWorkerLeaseReply::GRANTED: {
      --q->lease_requests_in_flight;
      auto lease = std::make_shared<Lease>();
      lease->lease_id = *LeaseId::FromBinary(lease_id);
      lease->raylet = raylet;
      lease->worker = reply.worker_address();
      lease->stub = pool_.Worker(AddressKey(lease->worker));
      lease->chips.assign(reply.tpu_chip_ids().begin(), reply.tpu_chip_ids().end());
      lease->chips_per_host = reply.tpu_chips_per_host();
      lease->worker_pid = reply.worker_pid();
      lease->idle_since = absl::Now();
      q->leases.push_back(lease);
      if (q->tasks.empty()) ReturnIdleLeasesLocked(absl::Now());
      return Pump(*q, to_start);
    }
    case rpc::RequestWorkerLeaseReply::SPILLBACK:
      if (spillbacks < kMaxSpillbacks) {
        return RequestLease(q, AddressKey(reply.retry_at()), true, spillbacks + 1);
      }
      [[fallthrough]];
    case rpc::RequestWorkerLeaseReply::REJECTED:
    case rpc::RequestWorkerLeaseReply::CANCELLED: {
      return RetryLocalLease(q, absl::Milliseconds(50));
    }
    case rpc::RequestWorkerLeaseReply::INFEASIBLE:
      --q->lease_requests_in_flight;
      return FailQueue(*q, ErrorType::kInfeasible, reply.message());
    default:
      --q->lease_requests_in_flight;
      return FailQueue(*q, ErrorType::kInvalidArgument, reply.message());
  }
}

// Asks the local raylet again after `delay`; the request still counts as in
// flight. The timer is owned here (a reply comes on the loop), so Stop()
// drops it with the queues' other state.
void CoreWorkerImpl::RetryLocalLease(SchedulingQueue* q, absl::Duration delay, std::string lease_id) {
  auto timer = lease_retry_timers_.emplace(lease_retry_timers_.end());
  *timer = loop_.RunAfter(delay, [this, q, timer, lease_id] {
    if (!stopping_) RequestLease(q, raylet_address_, false, 0, lease_id);
    lease_retry_timers_.erase(timer);
  });
}

// ---------------------------------------------------------------- pushes

void CoreWorkerImpl::StartPush(PushCall* call) {
  {
    absl::MutexLock lock(&live_mu_);
    if (stopping_) {
      // Not started; a pending actor call may still point at it, so it
      // lives until Stop() is done.
      ended_pushes_.push_back(call);
      return;
    }
    live_pushes_.insert(call);
  }
  SendOnStream(call);
}

void CoreWorkerImpl::SendOnStream(PushCall* call) {
  if (call->queue != nullptr && InjectPushFault(call)) {
    return OnPushDone(call, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropRequest)));
  }
  // Tasks and actor calls alike go over the worker's stream.
  while (true) {
    bool fresh = false;
    std::shared_ptr<PushStream> stream = StreamTo(call->address, call->stub, &fresh);
    if (stream == nullptr) {
      return OnPushDone(call, grpc::Status(grpc::StatusCode::CANCELLED, "this process is stopping"));
    }
    // A fresh stream takes the call before it starts, so it cannot refuse
    // it as broken: a worker that cannot be reached fails the call through
    // the stream's end, and its resend waits.
    const PushStream::Sent sent = stream->Send(call);
    if (fresh) stream->Start();
    if (sent == PushStream::Sent::kSent) return;
    if (sent == PushStream::Sent::kTooLarge) {
      return OnPushDone(call, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                           "the call is larger than a message may be"));
    }
  }
}

std::shared_ptr<PushStream> CoreWorkerImpl::StreamTo(const std::string& address,
                                                          rpc::CoreWorkerService::Stub* stub, bool* fresh) {
  absl::MutexLock lock(&streams_mu_);
  if (stopping_) return nullptr;  // CancelPushes has cancelled, or will see it
  auto it = streams_.find(address);
  if (it != streams_.end() && it->second->Usable()) return it->second;
  auto stream = std::make_shared<PushStream>(this, address);
  stream->Bind(stream, stub, options_.token);
  streams_[address] = stream;
  *fresh = true;
  absl::MutexLock live(&live_mu_);
  ++live_streams_;
  return stream;
}

void CoreWorkerImpl::ForgetStream(const std::string& address, const PushStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  auto it = streams_.find(address);
  if (it != streams_.end() && it->second.get() == stream) streams_.erase(it);
}

void CoreWorkerImpl::StreamEnded() {
  absl::MutexLock lock(&live_mu_);
  --live_streams_;
}

void CoreWorkerImpl::StartPushes(const std::vector<PushCall*>& calls) {
  for (PushCall* call : calls) StartPush(call);
}

bool CoreWorkerImpl::ResendPush(PushCall* call, const grpc::Status& status) {
  if (call->queue == nullptr || status.error_code() != grpc::StatusCode::UNAVAILABLE || call->resends >= kPushResends) {
    return false;
  }
  {
    absl::MutexLock lock(&live_mu_);
    if (stopping_) return false;  // no resend once stopping
    ++call->resends;
    call->reply.Clear();
  }
  SendOnStream(call);
  return true;
}

bool CoreWorkerImpl::InjectPushFault(PushCall* call) {
  call->drop_reply = false;
  rpc::RpcChaos* chaos = rpc::ProcessRpcChaos();
  if (chaos == nullptr || !chaos->Covers(kPushTaskMethod)) return false;
  const rpc::RpcFault::Kind kind = chaos->Decide(kPushTaskMethod).kind;
  call->drop_reply = kind == rpc::RpcFault::kDropReply;
  return kind == rpc::RpcFault::kDropRequest;
}

void CoreWorkerImpl::OnPushDone(PushCall* call, const grpc::Status& given) {
  grpc::Status status = given;
  if (call->drop_reply && status.ok()) {
    call->drop_reply = false;
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          rpc::InjectedFailureMessage(kPushTaskMethod, rpc::RpcFault::kDropReply));
  }
  // The connection broke: the same push to the same worker, which runs the
  // task at most once and answers a resend with the first push's reply.
  if (ResendPush(call, status)) return;
  // Stop() waits for this: what is below runs before it returns.
  auto done = [this, call] {
    absl::MutexLock lock(&live_mu_);
    live_pushes_.erase(call);
    // Once stopping, CancelPushes may still be cancelling it, and a pending
    // actor call may still point at it: Stop() deletes it at the end.
    if (stopping_) {
      ended_pushes_.push_back(call);
    } else {
      delete call;
    }
  };
  if (stopping_) return done();
  // Returns are stored first, so a waiting Get wakes while the bookkeeping
  // is done.
  call->status = rpc::ToAbslStatus(status);
  if (status.ok()) {
    HandleReturns(call->reply);
    refs_.ReleaseHeld(call->request.spec().task_id());
  }
  std::vector<PushCall*> to_start;
  if (call->queue == nullptr) {
    absl::MutexLock lock(&actors_mu_);
    OnActorTaskReply(*call, &to_start);
  } else {
    absl::MutexLock lock(&tasks_mu_);
    OnNormalTaskReply(*call, &to_start);
  }
  // The queue's next tasks go out from here (before this call counts as
  // done, so Stop() also waits for them or they are dropped).
  StartPushes(to_start);
  done();
}

bool CoreWorkerImpl::CancelPushes() {
  // stopping_ is set: no push starts and none is deleted but here. Every
  // push is on a stream, and a stream's end fails the calls on it (StreamTo
  // opens no new one now). Cancel without the lock (a completion may run
  // inline and take it).
  std::vector<std::shared_ptr<PushStream>> streams;
  {
    absl::MutexLock lock(&streams_mu_);
    for (auto& [address, stream] : streams_) streams.push_back(stream);
  }
  for (auto& stream : streams) stream->Cancel();
  streams.clear();
  absl::MutexLock lock(&live_mu_);
  auto all_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_) {
    return live_pushes_.empty() && live_streams_ == 0;
  };
  if (!live_mu_.AwaitWithTimeout(absl::Condition(&all_ended), absl::Seconds(10))) {
    // Their completions would touch a freed object: keep them, and it.
    Logger("core_worker")->error("{} task pushes and {} call streams did not end after being cancelled",
                                 live_pushes_.size(), live_streams_);
    return false;
  }
  return true;
}

void CoreWorkerImpl::DeleteEndedPushes() {
  absl::MutexLock lock(&live_mu_);
  for (PushCall* call : ended_pushes_) delete call;
  ended_pushes_.clear();
}

CoreWorkerImpl::PushCall* CoreWorkerImpl::PushNormalTask(SchedulingQueue& q, const std::shared_ptr<Lease>& lease,
                                                         rpc::TaskSpec spec) {
  ++lease->in_flight;
  auto* call = new PushCall;
  call->stub = lease->stub;
  call->address = AddressKey(lease->worker);
  call->queue = &q;
  call->lease = lease;
  rpc::PushTaskRequest& req = call->request;
  req.set_intended_worker_id(lease->worker.worker_id());
  for (int c : lease->chips) req.add_tpu_chip_ids(c);
  req.set_tpu_chips_per_host(lease->chips_per_host);
  *req.mutable_spec() = std::move(spec);
  RecordTaskEvent(req.spec(), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &lease->worker, lease->worker_pid,
                  q.resources);
  return call;
}

void CoreWorkerImpl::OnNormalTaskReply(PushCall& call, std::vector<PushCall*>* to_start) {
  SchedulingQueue& q = *call.queue;
  const std::shared_ptr<Lease>& lease = call.lease;
  rpc::TaskSpec& spec = *call.request.mutable_spec();
  --lease->in_flight;
  if (!call.status.ok()) {
    if (!lease->dead) {
      lease->dead = true;
      ReturnLease(lease, /*disconnect=*/true);
    }
    OnNormalTaskFailed(q, std::move(spec), "the worker died: " + std::string(call.status.message()));
  } else {
    const rpc::PushTaskReply& reply = call.reply;
    bool failed = reply.error().type() != rpc::ErrorInfo::NONE;
    RecordTaskEvent(spec, failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                    failed ? &reply.error() : nullptr);
    if (reply.worker_exiting() && !lease->dead) {
      lease->dead = true;
      ReturnLease(lease, true);
    }
  }
  if (lease->in_flight == 0) lease->idle_since = absl::Now();
  if (lease->dead) {
    q.leases.erase(std::remove(q.leases.begin(), q.leases.end(), lease), q.leases.end());
  }
  Pump(q, to_start);
}

void CoreWorkerImpl::HandleReturns(rpc::PushTaskReply& reply) {
  for (auto& r : *reply.mutable_returns()) {
    auto id = ObjectId::FromBinary(r.object_id());
    if (!id.ok()) continue;
    if (r.nested_size() > 0) refs_.HoldNested(*id, r);
    if (r.error().type() != rpc::ErrorInfo::NONE) {
      store_.Fail(*id, MakeError(FromProtoErrorType(r.error().type()), r.error().message()));
    } else if (!r.stored_remotely()) {
      store_.Put(*id, std::make_shared<const std::string>(std::move(*r.mutable_data())));
    } else {
      // Large: pull it from the worker now, off the io loop.
      std::string from = AddressKey(r.location());
      ObjectId oid = *id;
      auto fetch = [this, from, oid](rpc::CallCanceller* cancel) {
        auto v = FetchObject(&pool_, options_.token, from, oid, absl::Seconds(30), cancel);
        if (v.ok()) {
          store_.Put(oid, *v);
        } else {
          store_.Fail(oid, MakeError(ErrorType::kObjectLost, "could not fetch a task's return from " + from + ": " +
                                                                 std::string(v.status().message())));
        }
      };
      if (!fetches_.Submit(std::move(fetch))) {
        store_.Fail(oid, MakeError(ErrorType::kObjectLost, "the core worker is shutting down"));
      }
    }
  }
}

void CoreWorkerImpl::OnNormalTaskFailed(SchedulingQueue& q, rpc::TaskSpec spec, const std::string& why) {
  if (spec.max_retries() < 0 || spec.attempt() < spec.max_retries()) {
    spec.set_attempt(spec.attempt() + 1);
    Logger("core_worker")->info("retrying task {} (attempt {}): {}", spec.function_name(), spec.attempt(), why);
    q.tasks.push_front(std::move(spec));
    return;
  }
  FailTask(spec, ErrorType::kWorkerDied, why);
}

void CoreWorkerImpl::FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message) {
  rpc::ErrorInfo err;
  err.set_type(ToProtoErrorType(type));
  err.set_message(message);
  RecordTaskEvent(spec, rpc::TaskEvent::FAILED, &err);
  store_.Fail(ReturnObjectId(spec.task_id(), 1), MakeError(type, message));
  refs_.ReleaseHeld(spec.task_id());
}

void CoreWorkerImpl::FailQueue(SchedulingQueue& q, ErrorType type, const std::string& message) {
  while (!q.tasks.empty()) {
    FailTask(q.tasks.front(), type, message);
    q.tasks.pop_front();
  }
}

void CoreWorkerImpl::ReturnLease(const std::shared_ptr<Lease>& lease, bool disconnect) {
  rpc::ReturnWorkerRequest req;
  req.set_lease_id(lease->lease_id.Binary());
  req.set_worker_id(lease->worker.worker_id());
  req.set_disconnect_worker(disconnect);
  SendReturnWorker(lease->raylet, std::move(req));
}

void CoreWorkerImpl::ReleaseLease(const std::string& raylet, const std::string& lease_id) {
  rpc::ReturnWorkerRequest req;
  req.set_lease_id(lease_id);
  SendReturnWorker(raylet, std::move(req));
}

void CoreWorkerImpl::SendReturnWorker(const std::string& raylet, rpc::ReturnWorkerRequest req) {
  rpc::RetryingUnaryCall<rpc::ReturnWorkerReply>(
      &loop_, options_.token, absl::Seconds(10), ReturnRetry(), std::move(req),
      [stub = pool_.Raylet(raylet)](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->ReturnWorker(ctx, r, reply, std::move(done));
      },
      [](const absl::Status&, rpc::ReturnWorkerReply&&) {});
}

void CoreWorkerImpl::ReturnIdleLeases() {
  absl::MutexLock lock(&tasks_mu_);
  if (!ReturnIdleLeasesLocked(absl::Now())) {
    idle_lease_timer_armed_ = false;
    idle_lease_timer_.reset();
  }
}

bool CoreWorkerImpl::ReturnIdleLeasesLocked(absl::Time now) {
  bool any_left = false;
  for (auto& [key, q] : queues_) {
    for (auto it = q.leases.begin(); it != q.leases.end();) {
      auto& lease = *it;
      if (q.tasks.empty() && lease->in_flight == 0 && now - lease->idle_since >= kLeaseIdle) {
        ReturnLease(lease, false);
        it = q.leases.erase(it);
      } else {
        any_left = true;
        ++it;
      }
    }
  }
  return any_left;
}

}  // namespace manta::core
