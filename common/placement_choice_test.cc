#include "common/placement_choice.h"

#include "gtest/gtest.h"

namespace manta::pg {
namespace {

ResourceSet Set(std::map<std::string, double> m) { return *ResourceSet::FromMap(m); }

BundleWant Want(int index, double cpus) { return {index, Set({{"CPU", cpus}}), "bundle " + std::to_string(index)}; }

// A node with `total` CPUs, `available` of them left, whose labels satisfy
// the wants marked in `matches`.
NodeOption Node(const NodeId& id, double total, double available, std::vector<bool> matches) {
  return {id, Set({{"CPU", total}}), Set({{"CPU", available}}), std::move(matches)};
}

const std::vector<bool> kAll(3, true);  // matches every want of these tests

class PlacementChoiceTest : public ::testing::Test {
 protected:
  NodeId a_ = NodeId::FromRandom(), b_ = NodeId::FromRandom(), c_ = NodeId::FromRandom();
};

TEST_F(PlacementChoiceTest, StrictSpreadFindsTheMatchingAGreedyChoiceMisses) {
  // Bundle 1 may only go to A (its labels); bundle 0 anywhere. Taking A for
  // bundle 0, as a first-fit pass would, leaves bundle 1 nowhere.
  std::vector<BundleWant> wants = {Want(0, 1), Want(1, 1)};
  Choice c = ChoosePlacement(Strategy::kStrictSpread, wants,
                             {Node(a_, 1, 1, {true, true}), Node(b_, 1, 1, {true, false})}, {});
  ASSERT_TRUE(c.placed) << c.message;
  EXPECT_EQ(c.nodes.at(0), b_);
  EXPECT_EQ(c.nodes.at(1), a_);
}

TEST_F(PlacementChoiceTest, StrictSpreadSkipsNodesTheGroupUsesAndSaysWhetherEverPossible) {
  std::vector<BundleWant> wants = {Want(1, 1)};
  Choice c = ChoosePlacement(Strategy::kStrictSpread, wants, {Node(a_, 1, 1, kAll), Node(b_, 1, 1, kAll)}, {a_});
  ASSERT_TRUE(c.placed);
  EXPECT_EQ(c.nodes.at(1), b_);

  c = ChoosePlacement(Strategy::kStrictSpread, {Want(0, 1), Want(1, 1)}, {Node(a_, 1, 0, kAll), Node(b_, 1, 1, kAll)},
                      {});
  EXPECT_FALSE(c.placed);
  EXPECT_FALSE(c.infeasible);  // A frees up some day
  EXPECT_EQ(c.message, "not enough nodes have room for one bundle each now");

  c = ChoosePlacement(Strategy::kStrictSpread, {Want(0, 1), Want(1, 1)}, {Node(a_, 1, 1, kAll)}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_TRUE(c.infeasible);
}

TEST_F(PlacementChoiceTest, PackTakesOneNodeWhenOneHasRoomElseSpills) {
  std::vector<BundleWant> wants = {Want(0, 1), Want(1, 1)};
  // A is first (less loaded) but too small for both: B holds the group.
  Choice c = ChoosePlacement(Strategy::kPack, wants, {Node(a_, 2, 1.5, kAll), Node(b_, 8, 4, kAll)}, {});
  ASSERT_TRUE(c.placed);
  EXPECT_EQ(c.nodes.at(0), b_);
  EXPECT_EQ(c.nodes.at(1), b_);
  // No node for both: bundle by bundle, the second where the first went when it fits.
  c = ChoosePlacement(Strategy::kPack, {Want(0, 1), Want(1, 1), Want(2, 1)},
                      {Node(a_, 2, 2, kAll), Node(b_, 2, 2, kAll)}, {});
  ASSERT_TRUE(c.placed);
  EXPECT_EQ(c.nodes.at(0), c.nodes.at(1));
  EXPECT_NE(c.nodes.at(2), c.nodes.at(0));
  // STRICT_PACK never spills.
  c = ChoosePlacement(Strategy::kStrictPack, {Want(0, 1), Want(1, 1), Want(2, 1)},
                      {Node(a_, 2, 2, kAll), Node(b_, 2, 2, kAll)}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_TRUE(c.infeasible);
  EXPECT_EQ(c.message, "no alive node could ever hold every bundle (STRICT_PACK)");
}

TEST_F(PlacementChoiceTest, APartlyPlacedGroupPacksWhereItIsAndSaysWhyNot) {
  // Bundle 0 already on B: PACK puts bundle 1 there although A is emptier,
  // STRICT_PACK only there.
  Choice c = ChoosePlacement(Strategy::kPack, {Want(1, 1)}, {Node(a_, 4, 4, kAll), Node(b_, 4, 2, kAll)}, {b_});
  ASSERT_TRUE(c.placed);
  EXPECT_EQ(c.nodes.at(1), b_);
  c = ChoosePlacement(Strategy::kStrictPack, {Want(1, 4)}, {Node(a_, 4, 4, kAll), Node(b_, 4, 2, kAll)}, {b_});
  EXPECT_FALSE(c.placed);
  EXPECT_FALSE(c.infeasible);
  EXPECT_EQ(c.message, "no node has room for every bundle at once now");
  c = ChoosePlacement(Strategy::kSpread, {Want(0, 2), Want(1, 2)}, {Node(a_, 2, 2, kAll), Node(b_, 2, 1, kAll)}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_FALSE(c.infeasible);
  EXPECT_EQ(c.message, "no node has room for bundle 1 now");
  EXPECT_TRUE(c.nodes.empty());
}

TEST_F(PlacementChoiceTest, SpreadPrefersFreshAndLeastLoadedNodes) {
  Choice c = ChoosePlacement(Strategy::kSpread, {Want(0, 1), Want(1, 1), Want(2, 1)},
                             {Node(a_, 4, 1, kAll), Node(b_, 4, 4, kAll), Node(c_, 4, 3, kAll)}, {});
  ASSERT_TRUE(c.placed);
  EXPECT_EQ(c.nodes.at(0), b_);  // empty
  EXPECT_EQ(c.nodes.at(1), c_);  // a quarter used
  EXPECT_EQ(c.nodes.at(2), a_);
}

TEST_F(PlacementChoiceTest, ABundleNoNodeCouldEverHoldIsInfeasible) {
  Choice c =
      ChoosePlacement(Strategy::kSpread, {Want(0, 1), Want(1, 16)}, {Node(a_, 8, 8, kAll), Node(b_, 8, 8, kAll)}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_TRUE(c.infeasible);
  EXPECT_EQ(c.message, "no alive node could ever hold bundle 1");
  // Room, but not for this bundle's labels.
  c = ChoosePlacement(Strategy::kSpread, {Want(0, 1)}, {Node(a_, 8, 8, {false})}, {});
  EXPECT_TRUE(c.infeasible);
  c = ChoosePlacement(Strategy::kSpread, {}, {}, {});
  EXPECT_TRUE(c.placed);  // nothing left to place
}

TEST(PlacementLoadTest, MeanShareUsedOverNonzeroResources) {
  EXPECT_DOUBLE_EQ(Load(Set({{"CPU", 4}, {"TPU", 4}}), Set({{"CPU", 2}, {"TPU", 4}})), 0.25);
  EXPECT_DOUBLE_EQ(Load(ResourceSet(), ResourceSet()), 0);
}

}  // namespace
}  // namespace manta::pg
