// Packing the arguments of Remote(...) calls for the core worker.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "manta/errors.h"
#include "manta/object_ref.h"
#include "manta/serialization.h"
#include "manta/internal/core_worker.h"

namespace manta::internal {

// One argument for parameter type P:
//   * an ObjectRef<D> where the function takes D (not a ref) travels as a
//     reference, and the callee receives its value;
//   * anything else is converted to D and serialized.
// Throws manta::Error when the value cannot be serialized.
template <typename P, typename A>
core::Arg PackArg(A&& arg) {
  using D = std::decay_t<P>;
  using Given = std::decay_t<A>;
  if constexpr (IsObjectRef<Given>::value && !IsObjectRef<D>::value) {
    static_assert(std::is_same_v<typename Given::ValueType, D>,
                  "Remote(): an ObjectRef<T> argument needs a parameter of type T");
    return core::Arg::Ref(arg.Info());
  } else {
    static_assert(std::is_convertible_v<A&&, D>, "Remote(): an argument does not convert to the parameter type");
    // Refs inside the value are listed, so the call keeps them alive.
    RefCollector contained;
    CollectRefs collect(&contained);
    absl::StatusOr<std::string> bytes;
    if constexpr (std::is_same_v<Given, D>) {
      bytes = Serialize<D>(arg);
    } else {
      bytes = Serialize<D>(static_cast<D>(std::forward<A>(arg)));
    }
    ThrowIfError(bytes.status());
    return core::Arg::Value(std::move(*bytes), std::move(contained.refs));
  }
}

template <typename... P>
struct ParamList {};

template <typename... P, typename... A>
std::vector<core::Arg> PackArgs(ParamList<P...>, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "Remote(): wrong number of arguments");
  std::vector<core::Arg> packed;
  packed.reserve(sizeof...(A));
  (packed.push_back(PackArg<P>(std::forward<A>(args))), ...);
  return packed;
}

}  // namespace manta::internal
