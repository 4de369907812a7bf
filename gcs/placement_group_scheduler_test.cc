#include "gcs/placement_group_scheduler.h"

#include <optional>
#include <set>

#include "gcs/fake_raylet_client.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using Info = rpc::PlacementGroupInfo;

class PlacementGroupSchedulerTest : public ::testing::Test {
 protected:
  PlacementGroupSchedulerTest()
      : scheduler_(
            [this](const NodeId& n) -> const rpc::NodeResources* {
              auto it = view_.find(n);
              return it == view_.end() ? nullptr : &it->second;
            },
            [this](const rpc::NodeResources& r) { view_[*NodeId::FromBinary(r.node_id())] = r; }, &raylets_) {}

  NodeId AddNode(std::map<std::string, double> resources, std::map<std::string, std::string> labels = {},
                 bool sync = true) {
    rpc::NodeInfo n;
    NodeId id = NodeId::FromRandom();
    n.set_node_id(id.Binary());
    n.set_node_ip("10.0.0.1");
    n.set_node_manager_port(7000 + static_cast<int>(view_.size()));
    n.mutable_resources_total()->insert(resources.begin(), resources.end());
    n.mutable_labels()->insert(labels.begin(), labels.end());
    rpc::NodeResources r;
    r.set_node_id(id.Binary());
    r.mutable_total()->insert(resources.begin(), resources.end());
    r.mutable_available()->insert(resources.begin(), resources.end());
    view_[id] = r;
    scheduler_.OnNodeAdded(n);
    if (sync) scheduler_.MarkSynced(id);
    return id;
  }

  static Info Group(Info::Strategy strategy, std::vector<std::map<std::string, double>> bundles,
                    std::map<std::string, std::string> selector = {}) {
    Info g;
    g.set_placement_group_id(PlacementGroupId::FromRandom().Binary());
    g.set_strategy(strategy);
    for (size_t i = 0; i < bundles.size(); ++i) {
      rpc::Bundle* b = g.add_bundles();
      b->set_index(static_cast<int>(i));
      b->mutable_resources()->insert(bundles[i].begin(), bundles[i].end());
      b->mutable_label_selector()->insert(selector.begin(), selector.end());
    }
    return g;
  }

  // A raylet's reply after reserving: its available less what it reserved.
  rpc::PrepareBundlesReply PrepareOk(
      const FakeRayletClientPool::Call<rpc::PrepareBundlesRequest, rpc::PrepareBundlesReply>& call) {
    rpc::PrepareBundlesReply reply;
    reply.set_success(true);
    reply.set_committed(call.request.commit());
    rpc::NodeResources r = view_.at(call.node);
    for (const auto& b : call.request.bundles()) {
      for (const auto& [k, v] : b.resources()) (*r.mutable_available())[k] -= v;
    }
    r.set_version(r.version() + 1);
    *reply.mutable_resources() = r;
    return reply;
  }

  // Answers every outstanding prepare (ok) and then every commit.
  void AnswerAll() {
    while (!raylets_.prepares.empty()) {
      auto c = std::move(raylets_.prepares.front());
      raylets_.prepares.pop_front();
      c.cb(absl::OkStatus(), PrepareOk(c));
    }
    while (!raylets_.commits.empty()) {
      auto c = std::move(raylets_.commits.front());
      raylets_.commits.pop_front();
      c.cb(absl::OkStatus(), {});
    }
  }

  std::set<NodeId> Nodes(const PlacementResult& r) {
    std::set<NodeId> s;
    for (const auto& [i, n] : r.nodes) s.insert(n);
    return s;
  }

  absl::flat_hash_map<NodeId, rpc::NodeResources> view_;
  FakeRayletClientPool raylets_;
  PlacementGroupScheduler scheduler_;
};

