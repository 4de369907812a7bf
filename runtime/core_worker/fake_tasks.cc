// FakeCoreWorker's tasks and actors: runs on the caller's thread through
// the FunctionRegistry, with injected failures, retries and held tasks.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "manta/internal/function_registry.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta::core {
namespace {

bool IsDeath(ErrorType type) { return type == ErrorType::kWorkerDied || type == ErrorType::kNodeDied; }

internal::ArgViews Views(const std::vector<std::string>& values) {
  return internal::ArgViews(values.begin(), values.end());
}

// As the real worker decides (task_receiver.cc).
bool RetryableApplicationError(const absl::Status& error, const TaskOptions& options) {
  ErrorType type = GetErrorType(error);
  return options.retry_exceptions && (type == ErrorType::kApplicationError || type == ErrorType::kNone) &&
         (options.retry_exception_filter.empty() || IsMarkedRetryable(error));
}

}  // namespace

ObjectId FakeCoreWorker::NewObject() {
  ObjectId id = ObjectId::FromRandom();
  absl::MutexLock lock(&mu_);
  objects_[id];
  return id;
}

void FakeCoreWorker::Complete(const ObjectId& id, absl::StatusOr<std::string> value) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return;  // every reference was dropped already
  if (it->second.ready) return;      // cancelled while held
  it->second.ready = true;
  if (value.ok()) {
    it->second.value = std::make_shared<const std::string>(std::move(*value));
  } else {
    it->second.value = value.status();
  }
}

absl::Status FakeCoreWorker::CheckAffinity(const SchedulingStrategy& strategy) const {
  if (strategy.kind != SchedulingStrategy::Kind::kNodeAffinity || strategy.soft) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (const NodeData& n : nodes_) {
    if (n.node_id == strategy.node_id && n.alive) return absl::OkStatus();
  }
  return MakeError(ErrorType::kInfeasible,
                   absl::StrCat("NODE_AFFINITY: node ", strategy.node_id.Hex(), " is dead, draining or unknown"));
}

std::vector<ObjectId> FakeCoreWorker::NewObjects(int n) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < n; ++i) ids.push_back(NewObject());
  return ids;
}

std::vector<ObjectRefInfo> FakeCoreWorker::RefsTo(const std::vector<ObjectId>& ids) const {
  std::vector<ObjectRefInfo> refs;
  for (const ObjectId& id : ids) refs.push_back(ObjectRefInfo{id, address_});
  return refs;
}

void FakeCoreWorker::CompleteAll(const std::vector<ObjectId>& ids, const std::string& name,
                                 absl::StatusOr<internal::ReturnValues> values) {
  if (values.ok() && values->size() != ids.size()) {
    values = MakeError(
        ErrorType::kApplicationError,
        absl::StrCat(name, " returned ", values->size(), " values, but the task declares num_returns=", ids.size()));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (values.ok()) {
      Complete(ids[i], std::move((*values)[i]));
    } else {
      Complete(ids[i], values.status());
    }
  }
}

void FakeCoreWorker::RunOrHold(const std::string& name, std::function<void()> run) {
  {
    absl::MutexLock lock(&mu_);
    bool hold = !held_.empty();  // keep submission order behind held work
    for (const auto& held_name : held_names_) hold = hold || held_name == name;
    if (hold) {
      held_.push_back(std::move(run));
      return;
    }
  }
  run();
}

absl::StatusOr<std::vector<std::string>> FakeCoreWorker::ResolveArgs(const std::vector<Arg>& args) {
  std::vector<std::string> values;
  values.reserve(args.size());
  absl::MutexLock lock(&mu_);
  for (const Arg& arg : args) {
    if (!arg.ref.has_value()) {
      values.push_back(arg.data);
      continue;
    }
    auto it = objects_.find(arg.ref->id);
    if (it == objects_.end() || !it->second.ready) {
      return MakeError(ErrorType::kObjectLost, absl::StrCat("argument object ", arg.ref->id.Hex(), " was lost"));
    }
    if (!it->second.value.ok()) return it->second.value.status();
    values.push_back(**it->second.value);
  }
  return values;
}

