#include "common/rpc/call_canceller.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <string>

#include "common/rpc/grpc_util.h"
#include "common/rpc/test_silent_port.h"
#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

TEST(CallCancellerTest, CancelAllEndsACallInFlightAtOnce) {
  SilentPort port;
  ASSERT_TRUE(port.ok());
  grpc::GenericStub stub(MakeChannel(port.address()));
  CallCanceller canceller;
  grpc::ClientContext ctx;
  grpc::ByteBuffer reply;
  CallCanceller::Scope scope(&canceller, &ctx);
  std::future<grpc::Status> status = StartSilentCall(&stub, &ctx, &reply);
  // The port never answers: only the cancel can end the call before its
  // 60 s deadline, and only with CANCELLED.
  canceller.CancelAll();
  ASSERT_EQ(status.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(status.get().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(canceller.cancelled());
}

TEST(CallCancellerTest, ACallRegisteredAfterCancelAllIsCancelledAsItStarts) {
  SilentPort port;
  ASSERT_TRUE(port.ok());
  grpc::GenericStub stub(MakeChannel(port.address()));
  CallCanceller canceller;
  canceller.CancelAll();
  grpc::ClientContext ctx;
  grpc::ByteBuffer reply;
  CallCanceller::Scope scope(&canceller, &ctx);
  std::future<grpc::Status> status = StartSilentCall(&stub, &ctx, &reply);
  ASSERT_EQ(status.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(status.get().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace manta::rpc
