#include "runtime/core_worker/task_submitter.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

void AppendDouble(std::string* out, double v) {
  char bytes[sizeof(v)];
  std::memcpy(bytes, &v, sizeof(v));
  out->append(bytes, sizeof(v));
}

}  // namespace

// ---------------------------------------------------------------- submission

std::string TaskSubmitter::SchedulingKey(const TaskOptions& options) {
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
  // And so do those of different strategies.
  const SchedulingStrategy& s = options.scheduling_strategy;
  key += '|' + std::to_string(static_cast<int>(s.kind));
  if (s.kind == SchedulingStrategy::Kind::kNodeAffinity) key += s.node_id.Binary() + (s.soft ? "s" : "h");
  // And those another program runs (its workers are not this one's).
  key += '|';
  key += options.worker_executable;
  for (const auto& a : options.worker_args) {
    key += '\0';
    key += a;
  }
  return key;
}

void TaskSubmitter::AddCallerAndProgram(rpc::TaskSpec* spec) const {
  *spec->mutable_caller_address() = caller_.address;
  spec->set_caller_is_driver(caller_.is_driver);
  spec->set_worker_executable(caller_.worker_executable);
  for (const auto& a : caller_.worker_args) spec->add_worker_args(a);
}

void TaskSubmitter::InitQueue(TaskQueue& q, const TaskOptions& options) const {
  auto shape = std::make_shared<rpc::TaskSpec>();
  shape->set_type(rpc::TaskSpec::NORMAL_TASK);
  shape->set_job_id(caller_.job_id);
  AddCallerAndProgram(shape.get());
  SetProgram(options.worker_executable, options.worker_args, shape.get());
  if (options.resources.empty()) {
    (*shape->mutable_resources())["CPU"] = 1;
  } else {
    for (const auto& [k, v] : options.resources) (*shape->mutable_resources())[k] = v;
  }
  for (const auto& [k, v] : options.label_selector) (*shape->mutable_label_selector())[k] = v;
  shape->set_placement_group_id(options.placement_group_id);
  shape->set_bundle_index(options.bundle_index);
  for (const auto& [k, v] : options.env_vars) (*shape->mutable_env_vars())[k] = v;
  ToProtoStrategy(options.scheduling_strategy, shape->mutable_scheduling_strategy());
  // SPREAD tasks each want a lease (a node) of their own: none pipeline.
  q.fungible = options.scheduling_strategy.kind != SchedulingStrategy::Kind::kSpread;
  for (const auto& [name, qty] : shape->resources()) q.fungible &= name == "CPU" || name == "memory";
  q.resources = TaskEventBuffer::ResourcesOf(*shape);
  q.shape = std::move(shape);
}

void TaskSubmitter::Submit(rpc::TaskSpec spec, const TaskOptions& options, const std::vector<ObjectId>& contained) {
  for (int i = 1; i <= NumReturns(spec); ++i) deps_.store->Expect(ReturnObjectId(spec.task_id(), i));
  const bool resolve = resolver_->HasOwnedRefArgs(spec);
  deps_.refs->HoldArgs(spec.task_id(), spec, contained);
  TaskQueue* q;
  std::vector<PushCall*> to_start;
  {
    absl::MutexLock lock(&mu_);
    q = &queues_[SchedulingKey(options)];
    if (!q->shape) InitQueue(*q, options);
    pending_[spec.task_id()] = nullptr;
    if (resolve) {
      rpc::TaskSpec& brief = resolving_[spec.task_id()];
      brief.set_task_id(spec.task_id());
      brief.set_job_id(spec.job_id());
      brief.set_function_name(spec.function_name());
      brief.set_num_returns(spec.num_returns());
    }
    if (!resolve) {
      q->tasks.push_back(std::move(spec));
      Pump(*q, &to_start);
    }
  }
  deps_.host->StartPushes(to_start);
  if (!resolve) return;
  deps_.loop->Post([this, q, spec = std::move(spec)]() mutable {
    resolver_->Resolve(std::move(spec), [this, q](rpc::TaskSpec resolved, const absl::Status& failed) {
      if (!failed.ok()) {
        {
          absl::MutexLock lock(&mu_);
          pending_.erase(resolved.task_id());
          resolving_.erase(resolved.task_id());
          if (cancelled_.erase(resolved.task_id()) > 0) return;  // failed when it was cancelled
        }
        // A failed dependency fails the task with the same error.
        return deps_.FailTask(resolved, GetErrorType(failed), std::string(failed.message()));
      }
      std::vector<PushCall*> calls;
      {
        absl::MutexLock lock(&mu_);
        resolving_.erase(resolved.task_id());
        if (cancelled_.erase(resolved.task_id()) > 0) {
          pending_.erase(resolved.task_id());
          return;  // failed when it was cancelled
        }
        q->tasks.push_back(std::move(resolved));
        Pump(*q, &calls);
      }
      deps_.host->StartPushes(calls);
    });
  });
}

