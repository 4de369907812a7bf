#include "common/rpc/rpc_chaos.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/rpc_chaos_interceptor.h"
#include "common/rpc/test_kv_server.h"
#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

constexpr char kPut[] = "/manta.rpc.InternalKvGcsService/Put";
constexpr char kGet[] = "/manta.rpc.InternalKvGcsService/Get";
constexpr char kWorkerKill[] = "/manta.rpc.CoreWorkerService/KillActor";
constexpr char kGcsKill[] = "/manta.rpc.ActorGcsService/KillActor";

std::vector<RpcFaultRule> Parse(const std::string& spec, std::vector<std::string>* errors) {
  return ParseRpcFaultSpec(spec, errors);
}

TEST(RpcFaultSpecTest, ParsesEntries) {
  std::vector<std::string> errors;
  auto rules = Parse(" RequestWorkerLease=3:25:25 , CoreWorkerService.KillActor=-1:0:100:250,*=0:10:0", &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].method, "RequestWorkerLease");
  EXPECT_EQ(rules[0].max_failures, 3);
  EXPECT_EQ(rules[0].request_percent, 25);
  EXPECT_EQ(rules[0].reply_percent, 25);
  EXPECT_EQ(rules[0].max_delay_ms, 0);
  EXPECT_EQ(rules[1].method, "CoreWorkerService.KillActor");
  EXPECT_EQ(rules[1].max_failures, -1);
  EXPECT_EQ(rules[1].reply_percent, 100);
  EXPECT_EQ(rules[1].max_delay_ms, 250);
  EXPECT_EQ(rules[2].method, "*");
}

TEST(RpcFaultSpecTest, BadEntriesAreReportedAndSkipped) {
  std::vector<std::string> errors;
  auto rules = Parse(
      "Good=1:50:50,NoEquals,=1:2:3,Bad Name=1:0:0,Few=1:2,Many=1:2:3:4:5,NotANumber=x:1:1,Negative=-2:0:0,"
      "TooLikely=1:60:50,Over=1:101:0,Slow=1:0:0:60001,Fine=2:0:0",
      &errors);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].method, "Good");
  EXPECT_EQ(rules[1].method, "Fine");
  EXPECT_EQ(errors.size(), 10u);
  for (const std::string& e : errors) EXPECT_FALSE(e.empty());
  EXPECT_NE(errors[0].find("NoEquals"), std::string::npos) << errors[0];
}

TEST(RpcFaultSpecTest, EmptyAndRepeatedEntries) {
  std::vector<std::string> errors;
  EXPECT_TRUE(Parse("", &errors).empty());
  EXPECT_TRUE(Parse(" , ,", &errors).empty());
  EXPECT_TRUE(errors.empty());
  auto rules = Parse("Put=1:0:0,Put=2:0:100", &errors);
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].max_failures, 2);
  EXPECT_EQ(rules[0].reply_percent, 100);
}

TEST(RpcChaosTest, MostSpecificRuleApplies) {
  std::vector<std::string> errors;
  RpcChaos chaos(Parse("KillActor=-1:100:0,CoreWorkerService.KillActor=-1:0:100,*=-1:0:0", &errors), 1);
  EXPECT_EQ(chaos.Decide(kWorkerKill).kind, RpcFault::kDropReply);
  EXPECT_EQ(chaos.Decide(kGcsKill).kind, RpcFault::kDropRequest);
  EXPECT_EQ(chaos.Decide(kPut).kind, RpcFault::kNone);  // "*" with 0 %
  EXPECT_TRUE(chaos.Covers(kPut));
  RpcChaos narrow(Parse("Put=1:100:0", &errors), 1);
  EXPECT_TRUE(narrow.Covers(kPut));
  EXPECT_FALSE(narrow.Covers(kGet));
  EXPECT_EQ(narrow.Decide(kGet).kind, RpcFault::kNone);
}

