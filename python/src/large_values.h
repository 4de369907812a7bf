// Buffers for large values in a Python process.
//
// A Python driver allocates with glibc's malloc, which gives every block
// above 32 MiB its own mapping and unmaps it on free: each large put would
// fault its pages in afresh, one 4 KiB page at a time (about 3 ms a MiB on
// a virtual machine, ten times the copy). Daemons and workers use tcmalloc,
// which keeps freed spans; this does the same for the values a Python
// process joins: a value of at least kMinBytes is copied into a buffer whose
// pages are already there (a freed value's buffer, kept while the pool holds
// at most kMaxPooledBytes) or into a new one that asks for huge pages.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace manta::python {

class LargeValues {
 public:
  static constexpr size_t kMinBytes = size_t{4} << 20;
  static constexpr size_t kMaxPooledBytes = size_t{256} << 20;

  explicit LargeValues(size_t max_pooled_bytes = kMaxPooledBytes) : max_pooled_bytes_(max_pooled_bytes) {}

  // The process's pool (never destroyed: values may outlive static
  // destruction in the core worker's threads).
  static LargeValues& Get();

  // An empty string with capacity for `bytes`: a pooled buffer when one of
  // at least `bytes` and at most twice that is free, else a new one.
  std::string Take(size_t bytes);
  // `value` shared; its buffer comes back to the pool when the last owner
  // lets go (on any thread).
  std::shared_ptr<const std::string> Share(std::string value);

  size_t pooled_bytes() const;

 private:
  void Give(std::string* value);

  const size_t max_pooled_bytes_;
  mutable absl::Mutex mu_;
  std::vector<std::string> free_ ABSL_GUARDED_BY(mu_);
  size_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::python
