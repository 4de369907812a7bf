// The refs of a call with several returns: one typed ObjectRef per element
// of a std::tuple or std::pair result (TaskCaller::RemoteSplit and
// ActorTaskCaller::RemoteSplit).
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "manta/errors.h"
#include "manta/internal/core_worker.h"
#include "manta/object_ref.h"

namespace manta::internal {

template <typename T>
struct SplitRefs {
  static constexpr bool kSplittable = false;
};
template <typename... X>
struct SplitRefs<std::tuple<X...>> {
  static constexpr bool kSplittable = true;
  static constexpr int kCount = sizeof...(X);
  using Refs = std::tuple<ObjectRef<X>...>;
};
template <typename A, typename B>
struct SplitRefs<std::pair<A, B>> {
  static constexpr bool kSplittable = true;
  static constexpr int kCount = 2;
  using Refs = std::tuple<ObjectRef<A>, ObjectRef<B>>;
};

template <typename Refs, size_t... I>
Refs MakeSplitRefs(std::vector<core::ObjectRefInfo>& infos, std::index_sequence<I...>) {
  return Refs{std::tuple_element_t<I, Refs>(std::move(infos[I]))...};
}

// The number of returns a split call declares: the element count, or the
// count the options set (which must match it; InvalidArgument otherwise).
inline int SplitCount(int declared, int elements) {
  if (declared != 1 && declared != elements) {
    ThrowIfError(absl::InvalidArgumentError("num_returns is " + std::to_string(declared) + " but the result has " +
                                            std::to_string(elements) + " elements"));
  }
  return elements;
}

// Remote() makes one return; several need RemoteSplit.
inline void RequireOneReturn(int declared) {
  if (declared != 1) {
    ThrowIfError(absl::InvalidArgumentError("num_returns is " + std::to_string(declared) +
                                            ": use RemoteSplit for a call with several returns"));
  }
}

}  // namespace manta::internal
