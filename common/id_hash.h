// Hashing and equality of ids as machine words, for the hottest maps
// (the object store's entries, a wait's duplicate check): the generic
// byte-wise hash and memcmp are out-of-line calls on every probe.
//
//   absl::flat_hash_map<ObjectId, Entry, IdHash, IdEq> entries;
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace manta {

namespace id_words {

// Word I of an id's bytes (the last one padded with zeros).
template <size_t I, typename Id>
inline uint64_t Word(const Id& id) {
  static_assert(std::is_standard_layout_v<Id> && sizeof(Id) == Id::kSize, "an id is its bytes");
  constexpr size_t kAt = I * 8;
  constexpr size_t kBytes = Id::kSize - kAt < 8 ? Id::kSize - kAt : 8;
  uint64_t w = 0;
  std::memcpy(&w, reinterpret_cast<const char*>(&id) + kAt, kBytes);
  return w;
}

template <typename Id>
using Indices = std::make_index_sequence<(Id::kSize + 7) / 8>;

template <typename Id, size_t... I>
inline uint64_t Hash(const Id& id, std::index_sequence<I...>) {
  uint64_t acc = 0x243F6A8885A308D3ull;
  ((acc = (acc ^ Word<I>(id)) * 0x9E3779B97F4A7C15ull, acc ^= acc >> 32), ...);
  return acc;
}

template <typename Id, size_t... I>
inline bool Equal(const Id& a, const Id& b, std::index_sequence<I...>) {
  return ((Word<I>(a) ^ Word<I>(b)) | ...) == 0;
}

}  // namespace id_words

struct IdHash {
  template <typename Id>
  size_t operator()(const Id& id) const {
    return id_words::Hash(id, id_words::Indices<Id>());
  }
};

struct IdEq {
  template <typename Id>
  bool operator()(const Id& a, const Id& b) const {
    return id_words::Equal(a, b, id_words::Indices<Id>());
  }
};

}  // namespace manta
