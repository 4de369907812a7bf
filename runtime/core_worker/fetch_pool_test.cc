#include "runtime/core_worker/fetch_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/test_silent_port.h"
#include "gtest/gtest.h"

namespace manta::core {
namespace {

// A fetch whose owner never answers would hold its thread for a minute;
// Stop cancels it, runs the queued one already cancelled, and joins both.
TEST(FetchPoolTest, StopCancelsTheFetchInFlightAndFailsTheQueuedOnes) {
  rpc::SilentPort port;
  ASSERT_TRUE(port.ok());
  grpc::GenericStub stub(rpc::MakeChannel(port.address()));
  FetchPool pool(1);
  std::promise<void> started;
  std::promise<grpc::Status> first;
  std::promise<bool> second;
  ASSERT_TRUE(pool.Submit([&](rpc::CallCanceller* cancel) {
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    rpc::CallCanceller::Scope scope(cancel, &ctx);
    std::future<grpc::Status> call = rpc::StartSilentCall(&stub, &ctx, &reply);
    started.set_value();
    first.set_value(call.get());
  }));
  ASSERT_TRUE(pool.Submit([&](rpc::CallCanceller* cancel) { second.set_value(cancel->cancelled()); }));
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const absl::Time begin = absl::Now();
  pool.Stop();
  EXPECT_LT(absl::Now() - begin, absl::Seconds(30)) << "Stop waited for the call's deadline";
  EXPECT_EQ(first.get_future().get().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(second.get_future().get()) << "the queued fetch ran before Stop cancelled";
  bool ran = false;
  EXPECT_FALSE(pool.Submit([&](rpc::CallCanceller*) { ran = true; }));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace manta::core
