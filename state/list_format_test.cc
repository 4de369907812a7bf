#include "state/list_format.h"

#include <algorithm>

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "state/test_times.h"

namespace manta::state {
namespace {

std::vector<NodeView> Nodes() {
  NodeView worker;
  worker.node_id = "4f0e";
  worker.node_ip = "10.68.9.5";
  worker.start_time_ms = 2;
  worker.resources_total = {{"CPU", 8}, {"TPU", 4}, {"accelerator_type:TPU-V6E", 1}, {"tpu-group-0", 1}};
  worker.labels = {{"manta.io/tpu-slice-name", "tpu-group-0"}, {"manta.io/tpu-worker-id", "1"}};
  NodeView head;
  head.node_id = "bc0c";
  head.node_ip = "10.68.9.4";
  head.node_name = "head-host";
  head.is_head = true;
  head.start_time_ms = 1;
  head.resources_total = {{"CPU", 2}, {"memory", 16.0 * (1 << 30)}};
  NodeView dead;
  dead.node_id = "dead";
  dead.node_ip = "10.68.9.6";
  dead.alive = false;
  dead.start_time_ms = 3;
  dead.death_reason = "health check failed";
  return {worker, head, dead};
}

TEST(ListFormatTest, TableLikeRayListNodes) {
  std::string out = FormatNodeList(Nodes(), testing::RayExampleTime(), absl::UTCTimeZone());
  std::string expected =
      "======== List: 2026-04-21 10:20:20.945431 ========\n"
      "Stats:\n"
      "------------------------------\n"
      "Total: 3\n"
      "\n"
      "Table:\n"
      "------------------------------\n"
      "    NODE_ID  NODE_IP    IS_HEAD_NODE  STATE  STATE_MESSAGE        NODE_NAME  RESOURCES_TOTAL                "
      "LABELS\n"
      " 0  bc0c     10.68.9.4  True          ALIVE                       head-host  CPU: 2.0\n"
      "                                                                             memory: 16.000 GiB\n"
      " 1  4f0e     10.68.9.5  False         ALIVE                       10.68.9.5  CPU: 8.0                       "
      "manta.io/tpu-slice-name: tpu-group-0\n"
      "                                                                             TPU: 4.0                       "
      "manta.io/tpu-worker-id: '1'\n"
      "                                                                             accelerator_type:TPU-V6E: 1.0\n"
      "                                                                             tpu-group-0: 1.0\n"
      " 2  dead     10.68.9.6  False         DEAD   health check failed  10.68.9.6\n";
  EXPECT_EQ(out, expected) << out;
}

TEST(ListFormatTest, Json) {
  auto j = nlohmann::json::parse(FormatNodeListJson(Nodes()));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["node_id"], "bc0c");
  EXPECT_EQ(j[0]["is_head_node"], true);
  EXPECT_EQ(j[1]["resources_total"]["TPU"], 4.0);
  EXPECT_EQ(j[1]["labels"]["manta.io/tpu-worker-id"], "1");
  EXPECT_EQ(j[2]["state"], "DEAD");
  EXPECT_EQ(j[2]["state_message"], "health check failed");
}

TEST(ListFormatTest, YamlQuoting) {
  EXPECT_EQ(YamlScalar("tpu-group-0"), "tpu-group-0");
  EXPECT_EQ(YamlScalar("4x4"), "4x4");
  EXPECT_EQ(YamlScalar("1"), "'1'");
  EXPECT_EQ(YamlScalar("1.5"), "'1.5'");
  EXPECT_EQ(YamlScalar("true"), "'true'");
  EXPECT_EQ(YamlScalar(""), "''");
  EXPECT_EQ(YamlScalar("it's"), "it's");
  EXPECT_EQ(YamlScalar("-x"), "'-x'");
}

TEST(ListFormatTest, IndexColumnGrowsWithRows) {
  std::vector<std::vector<std::vector<std::string>>> rows(12, {{"x"}});
  std::string out = FormatTable({"A"}, rows);
  EXPECT_EQ(out.substr(0, out.find('\n')), "    A");
  EXPECT_NE(out.find("\n 0  x\n"), std::string::npos);
  EXPECT_NE(out.find("\n11  x\n"), std::string::npos);
}

TEST(ListFormatTest, NothingAUserNamedReachesTheTerminalRaw) {
  const std::string hostile =
      "x\x1b]0;PWNED\a\x1b[2J\nsecond row\xc2\x9b"
      "1m\xff";
  const std::string table = FormatTable({"NAME"}, {{{hostile}}});
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find('\a'), std::string::npos);
  EXPECT_EQ(table.find("\xc2\x9b"), std::string::npos) << "C1 control characters are escaped too";
  EXPECT_NE(table.find("x\\e]0;PWNED\\x07\\e[2J\\nsecond row\\x9b1m\\xff"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << "one header, one row";
  const std::string jobs = FormatJobList(
      nlohmann::json::array(
          {{{"submission_id", "raysubmit_a"}, {"status", "RUNNING"}, {"start_time", 0}, {"entrypoint", hostile}}}),
      absl::UTCTimeZone());
  EXPECT_EQ(jobs.find('\x1b'), std::string::npos) << jobs;
  EXPECT_EQ(std::count(jobs.begin(), jobs.end(), '\n'), 2) << jobs;
  EXPECT_EQ(EscapeForTerminal("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93") << "text stays text";
}

}  // namespace
}  // namespace manta::state
