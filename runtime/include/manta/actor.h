// Actors: a remote instance of a class whose methods run in order, one call
// at a time unless max_concurrency says otherwise.
//
//   auto counter = manta::Actor(Counter::Create).SetName("c").SetMaxRestarts(3).Remote(0);
//   manta::ObjectRef<int> r = counter.Task(&Counter::Incr).Remote(5);
//   manta::Kill(counter);
//
// Actor(factory) options (defaults as in Ray):
//   SetResources / SetResource  held for the actor's life; default none
//   SetLabelSelector            node labels the actor must run on
//   SetMaxRestarts              restarts after its process dies; default 0, -1 unlimited
//   SetMaxTaskRetries           re-runs of a call interrupted by a death; default 0
//   SetName / SetNamespace      a named actor, found with GetActor
//   SetDetached                 outlives the job that created it
//   SetMaxConcurrency           calls run at once on a thread pool; default 1
//   SetPlacementGroup           run in bundle `bundle_index` of a placement group
//   SetEnv                      environment variables of its process ("" removes one)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include <msgpack.hpp>

#include "common/id.h"
#include "manta/errors.h"
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

namespace internal {
// The registered name of a member function, or throws manta::Error.
std::string RemoteMethodName(const std::string& key, const std::type_info& type);
// The registered name of an actor factory, or throws manta::Error.
std::string RemoteFactoryName(const void* key, const std::type_info& type);
// "Counter" for "Counter::Create"; `fallback` when the name has no scope.
std::string ClassNameOfFactory(const std::string& factory_name, const std::string& fallback);
// Decodes a serialized ActorHandle; throws msgpack::type_error when malformed.
void UnpackActorHandle(const msgpack::object& o, ActorId* id, std::string* class_name);
}  // namespace internal

// A call on an actor, made by ActorHandle::Task.
template <typename R, typename... P>
class ActorTaskCaller {
 public:
  using Result = internal::ReturnValue<R>;

  ActorTaskCaller(ActorId actor, std::string method_name)
      : actor_(std::move(actor)), method_name_(std::move(method_name)) {}

  // Submits the call. Returns at once with a ref to its result; calls from
  // one caller run in submission order. A dead actor surfaces at Get as
  // ActorDiedError. Throws manta::Error when the call cannot be submitted.
  template <typename... A>
  ObjectRef<Result> Remote(A&&... args) {
    internal::RequireOneReturn(options_.num_returns);
    std::vector<core::Arg> packed = internal::PackArgs(internal::ParamList<P...>{}, std::forward<A>(args)...);
    absl::StatusOr<std::vector<core::ObjectRefInfo>> infos =
        internal::RequireCoreWorker().SubmitActorTask(actor_, method_name_, std::move(packed), options_);
    internal::ThrowIfError(infos.status());
    return ObjectRef<Result>(std::move(infos->front()));
  }

  // For a method returning a std::tuple or std::pair: one return per
  // element, as TaskCaller::RemoteSplit.
  template <typename... A>
  auto RemoteSplit(A&&... args) {
    using Split = internal::SplitRefs<Result>;
    static_assert(Split::kSplittable, "RemoteSplit: the method must return a std::tuple or std::pair");
    core::ActorTaskOptions options = options_;
    options.num_returns = internal::SplitCount(options_.num_returns, Split::kCount);
    std::vector<core::Arg> packed = internal::PackArgs(internal::ParamList<P...>{}, std::forward<A>(args)...);
    absl::StatusOr<std::vector<core::ObjectRefInfo>> infos =
        internal::RequireCoreWorker().SubmitActorTask(actor_, method_name_, std::move(packed), options);
    internal::ThrowIfError(infos.status());
    return internal::MakeSplitRefs<typename Split::Refs>(*infos, std::make_index_sequence<Split::kCount>{});
  }

  // How many values the call returns (RemoteSplit sets it from the result
  // type; Remote needs 1).
  ActorTaskCaller& SetNumReturns(int num_returns) {
    options_.num_returns = num_returns;
    return *this;
  }

  const std::string& method_name() const { return method_name_; }

 private:
  ActorId actor_;
  std::string method_name_;
  core::ActorTaskOptions options_;
};

// A reference to an actor of class T. Copyable and serializable (pass it to
// tasks and other actors); all copies name the same actor.
template <typename T>
class ActorHandle {
 public:
  ActorHandle() = default;
  ActorHandle(ActorId id, std::string class_name) : id_(std::move(id)), class_name_(std::move(class_name)) {}

  const ActorId& ID() const { return id_; }
  const std::string& ClassName() const { return class_name_; }

  // A caller for `method`, which MANTA_REMOTE must have registered. Throws
  // manta::Error (NotFound) when it was not.
  template <typename R, typename C, typename... P>
  ActorTaskCaller<R, P...> Task(R (C::*method)(P...)) const {
    static_assert(std::is_base_of_v<C, T>, "Task(): the method is not a member of this actor's class");
    return ActorTaskCaller<R, P...>(id_, internal::RemoteMethodName(internal::MemberKey(method), typeid(method)));
  }
  template <typename R, typename C, typename... P>
  ActorTaskCaller<R, P...> Task(R (C::*method)(P...) const) const {
    static_assert(std::is_base_of_v<C, T>, "Task(): the method is not a member of this actor's class");
    return ActorTaskCaller<R, P...>(id_, internal::RemoteMethodName(internal::MemberKey(method), typeid(method)));
  }

