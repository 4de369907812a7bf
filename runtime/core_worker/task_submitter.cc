// Normal tasks: dependency resolution, worker leases (reused for tasks of
// the same shape, returned when idle), direct pushes, retries. Everything
// here runs on the io loop except SubmitTask's first half.
#include "common/logging.h"
#include "common/rpc/client_call.h"
#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {
namespace {

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
constexpr int kMaxSpillbacks = 8;

}  // namespace

rpc::TaskSpec CoreWorkerImpl::BaseSpec(rpc::TaskSpec::Type type, const std::string& function_name,
                                       std::vector<Arg> args) {
  rpc::TaskSpec spec;
  spec.set_type(type);
  spec.set_task_id(TaskId::FromRandom().Binary());
  spec.set_job_id(job_id_.Binary());
  spec.set_function_name(function_name);
  *spec.mutable_caller_address() = address_proto_;
  spec.set_caller_worker_id(worker_id_.Binary());
  spec.set_worker_executable(options_.worker_executable);
  for (const auto& a : options_.worker_args) spec.add_worker_args(a);
  for (Arg& a : args) {
    rpc::TaskArg* out = spec.add_args();
    if (a.ref) {
      out->set_object_id(a.ref->id.Binary());
      rpc::Address owner;
      if (a.ref->owner_address.empty() || !owner.ParseFromString(a.ref->owner_address)) owner = address_proto_;
      *out->mutable_owner() = owner;
    } else {
      out->set_data(std::move(a.data));
    }
  }
  return spec;
}

absl::StatusOr<ObjectRefInfo> CoreWorkerImpl::SubmitTask(const std::string& function_name, std::vector<Arg> args,
                                                         const TaskOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::NORMAL_TASK, function_name, std::move(args));
  if (options.resources.empty()) {
    (*spec.mutable_resources())["CPU"] = 1;
  } else {
    for (const auto& [k, v] : options.resources) (*spec.mutable_resources())[k] = v;
  }
  for (const auto& [k, v] : options.label_selector) (*spec.mutable_label_selector())[k] = v;
  spec.set_max_retries(options.max_retries);
  spec.set_placement_group_id(options.placement_group_id);
  spec.set_bundle_index(options.bundle_index);
  for (const auto& [k, v] : options.env_vars) (*spec.mutable_env_vars())[k] = v;
  ObjectId ret = ReturnObjectId(*TaskId::FromBinary(spec.task_id()), 1);
  store_.Expect(ret);
  loop_.Post([this, spec = std::move(spec)]() mutable {
    ResolveDependencies(std::move(spec), [this](rpc::TaskSpec resolved) { SubmitOnLoop(std::move(resolved)); });
  });
  return ObjectRefInfo{ret, address_};
}

void CoreWorkerImpl::ResolveDependencies(rpc::TaskSpec spec, std::function<void(rpc::TaskSpec)> then) {
  // Arguments this process owns are waited for; small ones are inlined, so
  // the worker needs no round trip back to us.
  std::vector<int> owned;
  for (int i = 0; i < spec.args_size(); ++i) {
    const rpc::TaskArg& a = spec.args(i);
    if (!a.object_id().empty() && a.owner().worker_id() == worker_id_.Binary()) owned.push_back(i);
  }
  if (owned.empty()) return then(std::move(spec));
  auto state = std::make_shared<std::pair<rpc::TaskSpec, int>>(std::move(spec), static_cast<int>(owned.size()));
  auto shared_then = std::make_shared<std::function<void(rpc::TaskSpec)>>(std::move(then));
  for (int i : owned) {
    ObjectId id = *ObjectId::FromBinary(state->first.args(i).object_id());
    store_.OnReady(id, [this, state, shared_then, i](const absl::StatusOr<Value>& v) {
      loop_.Post([this, state, shared_then, i, v] {
        rpc::TaskArg* arg = state->first.mutable_args(i);
        if (!v.ok()) {
          // A failed dependency fails the task with the same error.
          FailTask(state->first, GetErrorType(v.status()), std::string(v.status().message()));
          state->second = -1;
          return;
        }
        if ((*v)->size() <= kInlineLimit) {
          arg->set_data(**v);
          arg->clear_object_id();
          arg->clear_owner();
        }
        if (state->second > 0 && --state->second == 0) (*shared_then)(std::move(state->first));
      });
    });
  }
}

