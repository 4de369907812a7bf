// ProgressLog: quiet when quick; past a second, a line a second with the
// share done, and a closing line with the rate.
#include "train/kernels/progress_log.h"

#include <gtest/gtest.h>

#include <vector>

namespace manta::train {
namespace {

struct Lines {
  std::vector<std::string> lines;
  ProgressLog::Sink sink() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
};

TEST(ProgressLogTest, AQuickOperationSaysNothing) {
  ManualClock clock;
  Lines out;
  ProgressLog log("save", 100, out.sink(), clock.AsClock());
  for (int i = 0; i < 10; ++i) {
    clock.Advance(absl::Milliseconds(50));
    log.Add(10);
  }
  log.Done();
  EXPECT_TRUE(out.lines.empty());
}

TEST(ProgressLogTest, ALongOneLogsAtMostOnceASecondAndCloses) {
  ManualClock clock;
  Lines out;
  const int64_t mib = 1 << 20;
  ProgressLog log("checkpoint save at step 7", 10 * mib, out.sink(), clock.AsClock());
  for (int i = 0; i < 10; ++i) {  // 1 MiB every 400 ms: 4 s in all
    clock.Advance(absl::Milliseconds(400));
    log.Add(mib);
  }
  log.Done();
  ASSERT_EQ(out.lines.size(), 4u);  // at 1.2 s, 2.4 s, 3.6 s, and the close
  EXPECT_EQ(out.lines[0], "checkpoint save at step 7: 30% (3.0 of 10.0 MiB, 1.2 s)");
  EXPECT_EQ(out.lines[1], "checkpoint save at step 7: 60% (6.0 of 10.0 MiB, 2.4 s)");
  EXPECT_EQ(out.lines[3], "checkpoint save at step 7: done, 10.0 MiB in 4.0 s (2.5 MiB/s)");
}

}  // namespace
}  // namespace manta::train
