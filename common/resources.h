// Resource quantities and sets.
//
// A quantity is fixed point with a resolution of 1/10000, never negative,
// never NaN or infinite. Sets map names ("CPU", "TPU", "memory",
// "accelerator_type:TPU-V6E", ...) to quantities; a zero entry is absent.
//
//   ASSIGN_OR_RETURN(ResourceSet demand, ResourceSet::FromMap({{"TPU", 4}}));
//   if (available.Contains(demand)) available.Subtract(demand);
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace manta {

class Quantity {
 public:
  static constexpr int64_t kScale = 10000;
  // The largest quantity accepted from outside (flags, JSON, RPC): 9 * 10^14
  // (900 TB of memory in bytes). Its fixed point, kMaxValue * kScale, fits in
  // int64 with room to spare; anything larger is treated as a mistake.
  static constexpr double kMaxValue = 9e14;
  static constexpr int64_t kMaxUnits = std::numeric_limits<int64_t>::max();

  constexpr Quantity() = default;
  static constexpr Quantity FromUnits(int64_t units) { return Quantity(units); }
  // InvalidArgument for NaN, infinities, negatives, values above kMaxValue
  // (the message names the maximum), and positive values below the 1/10000
  // resolution. Never overflows.
  static absl::StatusOr<Quantity> FromDouble(double v);

  double ToDouble() const { return static_cast<double>(units_) / kScale; }
  int64_t units() const { return units_; }
  bool IsZero() const { return units_ == 0; }

  // Saturates at kMaxUnits (sums over many nodes may pass kMaxValue).
  Quantity operator+(Quantity o) const {
    return Quantity(o.units_ > 0 && units_ > kMaxUnits - o.units_ ? kMaxUnits : units_ + o.units_);
  }
  Quantity operator-(Quantity o) const { return Quantity(units_ - o.units_); }
  bool operator==(Quantity o) const { return units_ == o.units_; }
  bool operator!=(Quantity o) const { return units_ != o.units_; }
  bool operator<(Quantity o) const { return units_ < o.units_; }
  bool operator<=(Quantity o) const { return units_ <= o.units_; }

 private:
  explicit constexpr Quantity(int64_t units) : units_(units) {}
  int64_t units_ = 0;
};

// An ordered map from resource name to a positive quantity. Not thread-safe.
class ResourceSet {
 public:
  ResourceSet() = default;
  // Validates every name and quantity; the error names the offending entry.
  static absl::StatusOr<ResourceSet> FromMap(const std::map<std::string, double>& m);
  // The same from any map of name to quantity (a protobuf map, say).
  template <typename Map>
  static absl::StatusOr<ResourceSet> FromPairs(const Map& m) {
    return FromMap(std::map<std::string, double>(m.begin(), m.end()));
  }

  // Validates a resource name: non-empty, at most 256 printable characters,
  // no whitespace.
  static absl::Status ValidateName(const std::string& name);

  Quantity Get(const std::string& name) const;
  void Set(const std::string& name, Quantity q);
  void Add(const ResourceSet& other);
  // CHECK-fails if the result would be negative: call Contains first.
  void Subtract(const ResourceSet& other);
  bool Contains(const ResourceSet& other) const;
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  std::map<std::string, double> ToMap() const;
  const std::map<std::string, Quantity>& entries() const { return entries_; }
  // "{CPU: 2, TPU: 4}".
  std::string DebugString() const;

  bool operator==(const ResourceSet& o) const { return entries_ == o.entries_; }

 private:
  std::map<std::string, Quantity> entries_;
};

// Parses a JSON object of resource quantities ('{"TPU": 4, "custom": 0.5}').
// InvalidArgument for invalid JSON, a name given twice, and the errors of
// ResourceSet::FromMap.
absl::StatusOr<ResourceSet> ParseResourcesJson(const std::string& json);

// Whether a node may offer `name` as a custom resource (--resources).
// InvalidArgument, naming it, for the names Manta sets itself: "node:*"
// (node:<ip> and the head's node:__internal_head__), and "TPU" and
// "TPU-<pod type>-head", which come from the TPU environment only.
absl::Status CheckCustomResourceName(const std::string& name);

// Prints a quantity as Ray prints Python floats: "4.0", "0.5", "0.001".
std::string FormatQuantity(double v);

}  // namespace manta
