// MANTA_REMOTE: makes functions, actor factories and actor methods callable
// remotely, by name.
//
//   int Add(int a, int b) { return a + b; }
//   class Counter {
//    public:
//     static Counter* Create(int start) { return new Counter(start); }
//     int Incr(int by) { return value_ += by; }
//    ...
//   };
//   MANTA_REMOTE(Add, Counter::Create, &Counter::Incr);
//
// Each entry is registered under its spelling with spaces and a leading '&'
// removed ("Add", "Counter::Create", "Counter::Incr"). The driver and its
// workers run the same program, so the names match on both sides. Kinds:
//   * a function pointer returning `C*` (C a class) is an actor factory; the
//     actor owns the instance and deletes it when it dies;
//   * any other function pointer is a remote function;
//   * a member function pointer is an actor method.
// Parameters and results must be serializable (manta/serialization.h).
// A function may return absl::Status or absl::StatusOr<X> (an ObjectRef<void>
// or ObjectRef<X>); a non-OK status, like a thrown std::exception, reaches the
// caller as ApplicationError.
//
// Use MANTA_REMOTE at namespace scope in a .cc file; registering one name
// twice aborts at start-up. Overloaded functions need a cast:
// MANTA_REMOTE(static_cast<int (*)(int)>(F)) registers under that spelling.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "manta/internal/invoke.h"
#include "manta/internal/function_registry.h"

namespace manta::internal {

// The names in the text of MANTA_REMOTE's arguments: split at top-level
// commas, whitespace removed, a leading '&' stripped.
std::vector<std::string> SplitRemoteNames(std::string_view spelled);

// Runs the remote function registered as `name` in this process, on this
// thread, with serialized `args` (one per parameter): its serialized result,
// NotFound when no function has that name, or the function's own error (a
// thrown exception or a returned status, as an Unknown/its code status
// whose message has the function's name and text). For libraries that run
// a user's registered function inside their own actor.
absl::StatusOr<std::string> CallLocal(const std::string& name, const std::vector<std::string>& args);

// Prints `message` and aborts: a MANTA_REMOTE that cannot work.
[[noreturn]] void RegistrationFailure(const std::string& message);

// The registry key of a member function pointer: its type and its bytes.
template <typename M>
std::string MemberKey(M member) {
  static_assert(std::is_member_function_pointer_v<M>);
  std::string key = typeid(M).name();
  key.push_back('\0');
  key.append(reinterpret_cast<const char*>(&member), sizeof(member));
  return key;
}

template <typename R, typename... P>
const void* FunctionKey(R (*f)(P...)) {
  return reinterpret_cast<const void*>(f);
}

template <typename R>
inline constexpr bool kIsFactoryResult = std::is_pointer_v<R>&& std::is_class_v<std::remove_pointer_t<R>>;

template <typename R, typename... P>
void RegisterOne(const std::string& name, R (*f)(P...)) {
  auto& registry = FunctionRegistry::Instance();
  if constexpr (kIsFactoryResult<R>) {
    registry.RegisterActorFactory(name, FunctionKey(f), MakeFactoryInvoker(name, f));
  } else {
    registry.RegisterFunction(name, FunctionKey(f), MakeFunctionInvoker(name, f));
  }
}

template <typename R, typename C, typename... P>
void RegisterOne(const std::string& name, R (C::*method)(P...)) {
  FunctionRegistry::Instance().RegisterActorMethod(name, MemberKey(method),
                                                   MakeMethodInvoker<C, R (C::*)(P...), R, P...>(name, method));
}

template <typename R, typename C, typename... P>
void RegisterOne(const std::string& name, R (C::*method)(P...) const) {
  FunctionRegistry::Instance().RegisterActorMethod(name, MemberKey(method),
                                                   MakeMethodInvoker<C, R (C::*)(P...) const, R, P...>(name, method));
}

template <typename... Fs>
int RegisterRemote(const char* spelled, Fs... fs) {
  std::vector<std::string> names = SplitRemoteNames(spelled);
  if (names.size() != sizeof...(Fs)) {
    RegistrationFailure(std::string("MANTA_REMOTE(") + spelled + "): cannot tell the names apart");
  }
  size_t i = 0;
  (RegisterOne(names[i++], fs), ...);
  return 0;
}

}  // namespace manta::internal

#define MANTA_REMOTE_CONCAT_INNER_(a, b) a##b
#define MANTA_REMOTE_CONCAT_(a, b) MANTA_REMOTE_CONCAT_INNER_(a, b)
#define MANTA_REMOTE(...)                                                           \
  [[maybe_unused]] static const int MANTA_REMOTE_CONCAT_(manta_remote_, __LINE__) = \
      ::manta::internal::RegisterRemote(#__VA_ARGS__, __VA_ARGS__)