  template <typename Packer>
  void msgpack_pack(Packer& packer) const {
    packer.pack_array(2);
    packer.pack(id_.Binary());
    packer.pack(class_name_);
  }
  void msgpack_unpack(const msgpack::object& o) { internal::UnpackActorHandle(o, &id_, &class_name_); }

  friend bool operator==(const ActorHandle& a, const ActorHandle& b) { return a.id_ == b.id_; }
  friend bool operator!=(const ActorHandle& a, const ActorHandle& b) { return a.id_ != b.id_; }

 private:
  ActorId id_;
  std::string class_name_;
};

template <typename T, typename... P>
class ActorCreator {
 public:
  ActorCreator(std::string factory_name, std::string class_name) : factory_name_(std::move(factory_name)) {
    options_.class_name = std::move(class_name);
  }

  ActorCreator& SetResources(std::map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  ActorCreator& SetResource(const std::string& name, double quantity) {
    options_.resources[name] = quantity;
    return *this;
  }
  ActorCreator& SetLabelSelector(std::map<std::string, std::string> selector) {
    options_.label_selector = std::move(selector);
    return *this;
  }
  ActorCreator& SetMaxRestarts(int max_restarts) {
    options_.max_restarts = max_restarts;
    return *this;
  }
  ActorCreator& SetMaxTaskRetries(int max_task_retries) {
    options_.max_task_retries = max_task_retries;
    return *this;
  }
  ActorCreator& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  // With SetName: when the name is taken in the namespace, Remote returns
  // a handle to the actor holding it (these options and arguments unused)
  // instead of throwing AlreadyExists; racing creators get the same actor.
  ActorCreator& SetGetIfExists(bool get_if_exists = true) {
    options_.get_if_exists = get_if_exists;
    return *this;
  }
  // Where it runs: NodeAffinity(node) (scheduling_strategy.h).
  ActorCreator& SetSchedulingStrategy(core::SchedulingStrategy strategy) {
    options_.scheduling_strategy = strategy;
    return *this;
  }
  ActorCreator& SetNamespace(std::string ray_namespace) {
    options_.ray_namespace = std::move(ray_namespace);
    return *this;
  }
  ActorCreator& SetDetached(bool detached = true) {
    options_.detached = detached;
    return *this;
  }
  ActorCreator& SetMaxConcurrency(int max_concurrency) {
    options_.max_concurrency = max_concurrency;
    return *this;
  }
  // `group_id`: the placement group's binary id; bundle -1: any bundle.
  ActorCreator& SetPlacementGroup(std::string group_id, int bundle_index = -1) {
    options_.placement_group_id = std::move(group_id);
    options_.bundle_index = bundle_index;
    return *this;
  }
  // Runs in bundle `bundle_index` of `group` (-1: any bundle of it). The
  // resources asked for (SetResources) come out of the bundle's.
  ActorCreator& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    return SetPlacementGroup(group.ID(), bundle_index);
  }
  // Environment variables of the actor's process for the life of its process,
  // set after Manta's own (TPU_VISIBLE_CHIPS, ...) so they win; a name
  // mapped to "" is removed. Remote throws manta::Error (InvalidArgument)
  // for a name that is empty or holds '='.
  ActorCreator& SetEnv(std::map<std::string, std::string> env_vars) {
    options_.env_vars = std::move(env_vars);
    return *this;
  }

  // Creates the actor. Returns at once; calls may be made right away and run
  // once it is alive. A failing factory makes the actor dead: its calls raise
  // ActorDiedError carrying the factory's error. Throws manta::Error when the
  // actor cannot be registered (e.g. the name is taken: AlreadyExists).
  template <typename... A>
  ActorHandle<T> Remote(A&&... args) {
    std::vector<core::Arg> packed = internal::PackArgs(internal::ParamList<P...>{}, std::forward<A>(args)...);
    absl::StatusOr<ActorId> id = internal::RequireCoreWorker().CreateActor(factory_name_, std::move(packed), options_);
    internal::ThrowIfError(id.status());
    return ActorHandle<T>(*id, options_.class_name);
  }

  const core::ActorOptions& options() const { return options_; }

 private:
  std::string factory_name_;
  core::ActorOptions options_;
};

// A creator for actors made by `factory` (a static `T* Create(...)`), which
// MANTA_REMOTE must have registered. Throws manta::Error when it was not.
template <typename T, typename... P>
ActorCreator<T, P...> Actor(T* (*factory)(P...)) {
  std::string name = internal::RemoteFactoryName(internal::FunctionKey(factory), typeid(factory));
  std::string class_name = internal::ClassNameOfFactory(name, internal::TypeName<T>());
  return ActorCreator<T, P...>(std::move(name), std::move(class_name));
}

// Kills the actor; with `no_restart` false it may restart (max_restarts).
// Pending and later calls raise ActorDiedError. Throws manta::Error when the
// kill cannot be delivered.
template <typename T>
void Kill(const ActorHandle<T>& actor, bool no_restart = true) {
  internal::ThrowIfError(internal::RequireCoreWorker().KillActor(actor.ID(), no_restart));
}

// The named actor `name` in namespace `ray_namespace` (empty: the job's), or
// nullopt when there is none. Throws manta::Error on other failures. The
// caller vouches that it is a T.
template <typename T>
std::optional<ActorHandle<T>> GetActor(const std::string& name, const std::string& ray_namespace = "") {
  absl::StatusOr<ActorId> id = internal::RequireCoreWorker().GetNamedActor(name, ray_namespace);
  if (absl::IsNotFound(id.status())) return std::nullopt;
  internal::ThrowIfError(id.status());
  return ActorHandle<T>(*id, internal::TypeName<T>());
}

}  // namespace manta
