#include "gcs/node_manager.h"

#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

rpc::NodeInfo MakeNode(NodeId id) {
  rpc::NodeInfo n;
  n.set_node_id(id.Binary());
  n.set_node_ip("127.0.0.1");
  n.set_node_manager_port(7000);
  (*n.mutable_resources_total())["CPU"] = 2;
  return n;
}

class NodeManagerTest : public ::testing::Test {
 protected:
  absl::Status Register(NodeManager& m, const rpc::NodeInfo& n, const std::string& cluster = "") {
    rpc::RegisterNodeRequest req;
    *req.mutable_node_info() = n;
    req.set_cluster_id(cluster);
    rpc::RegisterNodeReply reply;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleRegisterNode(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    return result;
  }
  std::vector<rpc::NodeInfo> All(NodeManager& m) {
    rpc::GetAllNodeInfoReply reply;
    m.HandleGetAllNodeInfo({}, &reply, [](const absl::Status&) {});
    return {reply.nodes().begin(), reply.nodes().end()};
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  ClusterId cluster_ = ClusterId::FromRandom();
};

TEST_F(NodeManagerTest, RegisterIsIdempotentAndPublishes) {
  NodeManager m(&store_, &pub_, cluster_, "inc");
  int added = 0;
  m.AddNodeAddedListener([&](const rpc::NodeInfo&) { ++added; });
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(m, MakeNode(id)).ok());
  // The same registration again (a retry whose reply was lost): no change.
  ASSERT_TRUE(Register(m, MakeNode(id), cluster_.Binary()).ok());
  EXPECT_EQ(m.num_alive(), 1u);
  EXPECT_EQ(added, 1);
  EXPECT_EQ(pub_.last_sequence(), 1);
  // A registration that says something new is taken, and told.
  rpc::NodeInfo changed = MakeNode(id);
  (*changed.mutable_labels())["zone"] = "b";
  ASSERT_TRUE(Register(m, changed, cluster_.Binary()).ok());
  EXPECT_EQ(m.num_alive(), 1u);
  EXPECT_EQ(added, 2);
  EXPECT_EQ(pub_.last_sequence(), 2);
}

TEST_F(NodeManagerTest, RejectsBadInputWithoutChangingAnything) {
  NodeManager m(&store_, &pub_, cluster_, "inc");
  rpc::NodeInfo bad = MakeNode(NodeId::FromRandom());
  (*bad.mutable_resources_total())["CPU"] = -1;
  EXPECT_EQ(Register(m, bad).code(), absl::StatusCode::kInvalidArgument);
  bad = MakeNode(NodeId::FromRandom());
  bad.set_node_id("short");
  EXPECT_EQ(Register(m, bad).code(), absl::StatusCode::kInvalidArgument);
  bad = MakeNode(NodeId::FromRandom());
  bad.set_node_manager_port(70000);
  EXPECT_EQ(Register(m, bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Register(m, MakeNode(NodeId::FromRandom()), ClusterId::FromRandom().Binary()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.num_alive(), 0u);
  EXPECT_EQ(pub_.last_sequence(), 0);
}

TEST_F(NodeManagerTest, DeadNodeStaysDeadAndIsRecovered) {
  NodeId id = NodeId::FromRandom();
  NodeId alive = NodeId::FromRandom();
  {
    NodeManager m(&store_, &pub_, cluster_, "inc");
    ASSERT_TRUE(Register(m, MakeNode(id)).ok());
    ASSERT_TRUE(Register(m, MakeNode(alive)).ok());
    m.MarkNodeDead(id, "NodeTerminated: test", false);
    Pump(loop_);
    EXPECT_EQ(Register(m, MakeNode(id)).code(), absl::StatusCode::kFailedPrecondition);
  }
  // A new manager over the same store: what a restarted GCS sees.
  NodeManager recovered(&store_, &pub_, cluster_, "inc2");
  std::vector<std::string> announced;
  recovered.AddNodeAddedListener([&](const rpc::NodeInfo& n) { announced.push_back(n.node_id()); });
  ASSERT_TRUE(recovered.Initialize().ok());
  EXPECT_EQ(recovered.num_alive(), 1u);
  ASSERT_EQ(announced.size(), 1u);
  EXPECT_EQ(announced[0], alive.Binary());
  auto all = All(recovered);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].state(), rpc::NodeInfo::DEAD);
  EXPECT_EQ(all[1].death_reason(), "NodeTerminated: test");
  EXPECT_EQ(Register(recovered, MakeNode(id)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(NodeManagerTest, UnregisterIsExpectedDeath) {
  NodeManager m(&store_, &pub_, cluster_, "inc");
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(m, MakeNode(id)).ok());
  rpc::UnregisterNodeRequest req;
  req.set_node_id(id.Binary());
  rpc::UnregisterNodeReply reply;
  absl::Status result = absl::UnknownError("");
  m.HandleUnregisterNode(req, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_TRUE(result.ok());
  auto all = All(m);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].death_expected());
  EXPECT_EQ(m.num_alive(), 0u);
}

TEST_F(NodeManagerTest, RequestsWithAMalformedNodeIdAreInvalidArgument) {
  NodeManager m(&store_, &pub_, cluster_, "inc");
  ASSERT_TRUE(Register(m, MakeNode(NodeId::FromRandom())).ok());
  for (const std::string& bad : {std::string(), std::string("short"), std::string(NodeId::kSize + 1, 'x')}) {
    rpc::UnregisterNodeRequest unregister;
    unregister.set_node_id(bad);
    rpc::UnregisterNodeReply unregistered;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleUnregisterNode(unregister, &unregistered, [&](const absl::Status& s) { result = s; });
    EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument) << result;
    EXPECT_NE(result.message().find("node_id must be 28 bytes"), absl::string_view::npos) << result;

    rpc::DrainNodeRequest drain;
    drain.set_node_id(bad);
    drain.set_reason("preemption");
    rpc::DrainNodeReply drained;
    result = absl::UnknownError("no reply");
    m.HandleDrainNode(drain, &drained, [&](const absl::Status& s) { result = s; });
    EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument) << result;
    EXPECT_NE(result.message().find("node_id must be 28 bytes"), absl::string_view::npos) << result;
  }
  Pump(loop_);
  EXPECT_EQ(m.num_alive(), 1u);
  EXPECT_EQ(pub_.last_sequence(), 1);
}

