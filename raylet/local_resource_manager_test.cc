#include "raylet/local_resource_manager.h"

#include "common/placement_group_resources.h"
#include "gtest/gtest.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using testing::Set;

TEST(LocalResourceManagerTest, GivesLowestFreeChips) {
  LocalResourceManager local(Set({{"CPU", 8}, {"TPU", 4}}), 4);
  auto one = local.Allocate(Set({{"TPU", 1}}));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->tpu_chip_ids, std::vector<int>({0}));
  auto two = local.Allocate(Set({{"TPU", 2}}));
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->tpu_chip_ids, std::vector<int>({1, 2}));
  EXPECT_FALSE(local.Allocate(Set({{"TPU", 2}})).has_value());
  EXPECT_EQ(local.available().Get("TPU").ToDouble(), 1.0);
}

TEST(LocalResourceManagerTest, FragmentedChipsAreReused) {
  LocalResourceManager local(Set({{"TPU", 4}}), 4);
  auto a = *local.Allocate(Set({{"TPU", 1}}));
  auto b = *local.Allocate(Set({{"TPU", 1}}));
  auto c = *local.Allocate(Set({{"TPU", 1}}));
  EXPECT_EQ(c.tpu_chip_ids, std::vector<int>({2}));
  EXPECT_TRUE(local.Release(a.id));
  EXPECT_TRUE(local.Release(c.id));
  auto d = local.Allocate(Set({{"TPU", 2}}));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->tpu_chip_ids, std::vector<int>({0, 2}));
  EXPECT_FALSE(local.Allocate(Set({{"TPU", 2}})).has_value());
  EXPECT_TRUE(local.Release(b.id));
  EXPECT_TRUE(local.Release(d->id));
  auto all = local.Allocate(Set({{"TPU", 4}}));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->tpu_chip_ids, std::vector<int>({0, 1, 2, 3}));
}

TEST(LocalResourceManagerTest, ReleaseIsIdempotentAndBumpsVersion) {
  LocalResourceManager local(Set({{"CPU", 2}, {"TPU", 4}}), 4);
  int changes = 0;
  local.SetChangeListener([&] { ++changes; });
  auto a = *local.Allocate(Set({{"CPU", 1}, {"TPU", 4}}));
  EXPECT_EQ(changes, 1);
  int64_t v = local.version();
  EXPECT_TRUE(local.Release(a.id));
  EXPECT_FALSE(local.Release(a.id));
  EXPECT_FALSE(local.Release(12345));
  EXPECT_EQ(changes, 2);
  EXPECT_EQ(local.version(), v + 1);
  EXPECT_EQ(local.available(), local.total());
}

TEST(LocalResourceManagerTest, NonTpuHostTreatsTpuAsQuantity) {
  LocalResourceManager local(Set({{"CPU", 2}, {"TPU", 1}}), 0);
  auto a = local.Allocate(Set({{"TPU", 0.5}}));
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->tpu_chip_ids.empty());
  EXPECT_TRUE(local.CanFitNow(Set({{"TPU", 0.5}})));
  EXPECT_FALSE(local.CanFitNow(Set({{"TPU", 1}})));
  EXPECT_TRUE(local.CanEverFit(Set({{"TPU", 1}})));
}

