// Decoding arguments, running user code and encoding results: the bodies of
// the invokers MANTA_REMOTE registers. Never throws; user exceptions become
// application errors.
#pragma once

#include <exception>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "manta/serialization.h"
#include "manta/internal/core_worker.h"
#include "manta/internal/function_registry.h"

namespace manta::internal {

// What a remote function of return type R produces: R, except that
// absl::Status produces nothing (void) and absl::StatusOr<X> produces X; a
// non-OK status returned by user code is an application error.
template <typename R>
struct ReturnTraits {
  using Value = std::decay_t<R>;
};
template <>
struct ReturnTraits<absl::Status> {
  using Value = void;
};
template <typename X>
struct ReturnTraits<absl::StatusOr<X>> {
  using Value = X;
};
template <typename R>
using ReturnValue = typename ReturnTraits<std::decay_t<R>>::Value;

// The application error for a user exception or a returned status.
absl::Status UserError(const std::string& function, const std::exception& e);
absl::Status UnknownUserError(const std::string& function);
absl::Status ReturnedError(const std::string& function, const absl::Status& status);
// The error for undecodable or miscounted arguments.
absl::Status ArgumentError(const std::string& function, const std::string& detail);

template <typename... D, size_t... I>
absl::Status DecodeArgsImpl(const std::string& function, const ArgViews& args, [[maybe_unused]] std::tuple<D...>* out,
                            std::index_sequence<I...>) {
  absl::Status status;
  [[maybe_unused]] auto decode_one = [&](auto index, auto* slot) {
    if (!status.ok()) return;
    using Value = std::remove_pointer_t<decltype(slot)>;
    absl::StatusOr<Value> value = Deserialize<Value>(args[decltype(index)::value]);
    if (!value.ok()) {
      status = ArgumentError(function, "argument " + std::to_string(decltype(index)::value + 1) + ": " +
                                           std::string(value.status().message()));
      return;
    }
    *slot = std::move(*value);
  };
  (decode_one(std::integral_constant<size_t, I>{}, &std::get<I>(*out)), ...);
  return status;
}

// Decodes `args` into `out`, one per parameter.
template <typename... D>
absl::Status DecodeArgs(const std::string& function, const ArgViews& args, std::tuple<D...>* out) {
  if (args.size() != sizeof...(D)) {
    return ArgumentError(function,
                         "takes " + std::to_string(sizeof...(D)) + " arguments, got " + std::to_string(args.size()));
  }
  return DecodeArgsImpl(function, args, out, std::index_sequence_for<D...>{});
}

// How many values the running task declares (TaskContext::num_returns; 1
// outside a task).
int DeclaredReturns();

template <typename T>
struct IsTupleLike : std::false_type {};
template <typename... X>
struct IsTupleLike<std::tuple<X...>> : std::true_type {};
template <typename A, typename B>
struct IsTupleLike<std::pair<A, B>> : std::true_type {};

// One value, or (a std::tuple or std::pair, when the task declares several
// returns) one per element; the worker checks the count.
template <typename V>
absl::StatusOr<ReturnValues> EncodeReturns(const V& value) {
  if constexpr (IsTupleLike<V>::value) {
    if (DeclaredReturns() > 1) {
      ReturnValues out;
      absl::Status status;
      std::apply(
          [&](const auto&... element) {
            auto one = [&](const auto& e) {
              if (!status.ok()) return;
              absl::StatusOr<std::string> bytes = Serialize(e);
              if (bytes.ok()) {
                out.push_back(std::move(*bytes));
              } else {
                status = bytes.status();
              }
            };
            (one(element), ...);
          },
          value);
      if (!status.ok()) return status;
      return out;
    }
  }
  absl::StatusOr<std::string> bytes = Serialize<V>(value);
  if (!bytes.ok()) return bytes.status();
  return ReturnValues{std::move(*bytes)};
}

// Runs `call` (user code returning R), encoding its result as bytes.
template <typename R, typename Call>
absl::StatusOr<ReturnValues> RunUserCode(const std::string& function, Call&& call) {
  try {
    if constexpr (std::is_void_v<R>) {
      call();
      return EncodeReturns(Nil{});
    } else if constexpr (std::is_same_v<std::decay_t<R>, absl::Status>) {
      absl::Status status = call();
      if (!status.ok()) return ReturnedError(function, status);
      return EncodeReturns(Nil{});
    } else if constexpr (std::is_same_v<ReturnValue<R>, std::decay_t<R>>) {
      return EncodeReturns<std::decay_t<R>>(call());
    } else {
      auto result = call();
      if (!result.ok()) return ReturnedError(function, result.status());
      if constexpr (std::is_void_v<ReturnValue<R>>) {
        return EncodeReturns(Nil{});
      } else {
        return EncodeReturns<ReturnValue<R>>(*result);
      }
    }
  } catch (const std::exception& e) {
    return UserError(function, e);
  } catch (...) {
    return UnknownUserError(function);
  }
}

template <typename... P>
using DecodedArgs = std::tuple<std::decay_t<P>...>;

// Calls f with the decoded arguments, moving each unless the parameter is
// an lvalue reference.
template <typename... P, typename F, typename Tuple, size_t... I>
decltype(auto) ApplyArgs(const F& f, Tuple& args, std::index_sequence<I...>) {
  return f(std::forward<P>(std::get<I>(args))...);
}

template <typename R, typename... P>
FunctionInvoker MakeFunctionInvoker(std::string name, R (*f)(P...)) {
  return [name = std::move(name), f](const ArgViews& args) -> absl::StatusOr<ReturnValues> {
    DecodedArgs<P...> decoded;
    absl::Status status = DecodeArgs(name, args, &decoded);
    if (!status.ok()) return status;
    return RunUserCode<R>(name, [&]() -> R { return ApplyArgs<P...>(f, decoded, std::index_sequence_for<P...>{}); });
  };
}

template <typename T, typename... P>
ActorFactoryInvoker MakeFactoryInvoker(std::string name, T* (*factory)(P...)) {
  return [name = std::move(name), factory](const ArgViews& args) -> absl::StatusOr<std::shared_ptr<void>> {
    DecodedArgs<P...> decoded;
    absl::Status status = DecodeArgs(name, args, &decoded);
    if (!status.ok()) return status;
    T* instance = nullptr;
    try {
      instance = ApplyArgs<P...>(factory, decoded, std::index_sequence_for<P...>{});
    } catch (const std::exception& e) {
      return UserError(name, e);
    } catch (...) {
      return UnknownUserError(name);
    }
    if (instance == nullptr) {
      return ReturnedError(name, absl::InternalError("the factory returned null"));
    }
    return std::shared_ptr<void>(instance, [](void* p) { delete static_cast<T*>(p); });
  };
}

template <typename C, typename M, typename R, typename... P>
ActorMethodInvoker MakeMethodInvoker(std::string name, M method) {
  return [name = std::move(name), method](void* instance, const ArgViews& args) -> absl::StatusOr<ReturnValues> {
    DecodedArgs<P...> decoded;
    absl::Status status = DecodeArgs(name, args, &decoded);
    if (!status.ok()) return status;
    C* self = static_cast<C*>(instance);
    auto bound = [self, method](auto&&... a) -> R { return (self->*method)(std::forward<decltype(a)>(a)...); };
    return RunUserCode<R>(name,
                          [&]() -> R { return ApplyArgs<P...>(bound, decoded, std::index_sequence_for<P...>{}); });
  };
}

}  // namespace manta::internal
