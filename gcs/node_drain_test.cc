// DrainNode on the GCS: the node table marks, persists and publishes a
// drain, tells the raylet, refuses bad requests without changing anything,
// and the actor and placement-group schedulers place nothing new on a
// draining node.
#include "absl/time/clock.h"
#include "gcs/actor_scheduler.h"
#include "gcs/fake_core_worker_client.h"
#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/node_manager.h"
#include "gcs/placement_group_scheduler.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"
#include "common/clock.h"

namespace manta::gcs {
namespace {

rpc::NodeInfo MakeDrainNode(NodeId id, double cpus = 2) {
  rpc::NodeInfo n;
  n.set_node_id(id.Binary());
  n.set_node_ip("127.0.0.1");
  n.set_node_manager_port(7000);
  (*n.mutable_resources_total())["CPU"] = cpus;
  return n;
}

rpc::DrainNodeRequest Drain(const NodeId& id, const std::string& reason = "preemption", int64_t deadline_ms = 0) {
  rpc::DrainNodeRequest r;
  r.set_node_id(id.Binary());
  r.set_reason(reason);
  r.set_deadline_ms(deadline_ms);
  return r;
}

class NodeDrainTest : public ::testing::Test {
 protected:
  NodeDrainTest() {
    manager_->AddNodeDrainingListener([this](const rpc::NodeInfo& n) { drained_.push_back(n); });
  }

  absl::Status Register(const rpc::NodeInfo& n) {
    rpc::RegisterNodeRequest req;
    *req.mutable_node_info() = n;
    rpc::RegisterNodeReply reply;
    absl::Status result = absl::UnknownError("no reply");
    manager_->HandleRegisterNode(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    return result;
  }

  absl::StatusOr<rpc::DrainNodeReply> Send(const rpc::DrainNodeRequest& req) {
    rpc::DrainNodeReply reply;
    absl::Status result = absl::UnknownError("no reply");
    manager_->HandleDrainNode(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    if (!result.ok()) return result;
    return reply;
  }

  // Every NodeInfo published on NODE_INFO, in order.
  std::vector<rpc::NodeInfo> Published() {
    rpc::PollRequest req;
    req.add_channels(rpc::PubMessage::NODE_INFO);
    rpc::PollReply reply;
    pub_.HandlePoll(req, &reply, [](const absl::Status&) {});
    std::vector<rpc::NodeInfo> out;
    reply = AsReceived(reply);
    for (const auto& m : reply.messages()) out.push_back(m.node_info());
    return out;
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeRayletClientPool raylets_;
  ClusterId cluster_ = ClusterId::FromRandom();
  std::unique_ptr<NodeManager> manager_ = std::make_unique<NodeManager>(&store_, &pub_, cluster_, "inc", &raylets_);
  std::vector<rpc::NodeInfo> drained_;  // seen by the draining listener
};

TEST_F(NodeDrainTest, DrainIsPublishedPersistedAndSentToTheRaylet) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(MakeDrainNode(id)).ok());
  int64_t deadline = NowUnixMs() + 30000;
  auto reply = Send(Drain(id, "preemption", deadline));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->accepted());

  const rpc::NodeInfo* alive = manager_->GetAliveNode(id);
  ASSERT_NE(alive, nullptr);
  EXPECT_EQ(alive->state(), rpc::NodeInfo::ALIVE);
  EXPECT_TRUE(alive->draining());
  EXPECT_EQ(alive->drain_reason(), "preemption");
  EXPECT_EQ(alive->drain_deadline_ms(), deadline);

  auto published = Published();
  ASSERT_EQ(published.size(), 2u);  // registered, then draining
  EXPECT_TRUE(published[1].draining());
  EXPECT_EQ(published[1].state(), rpc::NodeInfo::ALIVE);
  ASSERT_EQ(drained_.size(), 1u);
  EXPECT_TRUE(drained_[0].draining());

  ASSERT_EQ(raylets_.drains.size(), 1u);
  EXPECT_EQ(raylets_.drains[0].node, id);
  EXPECT_EQ(raylets_.drains[0].address, "127.0.0.1:7000");
  EXPECT_EQ(raylets_.drains[0].request.reason(), "preemption");
  EXPECT_EQ(raylets_.drains[0].request.deadline_ms(), deadline);

