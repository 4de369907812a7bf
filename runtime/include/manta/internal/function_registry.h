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
// Thread-safety: registration happens before main(); lookups are read-only
// afterwards and safe from any thread.
#pragma once

#include <functional>
#include <memory>
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
