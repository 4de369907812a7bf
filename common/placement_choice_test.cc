#include "common/placement_choice.h"

#include <set>

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

// Two "slices" of two hosts each, as nodes labelled s1/s2; the test asks
// for two domains of two bundles (one bundle per host: worker w of a slice
// is the only node matching want w of each domain).
class PlacementByLabelTest : public ::testing::Test {
 protected:
  NodeOption Host(const NodeId& id, const std::string& slice, int worker, double available) {
    NodeOption o = Node(id, 4, available, {});
    o.label_value = slice;
    // wants 0,1 (domain 0) and 2,3 (domain 1): want w needs worker w % 2.
    for (int w = 0; w < 4; ++w) o.matches.push_back(w % 2 == worker);
    return o;
  }
  std::vector<BundleWant> Wants() {
    std::vector<BundleWant> wants;
    for (int w = 0; w < 4; ++w) {
      wants.push_back(Want(w, 4));
      wants.back().domain = w / 2;
    }
    return wants;
  }
  NodeId s1w0_ = NodeId::FromRandom(), s1w1_ = NodeId::FromRandom();
  NodeId s2w0_ = NodeId::FromRandom(), s2w1_ = NodeId::FromRandom();
  NodeId s3w0_ = NodeId::FromRandom();
};

TEST_F(PlacementByLabelTest, EachDomainTakesOneWholeValueAndNoTwoShareOne) {
  Choice c = ChoosePlacementByLabel(
      Strategy::kStrictSpread, Wants(),
      {Host(s1w0_, "s1", 0, 4), Host(s1w1_, "s1", 1, 4), Host(s2w0_, "s2", 0, 4), Host(s2w1_, "s2", 1, 4)}, {}, {});
  ASSERT_TRUE(c.placed) << c.message;
  // Each domain's bundles on one slice, the two domains on different slices.
  std::set<NodeId> d0 = {c.nodes.at(0), c.nodes.at(1)}, d1 = {c.nodes.at(2), c.nodes.at(3)};
  EXPECT_TRUE((d0 == std::set<NodeId>{s1w0_, s1w1_} && d1 == std::set<NodeId>{s2w0_, s2w1_}) ||
              (d1 == std::set<NodeId>{s1w0_, s1w1_} && d0 == std::set<NodeId>{s2w0_, s2w1_}));
  EXPECT_EQ(c.nodes.at(0) == s1w0_ || c.nodes.at(0) == s2w0_, true);  // worker 0 of its slice
}

TEST_F(PlacementByLabelTest, ASliceMissingAHostOrWithAHostBusyIsSkipped) {
  // s3 has no worker 1; s1's worker 1 is busy: only s2 can take a domain.
  std::vector<BundleWant> one = {Want(0, 4), Want(1, 4)};
  Choice c = ChoosePlacementByLabel(Strategy::kStrictSpread, one,
                                    {Host(s3w0_, "s3", 0, 4), Host(s1w0_, "s1", 0, 4), Host(s1w1_, "s1", 1, 0),
                                     Host(s2w0_, "s2", 0, 4), Host(s2w1_, "s2", 1, 4)},
                                    {}, {});
  ASSERT_TRUE(c.placed) << c.message;
  EXPECT_EQ(c.nodes.at(0), s2w0_);
  EXPECT_EQ(c.nodes.at(1), s2w1_);

  // Both domains, but one slice has room now: wait (feasible some day).
  c = ChoosePlacementByLabel(
      Strategy::kStrictSpread, Wants(),
      {Host(s1w0_, "s1", 0, 4), Host(s1w1_, "s1", 1, 0), Host(s2w0_, "s2", 0, 4), Host(s2w1_, "s2", 1, 4)}, {}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_FALSE(c.infeasible);

  // Only a slice missing a host: never.
  c = ChoosePlacementByLabel(Strategy::kStrictSpread, one, {Host(s3w0_, "s3", 0, 4)}, {}, {});
  EXPECT_FALSE(c.placed);
  EXPECT_TRUE(c.infeasible);
}

TEST_F(PlacementByLabelTest, ADomainWithBundlesPlacedStaysOnItsValue) {
  // Bundle 1 of domain 0 (a worker 1) is placed again; bundle 0 is on s2.
  std::vector<BundleWant> wants = {Want(1, 4)};
  auto worker1 = [this](const NodeId& id, const std::string& slice, bool is_worker1) {
    NodeOption o = Host(id, slice, 0, 4);
    o.matches = {is_worker1};
    return o;
  };
  Choice c = ChoosePlacementByLabel(Strategy::kStrictSpread, wants,
                                    {worker1(s1w0_, "s1", false), worker1(s1w1_, "s1", true),
                                     worker1(s2w0_, "s2", false), worker1(s2w1_, "s2", true)},
                                    {s2w0_}, {{0, "s2"}});
  ASSERT_TRUE(c.placed) << c.message;
  EXPECT_EQ(c.nodes.at(1), s2w1_);
}

}  // namespace
}  // namespace manta::pg
