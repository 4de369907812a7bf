// NodeStats: the host's CPU and memory as Ray's node metrics report them,
// read from /proc: ray_node_cpu_utilization (percent of all CPUs busy since
// the previous read, or since boot on the first), ray_node_cpu_count,
// ray_node_mem_total, ray_node_mem_available and ray_node_mem_used (bytes),
// each labelled with the node's ip.
//
//   NodeStats stats("10.0.0.5");
//   registry.AddCollector([&](Exposition& out) { stats.Collect(out); });
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"

namespace manta::metrics {

struct CpuTimes {
  uint64_t busy = 0;
  uint64_t total = 0;
};
// The "cpu" line of /proc/stat's text; zeros when it is not there.
CpuTimes ParseProcStat(const std::string& text);
// A field of /proc/meminfo's text ("MemTotal"), in bytes; -1 when absent.
int64_t ParseMeminfo(const std::string& text, const std::string& field);

class NodeStats {
 public:
  explicit NodeStats(std::string ip) : ip_(std::move(ip)) {}
  void Collect(Exposition& out);

 private:
  const std::string ip_;
  absl::Mutex mu_;
  CpuTimes last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::metrics
