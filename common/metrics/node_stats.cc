#include "common/metrics/node_stats.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"

namespace manta::metrics {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

CpuTimes ParseProcStat(const std::string& text) {
  std::istringstream in(text);
  std::string label;
  in >> label;
  if (label != "cpu") return {};
  // user nice system idle iowait irq softirq steal (guest time is in user).
  uint64_t v[8] = {};
  for (uint64_t& x : v) {
    if (!(in >> x)) break;
  }
  CpuTimes t;
  t.total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  t.busy = t.total - v[3] - v[4];
  return t;
}

int64_t ParseMeminfo(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) != 0 || line.size() <= field.size() || line[field.size()] != ':') {
      continue;
    }
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kb = -1;
    value >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

int64_t ParseVmstat(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  std::string name;
  int64_t value = 0;
  while (in >> name >> value) {
    if (name == field) return value;
  }
  return -1;
}

NetBytes ParseNetDev(const std::string& text) {
  NetBytes out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    std::istringstream name_in(line.substr(0, colon));
    std::string name;
    name_in >> name;
    if (name.empty() || name == "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (uint64_t& x : v) {
      if (!(fields >> x)) break;
    }
    out.received += v[0];
    out.sent += v[8];
  }
  return out;
}

DiskIo ParseDiskstats(const std::string& text, const std::function<bool(const std::string&)>& whole) {
  DiskIo out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    uint64_t major = 0, minor = 0;
    std::string name;
    // reads, reads merged, sectors read, ms reading, writes, writes merged, sectors written
    uint64_t v[7] = {};
    if (!(fields >> major >> minor >> name)) continue;
    bool complete = true;
    for (uint64_t& x : v) complete = complete && static_cast<bool>(fields >> x);
    if (!complete || !whole(name)) continue;
    out.reads += v[0];
    out.read_bytes += v[2] * 512;
    out.writes += v[4];
    out.written_bytes += v[6] * 512;
  }
  return out;
}

namespace {

// A whole disk: listed in /sys/block (partitions are not), and not a loop
// or RAM device.
bool WholeDisk(const std::string& name) {
  if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0 || name.rfind("zram", 0) == 0) return false;
  return access(("/sys/block/" + name).c_str(), F_OK) == 0;
}

}  // namespace

void NodeStats::CollectDiskAndNetwork(Exposition& out, const Labels& ip) {
  struct statvfs fs;
  if (statvfs(disk_path_.c_str(), &fs) == 0) {
    const double block = static_cast<double>(fs.f_frsize);
    out.Family("ray_node_disk_usage", "gauge", "Bytes used on the root file system.");
    out.Sample("ray_node_disk_usage", ip, block * static_cast<double>(fs.f_blocks - fs.f_bfree));
    out.Family("ray_node_disk_free", "gauge", "Bytes free (to unprivileged users) on the root file system.");
    out.Sample("ray_node_disk_free", ip, block * static_cast<double>(fs.f_bavail));
  }
  const NetBytes net = ParseNetDev(ReadAll("/proc/net/dev"));
  const DiskIo disk = ParseDiskstats(ReadAll("/proc/diskstats"), WholeDisk);
  const absl::Time now = absl::Now();
  double seconds = 0;
  NetBytes net_before;
  DiskIo disk_before;
  {
    absl::MutexLock lock(&mu_);
    if (last_read_ != absl::InfinitePast()) seconds = absl::ToDoubleSeconds(now - last_read_);
    net_before = last_net_;
    disk_before = last_disk_;
    last_read_ = now;
    last_net_ = net;
    last_disk_ = disk;
  }
  // A counter that went back (a device gone) reads as no traffic.
  auto rate = [&](uint64_t after, uint64_t before) {
    return seconds > 0 && after >= before ? static_cast<double>(after - before) / seconds : 0.0;
  };
  out.Family("ray_node_network_sent", "gauge", "Bytes sent by every interface but lo since boot.");
  out.Sample("ray_node_network_sent", ip, static_cast<double>(net.sent));
  out.Family("ray_node_network_received", "gauge", "Bytes received by every interface but lo since boot.");
  out.Sample("ray_node_network_received", ip, static_cast<double>(net.received));
  out.Family("ray_node_network_send_speed", "gauge", "Bytes per second sent since the previous scrape.");
  out.Sample("ray_node_network_send_speed", ip, rate(net.sent, net_before.sent));
  out.Family("ray_node_network_receive_speed", "gauge", "Bytes per second received since the previous scrape.");
  out.Sample("ray_node_network_receive_speed", ip, rate(net.received, net_before.received));
  out.Family("ray_node_disk_io_read_speed", "gauge", "Bytes per second read from the disks since the previous scrape.");
  out.Sample("ray_node_disk_io_read_speed", ip, rate(disk.read_bytes, disk_before.read_bytes));
  out.Family("ray_node_disk_io_write_speed", "gauge",
             "Bytes per second written to the disks since the previous scrape.");
  out.Sample("ray_node_disk_io_write_speed", ip, rate(disk.written_bytes, disk_before.written_bytes));
  out.Family("ray_node_disk_read_iops", "gauge", "Reads per second completed by the disks since the previous scrape.");
  out.Sample("ray_node_disk_read_iops", ip, rate(disk.reads, disk_before.reads));
  out.Family("ray_node_disk_write_iops", "gauge",
             "Writes per second completed by the disks since the previous scrape.");
  out.Sample("ray_node_disk_write_iops", ip, rate(disk.writes, disk_before.writes));
}

void NodeStats::Collect(Exposition& out) {
  const Labels ip = {{"ip", ip_}};
  const CpuTimes now = ParseProcStat(ReadAll("/proc/stat"));
  double utilization = 0;
  {
    absl::MutexLock lock(&mu_);
    const uint64_t total = now.total - last_.total;
    if (total > 0 && now.total >= last_.total && now.busy >= last_.busy) {
      utilization = 100.0 * static_cast<double>(now.busy - last_.busy) / static_cast<double>(total);
    }
    last_ = now;
  }
  out.Family("ray_node_cpu_utilization", "gauge", "Percent of the node's CPUs busy since the previous scrape.");
  out.Sample("ray_node_cpu_utilization", ip, utilization);
  out.Family("ray_node_cpu_count", "gauge", "The node's CPUs.");
  out.Sample("ray_node_cpu_count", ip, static_cast<double>(std::thread::hardware_concurrency()));
  CollectDiskAndNetwork(out, ip);
  const std::string meminfo = ReadAll("/proc/meminfo");
  const int64_t total = ParseMeminfo(meminfo, "MemTotal");
  const int64_t available = ParseMeminfo(meminfo, "MemAvailable");
  if (total < 0 || available < 0) return;
  out.Family("ray_node_mem_total", "gauge", "The node's memory, in bytes.");
  out.Sample("ray_node_mem_total", ip, static_cast<double>(total));
  out.Family("ray_node_mem_available", "gauge", "The node's memory available, in bytes.");
  out.Sample("ray_node_mem_available", ip, static_cast<double>(available));
  out.Family("ray_node_mem_used", "gauge", "The node's memory in use (total less available), in bytes.");
  out.Sample("ray_node_mem_used", ip, static_cast<double>(total - available));
  const int64_t shared = ParseMeminfo(meminfo, "Shmem");
  if (shared >= 0) {
    out.Family("ray_node_mem_shared_bytes", "gauge", "The node's shared memory (tmpfs and shared mappings), in bytes.");
    out.Sample("ray_node_mem_shared_bytes", ip, static_cast<double>(shared));
  }
}

}  // namespace manta::metrics
