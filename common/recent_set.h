// The last `capacity` distinct keys inserted, oldest forgotten first: for
// remembering what ended (dead callers, published exits) without growing.
// Not thread-safe.
//
//   RecentSet seen(4096);
//   if (seen.Insert(id)) Publish(id);  // once per id while remembered
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "absl/container/flat_hash_set.h"

namespace manta {

class RecentSet {
 public:
  explicit RecentSet(size_t capacity) : capacity_(capacity) {}

  // Whether `key` was new (it is remembered from now on).
  bool Insert(const std::string& key) {
    if (!keys_.insert(key).second) return false;
    order_.push_back(key);
    if (order_.size() > capacity_) {
      keys_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool Contains(const std::string& key) const { return keys_.contains(key); }
  size_t size() const { return order_.size(); }

 private:
  const size_t capacity_;
  absl::flat_hash_set<std::string> keys_;
  std::deque<std::string> order_;  // oldest first
};

}  // namespace manta
