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

TEST(ToldViewTest, AReportTellsNothingOnlyWhenNoChangeCameSinceTheGcsWasTold) {
  ToldView told;
  EXPECT_FALSE(told.Redundant(false)) << "nothing told yet";
  told.Changed();
  told.Replied(1);
  EXPECT_FALSE(told.Redundant(false)) << "a reply alone: the GCS's demand is unknown";

  told.Reported(false);
  EXPECT_TRUE(told.Redundant(false));
  EXPECT_FALSE(told.Redundant(true)) << "demand is always reported";
  // A lease granted and returned leaves the same view, but raylets that
  // spilled to this node wait for a newer one.
  told.Changed();
  told.Changed();
  EXPECT_FALSE(told.Redundant(false));

  // A bundle call's reply told the GCS every change so far.
  told.Replied(5);
  EXPECT_TRUE(told.Redundant(false));
  told.Changed();
  EXPECT_FALSE(told.Redundant(false)) << "a change after the reply";
  told.Replied(6);
  told.Forget();  // registered again, or a report failed
  EXPECT_FALSE(told.Redundant(false));
}

TEST(ToldViewTest, DemandOnceReportedMakesTheNextReportNeeded) {
  ToldView told;
  told.Reported(true);
  // The demand went away: the GCS must hear that, though nothing changed.
  EXPECT_FALSE(told.Redundant(false));
  told.Replied(1);
  EXPECT_FALSE(told.Redundant(false)) << "a reply carries no demand";
  told.Reported(false);
  EXPECT_TRUE(told.Redundant(false));
}

TEST(ToldViewTest, AReplysViewIsConfirmedWhenSeenPublishedAtItsVersion) {
  ToldView told;
  told.Reported(false);
  EXPECT_FALSE(told.unconfirmed()) << "a report's reply confirms it";
  told.Changed();
  told.Replied(7);
  EXPECT_TRUE(told.unconfirmed());
  told.Published(6);
  EXPECT_TRUE(told.unconfirmed()) << "an older view";
  told.Published(8);
  EXPECT_FALSE(told.unconfirmed());
  told.Changed();
  told.Replied(9);
  told.Reported(false);
  EXPECT_FALSE(told.unconfirmed()) << "a report told it since";
}

}  // namespace
}  // namespace manta::raylet