TEST_F(PlacementGroupSchedulerTest, StrictSpreadPutsEachBundleOnItsOwnNode) {
  for (int i = 0; i < 4; ++i) AddNode({{"TPU", 4}});
  PlacementResult r = scheduler_.Choose(Group(Info::STRICT_SPREAD, {{{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}}));
  ASSERT_EQ(r.outcome, PlacementResult::kCreated) << r.message;
  EXPECT_EQ(Nodes(r).size(), 3u);
  PlacementResult too_many =
      scheduler_.Choose(Group(Info::STRICT_SPREAD, std::vector<std::map<std::string, double>>(5, {{"TPU", 4}})));
  EXPECT_EQ(too_many.outcome, PlacementResult::kNoFit);
  EXPECT_TRUE(too_many.infeasible);
}

TEST_F(PlacementGroupSchedulerTest, StrictSpreadFindsAMatchingWhereGreedyWouldNot) {
  // Bundle 0 fits both nodes, bundle 1 only the big one: a matching must
  // give bundle 0 the small node.
  AddNode({{"CPU", 2}});
  AddNode({{"CPU", 8}});
  PlacementResult r = scheduler_.Choose(Group(Info::STRICT_SPREAD, {{{"CPU", 1}}, {{"CPU", 6}}}));
  ASSERT_EQ(r.outcome, PlacementResult::kCreated) << r.message;
  EXPECT_EQ(Nodes(r).size(), 2u);
}

TEST_F(PlacementGroupSchedulerTest, PackStrategies) {
  NodeId small = AddNode({{"CPU", 2}});
  NodeId big = AddNode({{"CPU", 4}});
  PlacementResult strict = scheduler_.Choose(Group(Info::STRICT_PACK, {{{"CPU", 2}}, {{"CPU", 2}}}));
  ASSERT_EQ(strict.outcome, PlacementResult::kCreated);
  EXPECT_EQ(Nodes(strict), std::set<NodeId>{big});
  PlacementResult never = scheduler_.Choose(Group(Info::STRICT_PACK, {{{"CPU", 4}}, {{"CPU", 2}}}));
  EXPECT_EQ(never.outcome, PlacementResult::kNoFit);
  EXPECT_TRUE(never.infeasible);
  PlacementResult pack = scheduler_.Choose(Group(Info::PACK, {{{"CPU", 4}}, {{"CPU", 2}}}));
  ASSERT_EQ(pack.outcome, PlacementResult::kCreated);
  EXPECT_EQ(pack.nodes.at(0), big);
  EXPECT_EQ(pack.nodes.at(1), small);
  PlacementResult spread = scheduler_.Choose(Group(Info::SPREAD, {{{"CPU", 1}}, {{"CPU", 1}}}));
  ASSERT_EQ(spread.outcome, PlacementResult::kCreated);
  EXPECT_EQ(Nodes(spread).size(), 2u);
}

TEST_F(PlacementGroupSchedulerTest, LabelSelectorsAndUnsyncedNodes) {
  NodeId a = AddNode({{"TPU", 4}}, {{"manta.io/tpu-slice-name", "a"}});
  AddNode({{"TPU", 4}}, {{"manta.io/tpu-slice-name", "b"}});
  AddNode({{"TPU", 4}}, {{"manta.io/tpu-slice-name", "a"}}, /*sync=*/false);
  PlacementResult r = scheduler_.Choose(Group(Info::STRICT_SPREAD, {{{"TPU", 4}}}, {{"manta.io/tpu-slice-name", "a"}}));
  ASSERT_EQ(r.outcome, PlacementResult::kCreated);
  EXPECT_EQ(r.nodes.at(0), a);
  // The unsynced "a" node is not used: two bundles on "a" do not fit.
  PlacementResult two =
      scheduler_.Choose(Group(Info::STRICT_SPREAD, {{{"TPU", 4}}, {{"TPU", 4}}}, {{"manta.io/tpu-slice-name", "a"}}));
  EXPECT_EQ(two.outcome, PlacementResult::kNoFit);
}

TEST_F(PlacementGroupSchedulerTest, PrefersTheLeastLoadedNode) {
  NodeId busy = AddNode({{"TPU-v6e-16-head", 1}, {"TPU", 4}});
  NodeId idle = AddNode({{"TPU-v6e-16-head", 1}, {"TPU", 4}});
  (*view_[busy].mutable_available())["TPU"] = 0;
  PlacementResult r = scheduler_.Choose(Group(Info::PACK, {{{"TPU-v6e-16-head", 1}}}));
  ASSERT_EQ(r.outcome, PlacementResult::kCreated);
  EXPECT_EQ(r.nodes.at(0), idle);
}

TEST_F(PlacementGroupSchedulerTest, TwoPhaseCommitCreates) {
  AddNode({{"CPU", 4}});
  AddNode({{"CPU", 4}});
  std::optional<PlacementResult> result;
  bool prepared = false;
  scheduler_.Schedule(
      Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}}), [&](PlacementResult r) { result = std::move(r); },
      [&] { prepared = true; });
  ASSERT_EQ(raylets_.prepares.size(), 2u);
  EXPECT_TRUE(raylets_.commits.empty());
  // A second group sees the first's reservations in flight: nothing fits.
  EXPECT_EQ(scheduler_.Choose(Group(Info::PACK, {{{"CPU", 1}}})).outcome, PlacementResult::kNoFit);
  AnswerAll();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(prepared);
  EXPECT_EQ(result->outcome, PlacementResult::kCreated);
  EXPECT_EQ(Nodes(*result).size(), 2u);
  EXPECT_TRUE(raylets_.cancels.empty());
}

