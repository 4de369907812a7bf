// Placement groups against real clusters: the GCS places bundles and
// reserves them on real raylets by two-phase commit. Every test ends with
// every node's resources back to full and no placement-group resource left.
#include <signal.h>

#include <set>
#include <thread>
#include <string>

#include "absl/strings/match.h"
#include "common/id.h"
#include "common/placement_group_resources.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "proto/gcs_service.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

using Info = rpc::PlacementGroupInfo;
constexpr char kSliceLabel[] = "manta.io/tpu-slice-name";

class Groups {
 public:
  explicit Groups(Cluster* c) : cluster_(c) {}

  absl::StatusOr<Info> Create(const Info& spec) {
    rpc::CreatePlacementGroupRequest req;
    *req.mutable_spec() = spec;
    rpc::CreatePlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), absl::Seconds(5));
    grpc::Status s = Stub()->CreatePlacementGroup(&ctx, req, &reply);
    if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return reply.placement_group();
  }
  absl::StatusOr<Info> Get(const std::string& id) {
    rpc::GetPlacementGroupRequest req;
    req.set_placement_group_id(id);
    rpc::GetPlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), absl::Seconds(5));
    grpc::Status s = Stub()->GetPlacementGroup(&ctx, req, &reply);
    if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return reply.placement_group();
  }
  // True when CREATED within `timeout`.
  bool WaitReady(const std::string& id, absl::Duration timeout = absl::Seconds(20)) {
    rpc::WaitPlacementGroupReadyRequest req;
    req.set_placement_group_id(id);
    req.set_timeout_ms(static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    rpc::WaitPlacementGroupReadyReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), timeout + absl::Seconds(5));
    return Stub()->WaitPlacementGroupReady(&ctx, req, &reply).ok() && reply.ready();
  }
  absl::Status Remove(const std::string& id) {
    rpc::RemovePlacementGroupRequest req;
    req.set_placement_group_id(id);
    rpc::RemovePlacementGroupReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), absl::Seconds(5));
    grpc::Status s = Stub()->RemovePlacementGroup(&ctx, req, &reply);
    return s.ok() ? absl::OkStatus() : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  int Count() {
    rpc::ListPlacementGroupsReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), absl::Seconds(5));
    return Stub()->ListPlacementGroups(&ctx, {}, &reply).ok() ? reply.placement_groups_size() : -1;
  }

 private:
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> Stub() {
    return rpc::PlacementGroupGcsService::NewStub(rpc::MakeChannel(cluster_->gcs_address()));
  }
  Cluster* cluster_;
};

Info Spec(Info::Strategy strategy, int n, std::map<std::string, double> bundle,
          std::map<std::string, std::string> selector = {}) {
  Info g;
  g.set_placement_group_id(PlacementGroupId::FromRandom().Binary());
  g.set_strategy(strategy);
  for (int i = 0; i < n; ++i) {
    rpc::Bundle* b = g.add_bundles();
    b->set_index(i);
    b->mutable_resources()->insert(bundle.begin(), bundle.end());
    b->mutable_label_selector()->insert(selector.begin(), selector.end());
  }
  return g;
}

std::set<std::string> NodesOf(const Info& info) {
  std::set<std::string> s;
  for (const auto& b : info.bundles()) s.insert(b.node_id());
  return s;
}

// How much of `resource` is available across alive nodes.
double Available(Cluster& cluster, const std::string& resource) {
  auto r = cluster.GetClusterResources();
  double sum = 0;
  if (!r.ok()) return -1;
  for (const auto& n : r->nodes()) {
    auto it = n.available().find(resource);
    if (it != n.available().end()) sum += it->second;
  }
  return sum;
}

class TwoSliceGroupsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    ASSERT_TRUE(cluster_->StartHead().ok());
    ASSERT_TRUE(cluster_->AddTpuSlice("tpu-group-0", "v6e-16", "4x4").ok());
    ASSERT_TRUE(cluster_->AddTpuSlice("tpu-group-1", "v6e-16", "4x4").ok());
    ASSERT_TRUE(Cluster::WaitFor(
        [] {
          auto r = cluster_->GetClusterResources();
          return r.ok() && r->nodes_size() == 9;
        },
        absl::Seconds(20)));
  }
  static void TearDownTestSuite() {
    cluster_->Shutdown();
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override {
    std::string why;
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_->ResourcesFull(&why); }, absl::Seconds(10))) << why;
  }
  static Cluster* cluster_;
};
Cluster* TwoSliceGroupsTest::cluster_ = nullptr;

