// StatsPage: a few counters one process publishes for another process of
// the same host to read without asking it, as libtpu publishes its chips'
// metrics: a worker's object bytes and a logical chip's busy time, read by
// the host's raylet at each scrape.
//
// A page is a small file of kSlots 64-bit slots, mapped shared by its
// writer. A writer changes several slots as one (Write); a reader gets a
// consistent copy (a sequence count, odd while a write is under way, tells
// it to read again). A page's counters outlive its writer: the next writer
// of the same path goes on from them.
//
//   ASSIGN_OR_RETURN(auto page, StatsPage::Open(dir + "/worker-" + id));
//   page->Write([&](StatsPage::Slots& s) { s[0] = bytes; });
//   ...
//   absl::StatusOr<StatsPage::Values> v = ReadStatsPage(dir + "/worker-" + id);
//
// A page is written by one thread of one process at a time (Write is not
// safe to call concurrently); reads are safe from any thread or process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace manta::metrics {

class StatsPage {
 public:
  static constexpr int kSlots = 7;
  using Values = std::array<uint64_t, kSlots>;
  // What Write's function changes: the values as they stand.
  using Slots = Values;

  // Maps `path` for writing, creating the file (zeroed, mode 0644) when it
  // is not there and keeping its values when it is. Errors from the file
  // system (its directory must exist).
  static absl::StatusOr<std::unique_ptr<StatsPage>> Open(const std::string& path);
  ~StatsPage();  // unmaps; the file stays
  StatsPage(const StatsPage&) = delete;
  StatsPage& operator=(const StatsPage&) = delete;

  // Applies `change` to the values; readers see all of it or none.
  void Write(const std::function<void(Slots&)>& change);
  Values Read() const;

 private:
  struct Layout;
  explicit StatsPage(Layout* layout) : layout_(layout) {}
  Layout* const layout_;  // the mapping; constant after construction
};

// <session_dir>/stats/<node_id_hex>: where a node's processes publish pages
// (a worker finds it in MANTA_STATS_DIR).
std::string NodeStatsDir(const std::string& session_dir, const std::string& node_id_hex);
// A worker's page there: slot kWorkerHeapBytes holds the bytes of objects
// in its memory store.
std::string WorkerPagePath(const std::string& stats_dir, const std::string& worker_id_hex);
inline constexpr int kWorkerHeapBytes = 0;

// A copy of the page at `path`: NotFound when there is none, DataLoss when
// it is not a page (too short), Unavailable when writes kept it from
// reading a consistent copy.
absl::StatusOr<StatsPage::Values> ReadStatsPage(const std::string& path);

}  // namespace manta::metrics
