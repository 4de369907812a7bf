// FunctionRegistry: the remote functions, actor factories and actor methods
// of this program, by name. MANTA_REMOTE(...) fills it at static
// initialization; the core worker looks names up to run tasks, and callers
// look up the name of a function pointer to submit it.
//
// Values cross processes as byte strings (msgpack, see
// runtime/include/manta/serialization.h); invokers decode their arguments and
// encode their result. Invokers report user failures as a non-OK status
// whose message is the remote error text; they never throw.
//
// A front end that names its functions at run time (Python's "py:..."
// names: functions exported by content hash) installs a resolver for a
// prefix: a name not registered statically that starts with the prefix is
// asked of it, and what it returns is kept for the life of the process.
//
// Thread-safety: static registration happens before main(); lookups are safe
// from any thread, and so is SetResolver. A resolver runs on the looking-up
// thread without the registry's lock held, and may run more than once for
// one name when two threads ask at once (the first answer is kept).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::internal {

// Serialized arguments of one call, in order.
using ArgViews = std::vector<std::string_view>;

// The serialized values of one call: one per return the task declares
// (core::CurrentTaskContext()->num_returns, usually 1); the worker fails
// the task when the count differs. Every ref serialized during the call is
// held by each of them. A failure may carry the front end's form of the
// error (core::MakeApplicationError).
using ReturnValues = std::vector<std::string>;
// A plain remote function: args → serialized results.
using FunctionInvoker = std::function<absl::StatusOr<ReturnValues>(const ArgViews& args)>;
// An actor factory (e.g. Counter::Create): args → the new instance.
using ActorFactoryInvoker = std::function<absl::StatusOr<std::shared_ptr<void>>(const ArgViews& args)>;
// An actor method (e.g. &Counter::Incr): instance + args → serialized results.
using ActorMethodInvoker = std::function<absl::StatusOr<ReturnValues>(void* instance, const ArgViews& args)>;

class FunctionRegistry {
 public:
  static FunctionRegistry& Instance();

  // Each name is registered once; registering a name twice CHECK-fails
  // (two MANTA_REMOTE of the same function).
  void RegisterFunction(const std::string& name, const void* key, FunctionInvoker invoker);
  void RegisterActorFactory(const std::string& name, const void* key, ActorFactoryInvoker invoker);
  // `key` identifies a member function pointer: its bytes (see MemberKey).
  void RegisterActorMethod(const std::string& name, std::string key, ActorMethodInvoker invoker);

  struct Resolver {
    std::function<std::optional<FunctionInvoker>(const std::string& name)> function;
    std::function<std::optional<ActorFactoryInvoker>(const std::string& name)> factory;
    std::function<std::optional<ActorMethodInvoker>(const std::string& name)> method;
  };
  // Installs (or, with an empty Resolver, removes) the resolver of names
  // starting with `prefix` (non-empty; at most one per prefix).
  void SetResolver(const std::string& prefix, Resolver resolver);

  // Null when the name is neither registered nor resolved.
  const FunctionInvoker* FindFunction(const std::string& name) const;
  const ActorFactoryInvoker* FindActorFactory(const std::string& name) const;
  const ActorMethodInvoker* FindActorMethod(const std::string& name) const;

  // The registered name of a function pointer or member pointer key; empty
  // when it was not made remote.
  std::string NameOf(const void* key) const;
  std::string NameOfMember(const std::string& key) const;

 private:
  struct Impl;
  FunctionRegistry();
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::internal
