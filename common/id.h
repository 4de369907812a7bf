// Identifiers: fixed-size random byte strings shown as lowercase hex.
//
//   NodeId id = NodeId::FromRandom();
//   std::string hex = id.Hex();
//   absl::StatusOr<NodeId> back = NodeId::FromHex(hex);
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace manta {

// Fills `out` with `n` bytes from the kernel's random source (drawn a page
// at a time per thread; a forked child never reuses its parent's bytes).
void FillRandom(void* out, size_t n);

// Lowercase hex of `bytes`.
std::string ToHex(std::string_view bytes);
// Inverse of ToHex; InvalidArgument on odd length or non-hex characters.
absl::StatusOr<std::string> FromHex(std::string_view hex);

template <typename Tag, size_t N>
class BaseId {
 public:
  static constexpr size_t kSize = N;

  BaseId() { data_.fill(0); }
  static BaseId FromRandom() {
    BaseId id;
    FillRandom(id.data_.data(), N);
    return id;
  }
  // InvalidArgument unless `binary` is exactly N bytes.
  static absl::StatusOr<BaseId> FromBinary(std::string_view binary) {
    if (binary.size() != N) {
      return absl::InvalidArgumentError("id must be " + std::to_string(N) + " bytes, got " +
                                        std::to_string(binary.size()));
    }
    BaseId id;
    std::memcpy(id.data_.data(), binary.data(), N);
    return id;
  }
  static absl::StatusOr<BaseId> FromHex(std::string_view hex) {
    auto bin = ::manta::FromHex(hex);
    if (!bin.ok()) return bin.status();
    return FromBinary(*bin);
  }

  std::string Binary() const { return std::string(reinterpret_cast<const char*>(data_.data()), N); }
  std::string Hex() const { return ToHex(Binary()); }
  bool IsNil() const {
    for (uint8_t b : data_) {
      if (b != 0) return false;
    }
    return true;
  }

  bool operator==(const BaseId& o) const { return data_ == o.data_; }
  bool operator!=(const BaseId& o) const { return data_ != o.data_; }
  bool operator<(const BaseId& o) const { return data_ < o.data_; }
  template <typename H>
  friend H AbslHashValue(H h, const BaseId& id) {
    return H::combine_contiguous(std::move(h), id.data_.data(), N);
  }

 private:
  std::array<uint8_t, N> data_;
};

struct NodeIdTag {};
struct ClusterIdTag {};
struct WorkerIdTag {};
struct JobIdTag {};
struct TaskIdTag {};
struct ActorIdTag {};
struct ObjectIdTag {};
struct LeaseIdTag {};
struct PlacementGroupIdTag {};
// Ray's node ids are 28 bytes; keep the same length so logs look familiar.
using NodeId = BaseId<NodeIdTag, 28>;
using ClusterId = BaseId<ClusterIdTag, 16>;
using WorkerId = BaseId<WorkerIdTag, 28>;
using JobId = BaseId<JobIdTag, 4>;
using TaskId = BaseId<TaskIdTag, 24>;
using ActorId = BaseId<ActorIdTag, 16>;
// An object is named by the task that creates it and its return index, or is
// random for Put(): 28 bytes either way.
using ObjectId = BaseId<ObjectIdTag, 28>;
using LeaseId = BaseId<LeaseIdTag, 16>;
using PlacementGroupId = BaseId<PlacementGroupIdTag, 18>;

}  // namespace manta
