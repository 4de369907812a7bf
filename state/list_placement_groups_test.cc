#include "state/list_placement_groups.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "state/test_times.h"

namespace manta::state {
namespace {

BundleView Bundle(int index, std::map<std::string, double> resources, std::string node_id = "") {
  BundleView b;
  b.index = index;
  b.resources = std::move(resources);
  b.node_id = std::move(node_id);
  return b;
}

// A created slice-wide group and a group waiting for a node.
std::vector<PlacementGroupView> Groups() {
  PlacementGroupView train;
  train.placement_group_id = "5e0c";
  train.name = "train";
  train.ray_namespace = "default";
  train.creator_job_id = "01000000";
  train.strategy = "STRICT_SPREAD";
  train.state = "CREATED";
  train.detached = true;
  for (int i = 0; i < 4; ++i) train.bundles.push_back(Bundle(i, {{"TPU", 4}}, "b" + std::to_string(i)));
  train.bundles[0].label_selector = {{"manta.io/tpu-slice-name", "tpu-group-0"}};
  train.state_message = "stale message of an earlier wait";  // not shown: CREATED
  PlacementGroupView waiting;
  waiting.placement_group_id = "77ab";
  waiting.creator_job_id = "02000000";
  waiting.strategy = "PACK";
  waiting.state = "PENDING";
  waiting.num_reschedules = 1;
  waiting.bundles = {Bundle(0, {{"CPU", 1}}), Bundle(1, {{"TPU", 8}}), Bundle(2, {{"TPU", 8}})};
  waiting.state_message = "no node could ever hold bundle 1\n{'TPU': 8.0}";
  waiting.infeasible = true;
  return {train, waiting};
}

TEST(ListPlacementGroupsTest, TableLikeRayListPlacementGroups) {
  std::string out =
      FormatPlacementGroupList(Groups(), 100, /*detail=*/false, testing::RayExampleSecond(), absl::UTCTimeZone());
  EXPECT_EQ(out,
            "======== List: 2026-04-21 10:20:20.000000 ========\n"
            "Stats:\n"
            "------------------------------\n"
            "Total: 2\n"
            "\n"
            "Table:\n"
            "------------------------------\n"
            "    PLACEMENT_GROUP_ID  NAME   CREATOR_JOB_ID  STATE    STRATEGY       BUNDLES           STATE_MESSAGE\n"
            " 0  5e0c                train  01000000        CREATED  STRICT_SPREAD  4 x {'TPU': 4.0}\n"
            " 1  77ab                       02000000        PENDING  PACK           1 x {'CPU': 1.0}  "
            "no node could ever hold bundle 1 {'TPU': 8.0}\n"
            "                                                                       2 x {'TPU': 8.0}\n");
}

TEST(ListPlacementGroupsTest, DetailListsEveryBundleWithItsNode) {
  std::string out =
      FormatPlacementGroupList(Groups(), 100, /*detail=*/true, testing::RayExampleSecond(), absl::UTCTimeZone());
  EXPECT_NE(
      out.find("    PLACEMENT_GROUP_ID  NAME   CREATOR_JOB_ID  STATE    STRATEGY       RAY_NAMESPACE  IS_DETACHED  "
               "NUM_RESCHEDULES  BUNDLES"),
      std::string::npos)
      << out;
  EXPECT_NE(
      out.find(" 0  5e0c                train  01000000        CREATED  STRICT_SPREAD  default        True         "
               "0                0: {'TPU': 4.0} labels={'manta.io/tpu-slice-name': 'tpu-group-0'} node=b0\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("  1: {'TPU': 4.0} node=b1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  3: {'TPU': 4.0} node=b3\n"), std::string::npos) << out;
  // Unplaced bundles have no node.
  EXPECT_NE(out.find("1                0: {'CPU': 1.0}"), std::string::npos) << out;
  EXPECT_NE(out.find("  2: {'TPU': 8.0}\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("stale message"), std::string::npos) << out;
}

TEST(ListPlacementGroupsTest, LimitAndEmpty) {
  EXPECT_NE(FormatPlacementGroupList(Groups(), 2, false, testing::RayExampleSecond(), absl::UTCTimeZone())
                .find("Total: 2\n\nShowing at most 2 entries; use --limit to see more.\n\nTable:"),
            std::string::npos);
  EXPECT_EQ(FormatPlacementGroupList({}, 100, false, testing::RayExampleSecond(), absl::UTCTimeZone()),
            "======== List: 2026-04-21 10:20:20.000000 ========\n"
            "Stats:\n"
            "------------------------------\n"
            "Total: 0\n"
            "\n"
            "Table:\n"
            "------------------------------\n"
            "    PLACEMENT_GROUP_ID  NAME  CREATOR_JOB_ID  STATE  STRATEGY  BUNDLES  STATE_MESSAGE\n");
  EXPECT_EQ(FormatPlacementGroupListJson({}), "[]\n");
}

TEST(ListPlacementGroupsTest, JsonHasEveryField) {
  auto j = nlohmann::json::parse(FormatPlacementGroupListJson(Groups()));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["placement_group_id"], "5e0c");
  EXPECT_EQ(j[0]["name"], "train");
  EXPECT_EQ(j[0]["creator_job_id"], "01000000");
  EXPECT_EQ(j[0]["state"], "CREATED");
  EXPECT_EQ(j[0]["strategy"], "STRICT_SPREAD");
  EXPECT_EQ(j[0]["is_detached"], true);
  ASSERT_EQ(j[0]["bundles"].size(), 4u);
  EXPECT_EQ(j[0]["bundles"][0]["bundle_index"], 0);
  EXPECT_EQ(j[0]["bundles"][0]["unit_resources"]["TPU"], 4.0);
  EXPECT_EQ(j[0]["bundles"][0]["label_selector"]["manta.io/tpu-slice-name"], "tpu-group-0");
  EXPECT_EQ(j[0]["bundles"][3]["node_id"], "b3");
  EXPECT_EQ(j[1]["state"], "PENDING");
  EXPECT_EQ(j[1]["infeasible"], true);
  EXPECT_EQ(j[1]["num_reschedules"], 1);
  EXPECT_EQ(j[1]["state_message"], "no node could ever hold bundle 1\n{'TPU': 8.0}");
  EXPECT_EQ(j[1]["bundles"][2]["node_id"], "");
}

}  // namespace
}  // namespace manta::state
