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

ResourceSet Cpus(double n) { return *ResourceSet::FromMap({{"CPU", n}}); }

TEST(ToldViewTest, AReportOfWhatTheGcsWasToldIsRedundant) {
  ToldView told;
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(4), false)) << "nothing told yet";
  told.Replied(Cpus(4), Cpus(3));
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(3), false)) << "a reply alone: the GCS's demand is unknown";

  told.Reported(Cpus(4), Cpus(4), false);
  EXPECT_TRUE(told.Redundant(Cpus(4), Cpus(4), false));
  EXPECT_FALSE(told.by_reply());
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(2), false)) << "available changed";
  EXPECT_FALSE(told.Redundant(Cpus(8), Cpus(4), false)) << "total changed";
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(4), true)) << "demand is always reported";

  // A bundle call's reply told the GCS the new view: its report is redundant.
  told.Replied(Cpus(5), Cpus(3));
  EXPECT_TRUE(told.Redundant(Cpus(5), Cpus(3), false));
  EXPECT_TRUE(told.by_reply());
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(4), false)) << "the view before the reply is not the GCS's any more";

  told.Forget();  // registered again, or a report failed
  EXPECT_FALSE(told.Redundant(Cpus(5), Cpus(3), false));
}

TEST(ToldViewTest, DemandOnceReportedMakesTheNextReportNeeded) {
  ToldView told;
  told.Reported(Cpus(4), Cpus(0), true);
  // The demand went away: the GCS must hear that, though the view is the same.
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(0), false));
  told.Replied(Cpus(4), Cpus(0));
  EXPECT_FALSE(told.Redundant(Cpus(4), Cpus(0), false)) << "a reply carries no demand";
  told.Reported(Cpus(4), Cpus(0), false);
  EXPECT_TRUE(told.Redundant(Cpus(4), Cpus(0), false));
}

}  // namespace
}  // namespace manta::raylet
