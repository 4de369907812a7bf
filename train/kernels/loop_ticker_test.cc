#include "train/kernels/loop_ticker.h"

#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"

namespace manta::train {
namespace {

std::shared_ptr<gloo::transport::Device> LoopbackDevice() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

// Whether `ticker` sees `n` turns of its loop within 10 s.
bool SeesTurns(LoopTicker& ticker, int64_t n) { return ticker.AwaitTurns(n, absl::Seconds(10)); }

TEST(LoopTickerTest, WakesTheDevicesLoopWhileItLives) {
  auto device = LoopbackDevice();
  LoopTicker ticker(device, absl::Microseconds(100));
  // Idle, gloo's loop would turn once per 10 ms epoll timeout and never
  // call this handler: each turn seen here is a wake-up it sent.
  EXPECT_TRUE(SeesTurns(ticker, 20));
}

TEST(LoopTickerTest, TwoTickersOnOneDeviceComeAndGo) {
  auto device = LoopbackDevice();
  for (int i = 0; i < 3; ++i) {
    LoopTicker a(device), b(device);
    EXPECT_TRUE(SeesTurns(a, 2));
    EXPECT_TRUE(SeesTurns(b, 2));
  }  // each destructor unregisters from the loop while the other still ticks
}

TEST(LoopTickerTest, WithoutADeviceItDoesNothing) {
  LoopTicker ticker(nullptr);
  EXPECT_TRUE(SeesTurns(ticker, 0));
  EXPECT_FALSE(ticker.AwaitTurns(1, absl::Milliseconds(50)));
}

}  // namespace
}  // namespace manta::train