TEST_F(PlacementGroupSchedulerTest, OneNodeGroupsPrepareAndCommitInOneCall) {
  AddNode({{"CPU", 4}});
  std::optional<PlacementResult> result;
  scheduler_.Schedule(Group(Info::STRICT_PACK, {{{"CPU", 1}}, {{"CPU", 1}}}),
                      [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 1u);
  EXPECT_TRUE(raylets_.prepares[0].request.commit());
  EXPECT_EQ(raylets_.prepares[0].request.bundles_size(), 2);
  AnswerAll();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kCreated);
  EXPECT_TRUE(raylets_.commits.empty());
  // A raylet that prepared without committing is not taken at its word.
  result.reset();
  scheduler_.Schedule(Group(Info::PACK, {{{"CPU", 1}}}), [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 1u);
  auto call = std::move(raylets_.prepares.front());
  raylets_.prepares.pop_front();
  rpc::PrepareBundlesReply uncommitted = PrepareOk(call);
  uncommitted.set_committed(false);
  call.cb(absl::OkStatus(), std::move(uncommitted));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kFailed);
  EXPECT_EQ(raylets_.cancels.size(), 1u);
}

TEST_F(PlacementGroupSchedulerTest, ARefusedPrepareCancelsEveryPreparedBundle) {
  AddNode({{"CPU", 4}});
  AddNode({{"CPU", 4}});
  std::optional<PlacementResult> result;
  Info g = Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}});
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 2u);
  auto first = std::move(raylets_.prepares[0]);
  auto second = std::move(raylets_.prepares[1]);
  first.cb(absl::OkStatus(), PrepareOk(first));
  rpc::PrepareBundlesReply refused;
  refused.set_success(false);
  refused.set_message("does not fit");
  second.cb(absl::OkStatus(), std::move(refused));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kFailed);
  EXPECT_TRUE(raylets_.commits.empty());
  std::set<NodeId> cancelled;
  for (const auto& c : raylets_.cancels) {
    EXPECT_EQ(c.request.placement_group_id(), g.placement_group_id());
    cancelled.insert(c.node);
  }
  EXPECT_EQ(cancelled, (std::set<NodeId>{first.node, second.node}));
}

TEST_F(PlacementGroupSchedulerTest, NoNewAttemptWhileTheLastOnesBundlesAreBeingReturned) {
  AddNode({{"CPU", 4}});
  AddNode({{"CPU", 4}});
  Info g = Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}});
  std::optional<PlacementResult> result;
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 2u);
  auto first = std::move(raylets_.prepares[0]);
  auto second = std::move(raylets_.prepares[1]);
  raylets_.prepares.clear();
  first.cb(absl::OkStatus(), PrepareOk(first));
  second.cb(absl::UnavailableError("connection lost"), {});
  ASSERT_EQ(result->outcome, PlacementResult::kFailed);
  ASSERT_EQ(raylets_.cancels.size(), 2u);
  // A cancel still on its way (retried after a lost reply, say) would return
  // the next attempt's bundles, which have the same keys: no next attempt yet.
  result.reset();
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kFailed);
  EXPECT_TRUE(raylets_.prepares.empty());
  for (auto& c : std::exchange(raylets_.cancels, {})) {
    rpc::CancelBundlesReply returned;  // the node is whole again
    rpc::NodeResources r = view_.at(c.node);
    *r.mutable_available() = r.total();
    r.set_version(r.version() + 1);
    *returned.mutable_resources() = r;
    c.cb(absl::OkStatus(), std::move(returned));
  }
  result.reset();
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  EXPECT_EQ(raylets_.prepares.size(), 2u);
  AnswerAll();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kCreated);
}

TEST_F(PlacementGroupSchedulerTest, ADeadNodesCancelIsNotWaitedFor) {
  NodeId a = AddNode({{"CPU", 4}});
  NodeId b = AddNode({{"CPU", 4}});
  NodeId c = AddNode({{"CPU", 4}});
  Info g = Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}});
  (*view_[c].mutable_available())["CPU"] = 0;  // the first attempt goes to a and b
  std::optional<PlacementResult> result;
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 2u);
  for (auto& p : std::exchange(raylets_.prepares, {})) p.cb(absl::OkStatus(), PrepareOk(p));
  ASSERT_EQ(raylets_.commits.size(), 2u);
  for (auto& commit : std::exchange(raylets_.commits, {})) {
    commit.cb(commit.node == b ? absl::UnavailableError("connection lost") : absl::OkStatus(), {});
  }
  ASSERT_EQ(result->outcome, PlacementResult::kFailed);
  ASSERT_EQ(raylets_.cancels.size(), 2u);
  auto to_b = raylets_.cancels[0].node == b ? std::move(raylets_.cancels[0]) : std::move(raylets_.cancels[1]);
  auto to_a = raylets_.cancels[0].node == a ? std::move(raylets_.cancels[0]) : std::move(raylets_.cancels[1]);
  raylets_.cancels.clear();
  to_a.cb(absl::OkStatus(), {});
  // b dies with its cancel still being retried: nothing is placed on b
  // again, so the next attempt need not wait for the cancel's retries.
  scheduler_.OnNodeDead(b);
  view_.erase(b);
  for (NodeId n : {a, c}) {  // whole again
    *view_[n].mutable_available() = view_[n].total();
    view_[n].set_version(view_[n].version() + 1);
  }
  result.reset();
  scheduler_.Schedule(g, [&](PlacementResult r) { result = std::move(r); });
  ASSERT_EQ(raylets_.prepares.size(), 2u);
  for (const auto& p : raylets_.prepares) EXPECT_NE(p.node, b);
  AnswerAll();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kCreated);
  to_b.cb(absl::UnavailableError("node gone"), {});  // late, and harmless
  EXPECT_TRUE(raylets_.cancels.empty());
}

