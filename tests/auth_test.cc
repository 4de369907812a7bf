// Every gRPC call to the GCS and to a raylet needs the cluster token: a
// missing or wrong one gets UNAUTHENTICATED and changes nothing.
#include <memory>

#include "absl/strings/match.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "common/token.h"
#include "gcs_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "node_manager.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(5);

// Runs `call` with a context carrying `token` (none when empty).
template <typename Fn>
grpc::StatusCode CallWith(const std::string& token, Fn call) {
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, token, kTimeout);
  return call(&ctx).error_code();
}

// The stubs a caller without the right token tries.
struct Stubs {
  std::unique_ptr<rpc::NodeInfoGcsService::Stub> nodes;
  std::unique_ptr<rpc::NodeResourceGcsService::Stub> resources;
  std::unique_ptr<rpc::InternalKvGcsService::Stub> kv;
  std::unique_ptr<rpc::PubSubGcsService::Stub> pubsub;
  std::unique_ptr<rpc::NodeManagerService::Stub> raylet;
};

// Every call, read or write, to the GCS and to a raylet is refused with
// `token`; `victim_id` is the node a write would change.
void ExpectEveryCallRefused(const Stubs& stubs, const std::string& token, const std::string& victim_id) {
  const auto& nodes = stubs.nodes;
  const auto& resources = stubs.resources;
  const auto& kv = stubs.kv;
  const auto& pubsub = stubs.pubsub;
  const auto& raylet = stubs.raylet;
  const auto kUnauth = grpc::StatusCode::UNAUTHENTICATED;
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::GetClusterIdReply r;
                       return nodes->GetClusterId(c, rpc::GetClusterIdRequest(), &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::GetAllNodeInfoReply r;
                       return nodes->GetAllNodeInfo(c, rpc::GetAllNodeInfoRequest(), &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::RegisterNodeRequest req;
                       req.mutable_node_info()->set_node_id(NodeId::FromRandom().Binary());
                       req.mutable_node_info()->set_node_ip("127.0.0.1");
                       req.mutable_node_info()->set_node_manager_port(1);
                       rpc::RegisterNodeReply r;
                       return nodes->RegisterNode(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::UnregisterNodeRequest req;
                       req.set_node_id(victim_id);
                       req.set_reason("attack");
                       rpc::UnregisterNodeReply r;
                       return nodes->UnregisterNode(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::ReportResourcesRequest req;
                       req.mutable_resources()->set_node_id(victim_id);
                       (*req.mutable_resources()->mutable_total())["CPU"] = 1000;
                       req.mutable_resources()->set_version(1 << 30);
                       rpc::ReportResourcesReply r;
                       return resources->ReportResources(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::GetClusterResourcesReply r;
                       return resources->GetClusterResources(c, rpc::GetClusterResourcesRequest(), &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::KvPutRequest req;
                       req.set_ns("test");
                       req.set_key("intruder");
                       req.set_value("x");
                       rpc::KvPutReply r;
                       return kv->Put(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::KvGetRequest req;
                       req.set_ns("test");
                       req.set_key("intruder");
                       rpc::KvGetReply r;
                       return kv->Get(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::PollRequest req;
                       req.set_max_wait_ms(10);
                       rpc::PollReply r;
                       return pubsub->Poll(c, req, &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::HealthCheckReply r;
                       return raylet->HealthCheck(c, rpc::HealthCheckRequest(), &r);
                     }),
            kUnauth);
  EXPECT_EQ(CallWith(token,
                     [&](grpc::ClientContext* c) {
                       rpc::GetNodeStatsReply r;
                       return raylet->GetNodeStats(c, rpc::GetNodeStatsRequest(), &r);
                     }),
            kUnauth);
}

TEST(AuthTest, MissingOrWrongTokenIsRefusedByGcsAndRayletAndChangesNothing) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  auto worker = cluster.AddRaylet();
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto before = cluster.GetAllNodeInfo();
  ASSERT_TRUE(before.ok());

  auto gcs_channel = rpc::MakeChannel(cluster.gcs_address());
  auto nodes = rpc::NodeInfoGcsService::NewStub(gcs_channel);
  auto resources = rpc::NodeResourceGcsService::NewStub(gcs_channel);
  auto kv = rpc::InternalKvGcsService::NewStub(gcs_channel);
  auto pubsub = rpc::PubSubGcsService::NewStub(gcs_channel);
  auto raylet =
      rpc::NodeManagerService::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(cluster.raylet(*worker).port)));
  ASSERT_GT(cluster.raylet(*worker).port, 0);
  auto victim_id = FromHex(cluster.raylet(*worker).node_id);
  ASSERT_TRUE(victim_id.ok());

  std::string wrong = GenerateToken();
  ASSERT_NE(wrong, cluster.token());
  Stubs stubs{std::move(nodes), std::move(resources), std::move(kv), std::move(pubsub), std::move(raylet)};
  for (const std::string& token : {std::string(), wrong, std::string("not-even-hex")}) {
    SCOPED_TRACE(token.empty() ? "missing token" : "token " + token);
    ExpectEveryCallRefused(stubs, token, *victim_id);
  }

  // The right token works, and nothing changed.
  EXPECT_EQ(CallWith(cluster.token(),
                     [&](grpc::ClientContext* c) {
                       rpc::GetNodeStatsReply r;
                       return stubs.raylet->GetNodeStats(c, rpc::GetNodeStatsRequest(), &r);
                     }),
            grpc::StatusCode::OK);
  auto value = cluster.KvGet("test", "intruder");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_FALSE(value->has_value());
  auto after = cluster.GetAllNodeInfo();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->nodes_size(), before->nodes_size());
  for (const auto& n : after->nodes()) EXPECT_EQ(n.state(), rpc::NodeInfo::ALIVE) << ToHex(n.node_id());
  auto view = cluster.GetClusterResources();
  ASSERT_TRUE(view.ok());
  for (const auto& n : view->nodes()) EXPECT_LT(n.total().at("CPU"), 1000);

  // The CLI says so in one line.
  CommandResult status = cluster.RunManta({"status", "--address=" + cluster.gcs_address()}, {{"MANTA_TOKEN", wrong}});
  EXPECT_NE(status.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(status.err, "manta: error: ")) << status.err;
  EXPECT_TRUE(absl::StrContains(status.err, "refused")) << status.err;
  EXPECT_EQ(std::count(status.err.begin(), status.err.end(), '\n'), 1) << status.err;
}

}  // namespace
}  // namespace manta::testing
