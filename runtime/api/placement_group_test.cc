// The placement group API and the SetPlacementGroup / SetEnv options through
// the FakeCoreWorker.
#include "manta/placement_group.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "manta/api.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta_pg_test {

int Work(int v) { return v; }
class Holder {
 public:
  static Holder* Create() { return new Holder(); }
  int Get() { return 1; }
};
MANTA_REMOTE(Work, Holder::Create, &Holder::Get);

using manta::core::FakeCoreWorker;
using manta::core::NodeData;

NodeData Node(const std::string& ip, std::map<std::string, double> resources,
              std::map<std::string, std::string> labels = {}) {
  NodeData n;
  n.ip = ip;
  n.resources_total = std::move(resources);
  n.labels = std::move(labels);
  return n;
}

// The status a call threw, or OK when it did not throw.
template <typename F>
absl::Status Thrown(F&& f) {
  try {
    f();
  } catch (const manta::Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

class PlacementGroupTest : public ::testing::Test {
 protected:
  void SetUp() override { core_ = FakeCoreWorker::Install(); }
  void TearDown() override { FakeCoreWorker::Uninstall(); }
  FakeCoreWorker* core_ = nullptr;
};

TEST_F(PlacementGroupTest, CreateWaitAndLocateBundles) {
  core_->AddNode(Node("10.0.0.1", {{"CPU", 2}}, {{"zone", "a"}}));
  core_->AddNode(Node("10.0.0.2", {{"CPU", 2}}, {{"zone", "b"}}));
  manta::PlacementGroup pg = manta::CreatePlacementGroup(
      {.bundles = {{{{"CPU", 1}}}, {{{"CPU", 1}}}}, .strategy = manta::PlacementStrategy::kStrictSpread});
  EXPECT_EQ(pg.ID().size(), manta::PlacementGroupId::kSize);
  EXPECT_EQ(pg.Hex().size(), 2 * manta::PlacementGroupId::kSize);
  ASSERT_TRUE(pg.Wait(absl::Seconds(1)));
  EXPECT_EQ(pg.State(), manta::PlacementGroupState::kCreated);
  EXPECT_FALSE(pg.Infeasible());
  std::vector<manta::BundleLocation> bundles = pg.Bundles();
  ASSERT_EQ(bundles.size(), 2u);
  EXPECT_EQ(bundles[0].index, 0);
  EXPECT_EQ(bundles[1].index, 1);
  EXPECT_NE(bundles[0].node_id, bundles[1].node_id);
  EXPECT_NE(bundles[0].node_ip, bundles[1].node_ip);
  EXPECT_EQ(bundles[0].node_labels.size(), 1u);

  // What the GCS got: index = position, this job as creator.
  auto created = core_->CreatedPlacementGroups();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].strategy, manta::core::PlacementStrategy::kStrictSpread);
  EXPECT_EQ(created[0].bundles[1].index, 1);
  EXPECT_EQ(created[0].bundles[1].resources.at("CPU"), 1);

  manta::RemovePlacementGroup(pg);
  EXPECT_EQ(pg.State(), manta::PlacementGroupState::kRemoved);
  EXPECT_NO_THROW(manta::RemovePlacementGroup(pg));  // idempotent
  absl::Status waited = Thrown([&] { pg.Wait(absl::Seconds(1)); });
  EXPECT_TRUE(absl::IsFailedPrecondition(waited)) << waited;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);
}