std::string CoreWorkerImpl::SchedulingKey(const rpc::TaskSpec& spec) {
  std::string key;
  std::map<std::string, double> res(spec.resources().begin(), spec.resources().end());
  for (const auto& [k, v] : res) key += k + "=" + std::to_string(v) + ";";
  key += "|";
  std::map<std::string, std::string> labels(spec.label_selector().begin(), spec.label_selector().end());
  for (const auto& [k, v] : labels) key += k + "=" + v + ";";
  key += "|" + spec.placement_group_id() + "#" + std::to_string(spec.bundle_index());
  // Tasks with different environments queue (and lease) separately.
  std::map<std::string, std::string> env(spec.env_vars().begin(), spec.env_vars().end());
  key += "|";
  for (const auto& [k, v] : env) key += k + "=" + v + ";";
  return key;
}

void CoreWorkerImpl::SubmitOnLoop(rpc::TaskSpec spec) {
  std::string key = SchedulingKey(spec);
  SchedulingQueue& q = queues_[key];
  if (q.tasks.empty() && q.leases.empty()) q.shape = spec;
  q.tasks.push_back(PendingTask{std::move(spec)});
  Pump(key);
}

void CoreWorkerImpl::Pump(const std::string& key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  SchedulingQueue& q = it->second;
  // Ask for enough workers that every queued task could have its own
  // (bounded), counting the idle leases we hold.
  int idle = 0;
  for (auto& lease : q.leases) idle += !lease->dead && lease->in_flight == 0;
  int need = std::min<int>(static_cast<int>(q.tasks.size()) - idle, kMaxLeaseRequests);
  while (q.lease_requests_in_flight < need && q.leases.size() < 256) {
    if (q.lease_requests_in_flight++ == 0) q.oldest_lease_request = absl::Now();
    RequestLease(key, raylet_address_, false, 0);
  }
  // Tasks that hold devices (TPU chips, custom resources) never queue behind
  // one another on a worker while other devices may be free: each runs on a
  // lease of its own. CPU-only tasks are fungible and pipeline once more
  // workers cannot be had at once.
  bool fungible = true;
  for (const auto& [name, qty] : q.shape.resources()) fungible &= name == "CPU" || name == "memory";
  bool saturated = q.lease_requests_in_flight == 0 || absl::Now() - q.oldest_lease_request >= kPipelineAfter;
  int depth = fungible && saturated ? kPipelineDepth : 1;
  while (!q.tasks.empty()) {
    std::shared_ptr<Lease> best;
    for (auto& lease : q.leases) {
      if (!lease->dead && lease->in_flight < depth && (!best || lease->in_flight < best->in_flight)) {
        best = lease;
      }
    }
    if (!best) break;
    rpc::TaskSpec spec = std::move(q.tasks.front().spec);
    q.tasks.pop_front();
    PushNormalTask(key, best, std::move(spec));
  }
  if (q.tasks.empty() && !idle_lease_timer_) {
    idle_lease_timer_ = loop_.RunEvery(kLeaseIdle / 2, [this] { ReturnIdleLeases(); });
  }
}