  // A restarted GCS reads the drain back, and a re-registering raylet that
  // does not mention it keeps it.
  manager_ = std::make_unique<NodeManager>(&store_, &pub_, cluster_, "inc2", &raylets_);
  std::vector<rpc::NodeInfo> announced;
  manager_->AddNodeAddedListener([&](const rpc::NodeInfo& n) { announced.push_back(n); });
  ASSERT_TRUE(manager_->Initialize().ok());
  ASSERT_EQ(announced.size(), 1u);
  EXPECT_TRUE(announced[0].draining());
  ASSERT_TRUE(Register(MakeDrainNode(id)).ok());
  EXPECT_TRUE(manager_->GetAliveNode(id)->draining());
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), deadline);
}

TEST_F(NodeDrainTest, RepeatedDrainOnlyMovesTheDeadlineEarlier) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(MakeDrainNode(id)).ok());
  int64_t now = NowUnixMs();
  ASSERT_TRUE(Send(Drain(id, "idle", 0)).ok());
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), 0);
  ASSERT_TRUE(Send(Drain(id, "preemption", now + 60000)).ok());  // none -> 60 s: earlier
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), now + 60000);
  uint64_t sent = raylets_.drains.size();
  ASSERT_TRUE(Send(Drain(id, "preemption", now + 90000)).ok());  // later: kept
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), now + 60000);
  EXPECT_EQ(raylets_.drains.size(), sent);              // nothing changed: nothing sent
  ASSERT_TRUE(Send(Drain(id, "maintenance", 0)).ok());  // none: kept
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), now + 60000);
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_reason(), "maintenance");
  ASSERT_TRUE(Send(Drain(id, "preemption", now + 10000)).ok());
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_deadline_ms(), now + 10000);
  EXPECT_EQ(raylets_.drains.size(), 4u);
  EXPECT_EQ(raylets_.drains.back().request.deadline_ms(), now + 10000);
}

TEST_F(NodeDrainTest, BadRequestsChangeNothing) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(MakeDrainNode(id)).ok());
  const int64_t sequence = pub_.last_sequence();
  auto code = [&](const rpc::DrainNodeRequest& r) { return Send(r).status().code(); };

  rpc::DrainNodeRequest bad = Drain(id);
  bad.set_node_id("short");
  EXPECT_EQ(code(bad), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Drain(id, "")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Drain(id, std::string(257, 'x'))), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Send(Drain(id, std::string(256, 'x'), 0)).ok());  // the limit itself is fine
  EXPECT_EQ(code(Drain(id, "bad \xff utf-8")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Drain(id, "preemption", -5)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Drain(id, "preemption", NowUnixMs() - 60000)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Drain(NodeId::FromRandom())), absl::StatusCode::kNotFound);

  // Only the one valid drain went through.
  EXPECT_EQ(pub_.last_sequence(), sequence + 1);
  EXPECT_EQ(raylets_.drains.size(), 1u);
  EXPECT_EQ(drained_.size(), 1u);
  EXPECT_EQ(manager_->GetAliveNode(id)->drain_reason(), std::string(256, 'x'));

  // A deadline a moment in the past is within the clock slack.
  EXPECT_TRUE(Send(Drain(id, "preemption", NowUnixMs() - 200)).ok());
}

TEST_F(NodeDrainTest, ValidationMessagesNameTheField) {
  int64_t now = 1'000'000;
  rpc::DrainNodeRequest r = Drain(NodeId::FromRandom(), "", 0);
  EXPECT_NE(ValidateDrainRequest(r, now).message().find("reason"), std::string_view::npos);
  r = Drain(NodeId::FromRandom(), "preemption", now - 5000);
  EXPECT_NE(ValidateDrainRequest(r, now).message().find("in the past"), std::string_view::npos);
  r = Drain(NodeId::FromRandom(), "preemption", now - NodeManager::kDeadlineSlackMs);
  EXPECT_TRUE(ValidateDrainRequest(r, now).ok());
  r.set_node_id("x");
  EXPECT_NE(ValidateDrainRequest(r, now).message().find("node_id"), std::string_view::npos);
}

