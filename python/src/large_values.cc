#include "python/src/large_values.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace manta::python {
namespace {

// Ask for transparent huge pages over the whole pages of [data, data+bytes):
// a 2 MiB fault instead of 512 small ones. Advice only: ignored where huge
// pages are off.
void AdviseHugePages(const char* data, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

LargeValues& LargeValues::Get() {
  static LargeValues* pool = new LargeValues();
  return *pool;
}

std::string LargeValues::Take(size_t bytes) {
  if (bytes >= kMinBytes) {
    absl::MutexLock lock(&mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      size_t capacity = free_[i].capacity();
      if (capacity >= bytes && capacity <= 2 * bytes && (best == free_.size() || capacity < free_[best].capacity())) {
        best = i;
      }
    }
    if (best != free_.size()) {
      std::string out = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      free_bytes_ -= out.capacity();
      out.clear();
      return out;
    }
  }
  std::string out;
  out.reserve(bytes);
  if (bytes >= kMinBytes) AdviseHugePages(out.data(), bytes);
  return out;
}

std::shared_ptr<const std::string> LargeValues::Share(std::string value) {
  if (value.capacity() < kMinBytes) return std::make_shared<const std::string>(std::move(value));
  return std::shared_ptr<const std::string>(new std::string(std::move(value)),
                                            [this](const std::string* s) { Give(const_cast<std::string*>(s)); });
}

void LargeValues::Give(std::string* value) {
  std::unique_ptr<std::string> owned(value);
  size_t capacity = owned->capacity();
  std::vector<std::string> evicted;  // freed after the lock
  absl::MutexLock lock(&mu_);
  if (capacity > max_pooled_bytes_) return;
  // The oldest buffers go first to make room.
  while (free_bytes_ + capacity > max_pooled_bytes_ && !free_.empty()) {
    free_bytes_ -= free_.front().capacity();
    evicted.push_back(std::move(free_.front()));
    free_.erase(free_.begin());
  }
  free_bytes_ += capacity;
  free_.push_back(std::move(*owned));
}

size_t LargeValues::pooled_bytes() const {
  absl::MutexLock lock(&mu_);
  return free_bytes_;
}

}  // namespace manta::python