TEST(LocalResourceManagerTest, TpuHostRefusesFractionalChipsAndTooMany) {
  LocalResourceManager local(Set({{"TPU", 4}}), 4);
  EXPECT_FALSE(local.CanEverFit(Set({{"TPU", 0.5}})));
  EXPECT_FALSE(local.CanEverFit(Set({{"TPU", 8}})));
  EXPECT_FALSE(local.Allocate(Set({{"TPU", 0.5}})).has_value());
  EXPECT_TRUE(local.CanEverFit(Set({})));
  auto empty = local.Allocate(Set({}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->tpu_chip_ids.empty());
}

// --- placement-group bundles ---

class BundleResourcesTest : public ::testing::Test {
 protected:
  BundleResourcesTest() : local_(Set({{"CPU", 8}, {"TPU", 4}, {"memory", 1000}}), 4) {
    local_.SetChangeListener([this] { ++changes_; });
  }

  BundleSpec Bundle(int index, const std::map<std::string, double>& m) { return {group_, index, Set(m)}; }
  std::string Indexed(const std::string& base, int i) const { return pg::IndexedName(base, i, group_); }
  std::string Wildcard(const std::string& base) const { return pg::WildcardName(base, group_); }
  double Avail(const std::string& name) const { return local_.available().Get(name).ToDouble(); }
  double Total(const std::string& name) const { return local_.total().Get(name).ToDouble(); }
  // Checks the invariants the header promises.
  void ExpectConsistent() {
    EXPECT_TRUE(local_.total().Contains(local_.available()));
    std::map<PlacementGroupId, ResourceSet> indexed_sum;
    for (const auto& [key, b] : local_.bundles()) {
      if (!b.committed) continue;
      int unleased = 0;
      for (bool leased : b.chip_leased) unleased += leased ? 0 : 1;
      EXPECT_EQ(local_.available().Get(pg::IndexedName("TPU", key.second, key.first)).ToDouble(), unleased);
      for (const auto& [name, q] : b.resources.entries()) {
        ResourceSet one;
        one.Set(name, local_.available().Get(pg::IndexedName(name, key.second, key.first)));
        indexed_sum[key.first].Add(one);
      }
    }
    for (const auto& [group, sum] : indexed_sum) {
      for (const auto& [name, q] : sum.entries()) {
        EXPECT_EQ(local_.available().Get(pg::WildcardName(name, group)), q) << name;
      }
    }
  }

  PlacementGroupId group_ = PlacementGroupId::FromRandom();
  LocalResourceManager local_;
  int changes_ = 0;
};

TEST_F(BundleResourcesTest, PrepareCommitReturnRoundTripRestoresEverything) {
  const ResourceSet total = local_.total(), available = local_.available();
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 1}, {"TPU", 2}}), Bundle(1, {{"CPU", 2}})}).ok());
  EXPECT_EQ(local_.total(), total) << "prepare does not add group resources";
  EXPECT_EQ(Avail("CPU"), 5.0);
  EXPECT_EQ(Avail("TPU"), 2.0);
  EXPECT_EQ(local_.bundles().at({group_, 0}).tpu_chip_ids, std::vector<int>({0, 1}));
  EXPECT_TRUE(local_.bundles().at({group_, 1}).tpu_chip_ids.empty());
  EXPECT_FALSE(local_.CanEverFit(pg::BundleDemand(Set({{"CPU", 1}}), group_, 0))) << "not committed yet";

  ASSERT_TRUE(local_.CommitBundles(group_, {0, 1}).ok());
  EXPECT_EQ(Total(Indexed("TPU", 0)), 2.0);
  EXPECT_EQ(Total(Wildcard("CPU")), 3.0);
  EXPECT_EQ(Avail(Indexed("CPU", 1)), 2.0);
  EXPECT_EQ(Avail(Wildcard("bundle")), 2000.0);
  EXPECT_EQ(Avail("CPU"), 5.0) << "commit leaves the plain resources reserved";
  ExpectConsistent();

  EXPECT_EQ(local_.ReturnBundles({{group_, 0}, {group_, 1}}).size(), 2u);
  EXPECT_EQ(local_.total(), total);
  EXPECT_EQ(local_.available(), available);
  EXPECT_TRUE(local_.bundles().empty());
  // All four chips are free again.
  auto all = local_.Allocate(Set({{"TPU", 4}}));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->tpu_chip_ids, std::vector<int>({0, 1, 2, 3}));
}

TEST_F(BundleResourcesTest, PrepareIsAllOrNothing) {
  int64_t v = local_.version();
  absl::Status s = local_.PrepareBundles({Bundle(0, {{"TPU", 4}}), Bundle(1, {{"TPU", 1}})});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(local_.bundles().empty());
  EXPECT_EQ(local_.available(), local_.total());
  EXPECT_EQ(local_.version(), v);
  EXPECT_EQ(changes_, 0);
  // Each fits alone.
  EXPECT_TRUE(local_.PrepareBundles({Bundle(0, {{"TPU", 4}})}).ok());
  EXPECT_EQ(changes_, 1);
}