absl::Status FakeCoreWorker::TakeInjected(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ++run_counts_[name];
  auto it = injected_.find(name);
  if (it == injected_.end()) return absl::OkStatus();
  absl::Status error = MakeError(it->second.type, it->second.message);
  if (it->second.times > 0 && --it->second.times == 0) injected_.erase(it);
  return error;
}

void FakeCoreWorker::RunTask(const std::vector<ObjectId>& ids, const std::string& name, const std::vector<Arg>& args,
                             const TaskOptions& options) {
  const internal::FunctionInvoker* invoker = internal::FunctionRegistry::Instance().FindFunction(name);
  if (invoker == nullptr) {
    CompleteAll(ids, name, MakeError(ErrorType::kInvalidArgument, absl::StrCat("no remote function named ", name)));
    return;
  }
  auto values = ResolveArgs(args);
  if (!values.ok()) {
    CompleteAll(ids, name, values.status());
    return;
  }
  TaskContext context;
  context.task_id = TaskId::FromRandom();
  context.num_returns = options.num_returns;
  context.resources = options.resources;
  context.retry_exceptions = options.retry_exceptions;
  context.retry_exception_filter = options.retry_exception_filter;
  for (int attempt = 0;; ++attempt) {
    context.attempt = attempt;
    const bool retries_left = options.max_retries < 0 || attempt < options.max_retries;
    absl::Status injected = TakeInjected(name);
    if (injected.ok()) {
      absl::StatusOr<internal::ReturnValues> result;
      {
        ScopedTaskContext scope(&context);
        result = (*invoker)(Views(*values));
      }
      if (!retries_left || result.ok() || !RetryableApplicationError(result.status(), options)) {
        CompleteAll(ids, name, std::move(result));
        return;
      }
      continue;
    }
    if (!IsDeath(GetErrorType(injected)) || !retries_left) {
      CompleteAll(ids, name, injected);
      return;
    }
  }
}

void FakeCoreWorker::RunActorTask(const std::vector<ObjectId>& ids, const ActorId& actor, const std::string& name,
                                  const std::vector<Arg>& args) {
  const internal::ActorMethodInvoker* invoker = internal::FunctionRegistry::Instance().FindActorMethod(name);
  if (invoker == nullptr) {
    CompleteAll(ids, name, MakeError(ErrorType::kInvalidArgument, absl::StrCat("no actor method named ", name)));
    return;
  }
  std::shared_ptr<void> instance;
  absl::Status death;
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(actor);
    if (it == actors_.end()) {
      death = MakeError(ErrorType::kActorDied, absl::StrCat("no actor ", actor.Hex()));
    } else if (it->second.instance == nullptr) {
      death = it->second.death;
    } else {
      instance = it->second.instance;
    }
  }
  if (instance == nullptr) {
    CompleteAll(ids, name, death);
    return;
  }
  auto values = ResolveArgs(args);
  if (!values.ok()) {
    CompleteAll(ids, name, values.status());
    return;
  }
  absl::Status injected = TakeInjected(name);
  if (!injected.ok()) {
    CompleteAll(ids, name, injected);
    return;
  }
  TaskContext context;
  context.task_id = TaskId::FromRandom();
  context.actor_id = actor;
  context.num_returns = static_cast<int>(ids.size());
  ScopedTaskContext scope(&context);
  CompleteAll(ids, name, (*invoker)(instance.get(), Views(*values)));
}

void FakeCoreWorker::StartActor(const ActorId& actor) {
  std::string factory_name;
  std::vector<Arg> args;
  {
    absl::MutexLock lock(&mu_);
    const ActorState& state = actors_.at(actor);
    factory_name = state.factory_name;
    args = state.args;
  }
  absl::StatusOr<std::shared_ptr<void>> instance = absl::UnknownError("not run");
  const internal::ActorFactoryInvoker* factory = internal::FunctionRegistry::Instance().FindActorFactory(factory_name);
  absl::Status injected = TakeInjected(factory_name);
  if (factory == nullptr) {
    instance = absl::NotFoundError(absl::StrCat("no actor factory named ", factory_name));
  } else if (!injected.ok()) {
    instance = injected;
  } else {
    auto values = ResolveArgs(args);
    instance = values.ok() ? (*factory)(Views(*values)) : absl::StatusOr<std::shared_ptr<void>>(values.status());
  }
  absl::MutexLock lock(&mu_);
  ActorState& state = actors_.at(actor);
  if (instance.ok()) {
    state.instance = *std::move(instance);
  } else {
    state.death = MakeError(
        ErrorType::kActorDied,
        absl::StrCat("actor ", state.options.class_name, " could not be created: ", instance.status().message()));
  }
}

