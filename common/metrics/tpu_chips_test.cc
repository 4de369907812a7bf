#include "common/metrics/tpu_chips.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "common/metrics/stats_page.h"
#include "gtest/gtest.h"

namespace manta::metrics {
namespace {

class TempDir {
 public:
  TempDir() {
    char templ[] = "/tmp/manta_stats_XXXXXX";
    path_ = ::mkdtemp(templ);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(StatsPageTest, AWriterIsReadByAnotherProcessAndItsSuccessorGoesOnFromItsValues) {
  TempDir dir;
  const std::string path = dir.path() + "/page";
  EXPECT_TRUE(absl::IsNotFound(ReadStatsPage(path).status()));
  {
    auto page = StatsPage::Open(path);
    ASSERT_TRUE(page.ok()) << page.status();
    (*page)->Write([](StatsPage::Slots& s) {
      s[0] = 7;
      s[6] = 1ull << 40;
    });
    // Another process reads what this one wrote.
    const pid_t child = ::fork();
    if (child == 0) {
      auto v = ReadStatsPage(path);
      std::_Exit(v.ok() && (*v)[0] == 7 && (*v)[6] == (1ull << 40) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto next = StatsPage::Open(path);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->Read()[0], 7u) << "the page outlives its writer";
  ASSERT_TRUE(std::filesystem::exists(path));
  std::filesystem::resize_file(path, 8);
  EXPECT_TRUE(absl::IsDataLoss(ReadStatsPage(path).status()));
}

TEST(ChipMeterTest, UtilizationIsTheShareOfTimeBetweenReadsSpentInSteps) {
  ChipMeter meter;
  const uint64_t s = 1000000000;
  EXPECT_EQ(meter.Update(10 * s, {5, 1, 100}).duty_cycle, 0) << "nothing to compare the first read with";
  // Over 2 s: 1.5 s in steps, 0.5 s of it exchanging.
  ChipUtilization u = meter.Update(12 * s, {6.5, 1.5, 100});
  EXPECT_DOUBLE_EQ(u.duty_cycle, 75);
  EXPECT_DOUBLE_EQ(u.tensorcore, 50);
  EXPECT_DOUBLE_EQ(u.bandwidth, 25);
  // Idle: nothing changed.
  u = meter.Update(13 * s, {6.5, 1.5, 0});
  EXPECT_EQ(u.duty_cycle, 0);
  EXPECT_EQ(u.tensorcore, 0);
  // Counters that went back (a page made anew) give no reading.
  EXPECT_EQ(meter.Update(14 * s, {0.5, 0, 0}).duty_cycle, 0);
  EXPECT_DOUBLE_EQ(meter.Update(15 * s, {1.5, 0, 0}).duty_cycle, 100);
}

TEST(ChipActivityTest, AStepUnderWayCountsUpToTheReadAndADeadWriterReadsIdle) {
  TempDir dir;
  auto chip = ChipActivity::Open(dir.path(), 3);
  ASSERT_TRUE(chip.ok()) << chip.status();
  (*chip)->StepBegan();
  auto page = ReadStatsPage(ChipPagePath(dir.path(), 3));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((*page)[kChipWriterPid], static_cast<uint64_t>(::getpid()));
  const uint64_t since = (*page)[kChipBusySince];
  ASSERT_GT(since, 0u);
  EXPECT_DOUBLE_EQ(ReadChip(*page, since + 250000000, true).busy_seconds, 0.25);
  EXPECT_DOUBLE_EQ(ReadChip(*page, since + 250000000, false).busy_seconds, 0) << "its writer died mid-step";
  (*chip)->StepEnded(/*transfer_seconds=*/1000, /*bytes_held=*/4096);
  page = ReadStatsPage(ChipPagePath(dir.path(), 3));
  ASSERT_TRUE(page.ok());
  const ChipReading r = ReadChip(*page, MonotonicNanos() + 1000000000, true);
  EXPECT_EQ((*page)[kChipBusySince], 0u);
  EXPECT_EQ(r.bytes_held, 4096);
  EXPECT_EQ(r.transfer_seconds, r.busy_seconds) << "no more exchange than the step lasted";
  EXPECT_EQ(ReadChip(*page, MonotonicNanos(), false).bytes_held, 0);
  chip->reset();
  page = ReadStatsPage(ChipPagePath(dir.path(), 3));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((*page)[kChipBytesHeld], 0u) << "a chip let go holds nothing";
}

TEST(TpuChipStatsTest, EveryChipOfTheHostIsReportedWithRaysLabels) {
  TempDir dir;
  TpuChipStats stats({.ip = "10.0.0.5",
                      .chips = 2,
                      .type = "tpu-v6e-slice",
                      .topology = "4x4",
                      .device_prefix = "tpu-group-0-1",
                      .memory_per_chip = 1 << 30},
                     dir.path());
  auto chip = ChipActivity::Open(dir.path(), 1);
  ASSERT_TRUE(chip.ok());
  (*chip)->StepEnded(0, 12345);
  const Labels none;
  Exposition out(&none);
  stats.Collect(out);
  const std::string text = out.Take();
  const std::string labels =
      R"({ip="10.0.0.5",TpuIndex="1",TpuDeviceName="tpu-group-0-1-1",TpuType="tpu-v6e-slice",TpuTopology="4x4"})";
  EXPECT_TRUE(absl::StrContains(text, "ray_tpu_memory_used" + labels + " 12345\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "ray_tpu_memory_total" + labels + " 1073741824\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(ray_tpu_duty_cycle{ip="10.0.0.5",TpuIndex="0",)")) << "a chip without a page";
  EXPECT_TRUE(absl::StrContains(text, "# HELP ray_tpu_tensorcore_utilization ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "logical device")) << "the help says what a chip is here";
}

}  // namespace
}  // namespace manta::metrics