TEST_F(BundleResourcesTest, RetriedPrepareAndCommitDoNotDoubleReserve) {
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 4}})}).ok());
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 4}})}).ok());
  EXPECT_EQ(Avail("CPU"), 4.0);
  // A retry may carry a new bundle with it: only that one is reserved.
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 4}}), Bundle(1, {{"CPU", 2}})}).ok());
  EXPECT_EQ(Avail("CPU"), 2.0);
  ASSERT_TRUE(local_.CommitBundles(group_, {0}).ok());
  int64_t v = local_.version();
  ASSERT_TRUE(local_.CommitBundles(group_, {0}).ok());
  EXPECT_EQ(local_.version(), v) << "a repeated commit changes nothing";
  EXPECT_EQ(Total(Wildcard("CPU")), 4.0);
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 4}})}).ok()) << "prepare after commit is a retry";
  EXPECT_EQ(Total(Wildcard("CPU")), 4.0);
  EXPECT_EQ(Avail("CPU"), 2.0);
  EXPECT_EQ(local_.PrepareBundles({Bundle(0, {{"CPU", 3}})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(local_.CommitBundles(group_, {0, 7}).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(local_.bundles().at({group_, 1}).committed) << "a failed commit commits nothing";
  EXPECT_EQ(local_.CommitBundles(PlacementGroupId::FromRandom(), {}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(local_.CommitBundles(group_, {}).ok());
  EXPECT_TRUE(local_.bundles().at({group_, 1}).committed);
  EXPECT_EQ(local_.ReturnBundles({{group_, 0}}).size(), 1u);
  EXPECT_TRUE(local_.ReturnBundles({{group_, 0}}).empty()) << "returning twice is a no-op";
  EXPECT_EQ(Avail("CPU"), 6.0);
  EXPECT_EQ(Total(Wildcard("CPU")), 2.0);
  ExpectConsistent();
}

TEST_F(BundleResourcesTest, BadBundlesChangeNothing) {
  ASSERT_TRUE(local_.PrepareBundles({Bundle(5, {{"CPU", 1}})}).ok());
  const ResourceSet total = local_.total(), available = local_.available();
  int64_t v = local_.version();
  std::vector<std::vector<BundleSpec>> bad = {
      {Bundle(0, {})},
      {Bundle(0, {{"CPU", 0}})},
      {Bundle(-1, {{"CPU", 1}})},
      {Bundle(0, {{"CPU", 1}}), Bundle(0, {{"CPU", 1}})},
      {Bundle(0, {{"CPU", 1}}), Bundle(1, {{"TPU", 1.5}})},
      {Bundle(0, {{"bundle", 1}})},
      {Bundle(0, {{pg::WildcardName("CPU", PlacementGroupId::FromRandom()), 1}})},
      {Bundle(0, {{std::string(250, 'x'), 1}})},
      {BundleSpec{PlacementGroupId(), 0, Set({{"CPU", 1}})}},
      {Bundle(1, {{"CPU", 1}}), Bundle(5, {{"CPU", 2}})},
  };
  for (const auto& bundles : bad) {
    absl::Status s = local_.PrepareBundles(bundles);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_FALSE(s.message().empty());
  }
  EXPECT_EQ(local_.total(), total);
  EXPECT_EQ(local_.available(), available);
  EXPECT_EQ(local_.bundles().size(), 1u);
  EXPECT_EQ(local_.version(), v);
}

TEST_F(BundleResourcesTest, LeasesInABundleGetItsChipsAndGiveThemBack) {
  ASSERT_TRUE(local_.Allocate(Set({{"TPU", 1}})).has_value());  // chip 0 is the host's
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"TPU", 2}, {"CPU", 1}})}).ok());
  ASSERT_TRUE(local_.CommitBundles(group_, {0}).ok());
  EXPECT_EQ(local_.bundles().at({group_, 0}).tpu_chip_ids, std::vector<int>({1, 2}));
  ResourceSet one_chip = pg::BundleDemand(Set({{"TPU", 1}}), group_, 0);
  auto a = local_.Allocate(one_chip);
  auto b = local_.Allocate(pg::BundleDemand(Set({{"TPU", 1}}), group_, -1));
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->tpu_chip_ids, std::vector<int>({1}));
  EXPECT_EQ(b->tpu_chip_ids, std::vector<int>({2})) << "two leases in one bundle never share a chip";
  EXPECT_EQ(b->bundles, std::vector<BundleKey>({{group_, 0}}));
  EXPECT_EQ(Avail(Indexed("TPU", 0)), 0.0);
  EXPECT_EQ(Avail(Wildcard("TPU")), 0.0);
  EXPECT_EQ(Avail("TPU"), 1.0) << "the bundle does not use the host's free chip";
  EXPECT_FALSE(local_.CanFitNow(one_chip));
  EXPECT_TRUE(local_.CanEverFit(one_chip));
  EXPECT_FALSE(local_.CanEverFit(pg::BundleDemand(Set({{"TPU", 4}}), group_, 0)));
  EXPECT_FALSE(local_.CanEverFit(pg::BundleDemand(Set({{"TPU", 1}}), group_, 1)));
  ExpectConsistent();
  EXPECT_TRUE(local_.Release(a->id));
  auto c = local_.Allocate(one_chip);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tpu_chip_ids, std::vector<int>({1}));
  EXPECT_TRUE(local_.Release(b->id));
  EXPECT_TRUE(local_.Release(c->id));
  EXPECT_EQ(Avail(Indexed("TPU", 0)), 2.0);
  EXPECT_EQ(Avail(Wildcard("TPU")), 2.0);
  EXPECT_EQ(Avail(Wildcard("bundle")), 1000.0);
  ExpectConsistent();
}

