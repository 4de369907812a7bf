#include "common/metrics/component_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/process.h"

namespace manta::metrics {
namespace {

// A /proc file (a few hundred bytes) in one read; empty when unreadable.
std::string ReadProcFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

std::optional<ProcessCpu> ParseProcPidStat(const std::string& text) {
  // utime and stime are fields 14 and 15, starttime 22.
  std::vector<absl::string_view> fields = ProcStatFields(text);
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3, kStart = 22 - 3;
  if (fields.size() <= kStart) return std::nullopt;
  uint64_t utime = 0, stime = 0, start = 0;
  if (!absl::SimpleAtoi(fields[kUtime], &utime) || !absl::SimpleAtoi(fields[kStime], &stime) ||
      !absl::SimpleAtoi(fields[kStart], &start)) {
    return std::nullopt;
  }
  return ProcessCpu{utime + stime, start};
}

std::optional<ProcessPages> ParseStatm(const std::string& text) {
  // size resident shared text lib data dt
  std::istringstream in(text);
  int64_t size = 0;
  ProcessPages p;
  if (!(in >> size >> p.resident >> p.shared) || p.resident < 0 || p.shared < 0) return std::nullopt;
  return p;
}

double ComponentStats::TicksPerSecond() {
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? static_cast<double>(ticks) : 100.0;
}

std::optional<ProcessSample> ComponentStats::ReadProcess(int pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  auto cpu = ParseProcPidStat(ReadProcFile(dir + "/stat"));
  auto pages = ParseStatm(ReadProcFile(dir + "/statm"));
  if (!cpu || !pages) return std::nullopt;
  static const int64_t page_size = ::sysconf(_SC_PAGESIZE);
  ProcessSample s;
  s.cpu = *cpu;
  s.rss_bytes = pages->resident * page_size;
  s.shared_bytes = pages->shared * page_size;
  double uptime = 0;
  if (std::sscanf(ReadProcFile("/proc/uptime").c_str(), "%lf", &uptime) == 1) {
    s.age_seconds = uptime - static_cast<double>(cpu->start_ticks) / TicksPerSecond();
  }
  return s;
}

double ComponentStats::CpuPercent(const std::optional<Seen>& before, const ProcessSample& now, absl::Time at) const {
  double cpu_seconds = static_cast<double>(now.cpu.ticks) / ticks_per_second_;
  double seconds = now.age_seconds;
  // The same process as before (a pid reused since has another start).
  if (before && before->cpu.start_ticks == now.cpu.start_ticks && now.cpu.ticks >= before->cpu.ticks) {
    cpu_seconds = static_cast<double>(now.cpu.ticks - before->cpu.ticks) / ticks_per_second_;
    seconds = absl::ToDoubleSeconds(at - before->at);
  }
  return seconds > 0 ? 100.0 * cpu_seconds / seconds : 0.0;
}

void ComponentStats::Collect(const std::vector<Process>& processes, Exposition& out) {
  struct Sum {
    double cpu = 0, rss = 0, shared = 0;
  };
  std::map<std::pair<std::string, int>, Sum> sums;  // by component and pid (0 unless with_pid)
  const absl::Time at = now_();
  {
    absl::MutexLock lock(&mu_);
    std::map<int, Seen> seen;
    for (const Process& p : processes) {
      std::optional<ProcessSample> s = read_(p.pid);
      if (!s) continue;  // gone since it was listed
      auto it = seen_.find(p.pid);
      Sum& sum = sums[{p.component, p.with_pid ? p.pid : 0}];
      sum.cpu += CpuPercent(it == seen_.end() ? std::nullopt : std::optional<Seen>(it->second), *s, at);
      sum.rss += static_cast<double>(s->rss_bytes) / 1e6;
      sum.shared += static_cast<double>(s->shared_bytes);
      seen[p.pid] = Seen{s->cpu, at};
    }
    seen_.swap(seen);  // processes no longer listed are forgotten
  }
  const struct {
    const char* name;
    const char* help;
    double Sum::*value;
  } kFamilies[] = {
      {"ray_component_cpu_percentage", "Percent of one CPU the component's processes used since the previous scrape.",
       &Sum::cpu},
      {"ray_component_rss_mb", "Resident memory of the component's processes, in MB (10^6 bytes).", &Sum::rss},
      {"ray_component_mem_shared_bytes",
       "Resident shared memory of the component's processes (top's SHR column), in bytes.", &Sum::shared},
  };
  for (const auto& family : kFamilies) {
    out.Family(family.name, "gauge", family.help);
    for (const auto& [key, sum] : sums) {
      Labels labels = {{"ip", ip_}, {"Component", key.first}};
      if (key.second != 0) labels.emplace_back("pid", std::to_string(key.second));
      out.Sample(family.name, labels, sum.*family.value);
    }
  }
}

}  // namespace manta::metrics
