#include "raylet/report_throttle.h"

#include <uv.h>

#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

TEST(ReportThrottleTest, CoalescesWhileInFlightAndWithinTheInterval) {
  EventLoop loop;
  std::vector<std::function<void()>> pending;
  ReportThrottle throttle(&loop, absl::Milliseconds(20),
                          [&](std::function<void()> done) { pending.push_back(std::move(done)); });
  throttle.Request();
  throttle.Request();
  throttle.Request();
  EXPECT_EQ(throttle.num_sent(), 1);
  pending.back()();
  // The requests made meanwhile become one send, after the interval.
  EXPECT_EQ(throttle.num_sent(), 1);
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while (throttle.num_sent() < 2 && absl::Now() < limit) uv_run(loop.uv_loop(), UV_RUN_ONCE);
  EXPECT_EQ(throttle.num_sent(), 2);
  pending.back()();
  EXPECT_EQ(throttle.num_sent(), 2) << "nothing was requested since";
}

}  // namespace
}  // namespace manta::raylet
