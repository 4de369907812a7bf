#include "common/metrics/node_stats.h"

#include <fstream>
#include <sstream>
#include <thread>

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
}

}  // namespace manta::metrics