// The listeners take a node's id as valid: a stored row whose NodeInfo
// does not carry its key's id is never announced.
TEST_F(NodeManagerTest, RecoverySkipsARowWhoseNodeIdIsNotItsKey) {
  NodeId good = NodeId::FromRandom();
  rpc::NodeInfo corrupt = MakeNode(NodeId::FromRandom());
  corrupt.set_node_id("short");
  store_.Put(NodeManager::kTable, NodeId::FromRandom().Binary(), corrupt.SerializeAsString(), nullptr);
  store_.Put(NodeManager::kTable, good.Binary(), MakeNode(good).SerializeAsString(), nullptr);
  Pump(loop_);
  NodeManager m(&store_, &pub_, cluster_, "inc");
  std::vector<std::string> announced;
  m.AddNodeAddedListener([&](const rpc::NodeInfo& n) { announced.push_back(n.node_id()); });
  ASSERT_TRUE(m.Initialize().ok());
  EXPECT_EQ(m.num_alive(), 1u);
  ASSERT_EQ(announced.size(), 1u);
  EXPECT_EQ(announced[0], good.Binary());
}

TEST_F(NodeManagerTest, ABriefListHasEachNodeWithoutItsLabelsAndResources) {
  NodeManager m(&store_, &pub_, cluster_, "inc");
  rpc::NodeInfo n = MakeNode(NodeId::FromRandom());
  (*n.mutable_labels())["zone"] = "a";
  n.set_node_name("host-a");
  n.set_is_head(true);
  n.set_pid(42);
  ASSERT_TRUE(Register(m, n).ok());
  rpc::GetAllNodeInfoRequest brief;
  brief.set_brief(true);
  rpc::GetAllNodeInfoReply reply;
  m.HandleGetAllNodeInfo(brief, &reply, [](const absl::Status&) {});
  ASSERT_EQ(reply.nodes_size(), 1);
  const rpc::NodeInfo& b = reply.nodes(0);
  EXPECT_TRUE(b.labels().empty());
  EXPECT_TRUE(b.resources_total().empty());
  const rpc::NodeInfo full = All(m).at(0);
  EXPECT_FALSE(full.labels().empty());
  for (const rpc::NodeInfo* x : {&b, &full}) {
    EXPECT_EQ(x->node_id(), n.node_id());
    EXPECT_EQ(x->node_ip(), "127.0.0.1");
    EXPECT_EQ(x->node_name(), "host-a");
    EXPECT_TRUE(x->is_head());
    EXPECT_EQ(x->pid(), 42);
    EXPECT_EQ(x->state(), rpc::NodeInfo::ALIVE);
    EXPECT_EQ(x->start_time_ms(), full.start_time_ms());
  }
}

}  // namespace
}  // namespace manta::gcs
