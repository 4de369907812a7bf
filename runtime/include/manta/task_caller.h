// Task(f): calls a remote function.
//
//   manta::ObjectRef<int> r = manta::Task(Add).SetResources({{"CPU", 2}}).Remote(1, 2);
//
// Options (each returns the caller for chaining; defaults as in Ray):
//   SetResources / SetResource   demand; default {CPU: 1}
//   SetLabelSelector             node labels the task must run on
//   SetMaxRetries                re-runs on worker or node death; default 3, -1 unlimited
//   SetName                      display name; default the function's name
//   SetPlacementGroup            run in bundle `bundle_index` of a placement group
//   SetEnv                       environment variables while it runs ("" removes one)
//   SetNumReturns                values returned (RemoteSplit: one ref per tuple element)
//   SetRetryExceptions[Types]    also re-run when it throws (any, or named exception types)
//   SetSchedulingStrategy        SpreadStrategy() or NodeAffinity(node, soft)
#pragma once

#include <map>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "manta/internal/arguments.h"
#include "manta/internal/core.h"
#include "manta/internal/invoke.h"
#include "manta/internal/split_refs.h"
#include "manta/scheduling_strategy.h"
#include "manta/object_ref.h"
#include "manta/placement_group.h"
#include "manta/remote.h"
#include "manta/internal/core_worker.h"

namespace manta {

template <typename R, typename... P>
class TaskCaller {
 public:
  using Result = internal::ReturnValue<R>;

  explicit TaskCaller(std::string function_name) : function_name_(std::move(function_name)) {}

  TaskCaller& SetResources(std::map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  TaskCaller& SetResource(const std::string& name, double quantity) {
    options_.resources[name] = quantity;
    return *this;
  }
  TaskCaller& SetLabelSelector(std::map<std::string, std::string> selector) {
    options_.label_selector = std::move(selector);
    return *this;
  }
  TaskCaller& SetMaxRetries(int max_retries) {
    options_.max_retries = max_retries;
    return *this;
  }
  TaskCaller& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  // `group_id`: the placement group's binary id; bundle -1: any bundle.
  TaskCaller& SetPlacementGroup(std::string group_id, int bundle_index = -1) {
    options_.placement_group_id = std::move(group_id);
    options_.bundle_index = bundle_index;
    return *this;
  }
  // Runs in bundle `bundle_index` of `group` (-1: any bundle of it). The
  // resources asked for (SetResources) come out of the bundle's.
  TaskCaller& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    return SetPlacementGroup(group.ID(), bundle_index);
  }
  // Environment variables of the task's process while it runs (the worker's own environment is restored after),
  // set after Manta's own (TPU_VISIBLE_CHIPS, ...) so they win; a name
  // mapped to "" is removed. Remote throws manta::Error (InvalidArgument)
  // for a name that is empty or holds '='.
  TaskCaller& SetEnv(std::map<std::string, std::string> env_vars) {
    options_.env_vars = std::move(env_vars);
    return *this;
  }
  // How many values the task returns (RemoteSplit sets it from the result
  // type; Remote needs 1).
  TaskCaller& SetNumReturns(int num_returns) {
    options_.num_returns = num_returns;
    return *this;
  }
  // Runs the task again when it throws (or returns an error status), within
  // SetMaxRetries; Get raises the last attempt's error.
  // Where it runs: SpreadStrategy() or NodeAffinity(node) (scheduling_strategy.h).
  TaskCaller& SetSchedulingStrategy(core::SchedulingStrategy strategy) {
    options_.scheduling_strategy = strategy;
    return *this;
  }
  TaskCaller& SetRetryExceptions(bool retry = true) {
    options_.retry_exceptions = retry;
    options_.retry_exception_filter.clear();
    return *this;
  }
  // The same, only for exceptions whose type is one of `type_names` as the
  // worker names them (e.g. "std::runtime_error", "mylib::Busy"): the
  // thrown object's own type, not a base class.
  TaskCaller& SetRetryExceptionTypes(const std::vector<std::string>& type_names) {
    options_.retry_exceptions = !type_names.empty();
    options_.retry_exception_filter.clear();
    for (const std::string& name : type_names) options_.retry_exception_filter += name + "\n";
    return *this;
  }

  // Submits the task. Returns at once with a ref to its result; failures of
  // the task itself surface at Get. Throws manta::Error when it cannot be
  // submitted (Init not called, an argument cannot be serialized, the
  // options are invalid).
  template <typename... A>
  ObjectRef<Result> Remote(A&&... args) {
    internal::RequireOneReturn(options_.num_returns);
    std::vector<core::Arg> packed = internal::PackArgs(internal::ParamList<P...>{}, std::forward<A>(args)...);
    absl::StatusOr<std::vector<core::ObjectRefInfo>> infos =
        internal::RequireCoreWorker().SubmitTask(function_name_, std::move(packed), options_);
    internal::ThrowIfError(infos.status());
    return ObjectRef<Result>(std::move(infos->front()));
  }

  // For a function returning a std::tuple or std::pair: submits it with one
  // return per element and returns a std::tuple of their refs, so each
  // element is fetched (or passed on) alone. Throws manta::Error
  // (InvalidArgument) when SetNumReturns set another count.
  template <typename... A>
  auto RemoteSplit(A&&... args) {
    using Split = internal::SplitRefs<Result>;
    static_assert(Split::kSplittable, "RemoteSplit: the function must return a std::tuple or std::pair");
    core::TaskOptions options = options_;
    options.num_returns = internal::SplitCount(options_.num_returns, Split::kCount);
    std::vector<core::Arg> packed = internal::PackArgs(internal::ParamList<P...>{}, std::forward<A>(args)...);
    absl::StatusOr<std::vector<core::ObjectRefInfo>> infos =
        internal::RequireCoreWorker().SubmitTask(function_name_, std::move(packed), options);
    internal::ThrowIfError(infos.status());
    return internal::MakeSplitRefs<typename Split::Refs>(*infos, std::make_index_sequence<Split::kCount>{});
  }

  const std::string& function_name() const { return function_name_; }
  const core::TaskOptions& options() const { return options_; }

 private:
  std::string function_name_;
  core::TaskOptions options_;
};

namespace internal {
// The registered name of `f`, or throws manta::Error naming the problem.
std::string RemoteFunctionName(const void* key, const std::type_info& type);
}  // namespace internal

// Cancels the task (or actor call) whose result `ref` is (one this process
// borrows is cancelled by its owner): Get then throws TaskCancelledError. A running task is
// interrupted (TaskCancelled() turns true inside it) or, with `force`, its
// worker is killed (not for actor calls: manta::Error InvalidArgument). A
// finished task is left as it is. With `recursive` (as Ray's default), the
// tasks it submitted that are still pending are cancelled too, and theirs.
template <typename T>
void Cancel(const ObjectRef<T>& ref, bool force = false, bool recursive = true) {
  internal::ThrowIfError(internal::RequireCoreWorker().CancelTask(ref.Info(), force, recursive));
}

// Inside a task: whether it was cancelled while it runs. A long task polls
// it and returns early (its result is then TaskCancelledError anyway).
inline bool TaskCancelled() { return core::TaskCancelRequested(); }

// A caller for remote function `f`, which MANTA_REMOTE must have registered.
// Throws manta::Error (NotFound) when it was not, or when `f` is an actor
// factory (use manta::Actor).
template <typename R, typename... P>
TaskCaller<R, P...> Task(R (*f)(P...)) {
  return TaskCaller<R, P...>(internal::RemoteFunctionName(internal::FunctionKey(f), typeid(f)));
}

}  // namespace manta
