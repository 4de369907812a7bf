#include "common/metrics/component_stats.h"

#include <unistd.h>

#include <map>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta::metrics {
namespace {

TEST(ComponentStatsTest, ParsesProcPidStatPastACommandWithSpacesAndParentheses) {
  // Fields 14 and 15 (utime, stime) and 22 (starttime), counted from the
  // last ')': the command may hold both.
  const std::string line =
      "4242 (ray::Counter (x) y) S 1 4242 4242 0 -1 4194304 2000 0 0 0 "
      "150 25 0 0 20 0 3 0 98765 1000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  auto cpu = ParseProcPidStat(line);
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->ticks, 175u);
  EXPECT_EQ(cpu->start_ticks, 98765u);
  EXPECT_FALSE(ParseProcPidStat("").has_value());
  EXPECT_FALSE(ParseProcPidStat("12 (short) S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcPidStat("12 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13 14 15 16 17 18 19 20").has_value());
}

TEST(ComponentStatsTest, ParsesStatm) {
  auto pages = ParseStatm("26000 1200 300 10 0 900 0\n");
  ASSERT_TRUE(pages.has_value());
  EXPECT_EQ(pages->resident, 1200);
  EXPECT_EQ(pages->shared, 300);
  EXPECT_FALSE(ParseStatm("26000").has_value());
  EXPECT_FALSE(ParseStatm("").has_value());
}

TEST(ComponentStatsTest, ReadsThisProcess) {
  auto s = ComponentStats::ReadProcess(::getpid());
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(s->rss_bytes, 0);
  EXPECT_GE(s->shared_bytes, 0);
  EXPECT_GE(s->age_seconds, 0);
  EXPECT_FALSE(ComponentStats::ReadProcess(-1).has_value());
}

// Samples (name{labels} value) of an exposition, one per line.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(ComponentStatsTest, SumsAComponentsProcessesAndMeasuresCpuBetweenReads) {
  // 100 ticks a second; the workers began 10 s ago.
  std::map<int, ProcessSample> procs;
  procs[10] = {{50, 1000}, 2000000, 4096, 10};  // the raylet: 0.5 s of CPU
  procs[20] = {{100, 2000}, 3000000, 0, 10};    // two idle workers
  procs[21] = {{300, 2000}, 1000000, 8192, 10};
  absl::Time now = absl::FromUnixSeconds(1000);
  ComponentStats stats(
      "10.0.0.5",
      [&](int pid) -> std::optional<ProcessSample> {
        auto it = procs.find(pid);
        return it == procs.end() ? std::nullopt : std::optional<ProcessSample>(it->second);
      },
      100, [&] { return now; });
  const std::vector<ComponentStats::Process> listed = {
      {10, "raylet", true}, {20, "ray::IDLE", false}, {21, "ray::IDLE", false}, {99, "ray::Gone", false}};
  const Labels none;
  Exposition first(&none);
  stats.Collect(listed, first);
  auto s = Samples(first.Take());
  // First read: CPU since each process began.
  EXPECT_DOUBLE_EQ(s["ray_component_cpu_percentage{ip=\"10.0.0.5\",Component=\"raylet\",pid=\"10\"}"], 5.0);
  EXPECT_DOUBLE_EQ(s["ray_component_cpu_percentage{ip=\"10.0.0.5\",Component=\"ray::IDLE\"}"], 40.0);
  EXPECT_DOUBLE_EQ(s["ray_component_rss_mb{ip=\"10.0.0.5\",Component=\"ray::IDLE\"}"], 4.0);
  EXPECT_DOUBLE_EQ(s["ray_component_mem_shared_bytes{ip=\"10.0.0.5\",Component=\"ray::IDLE\"}"], 8192);
  EXPECT_DOUBLE_EQ(s["ray_component_rss_mb{ip=\"10.0.0.5\",Component=\"raylet\",pid=\"10\"}"], 2.0);
  EXPECT_EQ(s.size(), 6u) << "a process gone before its read adds nothing";

  // Two seconds later: the raylet used 1 s of CPU, worker 21 two CPUs; the
  // pid of worker 20 now belongs to a new process (another start time).
  now += absl::Seconds(2);
  procs[10].cpu.ticks += 100;
  procs[21].cpu.ticks += 400;
  procs[20] = {{10, 5000}, 1000000, 0, 1};
  Exposition second(&none);
  stats.Collect(listed, second);
  s = Samples(second.Take());
  EXPECT_DOUBLE_EQ(s["ray_component_cpu_percentage{ip=\"10.0.0.5\",Component=\"raylet\",pid=\"10\"}"], 50.0);
  EXPECT_DOUBLE_EQ(s["ray_component_cpu_percentage{ip=\"10.0.0.5\",Component=\"ray::IDLE\"}"], 200.0 + 10.0);
}

}  // namespace
}  // namespace manta::metrics
