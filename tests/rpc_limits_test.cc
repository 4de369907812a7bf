// Malformed and oversized requests are refused with INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED, and the daemons keep serving.
#include <grpcpp/generic/generic_stub.h>

#include <future>
#include <limits>
#include <memory>

#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "node_manager.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

constexpr absl::Duration kLimitsTimeout = absl::Seconds(10);

rpc::RegisterNodeRequest ValidRegistration() {
  rpc::RegisterNodeRequest req;
  rpc::NodeInfo* n = req.mutable_node_info();
  n->set_node_id(NodeId::FromRandom().Binary());
  n->set_node_ip("127.0.0.1");
  n->set_node_manager_port(1);
  (*n->mutable_resources_total())["CPU"] = 1;
  return req;
}

class RpcLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MANTA_ASSERT_OK(cluster_.StartHead());
    channel_ = UnlimitedChannel(cluster_.gcs_address());
    nodes_ = rpc::NodeInfoGcsService::NewStub(channel_);
  }

  grpc::Status Register(const rpc::RegisterNodeRequest& req) {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_.token(), kLimitsTimeout);
    rpc::RegisterNodeReply reply;
    return nodes_->RegisterNode(&ctx, req, &reply);
  }

  void ExpectStillServing() {
    auto id = cluster_.GetClusterId();
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(cluster_.CountNodes(rpc::NodeInfo::ALIVE), 1) << "a refused request registered a node";
  }

  Cluster cluster_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes_;
};

TEST_F(RpcLimitsTest, InvalidRegistrationsAreInvalidArgument) {
  struct Case {
    const char* what;
    std::function<void(rpc::RegisterNodeRequest*)> mutate;
  };
  std::vector<Case> cases = {
      {"short node id", [](auto* r) { r->mutable_node_info()->set_node_id("abc"); }},
      {"empty node id", [](auto* r) { r->mutable_node_info()->clear_node_id(); }},
      {"NaN quantity", [](auto* r) { (*r->mutable_node_info()->mutable_resources_total())["CPU"] = std::nan(""); }},
      {"negative quantity", [](auto* r) { (*r->mutable_node_info()->mutable_resources_total())["CPU"] = -1; }},
      {"infinite quantity",
       [](auto* r) {
         (*r->mutable_node_info()->mutable_resources_total())["CPU"] = std::numeric_limits<double>::infinity();
       }},
      {"absurd quantity", [](auto* r) { (*r->mutable_node_info()->mutable_resources_total())["CPU"] = 1e300; }},
      {"bad resource name", [](auto* r) { (*r->mutable_node_info()->mutable_resources_total())["a b"] = 1; }},
      {"bad port", [](auto* r) { r->mutable_node_info()->set_node_manager_port(-5); }},
  };
  for (const Case& c : cases) {
    rpc::RegisterNodeRequest req = ValidRegistration();
    c.mutate(&req);
    grpc::Status s = Register(req);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what << ": " << s.error_message();
  }
  ExpectStillServing();
}

TEST_F(RpcLimitsTest, InvalidResourceReportIsInvalidArgument) {
  auto stub = rpc::NodeResourceGcsService::NewStub(channel_);
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, cluster_.token(), kLimitsTimeout);
  rpc::ReportResourcesRequest req;
  req.mutable_resources()->set_node_id(FromHex(cluster_.raylet(0).node_id).value());
  (*req.mutable_resources()->mutable_total())["CPU"] = std::nan("");
  (*req.mutable_resources()->mutable_available())["CPU"] = -3;
  rpc::ReportResourcesReply reply;
  grpc::Status s = stub->ReportResources(&ctx, req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  ExpectStillServing();
}

TEST_F(RpcLimitsTest, LogFlushForAMalformedJobIsInvalidArgument) {
  auto raylet =
      rpc::NodeManagerService::NewStub(UnlimitedChannel("127.0.0.1:" + std::to_string(cluster_.raylet(0).port)));
  auto flush = [&](const std::string& job_id) {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_.token(), kLimitsTimeout);
    rpc::FlushJobLogsRequest req;
    req.set_job_id(job_id);
    rpc::FlushJobLogsReply reply;
    return raylet->FlushJobLogs(&ctx, req, &reply);
  };
  grpc::Status s = flush("abc");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("job_id"), std::string::npos) << s.error_message();
  // A job with no workers here has nothing to wait for.
  s = flush(std::string(JobId::kSize, '\x7f'));
  EXPECT_TRUE(s.ok()) << s.error_message();
  ExpectStillServing();
}

TEST_F(RpcLimitsTest, OversizedRequestsAreResourceExhausted) {
  auto kv = rpc::InternalKvGcsService::NewStub(channel_);
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, cluster_.token(), kLimitsTimeout);
  rpc::KvPutRequest req;
  req.set_ns("test");
  req.set_key("huge");
  req.set_value(std::string(rpc::kMaxMessageBytes + 1024, 'x'));
  rpc::KvPutReply reply;
  grpc::Status s = kv->Put(&ctx, req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  auto raylet =
      rpc::NodeManagerService::NewStub(UnlimitedChannel("127.0.0.1:" + std::to_string(cluster_.raylet(0).port)));
  grpc::ClientContext ctx2;
  rpc::PrepareContext(&ctx2, cluster_.token(), kLimitsTimeout);
  rpc::HealthCheckRequest hc;
  hc.set_gcs_incarnation(std::string(rpc::kMaxMessageBytes + 1024, 'x'));
  rpc::HealthCheckReply hc_reply;
  s = raylet->HealthCheck(&ctx2, hc, &hc_reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  ExpectStillServing();
  grpc::ClientContext ctx3;
  rpc::PrepareContext(&ctx3, cluster_.token(), kLimitsTimeout);
  s = raylet->HealthCheck(&ctx3, rpc::HealthCheckRequest(), &hc_reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(RpcLimitsTest, UnparsableBytesAreRefused) {
  grpc::GenericStub generic(channel_);
  const char garbage[] = "\xff\xff\xff\xff\x0f\x08";
  grpc::Slice slice(garbage, sizeof(garbage) - 1);
  grpc::ByteBuffer request(&slice, 1);
  for (const char* method : {"/manta.rpc.NodeInfoGcsService/RegisterNode", "/manta.rpc.InternalKvGcsService/Put"}) {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_.token(), kLimitsTimeout);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&done](grpc::Status s) { done.set_value(std::move(s)); });
    grpc::Status s = done.get_future().get();
    // Bytes that are not the method's message never reach a handler: gRPC's
    // callback API refuses them itself, with UNIMPLEMENTED and no message.
    EXPECT_FALSE(s.ok()) << method;
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT || s.error_code() == grpc::StatusCode::INTERNAL ||
                s.error_code() == grpc::StatusCode::UNIMPLEMENTED)
        << method << ": " << s.error_code() << " " << s.error_message();
  }
  ExpectStillServing();
}

}  // namespace
}  // namespace manta::testing
