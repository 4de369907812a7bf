// The CoreWorker's submission API: specs built from the caller's
// arguments, handed to the task submitter (task_submitter.h) or the actor
// side (actor_submitter.cc).
#include <cstring>

#include "runtime/core_worker/core_worker_impl.h"

namespace manta::core {

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

namespace {

// Refs to the returns of `spec`, owned here (an empty owner address means
// this process).
absl::Status ValidateStrategy(const SchedulingStrategy& s) {
  if (s.kind == SchedulingStrategy::Kind::kNodeAffinity && s.node_id.IsNil()) {
    return absl::InvalidArgumentError("NODE_AFFINITY needs a node id");
  }
  return absl::OkStatus();
}

std::vector<ObjectRefInfo> ReturnRefs(const rpc::TaskSpec& spec) {
  std::vector<ObjectRefInfo> refs;
  for (int i = 1; i <= NumReturns(spec); ++i) refs.push_back(ObjectRefInfo{ReturnObjectId(spec.task_id(), i), ""});
  return refs;
}

}  // namespace

absl::StatusOr<std::vector<ObjectRefInfo>> CoreWorkerImpl::SubmitTask(const std::string& function_name,
                                                                      std::vector<Arg> args,
                                                                      const TaskOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  if (options.num_returns < 1) return absl::InvalidArgumentError("num_returns must be at least 1");
  if (auto s = ValidateStrategy(options.scheduling_strategy); !s.ok()) return s;
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::NORMAL_TASK, function_name, std::move(args), &contained);
  spec.set_max_retries(options.max_retries);
  // The worker sets these while the task runs.
  for (const auto& [k, v] : options.env_vars) (*spec.mutable_env_vars())[k] = v;
  spec.set_num_returns(options.num_returns);
  spec.set_retry_exceptions(options.retry_exceptions);
  spec.set_retry_exception_filter(options.retry_exception_filter);
  std::vector<ObjectRefInfo> refs = ReturnRefs(spec);
  const TaskId id = *TaskId::FromBinary(spec.task_id());
  tasks_.Submit(std::move(spec), options, contained);
  // Added once pending: a recursive cancel of its parent that lists it
  // finds it, and one that ran before has it cancelled now.
  if (auto added = children_.AddFromCurrent({id, ActorId()}); added && added->cancel) {
    (void)tasks_.Cancel(id.Binary(), added->force, /*recursive=*/true);
  }
  return refs;
}

absl::StatusOr<ActorId> CoreWorkerImpl::CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                                    const ActorOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  if (auto s = ValidateStrategy(options.scheduling_strategy); !s.ok()) return s;
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_CREATION_TASK, factory_name, std::move(args), &contained);
  // The GCS has a worker started for the actor and owns it for this caller.
  AddCallerAndProgram(&spec);
  SetProgram(options.worker_executable, options.worker_args, &spec);
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
  o->set_get_if_exists(options.get_if_exists);
  ToProtoStrategy(options.scheduling_strategy, spec.mutable_scheduling_strategy());
  spec.set_placement_group_id(options.placement_group_id);
  spec.set_bundle_index(options.bundle_index);
  for (const auto& [k, v] : options.env_vars) (*spec.mutable_env_vars())[k] = v;
  return actors_.Create(std::move(spec), contained);
}

absl::StatusOr<std::vector<ObjectRefInfo>> CoreWorkerImpl::SubmitActorTask(const ActorId& actor,
                                                                           const std::string& method_name,
                                                                           std::vector<Arg> args,
                                                                           const ActorTaskOptions& options) {
  if (options.num_returns < 1) return absl::InvalidArgumentError("num_returns must be at least 1");
  std::vector<ObjectId> contained;
  rpc::TaskSpec spec = BaseSpec(rpc::TaskSpec::ACTOR_TASK, method_name, std::move(args), &contained);
  spec.set_actor_id(actor.Binary());
  spec.set_num_returns(options.num_returns);
  std::vector<ObjectRefInfo> refs = ReturnRefs(spec);
  const TaskId id = *TaskId::FromBinary(spec.task_id());
  actors_.Submit(actor, std::move(spec), contained);
  if (auto added = children_.AddFromCurrent({id, actor}); added && added->cancel) {
    (void)actors_.Cancel(id.Binary(), /*force=*/false, /*recursive=*/true);
  }
  return refs;
}

absl::Status CoreWorkerImpl::CancelTask(const ObjectRefInfo& ref, bool force, bool recursive) {
  if (!ref.owner_address.empty()) {
    rpc::Address owner;
    if (!owner.ParseFromString(ref.owner_address)) return absl::InvalidArgumentError("malformed owner address");
    if (owner.worker_id() != address_proto_.worker_id()) {
      // Borrowed: the owner (the task's caller) cancels it, as Ray's does.
      rpc::RemoteCancelTaskRequest req;
      req.set_object_id(ref.id.Binary());
      req.set_force(force);
      req.set_recursive(recursive);
      auto* stub = pool_.Worker(AddressKey(owner));
      auto reply = SyncCall<rpc::RemoteCancelTaskReply>(
          options_.token, [&](auto* ctx, auto* r) { return stub->RemoteCancelTask(ctx, req, r); });
      if (absl::IsUnavailable(reply.status()) || absl::IsDeadlineExceeded(reply.status())) {
        return absl::UnavailableError("cannot reach the owner of " + ref.id.Hex() + " at " + AddressKey(owner) +
                                      " to cancel its task: " + std::string(reply.status().message()));
      }
      return reply.status();
    }
  }
  auto task = TaskId::FromBinary(ref.id.Binary().substr(0, TaskId::kSize));
  if (!task.ok()) return absl::InvalidArgumentError("not a task's return");
  absl::Status actor_call = actors_.Cancel(task->Binary(), force, recursive);
  if (!absl::IsNotFound(actor_call)) return actor_call;
  absl::Status normal = tasks_.Cancel(task->Binary(), force, recursive);
  // Not pending: it ended already (or is not a task's return), as Ray.
  return absl::IsNotFound(normal) ? absl::OkStatus() : normal;
}

}  // namespace manta::core
