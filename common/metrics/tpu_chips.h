// The activity of a host's TPU chips, published by the processes that
// compute on them and reported by the host's raylet under the names of
// Ray's TPU panels. On a real TPU host these come from libtpu; on the hosts
// Manta runs on, a chip is a logical device of the training kernels (a
// thread computing on the CPU), and what it reports is measured by the
// kernels themselves:
//   ray_tpu_duty_cycle                   percent of the time the chip ran a
//                                        training step (computing or
//                                        exchanging with its peers)
//   ray_tpu_tensorcore_utilization       percent of the time it computed
//   ray_tpu_memory_bandwidth_utilization percent of the time it moved its
//                                        arrays to and from its peers
//   ray_tpu_memory_used / _total         bytes its arrays hold / the host's
//                                        memory shared among its chips
// each labelled with Ray's TpuIndex, TpuDeviceName, TpuType, TpuTopology
// and the node's ip; percentages are over the time since the previous read.
//
// Each chip has a stats page (stats_page.h) in the node's stats directory
// (NodeStatsDir), chip-<index>, written by the one process
// that holds the chip (ChipActivity) and read at each scrape (TpuChipStats).
// A page whose writer died reads as an idle chip holding nothing.
//
//   // in the process computing on chip 2:
//   ASSIGN_OR_RETURN(auto chip, ChipActivity::Open(stats_dir, 2));
//   chip->StepBegan();  ... chip->StepEnded(/*transfer_seconds=*/0.01, /*bytes_held=*/1 << 20);
//   // in the raylet:
//   TpuChipStats chips({.ip = ip, .chips = 4, .type = "tpu-v6e-slice", ...}, dir);
//   registry.AddCollector([&](Exposition& out) { chips.Collect(out); });
//
// ChipActivity: one thread at a time. ChipMeter: not thread-safe.
// TpuChipStats: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"
#include "common/metrics/stats_page.h"

namespace manta::metrics {

std::string ChipPagePath(const std::string& stats_dir, int chip);

// CLOCK_MONOTONIC, shared by every process of the host.
uint64_t MonotonicNanos();

// A chip's page, slot by slot.
enum ChipSlot {
  kChipBusyNanos = 0,      // steps that ended
  kChipBusySince = 1,      // when the step under way began; 0 when idle
  kChipTransferNanos = 2,  // of the steps that ended: exchanging with peers
  kChipBytesHeld = 3,
  kChipWriterPid = 4,
};

class ChipActivity {
 public:
  // Opens the page of chip `chip` in `stats_dir` (which must exist) and
  // marks it this process's.
  static absl::StatusOr<std::unique_ptr<ChipActivity>> Open(const std::string& stats_dir, int chip);
  // Idle and holding nothing once the process lets the chip go.
  ~ChipActivity();

  void StepBegan();
  // `transfer_seconds` of the step went to exchanges with peers.
  void StepEnded(double transfer_seconds, int64_t bytes_held);

 private:
  explicit ChipActivity(std::unique_ptr<StatsPage> page) : page_(std::move(page)) {}
  const std::unique_ptr<StatsPage> page_;
};

// A chip's totals as of one moment.
struct ChipReading {
  double busy_seconds = 0;  // a step under way counts up to the moment
  double transfer_seconds = 0;
  int64_t bytes_held = 0;
};
// What page `v` says at monotonic `now_nanos`; a page whose writer is not
// alive reads as idle and holding nothing.
ChipReading ReadChip(const StatsPage::Values& v, uint64_t now_nanos, bool writer_alive);

// Percentages of the time between two readings of one chip.
struct ChipUtilization {
  double duty_cycle = 0;
  double tensorcore = 0;
  double bandwidth = 0;
};
class ChipMeter {
 public:
  // Since the previous Update (all 0 on the first, and when the counters
  // went back: a page made anew).
  ChipUtilization Update(uint64_t now_nanos, const ChipReading& r);

 private:
  bool has_previous_ = false;
  uint64_t at_ = 0;
  ChipReading previous_;
};

class TpuChipStats {
 public:
  struct Host {
    std::string ip;
    int chips = 0;              // this host's
    std::string type;           // Ray's TpuType: "tpu-v6e-slice"
    std::string topology;       // "4x4"
    std::string device_prefix;  // TpuDeviceName is "<prefix>-<index>"
    int64_t memory_per_chip = 0;
  };
  TpuChipStats(Host host, std::string stats_dir);
  void Collect(Exposition& out);

 private:
  const Host host_;
  const std::string dir_;
  absl::Mutex mu_;
  std::vector<ChipMeter> meters_ ABSL_GUARDED_BY(mu_);  // by chip
};

}  // namespace manta::metrics