TEST_F(PlacementGroupTest, TheFakeFindsAStrictSpreadPlacementFirstFitMisses) {
  // STRICT_SPREAD where only one node suits bundle 1: the GCS's matching
  // puts bundle 0 elsewhere, where a first-fit pass would take that node.
  core_->AddNode(Node("10.0.0.1", {{"CPU", 1}}, {{"pool", "x"}}));
  core_->AddNode(Node("10.0.0.2", {{"CPU", 1}}, {{"pool", "y"}}));
  manta::PlacementGroup pg = manta::CreatePlacementGroup(
      {.bundles = {{.resources = {{"CPU", 1}}}, {.resources = {{"CPU", 1}}, .label_selector = {{"pool", "x"}}}},
       .strategy = manta::PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(pg.Wait(absl::Seconds(1)));
  EXPECT_EQ(pg.Bundles()[0].node_ip, "10.0.0.2");
  EXPECT_EQ(pg.Bundles()[1].node_ip, "10.0.0.1");
  // A draining node takes no bundle.
  NodeData draining = Node("10.0.0.3", {{"CPU", 1}});
  draining.draining = true;
  core_->AddNode(draining);
  manta::PlacementGroup more = manta::CreatePlacementGroup({.bundles = {{.resources = {{"CPU", 1}}}}});
  EXPECT_FALSE(more.Wait(absl::Milliseconds(50)));
  EXPECT_FALSE(more.Infeasible());
}

TEST_F(PlacementGroupTest, HeaderExampleCompilesAndLabelSelectorsPlace) {
  core_->AddNode(Node("10.0.0.1", {{"TPU", 4}}, {{"pool", "x"}}));
  core_->AddNode(Node("10.0.0.2", {{"TPU", 4}}, {{"pool", "y"}}));
  manta::PlacementGroup pg =
      manta::CreatePlacementGroup({.bundles = {{.resources = {{"TPU", 4}}}, {.resources = {{"TPU", 4}}}},
                                   .strategy = manta::PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(pg.Wait(absl::Seconds(1)));
  manta::PlacementGroup selected =
      manta::CreatePlacementGroup({.bundles = {{.resources = {{"CPU", 0.5}}, .label_selector = {{"pool", "y"}}}}});
  core_->AddNode(Node("10.0.0.3", {{"CPU", 1}}, {{"pool", "x"}}));
  core_->AddNode(Node("10.0.0.4", {{"CPU", 1}}, {{"pool", "y"}}));
  ASSERT_TRUE(selected.Wait(absl::Seconds(1)));
  EXPECT_EQ(selected.Bundles()[0].node_ip, "10.0.0.4");
}

TEST_F(PlacementGroupTest, PendingUntilANodeJoinsAndInfeasibleSaysWhy) {
  core_->AddNode(Node("10.0.0.1", {{"CPU", 1}}));
  manta::PlacementGroup pg = manta::CreatePlacementGroup({.bundles = {{{{"CPU", 4}}}}});
  EXPECT_FALSE(pg.Wait(absl::Milliseconds(10)));
  EXPECT_EQ(pg.State(), manta::PlacementGroupState::kPending);
  EXPECT_TRUE(pg.Infeasible());
  EXPECT_NE(pg.StateMessage().find("bundle 0"), std::string::npos) << pg.StateMessage();
  std::vector<manta::BundleLocation> bundles = pg.Bundles();
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_TRUE(bundles[0].node_id.empty());
  core_->AddNode(Node("10.0.0.2", {{"CPU", 8}}));
  EXPECT_TRUE(pg.Wait(absl::Seconds(1)));
  EXPECT_EQ(pg.Bundles()[0].node_ip, "10.0.0.2");
}

TEST_F(PlacementGroupTest, MalformedRequestsSurfaceTheGcsError) {
  auto code_of = [](const manta::PlacementGroupOptions& o) { return Thrown([&] { manta::CreatePlacementGroup(o); }); };
  absl::Status s = code_of({});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(std::string(s.message()).find("at least one bundle"), std::string::npos) << s;
  s = code_of({.bundles = {{}}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(std::string(s.message()).find("empty"), std::string::npos) << s;
  s = code_of({.bundles = {{{{"CPU", -1}}}}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  s = code_of({.bundles = {{{{"CPU", std::numeric_limits<double>::quiet_NaN()}}}}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  s = code_of({.bundles = {{{{"CPU", 1}}, {{"bad key!", "v"}}}}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(core_->LivePlacementGroupCount(), 0u);

  // The Try form says the same without throwing.
  absl::StatusOr<manta::PlacementGroup> tried = manta::TryCreatePlacementGroup({});
  EXPECT_TRUE(absl::IsInvalidArgument(tried.status()));
}

TEST_F(PlacementGroupTest, NamesAreUniqueAndFound) {
  manta::PlacementGroup pg = manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}, .name = "train"});
  EXPECT_EQ(manta::GetPlacementGroup("train"), pg);
  absl::Status taken = Thrown([] { manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}, .name = "train"}); });
  EXPECT_TRUE(absl::IsAlreadyExists(taken)) << taken;
  absl::Status missing = Thrown([] { manta::GetPlacementGroup("nope"); });
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  absl::Status other_ns = Thrown([] { manta::GetPlacementGroup("train", "elsewhere"); });
  EXPECT_TRUE(absl::IsNotFound(other_ns)) << other_ns;
  manta::RemovePlacementGroup(pg);
  EXPECT_TRUE(absl::IsNotFound(manta::TryGetPlacementGroup("train").status()));
  // The name is free again.
  EXPECT_NO_THROW(manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}, .name = "train"}));
}

TEST_F(PlacementGroupTest, GcsFailuresAreErrorsWithTheirMessage) {
  core_->InjectGcsError("CreatePlacementGroup", absl::UnavailableError("GCS at 1.2.3.4:6379 unreachable"), 1);
  absl::Status s = Thrown([] { manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}}); });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(std::string(s.message()).find("unreachable"), std::string::npos) << s;
  manta::PlacementGroup pg = manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}});
  core_->InjectGcsError("WaitPlacementGroupReady", absl::DeadlineExceededError("rpc deadline"), 1);
  try {
    pg.Wait(absl::Seconds(1));
    ADD_FAILURE() << "Wait did not throw";
  } catch (const manta::TaskError&) {
    ADD_FAILURE() << "a GCS failure is not a TaskError";
  } catch (const manta::Error& e) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(e.status()));
  }
  absl::Status unknown = Thrown([] { manta::PlacementGroup(std::string(18, 'x')).State(); });
  EXPECT_TRUE(absl::IsNotFound(unknown)) << unknown;
  absl::Status bogus = Thrown([] { manta::PlacementGroup("short").State(); });
  EXPECT_TRUE(absl::IsInvalidArgument(bogus)) << bogus;
}