TaskSubmitter::Counts TaskSubmitter::counts() {
  absl::MutexLock lock(&mu_);
  Counts c;
  for (const auto& [key, q] : queues_) {
    c.queued += static_cast<int>(q.tasks.size());
    c.leases += static_cast<int>(q.leases.size());
    c.lease_requests += q.lease_requests_in_flight;
  }
  return c;
}

// ---------------------------------------------------------------- queues and leases
void TaskSubmitter::Pump(TaskQueue& q, std::vector<PushCall*>* to_start) {
  // Ask for enough workers that every queued task could have its own
  // (bounded), counting the idle leases we hold.
  int idle = 0;
  for (auto& lease : q.leases) idle += !lease->dead && lease->in_flight == 0;
  int need = std::min<int>(static_cast<int>(q.tasks.size()) - idle, kMaxLeaseRequests);
  while (q.lease_requests_in_flight < need && q.leases.size() < 256) {
    if (q.lease_requests_in_flight++ == 0) q.oldest_lease_request = deps_.clock();
    RequestLease(&q, caller_.local_raylet, false, 0);
  }
  // Tasks that hold devices (TPU chips, custom resources) never queue behind
  // one another on a worker while other devices may be free: each runs on a
  // lease of its own. CPU-only tasks are fungible and pipeline once more
  // workers cannot be had at once.
  if (!q.tasks.empty()) {
    const absl::Time now = deps_.clock();
    bool saturated = q.lease_requests_in_flight == 0 || now - q.oldest_lease_request >= kPipelineAfter;
    int depth = q.fungible && saturated ? kPipelineDepth : 1;
    auto takes = [&](const WorkerLease& lease) {
      return !lease.dead && lease.in_flight < depth && (lease.in_flight == 0 || now - lease.last_done < kPipelineAfter);
    };
    while (!q.tasks.empty()) {
      std::shared_ptr<WorkerLease>* best = nullptr;
      for (auto& lease : q.leases) {
        if (takes(*lease) && (!best || lease->in_flight < (*best)->in_flight)) best = &lease;
      }
      if (best == nullptr) break;
      rpc::TaskSpec spec = std::move(q.tasks.front());
      q.tasks.pop_front();
      to_start->push_back(PushTask(q, *best, std::move(spec)));
    }
  }
  if (q.tasks.empty() && !idle_lease_timer_armed_) {
    idle_lease_timer_armed_ = true;
    deps_.loop->Post([this] {
      if (!idle_lease_timer_) idle_lease_timer_ = deps_.loop->RunEvery(kLeaseIdle / 2, [this] { ReturnIdleLeases(); });
    });
  }
}

void TaskSubmitter::RequestLease(TaskQueue* q, const std::string& raylet, bool grant_or_reject, int spillbacks,
                                 std::string lease_id) {
  rpc::RequestWorkerLeaseRequest req;
  req.set_lease_id(lease_id.empty() ? LeaseId::FromRandom().Binary() : std::move(lease_id));
  *req.mutable_spec() = *q->shape;
  req.set_grant_or_reject(grant_or_reject);
  req.set_spillback_count(spillbacks);
  std::string id = req.lease_id();
  // The reply is delivered on the loop (never inline), so this may be
  // called with mu_ held.
  deps_.host->RequestWorkerLease(
      raylet, std::move(req),
      [this, q, raylet, spillbacks, id](const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) {
        if (stopping_.load()) {
          // A worker granted after Stop goes back at once: it would
          // otherwise stay leased to a caller that is going away.
          if (s.ok() && reply.outcome() == rpc::RequestWorkerLeaseReply::GRANTED) {
            rpc::ReturnWorkerRequest back;
            back.set_lease_id(id);
            back.set_worker_id(reply.worker_address().worker_id());
            deps_.host->ReturnWorker(raylet, std::move(back));
          }
          return;
        }
        std::vector<PushCall*> to_start;
        {
          absl::MutexLock lock(&mu_);
          OnLeaseReply(q, raylet, spillbacks, id, s, reply, &to_start);
        }
        deps_.host->StartPushes(to_start);
      });
}

