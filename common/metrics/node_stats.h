// NodeStats: the host's CPU, memory, disk and network as Ray's node metrics
// report them, read from /proc and statvfs: ray_node_cpu_utilization
// (percent of all CPUs busy since the previous read, or since boot on the
// first), ray_node_cpu_count, ray_node_mem_total, _available, _used and
// _shared_bytes (bytes), ray_node_disk_usage and _free (bytes of the file
// system at `disk_path`, the root by default, as Ray's), ray_node_disk_io_read_speed / _write_speed
// (bytes/s) and ray_node_disk_read_iops / _write_iops of the whole disks,
// ray_node_network_sent / _received (bytes since boot, every interface but
// lo) and ray_node_network_send_speed / _receive_speed (bytes/s); speeds are
// since the previous read (0 on the first). Each labelled with the node's ip.
//
//   NodeStats stats("10.0.0.5");
//   registry.AddCollector([&](Exposition& out) { stats.Collect(out); });
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
// A counter of /proc/vmstat's text ("oom_kill"); -1 when absent.
int64_t ParseVmstat(const std::string& text, const std::string& field);

struct NetBytes {
  uint64_t received = 0;
  uint64_t sent = 0;
};
// /proc/net/dev's text summed over every interface but lo.
NetBytes ParseNetDev(const std::string& text);

struct DiskIo {
  uint64_t reads = 0, writes = 0;              // completed
  uint64_t read_bytes = 0, written_bytes = 0;  // sectors of 512 bytes
};
// /proc/diskstats's text summed over the devices `whole` accepts (whole
// disks, not their partitions).
DiskIo ParseDiskstats(const std::string& text, const std::function<bool(const std::string&)>& whole);

class NodeStats {
 public:
  // `disk_path`: a path on the file system whose usage is reported.
  explicit NodeStats(std::string ip, std::string disk_path = "/")
      : ip_(std::move(ip)), disk_path_(std::move(disk_path)) {}
  void Collect(Exposition& out);

 private:
  void CollectDiskAndNetwork(Exposition& out, const Labels& ip);

  const std::string ip_;
  const std::string disk_path_;
  absl::Mutex mu_;
  CpuTimes last_ ABSL_GUARDED_BY(mu_);
  // The previous read of the counters the speeds come from.
  absl::Time last_read_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  NetBytes last_net_ ABSL_GUARDED_BY(mu_);
  DiskIo last_disk_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::metrics