absl::StatusOr<std::vector<ObjectRefInfo>> FakeCoreWorker::SubmitTask(const std::string& function_name,
                                                                      std::vector<Arg> args,
                                                                      const TaskOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  if (options.num_returns < 1) return absl::InvalidArgumentError("num_returns must be at least 1");
  {
    absl::MutexLock lock(&mu_);
    last_task_options_ = options;
  }
  std::vector<ObjectId> ids = NewObjects(options.num_returns);
  if (absl::Status placed = CheckAffinity(options.scheduling_strategy); !placed.ok()) {
    CompleteAll(ids, function_name, placed);
    return RefsTo(ids);
  }
  RunOrHold(function_name, [this, ids, function_name, args = std::move(args), options] {
    RunTask(ids, function_name, args, options);
  });
  return RefsTo(ids);
}

absl::StatusOr<ActorId> FakeCoreWorker::CreateActor(const std::string& factory_name, std::vector<Arg> args,
                                                    const ActorOptions& options) {
  if (auto s = ValidateEnvVars(options.env_vars); !s.ok()) return s;
  ActorId id = ActorId::FromRandom();
  {
    absl::MutexLock lock(&mu_);
    if (!options.name.empty()) {
      auto key = std::make_pair(options.ray_namespace, options.name);
      if (auto taken = named_actors_.find(key); taken != named_actors_.end() && options.get_if_exists) {
        return taken->second;
      }
      if (named_actors_.count(key) > 0) {
        return absl::AlreadyExistsError(absl::StrCat("an actor named ", options.name, " already exists"));
      }
      named_actors_[key] = id;
    }
    ActorState& state = actors_[id];
    state.factory_name = factory_name;
    state.args = std::move(args);
    state.options = options;
    state.death = MakeError(ErrorType::kActorDied, "actor is not alive");
  }
  StartActor(id);
  return id;
}

absl::StatusOr<std::vector<ObjectRefInfo>> FakeCoreWorker::SubmitActorTask(const ActorId& actor,
                                                                           const std::string& method_name,
                                                                           std::vector<Arg> args,
                                                                           const ActorTaskOptions& options) {
  if (options.num_returns < 1) return absl::InvalidArgumentError("num_returns must be at least 1");
  std::vector<ObjectId> ids = NewObjects(options.num_returns);
  RunOrHold(method_name,
            [this, ids, actor, method_name, args = std::move(args)] { RunActorTask(ids, actor, method_name, args); });
  return RefsTo(ids);
}

absl::Status FakeCoreWorker::CancelTask(const ObjectRefInfo& ref, bool force, bool recursive) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(ref.id);
  if (it == objects_.end() || it->second.ready) return absl::OkStatus();  // gone or finished
  it->second.ready = true;
  it->second.value = MakeError(ErrorType::kTaskCancelled, "the task was cancelled before it ran");
  return absl::OkStatus();
}

absl::StatusOr<ActorId> FakeCoreWorker::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  absl::MutexLock lock(&mu_);
  auto it = named_actors_.find({ray_namespace, name});
  if (it == named_actors_.end()) return absl::NotFoundError(absl::StrCat("no actor named ", name));
  return it->second;
}

absl::Status FakeCoreWorker::KillActor(const ActorId& actor, bool no_restart) {
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(actor);
    if (it == actors_.end()) return absl::NotFoundError(absl::StrCat("no actor ", actor.Hex()));
    if (no_restart) {
      it->second.instance.reset();
      it->second.death =
          MakeError(ErrorType::kActorDied, absl::StrCat("actor ", it->second.options.class_name, " was killed"));
      for (auto named = named_actors_.begin(); named != named_actors_.end();) {
        named = named->second == actor ? named_actors_.erase(named) : std::next(named);
      }
      return absl::OkStatus();
    }
  }
  KillActorProcess(actor);
  return absl::OkStatus();
}

}  // namespace manta::core