TEST_F(PlacementGroupSchedulerTest, ANodeDyingBetweenPrepareAndCommitRollsBack) {
  NodeId a = AddNode({{"CPU", 4}});
  NodeId b = AddNode({{"CPU", 4}});
  std::optional<PlacementResult> result;
  scheduler_.Schedule(Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}}),
                      [&](PlacementResult r) { result = std::move(r); });
  auto to_a = raylets_.prepares[0].node == a ? std::move(raylets_.prepares[0]) : std::move(raylets_.prepares[1]);
  to_a.cb(absl::OkStatus(), PrepareOk(to_a));
  EXPECT_FALSE(result.has_value());
  scheduler_.OnNodeDead(b);  // its prepare never answers
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->outcome, PlacementResult::kFailed);
  EXPECT_TRUE(raylets_.commits.empty());
  ASSERT_EQ(raylets_.cancels.size(), 1u);
  EXPECT_EQ(raylets_.cancels[0].node, a);
}

TEST_F(PlacementGroupSchedulerTest, CancelWaitsForRepliesThenReturnsEverything) {
  AddNode({{"CPU", 4}});
  bool called = false;
  Info g = Group(Info::PACK, {{{"CPU", 2}}});
  scheduler_.Schedule(g, [&](PlacementResult) { called = true; });
  scheduler_.Cancel(*PlacementGroupId::FromBinary(g.placement_group_id()));
  EXPECT_FALSE(scheduler_.IsScheduling(*PlacementGroupId::FromBinary(g.placement_group_id())));
  EXPECT_TRUE(raylets_.cancels.empty());  // the prepare may still land
  AnswerAll();
  EXPECT_FALSE(called);
  EXPECT_TRUE(raylets_.commits.empty());
  ASSERT_EQ(raylets_.cancels.size(), 1u);
}

TEST_F(PlacementGroupSchedulerTest, ReschedulingKeepsPlacedBundles) {
  NodeId a = AddNode({{"CPU", 4}});
  NodeId b = AddNode({{"CPU", 4}});
  AddNode({{"CPU", 4}});
  Info g = Group(Info::STRICT_SPREAD, {{{"CPU", 4}}, {{"CPU", 4}}});
  g.mutable_bundles(0)->set_node_id(a.Binary());
  (*view_[a].mutable_available())["CPU"] = 0;
  PlacementResult r = scheduler_.Choose(g);
  ASSERT_EQ(r.outcome, PlacementResult::kCreated);
  EXPECT_EQ(r.nodes.count(0), 0u);
  EXPECT_NE(r.nodes.at(1), a);
  (void)b;
}

TEST(ParseBundleTest, RejectsBadBundles) {
  rpc::Bundle empty;
  EXPECT_EQ(ParseBundle(empty).status().code(), absl::StatusCode::kInvalidArgument);
  rpc::Bundle nan;
  (*nan.mutable_resources())["CPU"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ParseBundle(nan).status().code(), absl::StatusCode::kInvalidArgument);
  rpc::Bundle negative;
  (*negative.mutable_resources())["CPU"] = -1;
  EXPECT_EQ(ParseBundle(negative).status().code(), absl::StatusCode::kInvalidArgument);
  rpc::Bundle selector;
  (*selector.mutable_resources())["CPU"] = 1;
  (*selector.mutable_label_selector())["bad key!"] = "x";
  EXPECT_EQ(ParseBundle(selector).status().code(), absl::StatusCode::kInvalidArgument);
  // Another group's resources are not a bundle's to reserve.
  rpc::Bundle group_resource;
  (*group_resource.mutable_resources())["CPU_group_0_" + std::string(36, 'a')] = 1;
  EXPECT_EQ(ParseBundle(group_resource).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::gcs