TEST_F(BundleResourcesTest, AnyBundleLeasePicksABundleWithRoom) {
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 1}}), Bundle(1, {{"CPU", 3}})}).ok());
  ASSERT_TRUE(local_.CommitBundles(group_, {}).ok());
  ResourceSet two = pg::BundleDemand(Set({{"CPU", 2}}), group_, -1);
  ResourceSet four = pg::BundleDemand(Set({{"CPU", 4}}), group_, -1);
  EXPECT_FALSE(local_.CanEverFit(four)) << "no single bundle holds 4 CPU, though the group does";
  auto a = local_.Allocate(two);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->bundles, std::vector<BundleKey>({{group_, 1}}));
  EXPECT_EQ(Avail(Indexed("CPU", 1)), 1.0);
  EXPECT_EQ(Avail(Indexed("CPU", 0)), 1.0);
  EXPECT_EQ(Avail(Wildcard("CPU")), 2.0);
  EXPECT_FALSE(local_.CanFitNow(two)) << "2 CPU are left, but not in one bundle";
  auto b = local_.Allocate(pg::BundleDemand(Set({{"CPU", 1}}), group_, -1));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->bundles, std::vector<BundleKey>({{group_, 0}})) << "lowest index first";
  ExpectConsistent();
  // What each gives back when released: both names of its bundle.
  const ResourceSet held = local_.AllocatedResources(a->id);
  EXPECT_EQ(held.Get(Indexed("CPU", 1)).ToDouble(), 2.0) << held.DebugString();
  EXPECT_EQ(held.Get(Wildcard("CPU")).ToDouble(), 2.0) << held.DebugString();
  EXPECT_TRUE(held.Get(Indexed("CPU", 0)).IsZero()) << held.DebugString();
  local_.Release(a->id);
  EXPECT_TRUE(local_.AllocatedResources(a->id).empty());
  local_.Release(b->id);
  EXPECT_EQ(Avail(Wildcard("CPU")), 4.0);
}

TEST_F(BundleResourcesTest, ReturningABundleInUseKeepsTheBooksStraight) {
  const ResourceSet total = local_.total(), available = local_.available();
  ASSERT_TRUE(local_.PrepareBundles({Bundle(0, {{"CPU", 2}, {"TPU", 2}})}).ok());
  ASSERT_TRUE(local_.CommitBundles(group_, {0}).ok());
  auto a = local_.Allocate(pg::BundleDemand(Set({{"CPU", 1}, {"TPU", 2}}), group_, 0));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(local_.ReturnBundles({{group_, 0}}).size(), 1u);
  EXPECT_TRUE(local_.Release(a->id));
  EXPECT_EQ(local_.total(), total);
  EXPECT_EQ(local_.available(), available);
  EXPECT_EQ(local_.Allocate(Set({{"TPU", 4}}))->tpu_chip_ids, std::vector<int>({0, 1, 2, 3}));
}

TEST(LocalResourceManagerTest, NonTpuHostBundlesHoldFractionalTpu) {
  LocalResourceManager local(Set({{"CPU", 2}, {"TPU", 1}}), 0);
  PlacementGroupId g = PlacementGroupId::FromRandom();
  ASSERT_TRUE(local.PrepareBundles({{g, 0, Set({{"TPU", 0.5}})}}).ok());
  ASSERT_TRUE(local.CommitBundles(g, {0}).ok());
  auto a = local.Allocate(pg::BundleDemand(Set({{"TPU", 0.25}}), g, 0));
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->tpu_chip_ids.empty());
  EXPECT_EQ(local.available().Get(pg::IndexedName("TPU", 0, g)).ToDouble(), 0.25);
}

}  // namespace
}  // namespace manta::raylet
