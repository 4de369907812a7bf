#include "common/rpc/grpc_util.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "absl/time/clock.h"
#include "common/process.h"
#include "common/rpc/tsan_handoff.h"

#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

TEST(PrepareContextTest, AnUnboundedWaitGetsADeadlineInTheFuture) {
  using std::chrono::hours;
  const auto now = std::chrono::system_clock::now();
  for (absl::Duration d :
       {absl::InfiniteDuration(), absl::Hours(24 * 365 * 1000), absl::Seconds(1) + absl::InfiniteDuration()}) {
    grpc::ClientContext ctx;
    PrepareContext(&ctx, "", d);
    EXPECT_GT(ctx.deadline(), now + hours(24 * 300));
  }
  grpc::ClientContext ctx;
  PrepareContext(&ctx, "", absl::Seconds(5));
  EXPECT_GT(ctx.deadline(), now);
  EXPECT_LT(ctx.deadline(), now + hours(1));
  grpc::ClientContext negative;
  PrepareContext(&negative, "", -absl::Seconds(5));
  EXPECT_LE(negative.deadline(), std::chrono::system_clock::now() + hours(1));
}

// A client whose last reference goes with its call's completion is
// destroyed on gRPC's callback thread, as a core worker's clients are at
// shutdown. That must not shut down the queue the thread serves (gRPC would
// free it under the thread: see AnchorCallbackQueue in grpc_util.cc); later
// callback calls still complete.
TEST(MakeChannelTest, AChannelReleasedInItsOwnCompletionLeavesCallbacksWorking) {
  struct Call {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer reply;
  };
  std::atomic<int> completed{0};
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    auto call = std::make_shared<Call>();
    call->channel = MakeChannel("unix:/nonexistent/manta-grpc-util-test");
    call->stub = std::make_unique<grpc::GenericStub>(call->channel);
    call->context.set_deadline(std::chrono::system_clock::now());
    grpc::Slice empty("");
    call->request = grpc::ByteBuffer(&empty, 1);
    Call* raw = call.get();
    MANTA_GRPC_HANDOFF_BEFORE();
    raw->stub->UnaryCall(&raw->context, "/manta.Test/None", grpc::StubOptions(), &raw->request, &raw->reply,
                         [call = std::move(call), &completed](grpc::Status) mutable {
                           MANTA_GRPC_HANDOFF_AFTER();
                           std::shared_ptr<Call> last = std::move(call);
                           completed.fetch_add(1);
                           last.reset();  // the channel goes here, on the callback thread
                         });
    ASSERT_TRUE(PollUntil([&] { return completed.load() > i; }, absl::Now() + absl::Seconds(10)))
        << "round " << i << " never completed";
    ASSERT_EQ(completed.load(), i + 1);
  }
}

}  // namespace
}  // namespace manta::rpc