TEST_F(TwoSliceGroupsTest, EachStrategy) {
  Groups groups(cluster_);
  // STRICT_SPREAD: every TPU host, one bundle each.
  auto spread = groups.Create(Spec(Info::STRICT_SPREAD, 8, {{"TPU", 4}}));
  ASSERT_TRUE(spread.ok()) << spread.status();
  ASSERT_TRUE(groups.WaitReady(spread->placement_group_id()));
  auto info = groups.Get(spread->placement_group_id());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), Info::CREATED);
  EXPECT_EQ(NodesOf(*info).size(), 8u);
  EXPECT_EQ(Available(*cluster_, "TPU"), 0);
  CommandResult list = cluster_->RunManta({"list", "placement-groups"}, cluster_->MantaEnv());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(absl::StrContains(list.out, "CREATED  STRICT_SPREAD  8 x {'TPU': 4.0}")) << list.out;
  CommandResult status = cluster_->RunManta({"status"}, cluster_->MantaEnv());
  EXPECT_TRUE(absl::StrContains(status.out, " 0.0/32.0 TPU (0.0 used of 32.0 reserved in placement groups)\n"))
      << status.out;
  EXPECT_FALSE(absl::StrContains(status.out, "_group_")) << status.out;
  // Nothing is left for another chip.
  auto more = groups.Create(Spec(Info::PACK, 1, {{"TPU", 1}}));
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(groups.WaitReady(more->placement_group_id(), absl::Milliseconds(300)));
  ASSERT_TRUE(groups.Remove(spread->placement_group_id()).ok());
  EXPECT_TRUE(groups.WaitReady(more->placement_group_id()));  // placed once room appeared
  ASSERT_TRUE(groups.Remove(more->placement_group_id()).ok());

  // STRICT_PACK: both on one host.
  auto pack = groups.Create(Spec(Info::STRICT_PACK, 2, {{"TPU", 2}}));
  ASSERT_TRUE(pack.ok());
  ASSERT_TRUE(groups.WaitReady(pack->placement_group_id()));
  EXPECT_EQ(NodesOf(*groups.Get(pack->placement_group_id())).size(), 1u);
  ASSERT_TRUE(groups.Remove(pack->placement_group_id()).ok());

  // PACK: more than one host holds, so it spills to a second.
  auto spill = groups.Create(Spec(Info::PACK, 2, {{"TPU", 4}}));
  ASSERT_TRUE(spill.ok());
  ASSERT_TRUE(groups.WaitReady(spill->placement_group_id()));
  EXPECT_EQ(NodesOf(*groups.Get(spill->placement_group_id())).size(), 2u);
  ASSERT_TRUE(groups.Remove(spill->placement_group_id()).ok());

  // SPREAD with a label selector: distinct hosts of slice 1 only.
  auto labelled = groups.Create(Spec(Info::SPREAD, 3, {{"TPU", 1}}, {{kSliceLabel, "tpu-group-1"}}));
  ASSERT_TRUE(labelled.ok());
  ASSERT_TRUE(groups.WaitReady(labelled->placement_group_id()));
  auto placed = *groups.Get(labelled->placement_group_id());
  EXPECT_EQ(NodesOf(placed).size(), 3u);
  auto nodes = cluster_->GetAllNodeInfo();
  ASSERT_TRUE(nodes.ok());
  for (const auto& n : nodes->nodes()) {
    if (NodesOf(placed).count(n.node_id()) == 0) continue;
    EXPECT_EQ(n.labels().at(kSliceLabel), "tpu-group-1");
  }
  ASSERT_TRUE(groups.Remove(labelled->placement_group_id()).ok());
}

