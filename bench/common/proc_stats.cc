#include "bench/common/proc_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/process.h"

namespace manta::bench {
namespace {

int64_t FieldKb(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  int64_t total = -1;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream ss(line.substr(key.size()));
    int64_t kb = 0;
    ss >> kb;
    total = (total < 0 ? 0 : total) + kb;
  }
  return total < 0 ? -1 : total * 1024;
}

}  // namespace

double TicksToSeconds(uint64_t ticks) { return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK)); }

double CpuSeconds(pid_t pid) {
  const std::optional<LiveProcess> p = ReadLiveProcess(pid);
  return p ? TicksToSeconds(p->user_ticks + p->system_ticks) : -1;
}

double MachineBusySeconds() {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice",
  // in clock ticks; guest time is already counted in user.
  std::ifstream f("/proc/stat");
  std::string cpu;
  f >> cpu;
  if (cpu != "cpu") return -1;
  int64_t busy = 0, v = 0;
  for (int i = 0; i < 8 && f >> v; ++i) {
    if (i != 3 && i != 4 && i != 7) busy += v;  // idle, iowait and steal
  }
  return f ? TicksToSeconds(static_cast<uint64_t>(busy)) : -1;
}

int64_t RssBytes(pid_t pid) { return FieldKb("/proc/" + std::to_string(pid) + "/status", "VmRSS:"); }

int64_t PeakRssBytes(pid_t pid) { return FieldKb("/proc/" + std::to_string(pid) + "/status", "VmHWM:"); }

int64_t PssBytes(pid_t pid) { return FieldKb("/proc/" + std::to_string(pid) + "/smaps_rollup", "Pss:"); }

int64_t PrivateBytes(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/smaps_rollup";
  int64_t clean = FieldKb(path, "Private_Clean:");
  int64_t dirty = FieldKb(path, "Private_Dirty:");
  if (clean < 0 || dirty < 0) return -1;
  return clean + dirty;
}

std::string ProcessName(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

}  // namespace manta::bench