void CoreWorkerImpl::RequestLease(const std::string& key, const std::string& raylet, bool grant_or_reject,
                                  int spillbacks) {
  SchedulingQueue& q = queues_[key];
  rpc::RequestWorkerLeaseRequest req;
  req.set_lease_id(LeaseId::FromRandom().Binary());
  *req.mutable_spec() = q.shape;
  req.mutable_spec()->clear_args();
  req.set_grant_or_reject(grant_or_reject);
  req.set_spillback_count(spillbacks);
  std::string lease_id = req.lease_id();
  rpc::UnaryCall<rpc::RequestWorkerLeaseReply>(
      &loop_, options_.token, absl::Hours(24), std::move(req),
      [stub = pool_.Raylet(raylet)](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->RequestWorkerLease(ctx, r, reply, std::move(done));
      },
      [this, key, raylet, spillbacks, lease_id](const absl::Status& s, rpc::RequestWorkerLeaseReply&& reply) {
        if (stopping_) return;
        SchedulingQueue& q = queues_[key];
        auto done_requesting = [&] { --q.lease_requests_in_flight; };
        if (!s.ok()) {
          done_requesting();
          Logger("core_worker")->warn("lease request to {} failed: {}", raylet, s.ToString());
          if (raylet != raylet_address_) return Pump(key);  // spilled-to node gone: start over locally
          FailQueue(key, ErrorType::kNodeDied,
                    "the local raylet at " + raylet + " is unreachable: " + std::string(s.message()));
          return;
        }
        switch (reply.outcome()) {
          case rpc::RequestWorkerLeaseReply::GRANTED: {
            done_requesting();
            auto lease = std::make_shared<Lease>();
            lease->lease_id = *LeaseId::FromBinary(lease_id);
            lease->raylet = raylet;
            lease->worker = reply.worker_address();
            lease->chips.assign(reply.tpu_chip_ids().begin(), reply.tpu_chip_ids().end());
            lease->chips_per_host = reply.tpu_chips_per_host();
            lease->worker_pid = reply.worker_pid();
            lease->idle_since = absl::Now();
            q.leases.push_back(lease);
            if (q.tasks.empty()) ReturnIdleLeases();
            return Pump(key);
          }
          case rpc::RequestWorkerLeaseReply::SPILLBACK:
            if (spillbacks < kMaxSpillbacks) {
              return RequestLease(key, AddressKey(reply.retry_at()), true, spillbacks + 1);
            }
            [[fallthrough]];
          case rpc::RequestWorkerLeaseReply::REJECTED:
          case rpc::RequestWorkerLeaseReply::CANCELLED: {
            // Try again from the local raylet a little later.
            auto timer = std::make_shared<std::unique_ptr<EventLoop::Timer>>();
            *timer = loop_.RunAfter(absl::Milliseconds(50), [this, key, timer]() mutable {
              RequestLease(key, raylet_address_, false, 0);
              timer->reset();
            });
            return;
          }
          case rpc::RequestWorkerLeaseReply::INFEASIBLE:
            done_requesting();
            return FailQueue(key, ErrorType::kInfeasible, reply.message());
          default:
            done_requesting();
            return FailQueue(key, ErrorType::kInvalidArgument, reply.message());
        }
      });
}

void CoreWorkerImpl::PushNormalTask(const std::string& key, std::shared_ptr<Lease> lease, rpc::TaskSpec spec) {
  ++lease->in_flight;
  rpc::PushTaskRequest req;
  req.set_intended_worker_id(lease->worker.worker_id());
  for (int c : lease->chips) req.add_tpu_chip_ids(c);
  req.set_tpu_chips_per_host(lease->chips_per_host);
  *req.mutable_spec() = spec;
  RecordTaskEvent(spec, rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &lease->worker, lease->worker_pid);
  // The reply is handled on the gRPC thread first, so a waiting Get wakes
  // without a hop through the io loop; the bookkeeping then runs on the loop.
  rpc::UnaryCall<rpc::PushTaskReply>(
      nullptr, options_.token, absl::Hours(24 * 365), std::move(req),
      [stub = pool_.Worker(AddressKey(lease->worker))](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->PushTask(ctx, r, reply, std::move(done));
      },
      [this, key, lease, spec = std::move(spec)](const absl::Status& s, rpc::PushTaskReply&& reply) mutable {
        if (s.ok()) HandleReturns(reply);
        loop_.Post([this, key, lease, spec = std::move(spec), s, reply = std::move(reply)]() mutable {
          OnNormalTaskReply(key, lease, std::move(spec), s, reply);
        });
      });
}

