#include "common/placement_group_resources.h"

#include "gtest/gtest.h"

namespace manta::pg {
namespace {

TEST(PlacementGroupResourcesTest, NamesRoundTrip) {
  PlacementGroupId g = PlacementGroupId::FromRandom();
  auto w = ParseGroupResource(WildcardName("TPU", g));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->base, "TPU");
  EXPECT_EQ(w->index, -1);
  EXPECT_EQ(w->group, g);
  auto i = ParseGroupResource(IndexedName("accelerator_type:TPU-V6E", 12, g));
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->base, "accelerator_type:TPU-V6E");
  EXPECT_EQ(i->index, 12);
  EXPECT_FALSE(ParseGroupResource("CPU").has_value());
  EXPECT_FALSE(ParseGroupResource("TPU-v6e-16-head").has_value());
  EXPECT_FALSE(ParseGroupResource("_group_" + g.Hex()).has_value());
  EXPECT_FALSE(ParseGroupResource("CPU_group_x_" + g.Hex()).has_value());
}

TEST(PlacementGroupResourcesTest, TaskDemandFitsInCommittedBundle) {
  PlacementGroupId g = PlacementGroupId::FromRandom();
  ResourceSet bundle = *ResourceSet::FromMap({{"CPU", 2}, {"TPU", 4}});
  ResourceSet node = CommittedResources(bundle, g, 1);
  EXPECT_TRUE(node.Contains(BundleDemand(*ResourceSet::FromMap({{"TPU", 4}}), g, 1)));
  EXPECT_TRUE(node.Contains(BundleDemand(*ResourceSet::FromMap({{"CPU", 1}}), g, -1)));
  EXPECT_TRUE(node.Contains(BundleDemand(ResourceSet(), g, 1)));
  EXPECT_FALSE(node.Contains(BundleDemand(ResourceSet(), g, 0)));
  EXPECT_FALSE(node.Contains(BundleDemand(*ResourceSet::FromMap({{"TPU", 8}}), g, 1)));
  EXPECT_FALSE(node.Contains(BundleDemand(ResourceSet(), PlacementGroupId::FromRandom(), -1)));
  EXPECT_EQ(BundleDemand(ResourceSet(), g, 1).Get(IndexedName(kBundleMarker, 1, g)).ToDouble(), 0.001);
}

}  // namespace
}  // namespace manta::pg

namespace manta::pg {
namespace {

TEST(SummarizeNameTest, PlainReservedOrSkipped) {
  PlacementGroupId group = PlacementGroupId::FromRandom();
  EXPECT_EQ(SummarizeName("TPU").kind, SummaryName::kPlain);
  EXPECT_EQ(SummarizeName("my_group_x").kind, SummaryName::kPlain);  // not a group name
  SummaryName reserved = SummarizeName(WildcardName("TPU", group));
  EXPECT_EQ(reserved.kind, SummaryName::kReserved);
  EXPECT_EQ(reserved.name, "TPU");
  EXPECT_EQ(SummarizeName(IndexedName("TPU", 1, group)).kind, SummaryName::kSkip);
  EXPECT_EQ(SummarizeName(WildcardName(kBundleMarker, group)).kind, SummaryName::kSkip);
  EXPECT_EQ(SummarizeName("node:10.0.0.1").kind, SummaryName::kSkip);
}

}  // namespace
}  // namespace manta::pg