void TaskSubmitter::OnLeaseReply(TaskQueue* q, const std::string& raylet, int spillbacks, const std::string& lease_id,
                                 const absl::Status& s, const rpc::RequestWorkerLeaseReply& reply,
                                 std::vector<PushCall*>* to_start) {
  if (!s.ok()) {
    Logger("core_worker")->warn("lease request to {} failed: {}", raylet, s.ToString());
    if (raylet != caller_.local_raylet) {  // spilled-to node gone: start over locally
      // It may have granted the lease with a reply that was lost.
      ReleaseLease(raylet, lease_id);
      --q->lease_requests_in_flight;
      return Pump(*q, to_start);
    }
    absl::Time now = deps_.clock();
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
  if (raylet == caller_.local_raylet) local_raylet_failing_since_ = absl::InfiniteFuture();
  switch (reply.outcome()) {
    case rpc::RequestWorkerLeaseReply::GRANTED: {
      --q->lease_requests_in_flight;
      auto lease = std::make_shared<WorkerLease>();
      lease->lease_id = *LeaseId::FromBinary(lease_id);
      lease->raylet = raylet;
      lease->worker = reply.worker_address();
      lease->chips.assign(reply.tpu_chip_ids().begin(), reply.tpu_chip_ids().end());
      lease->chips_per_host = reply.tpu_chips_per_host();
      lease->worker_pid = reply.worker_pid();
      lease->idle_since = deps_.clock();
      q->leases.push_back(lease);
      if (q->tasks.empty()) ReturnIdleLeasesLocked(deps_.clock());
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

// The timer is owned here (a reply comes on the loop), so DropTimers drops
// it with the queues' other state.
void TaskSubmitter::RetryLocalLease(TaskQueue* q, absl::Duration delay, std::string lease_id) {
  auto timer = lease_retry_timers_.emplace(lease_retry_timers_.end());
  *timer = deps_.loop->RunAfter(delay, [this, q, timer, lease_id] {
    if (!stopping_.load()) RequestLease(q, caller_.local_raylet, false, 0, lease_id);
    lease_retry_timers_.erase(timer);
  });
}

// ---------------------------------------------------------------- pushes

PushCall* TaskSubmitter::PushTask(TaskQueue& q, const std::shared_ptr<WorkerLease>& lease, rpc::TaskSpec spec) {
  ++lease->in_flight;
  auto* call = new PushCall;
  call->address = AddressKey(lease->worker);
  call->worker_id = lease->worker.worker_id();
  call->queue = &q;
  call->lease = lease;
  rpc::PushTaskRequest& req = call->request;
  req.set_intended_worker_id(lease->worker.worker_id());
  for (int c : lease->chips) req.add_tpu_chip_ids(c);
  req.set_tpu_chips_per_host(lease->chips_per_host);
  pending_[spec.task_id()] = call;
  *req.mutable_spec() = std::move(spec);
  // What the task holds, for its context on the worker.
  *req.mutable_spec()->mutable_resources() = q.shape->resources();
  deps_.host->RecordTaskEvent(req.spec(), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &lease->worker,
                              lease->worker_pid, q.resources);
  return call;
}

void TaskSubmitter::OnPushDone(PushCall& call, std::vector<PushCall*>* to_start) {
  absl::MutexLock lock(&mu_);
  TaskQueue& q = *call.queue;
  const std::shared_ptr<WorkerLease>& lease = call.lease;
  rpc::TaskSpec& spec = *call.request.mutable_spec();
  --lease->in_flight;
  lease->last_done = deps_.clock();
  pending_[spec.task_id()] = nullptr;  // requeued, or erased below
  const bool cancelled = cancelled_.erase(spec.task_id()) > 0;
  if (!call.status.ok() && cancelled) {
    // Its worker was killed (force) or died meanwhile: not retried.
    if (!lease->dead) {
      lease->dead = true;
      ReturnLease(*lease, /*disconnect=*/true);
    }
    pending_.erase(spec.task_id());
    deps_.FailTask(spec, ErrorType::kTaskCancelled, "the task was cancelled while it ran");
  } else if (!call.status.ok()) {
    if (!lease->dead) {
      lease->dead = true;
      ReturnLease(*lease, /*disconnect=*/true);
    }
    OnTaskFailed(q, std::move(spec), "the worker died: " + std::string(call.status.message()));
  } else if (RetriesApplicationError(call)) {
    deps_.host->RecordTaskEvent(spec, rpc::TaskEvent::FAILED, &call.reply.error());
    OnTaskFailed(q, std::move(spec), "it raised a retryable error: " + call.reply.error().message());
  } else {
    pending_.erase(spec.task_id());
    const rpc::PushTaskReply& reply = call.reply;
    bool failed = reply.error().type() != rpc::ErrorInfo::NONE;
    deps_.host->RecordTaskEvent(spec, failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                                failed ? &reply.error() : nullptr);
    if (reply.worker_exiting() && !lease->dead) {
      lease->dead = true;
      ReturnLease(*lease, true);
    }
  }
  if (lease->in_flight == 0) lease->idle_since = deps_.clock();
  if (lease->dead) {
    q.leases.erase(std::remove(q.leases.begin(), q.leases.end(), lease), q.leases.end());
  }
  Pump(q, to_start);
}

absl::Status TaskSubmitter::Cancel(const std::string& task_id, bool force, bool recursive, std::function<void()> done) {
  if (!done) done = [] {};
  // What is left to do once mu_ is released.
  enum class Then { kNotFound, kDone, kKill, kAskWorker } then = Then::kDone;
  std::string worker;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(task_id);
    if (it == pending_.end()) {
      then = Then::kNotFound;
    } else if (it->second == nullptr) {
      CancelUnpushed(it);
    } else {
      cancelled_.insert(task_id);
      // Forced: the raylet kills the worker and takes the lease back; the
      // push fails, and the task with it (cancelled, not retried). With
      // `recursive`, the worker first cancels what the task submitted.
      then = force && !recursive ? Then::kKill : Then::kAskWorker;
      worker = it->second->address;
    }
  }
  switch (then) {
    case Then::kNotFound:
      done();
      return absl::NotFoundError("no pending task of that id");
    case Then::kDone:
      done();
      break;
    case Then::kKill:
      KillCancelled(task_id, std::move(done));
      break;
    case Then::kAskWorker:
      if (force) {
        deps_.host->CancelOnWorker(
            worker, task_id, recursive, /*force=*/true,
            [this, task_id, done = std::move(done)]() mutable { KillCancelled(task_id, std::move(done)); });
      } else {
        deps_.host->CancelOnWorker(worker, task_id, recursive, /*force=*/false);
        done();
      }
      break;
  }
  return absl::OkStatus();
}

void TaskSubmitter::CancelUnpushed(std::map<std::string, PushCall*>::iterator it) {
  const std::string task_id = it->first;
  for (auto& [key, q] : queues_) {
    for (auto t = q.tasks.begin(); t != q.tasks.end(); ++t) {
      if (t->task_id() != task_id) continue;
      deps_.FailTask(*t, ErrorType::kTaskCancelled, "the task was cancelled before it ran");
      q.tasks.erase(t);
      pending_.erase(it);
      return;
    }
  }
  // Resolving its arguments: failed now; dropped once they are ready.
  if (auto r = resolving_.find(task_id); r != resolving_.end()) {
    cancelled_.insert(task_id);
    deps_.FailTask(r->second, ErrorType::kTaskCancelled, "the task was cancelled before it ran");
    resolving_.erase(r);
  }
}

void TaskSubmitter::KillCancelled(const std::string& task_id, std::function<void()> done) {
  std::shared_ptr<WorkerLease> kill;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(task_id);
    // Still pushed, and still cancelled (its push has not ended since).
    if (it != pending_.end() && it->second != nullptr && cancelled_.count(task_id) > 0 && !it->second->lease->dead) {
      kill = it->second->lease;
      kill->dead = true;
    }
  }
  // A lease's address and ids never change: read without the lock.
  if (kill) {
    ReturnLease(*kill, /*disconnect=*/true, std::move(done));
  } else {
    done();
  }
}

bool TaskSubmitter::IsPending(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  return pending_.count(task_id) > 0;
}

bool TaskSubmitter::RetriesApplicationError(const PushCall& call) {
  const rpc::TaskSpec& spec = call.request.spec();
  return call.reply.error().retryable() && (spec.max_retries() < 0 || spec.attempt() < spec.max_retries());
}

void TaskSubmitter::OnTaskFailed(TaskQueue& q, rpc::TaskSpec spec, const std::string& why) {
  if (spec.max_retries() < 0 || spec.attempt() < spec.max_retries()) {
    spec.set_attempt(spec.attempt() + 1);
    Logger("core_worker")->info("retrying task {} (attempt {}): {}", spec.function_name(), spec.attempt(), why);
    q.tasks.push_front(std::move(spec));
    return;
  }
  pending_.erase(spec.task_id());
  deps_.FailTask(spec, ErrorType::kWorkerDied, why);
}

void TaskSubmitter::FailQueue(TaskQueue& q, ErrorType type, const std::string& message) {
  while (!q.tasks.empty()) {
    pending_.erase(q.tasks.front().task_id());
    deps_.FailTask(q.tasks.front(), type, message);
    q.tasks.pop_front();
  }
}

void TaskSubmitter::ReturnLease(const WorkerLease& lease, bool disconnect, std::function<void()> done) {
  rpc::ReturnWorkerRequest req;
  req.set_lease_id(lease.lease_id.Binary());
  req.set_worker_id(lease.worker.worker_id());
  req.set_disconnect_worker(disconnect);
  deps_.host->ReturnWorker(lease.raylet, std::move(req), std::move(done));
}

void TaskSubmitter::ReleaseLease(const std::string& raylet, const std::string& lease_id) {
  rpc::ReturnWorkerRequest req;
  req.set_lease_id(lease_id);
  deps_.host->ReturnWorker(raylet, std::move(req));
}

void TaskSubmitter::ReturnIdleLeases() {
  absl::MutexLock lock(&mu_);
  if (!ReturnIdleLeasesLocked(deps_.clock())) {
    idle_lease_timer_armed_ = false;
    idle_lease_timer_.reset();
  }
}

bool TaskSubmitter::ReturnIdleLeasesLocked(absl::Time now) {
  bool any_left = false;
  for (auto& [key, q] : queues_) {
    for (auto it = q.leases.begin(); it != q.leases.end();) {
      auto& lease = *it;
      if (q.tasks.empty() && lease->in_flight == 0 && now - lease->idle_since >= kLeaseIdle) {
        ReturnLease(*lease, false);
        it = q.leases.erase(it);
      } else {
        any_left = true;
        ++it;
      }
    }
  }
  return any_left;
}

void TaskSubmitter::ReturnAllLeases() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, q] : queues_) {
    for (auto& lease : q.leases) ReturnLease(*lease, false);
    q.leases.clear();
  }
}

void TaskSubmitter::ReturnIdleLeasesOf(const std::string& group, std::function<void()> done) {
  std::vector<std::shared_ptr<WorkerLease>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, q] : queues_) {
      if (!q.shape || q.shape->placement_group_id() != group || !q.tasks.empty()) continue;
      for (auto it = q.leases.begin(); it != q.leases.end();) {
        if ((*it)->in_flight == 0 && !(*it)->dead) {
          idle.push_back(*it);
          it = q.leases.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  if (idle.empty()) return done();
  // The last raylet to answer ends the wait.
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(idle.size()));
  auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
  for (const auto& lease : idle) {
    rpc::ReturnWorkerRequest req;
    req.set_lease_id(lease->lease_id.Binary());
    req.set_worker_id(lease->worker.worker_id());
    deps_.host->ReturnWorker(lease->raylet, std::move(req), [left, shared_done] {
      if (left->fetch_sub(1) == 1) (*shared_done)();
    });
  }
}

void TaskSubmitter::DropTimers() {
  idle_lease_timer_.reset();
  lease_retry_timers_.clear();
}

}  // namespace manta::core
