#include "common/rpc/grpc_util.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

TEST(PrepareContextTest, AnUnboundedWaitGetsADeadlineInTheFuture) {
  using std::chrono::hours;
  const auto now = std::chrono::system_clock::now();
  for (absl::Duration d : {absl::InfiniteDuration(), absl::Hours(24 * 365 * 1000), absl::Seconds(1) + absl::InfiniteDuration()}) {
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

}  // namespace
}  // namespace manta::rpc