TEST_F(TwoSliceGroupsTest, AThirdSliceWaitsUntilOneIsReleased) {
  Groups groups(cluster_);
  auto a = groups.Create(Spec(Info::STRICT_SPREAD, 4, {{"TPU", 4}}, {{kSliceLabel, "tpu-group-0"}}));
  auto b = groups.Create(Spec(Info::STRICT_SPREAD, 4, {{"TPU", 4}}, {{kSliceLabel, "tpu-group-1"}}));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(groups.WaitReady(a->placement_group_id()));
  ASSERT_TRUE(groups.WaitReady(b->placement_group_id()));
  auto third =
      groups.Create(Spec(Info::STRICT_SPREAD, 4, {{"TPU", 4}}, {{kSliceLabel, "in(tpu-group-0,tpu-group-1)"}}));
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(groups.WaitReady(third->placement_group_id(), absl::Milliseconds(500)));
  EXPECT_FALSE(groups.Get(third->placement_group_id())->infeasible());  // waiting, not impossible
  // `manta status` shows it under Demands.
  CommandResult status = cluster_->RunManta({"status"}, cluster_->MantaEnv());
  EXPECT_TRUE(absl::StrContains(status.out, "pending placement groups")) << status.out;

  ASSERT_TRUE(groups.Remove(a->placement_group_id()).ok());
  ASSERT_TRUE(groups.WaitReady(third->placement_group_id()));
  EXPECT_EQ(NodesOf(*groups.Get(third->placement_group_id())), NodesOf(*groups.Get(a->placement_group_id())));
  ASSERT_TRUE(groups.Remove(b->placement_group_id()).ok());
  ASSERT_TRUE(groups.Remove(third->placement_group_id()).ok());
}

TEST_F(TwoSliceGroupsTest, BadInputIsRefusedAndChangesNothing) {
  Groups groups(cluster_);
  int before = groups.Count();
  std::vector<Info> bad = {Spec(Info::PACK, 0, {}), Spec(Info::PACK, 1, {}), Spec(Info::PACK, 1, {{"TPU", -4}}),
                           Spec(Info::PACK, 1, {{"TPU", std::nan("")}}),
                           Spec(Info::PACK, 1, {{"TPU", 4}}, {{"bad key!", "x"}})};
  for (const Info& spec : bad) {
    auto r = groups.Create(spec);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << spec.ShortDebugString();
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_EQ(groups.Count(), before);
  // A bundle larger than any node is accepted and reported infeasible.
  auto huge = groups.Create(Spec(Info::PACK, 1, {{"TPU", 64}}));
  ASSERT_TRUE(huge.ok());
  ASSERT_TRUE(Cluster::WaitFor([&] { return groups.Get(huge->placement_group_id())->infeasible(); }, absl::Seconds(5)));
  EXPECT_TRUE(absl::StrContains(groups.Get(huge->placement_group_id())->state_message(), "TPU: 64"))
      << groups.Get(huge->placement_group_id())->state_message();
  CommandResult status = cluster_->RunManta({"status"}, cluster_->MantaEnv());
  EXPECT_TRUE(absl::StrContains(status.out, "(infeasible)")) << status.out;
  ASSERT_TRUE(groups.Remove(huge->placement_group_id()).ok());
  // Unknown ids.
  EXPECT_EQ(groups.Remove(PlacementGroupId::FromRandom().Binary()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(groups.Remove("short").code(), absl::StatusCode::kInvalidArgument);
}

// Two raylets with one "slot" each: a STRICT_SPREAD group of two slots needs
// both.
class SlotGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MANTA_ASSERT_OK(cluster_.StartHead());
    RayletOptions slot;
    slot.resources = R"({"slot": 1})";
    auto ids = cluster_.AddRaylets({slot, slot});
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") == 2; }, absl::Seconds(10)));
  }
  void TearDown() override {
    std::string why;
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_.ResourcesFull(&why); }, absl::Seconds(10))) << why;
    cluster_.Shutdown();
  }
  // Stops raylet 2 once the GCS places bundles on it. The GCS uses a node
  // only after syncing it (telling it which bundles it holds); stopped before
  // answering that call, raylet 2 would never be used and raylet 1 would
  // never prepare. A group over both slots proves both synced.
  void StopRayletTwoOnceUsable(Groups& groups) {
    auto both = groups.Create(Spec(Info::STRICT_SPREAD, 2, {{"slot", 1}}));
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_TRUE(groups.WaitReady(both->placement_group_id()));
    ASSERT_TRUE(groups.Remove(both->placement_group_id()).ok());
    ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") == 2; }, absl::Seconds(10)));
    MANTA_ASSERT_OK(cluster_.KillRaylet(2, SIGSTOP));
  }
  Cluster cluster_;
};

