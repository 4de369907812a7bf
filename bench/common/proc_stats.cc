#include "bench/common/proc_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
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

// The fields of /proc/PID/stat after the command name ([0] is field 3);
// empty when unreadable.
std::vector<std::string> StatFields(pid_t pid) {
  const auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return {};
  std::vector<std::string> out;
  for (absl::string_view f : ProcStatFields(*text)) out.emplace_back(f);
  return out;
}

// Field `i` (as numbered in proc(5)) of `fields`, in seconds of clock ticks.
double TicksField(const std::vector<std::string>& fields, size_t i) {
  int64_t ticks = 0;
  if (fields.size() <= i - 3 || !absl::SimpleAtoi(fields[i - 3], &ticks)) return -1;
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double CpuSeconds(pid_t pid) {
  const std::vector<std::string> fields = StatFields(pid);
  const double user = TicksField(fields, 14), system = TicksField(fields, 15);
  return user < 0 || system < 0 ? -1 : user + system;
}

double SystemCpuSeconds(pid_t pid) { return TicksField(StatFields(pid), 15); }

double MachineBusySeconds() {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice",
  // in clock ticks; guest time is already counted in user.
  std::ifstream f("/proc/stat");
  std::string cpu;
  f >> cpu;
  if (cpu != "cpu") return -1;
  int64_t busy = 0, v = 0;
  for (int i = 0; i < 8 && f >> v; ++i) {
    if (i != 3 && i != 4) busy += v;  // idle and iowait
  }
  return f ? static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK)) : -1;
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

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* e = readdir(dir)) {
    pid_t child = 0;
    if (!absl::SimpleAtoi(e->d_name, &child)) continue;
    const std::vector<std::string> fields = StatFields(child);
    int64_t parent = 0;  // field 4
    if (fields.size() > 1 && fields[0] != "Z" && absl::SimpleAtoi(fields[1], &parent) && parent == pid) {
      out.push_back(child);
    }
  }
  closedir(dir);
  return out;
}

}  // namespace manta::bench