void CoreWorkerImpl::OnNormalTaskReply(const std::string& key, const std::shared_ptr<Lease>& lease, rpc::TaskSpec spec,
                                       const absl::Status& s, const rpc::PushTaskReply& reply) {
  --lease->in_flight;
  if (!s.ok()) {
    if (!lease->dead) {
      lease->dead = true;
      ReturnLease(lease, /*disconnect=*/true);
    }
    OnNormalTaskFailed(key, std::move(spec), "the worker died: " + std::string(s.message()));
  } else {
    bool failed = reply.error().type() != rpc::ErrorInfo::NONE;
    RecordTaskEvent(spec, failed ? rpc::TaskEvent::FAILED : rpc::TaskEvent::FINISHED,
                    failed ? &reply.error() : nullptr);
    if (reply.worker_exiting() && !lease->dead) {
      lease->dead = true;
      ReturnLease(lease, true);
    }
  }
  if (lease->in_flight == 0) lease->idle_since = absl::Now();
  auto& q = queues_[key];
  if (lease->dead) {
    q.leases.erase(std::remove(q.leases.begin(), q.leases.end(), lease), q.leases.end());
  }
  Pump(key);
}

void CoreWorkerImpl::HandleReturns(const rpc::PushTaskReply& reply) {
  for (const auto& r : reply.returns()) {
    auto id = ObjectId::FromBinary(r.object_id());
    if (!id.ok()) continue;
    if (r.error().type() != rpc::ErrorInfo::NONE) {
      store_.Fail(*id, MakeError(FromProtoErrorType(r.error().type()), r.error().message()));
    } else if (!r.stored_remotely()) {
      store_.Put(*id, std::make_shared<const std::string>(r.data()));
    } else {
      // Large: pull it from the worker now, off the io loop.
      std::string from = AddressKey(r.location());
      ObjectId oid = *id;
      std::thread([this, from, oid] {
        auto v = FetchObject(&pool_, options_.token, from, oid, absl::Seconds(30));
        if (v.ok()) {
          store_.Put(oid, *v);
        } else {
          store_.Fail(oid, MakeError(ErrorType::kObjectLost, "could not fetch a task's return from " + from + ": " +
                                                                 std::string(v.status().message())));
        }
      }).detach();
    }
  }
}

void CoreWorkerImpl::OnNormalTaskFailed(const std::string& key, rpc::TaskSpec spec, const std::string& why) {
  if (spec.max_retries() < 0 || spec.attempt() < spec.max_retries()) {
    spec.set_attempt(spec.attempt() + 1);
    Logger("core_worker")->info("retrying task {} (attempt {}): {}", spec.function_name(), spec.attempt(), why);
    queues_[key].tasks.push_front(PendingTask{std::move(spec)});
    return;
  }
  FailTask(spec, ErrorType::kWorkerDied, why);
}

void CoreWorkerImpl::FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message) {
  rpc::ErrorInfo err;
  err.set_type(ToProtoErrorType(type));
  err.set_message(message);
  RecordTaskEvent(spec, rpc::TaskEvent::FAILED, &err);
  store_.Fail(ReturnObjectId(*TaskId::FromBinary(spec.task_id()), 1), MakeError(type, message));
}

void CoreWorkerImpl::FailQueue(const std::string& key, ErrorType type, const std::string& message) {
  SchedulingQueue& q = queues_[key];
  while (!q.tasks.empty()) {
    FailTask(q.tasks.front().spec, type, message);
    q.tasks.pop_front();
  }
}

void CoreWorkerImpl::ReturnLease(const std::shared_ptr<Lease>& lease, bool disconnect) {
  rpc::ReturnWorkerRequest req;
  req.set_lease_id(lease->lease_id.Binary());
  req.set_worker_id(lease->worker.worker_id());
  req.set_disconnect_worker(disconnect);
  rpc::UnaryCall<rpc::ReturnWorkerReply>(
      &loop_, options_.token, absl::Seconds(10), std::move(req),
      [stub = pool_.Raylet(lease->raylet)](auto* ctx, auto* r, auto* reply, auto done) {
        stub->async()->ReturnWorker(ctx, r, reply, std::move(done));
      },
      [](const absl::Status&, rpc::ReturnWorkerReply&&) {});
}

void CoreWorkerImpl::ReturnIdleLeases() {
  absl::Time now = absl::Now();
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
  if (!any_left) idle_lease_timer_.reset();
}

}  // namespace manta::core