TEST_F(NodeDrainTest, DeadNodeIsRejectedWithTheReason) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(Register(MakeDrainNode(id)).ok());
  manager_->MarkNodeDead(id, "NodeTerminated: health check failed", false);
  Pump(loop_);
  const int64_t sequence = pub_.last_sequence();
  auto reply = Send(Drain(id));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_FALSE(reply->accepted());
  EXPECT_NE(reply->rejection_reason().find("dead"), std::string::npos) << reply->rejection_reason();
  EXPECT_NE(reply->rejection_reason().find("health check failed"), std::string::npos);
  EXPECT_EQ(pub_.last_sequence(), sequence);
  EXPECT_TRUE(raylets_.drains.empty());
}

TEST(DrainSchedulingTest, ActorSchedulerSkipsADrainingNode) {
  FakeRayletClientPool raylets;
  FakeCoreWorkerClientPool workers;
  FakeTimers timers;
  ActorScheduler scheduler([](const NodeId&) -> const rpc::NodeResources* { return nullptr; }, &raylets, &workers,
                           timers.RunAfter());
  NodeId draining = NodeId::FromRandom();
  rpc::NodeInfo info = MakeDrainNode(draining, 4);
  scheduler.OnNodeAdded(info);
  info.set_draining(true);
  info.set_drain_reason("preemption");
  scheduler.OnNodeDraining(info);

  rpc::TaskSpec spec;
  spec.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  ActorId actor = ActorId::FromRandom();
  spec.set_actor_id(actor.Binary());
  (*spec.mutable_resources())["CPU"] = 1;
  scheduler.Schedule(actor, spec, [](ActorCreationResult) {});
  EXPECT_TRUE(raylets.leases.empty()) << "leased on a draining node";
  rpc::GetClusterResourcesReply demands;
  scheduler.AppendDemands(&demands);
  ASSERT_EQ(demands.demands_size(), 1);  // waits for another node

  NodeId other = NodeId::FromRandom();
  scheduler.OnNodeAdded(MakeDrainNode(other, 4));
  ASSERT_EQ(raylets.leases.size(), 1u);
  EXPECT_EQ(raylets.leases.front().node, other);
}

TEST(DrainSchedulingTest, PlacementGroupSchedulerSkipsADrainingNode) {
  FakeRayletClientPool raylets;
  PlacementGroupScheduler scheduler([](const NodeId&) -> const rpc::NodeResources* { return nullptr; },
                                    [](const rpc::NodeResources&) {}, &raylets);
  NodeId draining = NodeId::FromRandom();
  NodeId other = NodeId::FromRandom();
  for (const NodeId& id : {draining, other}) {
    scheduler.OnNodeAdded(MakeDrainNode(id, 4));
    scheduler.MarkSynced(id);
  }
  rpc::NodeInfo info = MakeDrainNode(draining, 4);
  info.set_draining(true);
  scheduler.OnNodeDraining(info);

  rpc::PlacementGroupInfo group;
  group.set_placement_group_id(PlacementGroupId::FromRandom().Binary());
  group.set_strategy(rpc::PlacementGroupInfo::SPREAD);
  for (int i = 0; i < 2; ++i) {
    rpc::Bundle* b = group.add_bundles();
    b->set_index(i);
    (*b->mutable_resources())["CPU"] = 1;
  }
  PlacementResult choice = scheduler.Choose(group);
  ASSERT_EQ(choice.outcome, PlacementResult::kCreated) << choice.message;
  for (const auto& [index, node] : choice.nodes) EXPECT_EQ(node, other) << "bundle " << index;

  group.set_strategy(rpc::PlacementGroupInfo::STRICT_SPREAD);
  choice = scheduler.Choose(group);
  EXPECT_EQ(choice.outcome, PlacementResult::kNoFit);
  EXPECT_TRUE(choice.infeasible);
}

}  // namespace
}  // namespace manta::gcs