TEST(RpcChaosTest, MaxFailuresBoundsInjections) {
  std::vector<std::string> errors;
  RpcChaos chaos(Parse("Put=3:50:50", &errors), 7);
  int failed = 0;
  for (int i = 0; i < 100; ++i) failed += chaos.Decide(kPut).kind != RpcFault::kNone;
  EXPECT_EQ(failed, 3);
  EXPECT_EQ(chaos.num_injected(), 3);
  RpcChaos unlimited(Parse("Put=-1:100:0", &errors), 7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(unlimited.Decide(kPut).kind, RpcFault::kDropRequest);
}

TEST(RpcChaosTest, ProbabilitiesAreRoughlyKept) {
  std::vector<std::string> errors;
  RpcChaos chaos(Parse("Put=-1:30:20:100", &errors), 42);
  int requests = 0, replies = 0;
  for (int i = 0; i < 10000; ++i) {
    RpcFault f = chaos.Decide(kPut);
    requests += f.kind == RpcFault::kDropRequest;
    replies += f.kind == RpcFault::kDropReply;
    if (f.kind == RpcFault::kDropRequest) {
      EXPECT_EQ(f.delay, absl::ZeroDuration());
    }
    EXPECT_LE(f.delay, absl::Milliseconds(100));
  }
  EXPECT_NEAR(requests, 3000, 300);
  EXPECT_NEAR(replies, 2000, 300);
}

// Calls through a channel with the interceptor to a real server that counts
// what it handles.
class ChaosChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start().ok()); }

  std::unique_ptr<InternalKvGcsService::Stub> Stub(RpcChaos* chaos) {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(MakeRpcChaosInterceptorFactory(chaos));
    auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
        server_.address(), grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(interceptors));
    return InternalKvGcsService::NewStub(channel);
  }

  static grpc::Status SyncPut(InternalKvGcsService::Stub* stub) {
    grpc::ClientContext ctx;
    PrepareContext(&ctx, "", absl::Seconds(5));
    KvPutRequest req;
    req.set_key("k");
    KvPutReply reply;
    return stub->Put(&ctx, req, &reply);
  }

  static grpc::Status AsyncPut(InternalKvGcsService::Stub* stub) {
    grpc::ClientContext ctx;
    PrepareContext(&ctx, "", absl::Seconds(5));
    KvPutRequest req;
    req.set_key("k");
    KvPutReply reply;
    grpc::Status status;
    absl::Notification done;
    stub->async()->Put(&ctx, &req, &reply, [&](grpc::Status s) {
      status = s;
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

  testing::CountingKvServer server_;
};

TEST_F(ChaosChannelTest, DroppedRequestNeverReachesTheServer) {
  std::vector<std::string> errors;
  RpcChaos chaos(ParseRpcFaultSpec("Put=-1:100:0", &errors), 1);
  auto stub = Stub(&chaos);
  grpc::Status s = SyncPut(stub.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  s = AsyncPut(stub.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(server_.puts(), 0);
}

TEST_F(ChaosChannelTest, DroppedReplyRunsOnTheServer) {
  std::vector<std::string> errors;
  RpcChaos chaos(ParseRpcFaultSpec("Put=-1:0:100", &errors), 1);
  auto stub = Stub(&chaos);
  grpc::Status s = SyncPut(stub.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  s = AsyncPut(stub.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(server_.puts(), 2);
}

TEST_F(ChaosChannelTest, BudgetSpentThenCallsPass) {
  std::vector<std::string> errors;
  RpcChaos chaos(ParseRpcFaultSpec("Put=2:50:50", &errors), 3);
  auto stub = Stub(&chaos);
  EXPECT_FALSE(AsyncPut(stub.get()).ok());
  EXPECT_FALSE(AsyncPut(stub.get()).ok());
  EXPECT_TRUE(AsyncPut(stub.get()).ok());
  EXPECT_TRUE(SyncPut(stub.get()).ok());
}

TEST_F(ChaosChannelTest, DelayedCallsStillSucceed) {
  std::vector<std::string> errors;
  RpcChaos chaos(ParseRpcFaultSpec("Put=0:0:0:30", &errors), 5);
  auto stub = Stub(&chaos);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(AsyncPut(stub.get()).ok());
  EXPECT_TRUE(SyncPut(stub.get()).ok());
  EXPECT_EQ(server_.puts(), 11);
}

TEST_F(ChaosChannelTest, UncoveredMethodsAreUntouched) {
  std::vector<std::string> errors;
  RpcChaos chaos(ParseRpcFaultSpec("Get=-1:100:0", &errors), 1);
  auto stub = Stub(&chaos);
  EXPECT_TRUE(SyncPut(stub.get()).ok());
  EXPECT_TRUE(AsyncPut(stub.get()).ok());
  EXPECT_EQ(server_.puts(), 2);
}

}  // namespace
}  // namespace manta::rpc
