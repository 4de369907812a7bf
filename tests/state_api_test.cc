// The dashboard's State API against a head and a TPU slice started with
// `manta start`: Ray's shapes, limits and filters on real tables, the token
// guarding every route, and a GCS that is gone answered with 503.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

using nlohmann::json;

class StateApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = cluster_.Start();
    ASSERT_TRUE(s.ok()) << s;
  }

  // GET `path` with the token: the status code and the body.
  std::pair<int, std::string> Get(const std::string& path, bool with_token = true) {
    std::vector<std::string> args = {"-o", "-", "-w", "\n%{http_code}", cluster_.url() + path};
    if (with_token) args.insert(args.begin(), {"-H", cluster_.AuthHeader()});
    CommandResult r = cluster_.Curl(args);
    const size_t nl = r.out.rfind('\n');
    if (nl == std::string::npos) return {0, r.out + r.err};
    return {std::atoi(r.out.c_str() + nl + 1), r.out.substr(0, nl)};
  }
  // The `data.result` of a list route, checked to be Ray's envelope.
  json List(const std::string& path) {
    auto [code, body] = Get(path);
    EXPECT_EQ(code, 200) << path << ": " << body;
    json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << body;
    if (!j.is_object()) return json::object();
    EXPECT_EQ(j.value("result", false), true);
    return j["data"]["result"];
  }

  JobCluster cluster_;
};

TEST_F(StateApiTest, NodesAndClusterStatusInRaysShapes) {
  ASSERT_TRUE(cluster_.AddTpuSlice("tpu-group-0", "v6e-16", "4x4", 4).ok());
  ASSERT_TRUE(JobCluster::WaitFor([&] { return List("/api/v0/nodes").value("total", 0) == 5; }));

  json nodes = List("/api/v0/nodes");
  EXPECT_EQ(nodes["num_filtered"], 5);
  EXPECT_EQ(nodes["result"].size(), 5u);
  EXPECT_TRUE(nodes["result"][0].contains("node_id"));
  EXPECT_TRUE(nodes["result"][0].contains("resources_total"));

  json heads = List("/api/v0/nodes?filter_keys=is_head_node&filter_predicates=%3D&filter_values=true");
  EXPECT_EQ(heads["num_filtered"], 1);
  ASSERT_EQ(heads["result"].size(), 1u);
  EXPECT_EQ(heads["result"][0]["is_head_node"], true);

  json two = List("/api/v0/nodes?limit=2");
  EXPECT_EQ(two["result"].size(), 2u);
  EXPECT_EQ(two["total"], 5);  // truncated, as Ray's: only the page's nodes are read
  EXPECT_EQ(two["num_after_truncation"], 2);
  json last = List("/api/v0/nodes?limit=2&offset=4");  // the third page
  ASSERT_EQ(last["result"].size(), 1u);
  EXPECT_EQ(last["result"][0]["node_id"], nodes["result"][4]["node_id"]);

  // Each alive node's availability, every resource it has (chips a test's
  // bundle would reserve show as used, not missing).
  for (const json& node : nodes["result"]) {
    ASSERT_TRUE(node.contains("resources_available")) << node.dump();
    EXPECT_EQ(node["resources_available"].size(), node["resources_total"].size()) << node.dump();
    if (node["resources_total"].contains("TPU")) {
      EXPECT_EQ(node["resources_available"]["TPU"], 4.0);
    }
  }

  auto [code, body] = Get("/api/cluster_status");
  ASSERT_EQ(code, 200) << body;
  json status = json::parse(body)["data"]["clusterStatus"];
  EXPECT_EQ(status["autoscalerReport"]["activeNodes"].size(), 5u);
  ASSERT_TRUE(status["loadMetricsReport"]["usage"].contains("TPU")) << body;
  EXPECT_EQ(status["loadMetricsReport"]["usage"]["TPU"][1], 16.0);  // [used, total]

  auto [fcode, formatted] = Get("/api/cluster_status?format=1");
  ASSERT_EQ(fcode, 200);
  EXPECT_NE(json::parse(formatted)["data"]["clusterStatus"].get<std::string>().find("Node status"), std::string::npos);

  auto [hcode, healthz] = Get("/api/gcs_healthz");
  EXPECT_EQ(hcode, 200);
  EXPECT_EQ(healthz, "success");
}

TEST_F(StateApiTest, ActorsTasksAndGroupsOfARealJob) {
  // A named detached actor that outlives its driver, and one that dies with it.
  SpawnOptions driver;
  driver.executable = JobCluster::BinDir() + "/runtime_driver";
  driver.args = {"detached_create"};
  driver.env = {{"MANTA_ADDRESS", cluster_.gcs_address()}, {"MANTA_TOKEN", cluster_.token()}};
  auto ran = RunAndCapture(driver, absl::Seconds(60));
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_EQ(ran->exit_code, 0) << ran->out << ran->err;

  json alive;
  ASSERT_TRUE(JobCluster::WaitFor([&] {
    alive = List("/api/v0/actors?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE");
    json all = List("/api/v0/actors");
    return alive.value("num_filtered", 0) == 1 && all.value("total", 0) == 2;
  })) << alive.dump();
  EXPECT_EQ(alive["result"][0]["name"], "keeper");
  EXPECT_EQ(alive["result"][0]["is_detached"], true);
  json dead = List("/api/v0/actors?filter_keys=state&filter_predicates=!%3D&filter_values=ALIVE");
  ASSERT_EQ(dead["num_filtered"], 1);
  EXPECT_EQ(dead["result"][0]["name"], "owned");

  json tasks = List("/api/v0/tasks?limit=10000");
  EXPECT_GE(tasks.value("total", 0), 4) << tasks.dump();  // two creations, two calls

  // A job reserving entrypoint resources holds a placement group while it runs.
  cli::JobClient client = cluster_.Client();
  auto id = client.Submit({{"entrypoint", "sleep 30"}, {"entrypoint_num_cpus", 1}});
  ASSERT_TRUE(id.ok()) << id.status();
  json groups;
  ASSERT_TRUE(JobCluster::WaitFor([&] {
    groups = List("/api/v0/placement_groups?filter_keys=state&filter_predicates=%3D&filter_values=CREATED");
    return groups.value("num_filtered", 0) == 1;
  })) << groups.dump();
  EXPECT_EQ(groups["result"][0]["is_detached"], true);
  ASSERT_TRUE(client.StopJob(*id).ok());
}

TEST_F(StateApiTest, BadQueriesAndMissingTokensAreRefused) {
  for (const char* path :
       {"/api/v0/actors?limit=0", "/api/v0/nodes?limit=abc", "/api/v0/nodes?filter_keys=state&filter_values=ALIVE",
        "/api/v0/nodes?filter_keys=state&filter_predicates=%3E&filter_values=ALIVE",
        "/api/v0/nodes?filter_keys=no_such_column&filter_predicates=%3D&filter_values=x"}) {
    auto [code, body] = Get(path);
    EXPECT_EQ(code, 400) << path << ": " << body;
  }
  for (const char* path : {"/api/v0/nodes", "/api/v0/actors", "/api/cluster_status", "/api/gcs_healthz",
                           "/api/train/v2/runs/v1", "/api/v0/tasks", "/api/v0/placement_groups"}) {
    auto [code, body] = Get(path, /*with_token=*/false);
    EXPECT_EQ(code, 401) << path << ": " << body;
  }
  auto [code, body] = Get("/api/train/v2/runs/v1");
  ASSERT_EQ(code, 200) << body;
  EXPECT_EQ(json::parse(body)["train_runs"], json::array());
}

}  // namespace
}  // namespace manta::testing
