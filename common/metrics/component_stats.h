// ComponentStats: the CPU and memory of a node's Ray components, as Ray's
// reporter agent reports them for its Grafana panels "Node CPU by
// Component" and "Node Memory by Component":
//   ray_component_cpu_percentage    percent of one CPU used since the previous
//                                   read (over 100 for more than one CPU;
//                                   since the process began on its first)
//   ray_component_rss_mb            resident memory, in MB of 10^6 bytes
//   ray_component_mem_shared_bytes  resident shared memory (top's SHR)
// each labelled with the node's ip and Component ("raylet", "gcs",
// "dashboard", or a worker's "ray::<Class>", "ray::<function>", "ray::IDLE"),
// and a daemon's pid. Processes of one component are summed, as Ray sums
// its workers by name. Read from /proc/<pid>/stat and /proc/<pid>/statm:
// two small reads a process.
//
//   ComponentStats stats("10.0.0.5");
//   registry.AddCollector([&](Exposition& out) {
//     stats.Collect({{getpid(), "raylet", true}}, out);
//   });
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"

namespace manta::metrics {

// From /proc/<pid>/stat: CPU time (utime + stime) and the start time since
// boot, in clock ticks. nullopt for text that is not such a line.
struct ProcessCpu {
  uint64_t ticks = 0;
  uint64_t start_ticks = 0;
};
std::optional<ProcessCpu> ParseProcPidStat(const std::string& text);

// From /proc/<pid>/statm: resident and resident shared pages. nullopt for
// text that is not such a line.
struct ProcessPages {
  int64_t resident = 0;
  int64_t shared = 0;
};
std::optional<ProcessPages> ParseStatm(const std::string& text);

// One read of a process.
struct ProcessSample {
  ProcessCpu cpu;
  int64_t rss_bytes = 0;
  int64_t shared_bytes = 0;
  double age_seconds = 0;  // since it began
};

class ComponentStats {
 public:
  struct Process {
    int pid = 0;
    std::string component;
    bool with_pid = false;  // a daemon's: its series carries its pid
  };
  // Reads a process: nullopt when it is gone.
  using Reader = std::function<std::optional<ProcessSample>(int pid)>;

  explicit ComponentStats(std::string ip, Reader read = ReadProcess, double ticks_per_second = TicksPerSecond(),
                          std::function<absl::Time()> now = absl::Now)
      : ip_(std::move(ip)), read_(std::move(read)), ticks_per_second_(ticks_per_second), now_(std::move(now)) {}

  void Collect(const std::vector<Process>& processes, Exposition& out);

  static std::optional<ProcessSample> ReadProcess(int pid);
  static double TicksPerSecond();

 private:
  struct Seen {
    ProcessCpu cpu;
    absl::Time at;
  };
  // The percent of a CPU `now` says the process used since `before` (or
  // since it began, without one).
  double CpuPercent(const std::optional<Seen>& before, const ProcessSample& now, absl::Time at) const;

  const std::string ip_;
  const Reader read_;
  const double ticks_per_second_;
  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  std::map<int, Seen> seen_ ABSL_GUARDED_BY(mu_);  // by pid: the previous read
};

}  // namespace manta::metrics