TEST_F(SlotGroupsTest, ARayletDyingBetweenPrepareAndCommitRollsBack) {
  Groups groups(&cluster_);
  ASSERT_NO_FATAL_FAILURE(StopRayletTwoOnceUsable(groups));  // its prepare never answers
  auto g = groups.Create(Spec(Info::STRICT_SPREAD, 2, {{"slot", 1}}));
  ASSERT_TRUE(g.ok()) << g.status();
  // Raylet 1 prepared its bundle.
  ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") <= 1; }, absl::Seconds(5)));
  EXPECT_EQ(groups.Get(g->placement_group_id())->state(), Info::PENDING);
  MANTA_ASSERT_OK(cluster_.KillRaylet(2, SIGKILL));
  // Rolled back: raylet 1's slot is free again and the group waits.
  ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") == 1; }, absl::Seconds(10)));
  EXPECT_NE(groups.Get(g->placement_group_id())->state(), Info::CREATED);
  // A new node makes it whole.
  RayletOptions slot;
  slot.resources = R"({"slot": 1})";
  ASSERT_TRUE(cluster_.AddRaylet(slot).ok());
  ASSERT_TRUE(groups.WaitReady(g->placement_group_id()));
  ASSERT_TRUE(groups.Remove(g->placement_group_id()).ok());
}

TEST_F(SlotGroupsTest, ADeadNodesBundlesAreRescheduled) {
  Groups groups(&cluster_);
  auto g = groups.Create(Spec(Info::SPREAD, 2, {{"slot", 1}}));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(groups.WaitReady(g->placement_group_id()));
  MANTA_ASSERT_OK(cluster_.KillRaylet(1, SIGKILL));
  ASSERT_TRUE(Cluster::WaitFor([&] { return groups.Get(g->placement_group_id())->state() == Info::RESCHEDULING; },
                               absl::Seconds(10)));
  RayletOptions slot;
  slot.resources = R"({"slot": 1})";
  ASSERT_TRUE(cluster_.AddRaylet(slot).ok());
  ASSERT_TRUE(groups.WaitReady(g->placement_group_id()));
  EXPECT_EQ(groups.Get(g->placement_group_id())->num_reschedules(), 1);
  ASSERT_TRUE(groups.Remove(g->placement_group_id()).ok());
}

TEST_F(SlotGroupsTest, AGcsRestartedDuringCreationLeaksNothing) {
  Groups groups(&cluster_);
  ASSERT_NO_FATAL_FAILURE(StopRayletTwoOnceUsable(groups));
  auto g = groups.Create(Spec(Info::STRICT_SPREAD, 2, {{"slot", 1}}));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") <= 1; }, absl::Seconds(5)));
  MANTA_ASSERT_OK(cluster_.KillGcs());
  MANTA_ASSERT_OK(cluster_.KillRaylet(2, SIGCONT));
  MANTA_ASSERT_OK(cluster_.RestartGcs());
  // The restarted GCS places the group again; the half-made reservation is
  // returned, so exactly one slot per node is held.
  ASSERT_TRUE(groups.WaitReady(g->placement_group_id()));
  ASSERT_TRUE(Cluster::WaitFor([&] { return Available(cluster_, "slot") == 0; }, absl::Seconds(10)));
  EXPECT_EQ(NodesOf(*groups.Get(g->placement_group_id())).size(), 2u);
  ASSERT_TRUE(groups.Remove(g->placement_group_id()).ok());
}

// A group still waiting for room is persisted: a GCS stopped cleanly (with a
// caller waiting on the group) and started again still has it, PENDING.
TEST_F(SlotGroupsTest, AWaitingGroupSurvivesACleanGcsRestart) {
  Groups groups(&cluster_);
  auto g = groups.Create(Spec(Info::STRICT_SPREAD, 3, {{"slot", 1}}));  // two slots only: waits
  ASSERT_TRUE(g.ok());
  std::thread waiter([&] { EXPECT_FALSE(groups.WaitReady(g->placement_group_id(), absl::Seconds(30))); });
  const bool infeasible =
      Cluster::WaitFor([&] { return groups.Get(g->placement_group_id())->infeasible(); }, absl::Seconds(10));
  absl::Status stopped = cluster_.StopGcs();
  waiter.join();
  ASSERT_TRUE(infeasible);
  MANTA_ASSERT_OK(stopped);
  MANTA_ASSERT_OK(cluster_.RestartGcs());
  ASSERT_TRUE(Cluster::WaitFor([&] { return groups.Get(g->placement_group_id()).ok(); }, absl::Seconds(10)));
  EXPECT_EQ(groups.Get(g->placement_group_id())->state(), Info::PENDING);  // persisted, still waiting
  ASSERT_TRUE(groups.Remove(g->placement_group_id()).ok());
}

}  // namespace
}  // namespace manta::testing
