#include "common/metrics/stats_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace manta::metrics {

// The file: a sequence count, then the slots. Lock-free 64-bit atomics have
// the layout of plain integers, so two processes mapping the file share them.
struct StatsPage::Layout {
  std::atomic<uint64_t> sequence;
  std::atomic<uint64_t> slots[kSlots];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));

namespace {

constexpr size_t kPageBytes = 64;
static_assert(kPageBytes == (StatsPage::kSlots + 1) * sizeof(uint64_t));
constexpr int kReadTries = 100;

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::Status(errno == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kUnavailable,
                      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Copies the slots of a mapped page into `out`; false when writes kept
// changing them through kReadTries tries.
bool Copy(const void* mapping, StatsPage::Values* out) {
  const auto* seq = static_cast<const std::atomic<uint64_t>*>(mapping);
  const auto* slots = seq + 1;
  for (int i = 0; i < kReadTries; ++i) {
    const uint64_t before = seq->load(std::memory_order_acquire);
    if (before % 2 == 1) continue;  // a write is under way
    for (int s = 0; s < StatsPage::kSlots; ++s) (*out)[s] = slots[s].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq->load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StatsPage>> StatsPage::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open", path);
  struct stat st;
  // A new file is extended with zeros; a longer one keeps its tail.
  if (::fstat(fd, &st) != 0 || (st.st_size < static_cast<off_t>(kPageBytes) && ::ftruncate(fd, kPageBytes) != 0)) {
    absl::Status s = Errno("cannot size", path);
    ::close(fd);
    return s;
  }
  void* mapping = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) return Errno("cannot map", path);
  auto* layout = static_cast<Layout*>(mapping);
  // A writer that died mid-write left the count odd: that write is lost.
  uint64_t seq = layout->sequence.load(std::memory_order_relaxed);
  if (seq % 2 == 1) layout->sequence.store(seq + 1, std::memory_order_release);
  return std::unique_ptr<StatsPage>(new StatsPage(layout));
}

StatsPage::~StatsPage() { ::munmap(layout_, kPageBytes); }

void StatsPage::Write(const std::function<void(Slots&)>& change) {
  Values v;
  for (int s = 0; s < kSlots; ++s) v[s] = layout_->slots[s].load(std::memory_order_relaxed);
  change(v);
  const uint64_t seq = layout_->sequence.load(std::memory_order_relaxed);
  layout_->sequence.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int s = 0; s < kSlots; ++s) layout_->slots[s].store(v[s], std::memory_order_relaxed);
  layout_->sequence.store(seq + 2, std::memory_order_release);
}

StatsPage::Values StatsPage::Read() const {
  Values v;
  for (int s = 0; s < kSlots; ++s) v[s] = layout_->slots[s].load(std::memory_order_relaxed);
  return v;
}

std::string NodeStatsDir(const std::string& session_dir, const std::string& node_id_hex) {
  return absl::StrCat(session_dir, "/stats/", node_id_hex);
}

std::string WorkerPagePath(const std::string& stats_dir, const std::string& worker_id_hex) {
  return absl::StrCat(stats_dir, "/worker-", worker_id_hex);
}

absl::StatusOr<StatsPage::Values> ReadStatsPage(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kPageBytes)) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, " is not a stats page"));
  }
  void* mapping = ::mmap(nullptr, kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) return Errno("cannot map", path);
  StatsPage::Values v;
  const bool consistent = Copy(mapping, &v);
  ::munmap(mapping, kPageBytes);
  if (!consistent) return absl::UnavailableError(absl::StrCat(path, " kept changing while read"));
  return v;
}

}  // namespace manta::metrics