TEST_F(PlacementGroupTest, CallsBeforeInitFail) {
  FakeCoreWorker::Uninstall();
  absl::Status s = Thrown([] { manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}}); });
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  core_ = FakeCoreWorker::Install();
}

TEST_F(PlacementGroupTest, StrategyNames) {
  for (auto s : {manta::PlacementStrategy::kPack, manta::PlacementStrategy::kSpread,
                 manta::PlacementStrategy::kStrictPack, manta::PlacementStrategy::kStrictSpread}) {
    EXPECT_EQ(manta::ParsePlacementStrategy(manta::PlacementStrategyName(s)), s);
  }
  EXPECT_EQ(manta::PlacementStrategyName(manta::PlacementStrategy::kStrictSpread), "STRICT_SPREAD");
  EXPECT_THROW(manta::ParsePlacementStrategy("pack"), manta::Error);
}

TEST_F(PlacementGroupTest, TaskOptionsCarryGroupBundleAndEnv) {
  manta::PlacementGroup pg = manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}, {{{"CPU", 1}}}}});
  auto r = manta::Task(Work).SetPlacementGroup(pg, 1).SetEnv({{"A", "1"}, {"GONE", ""}}).Remote(7);
  EXPECT_EQ(*manta::Get(r), 7);
  manta::core::TaskOptions o = core_->last_task_options();
  EXPECT_EQ(o.placement_group_id, pg.ID());
  EXPECT_EQ(o.bundle_index, 1);
  EXPECT_EQ(o.env_vars, (std::map<std::string, std::string>{{"A", "1"}, {"GONE", ""}}));

  manta::Task(Work).SetPlacementGroup(pg).Remote(1);
  EXPECT_EQ(core_->last_task_options().bundle_index, -1);
  EXPECT_TRUE(core_->last_task_options().env_vars.empty());
}

TEST_F(PlacementGroupTest, ActorOptionsCarryGroupBundleAndEnv) {
  manta::PlacementGroup pg = manta::CreatePlacementGroup({.bundles = {{{{"CPU", 1}}}}});
  auto actor = manta::Actor(Holder::Create).SetPlacementGroup(pg, 0).SetEnv({{"MEGASCALE_SLICE_ID", "3"}}).Remote();
  manta::core::ActorOptions o = core_->actor_options(actor.ID());
  EXPECT_EQ(o.placement_group_id, pg.ID());
  EXPECT_EQ(o.bundle_index, 0);
  EXPECT_EQ(o.env_vars.at("MEGASCALE_SLICE_ID"), "3");
}

TEST_F(PlacementGroupTest, InvalidEnvNamesAreRejectedAtSubmission) {
  absl::Status s = Thrown([] { manta::Task(Work).SetEnv({{"A=B", "1"}}).Remote(1); });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  s = Thrown([] { manta::Actor(Holder::Create).SetEnv({{"", "1"}}).Remote(); });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

}  // namespace manta_pg_test
