// Every entry point of a head node (GCS and raylet gRPC, the dashboard's Jobs
// API, the CLI) walked with the hostile inputs of bad_input_table.h. Each
// must get its clear refusal, leave the cluster's state as it was, and leave
// every daemon serving. Connection floods against the dashboard and the GCS
// must not keep a legitimate request from being served.
#include <signal.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/process.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.pb.h"
#include "gtest/gtest.h"
#include "node_manager.pb.h"
#include "nlohmann/json.hpp"
#include "tests/bad_input_table.h"
#include "tests/raw_socket.h"

namespace manta::testing {
namespace {

std::string Hex(const std::string& bytes) { return ToHex(bytes); }

std::string FormatMap(const google::protobuf::Map<std::string, double>& m) {
  std::map<std::string, double> sorted(m.begin(), m.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

class BadInputTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = cluster_.Start();
    ASSERT_TRUE(s.ok()) << s;
    target_.cluster = &cluster_;
    target_.gcs_address = cluster_.gcs_address();
    target_.token = cluster_.token();
    std::string url = cluster_.url();
    target_.dashboard_port = std::stoi(url.substr(url.rfind(':') + 1));
    rpc::GetAllNodeInfoReply nodes;
    Outcome o = CallGrpc(target_.gcs_address, "/manta.rpc.NodeInfoGcsService/GetAllNodeInfo",
                         rpc::GetAllNodeInfoRequest(), target_.token, &nodes);
    ASSERT_EQ(o.code, "OK") << o.message;
    ASSERT_EQ(nodes.nodes_size(), 1);
    target_.node_id = nodes.nodes(0).node_id();
    target_.raylet_address = rpc::RayletAddress(nodes.nodes(0));
  }

  // Everything a refused input must leave alone, as text. Quantities are
  // compared exactly; `why` (if given) says what is wrong beyond a diff.
  std::string Snapshot() {
    std::string out;
    rpc::GetAllNodeInfoReply nodes;
    Outcome o = CallGrpc(target_.gcs_address, "/manta.rpc.NodeInfoGcsService/GetAllNodeInfo",
                         rpc::GetAllNodeInfoRequest(), target_.token, &nodes);
    absl::StrAppend(&out, "nodes: ", o.code, "\n");
    for (const auto& n : nodes.nodes()) {
      absl::StrAppend(&out, Hex(n.node_id()), " state=", n.state(), " draining=", n.draining(), " total={",
                      FormatMap(n.resources_total()), "} labels=", n.labels_size(), "\n");
    }
    rpc::GetClusterResourcesReply resources;
    o = CallGrpc(target_.gcs_address, "/manta.rpc.NodeResourceGcsService/GetClusterResources",
                 rpc::GetClusterResourcesRequest(), target_.token, &resources);
    absl::StrAppend(&out, "resources: ", o.code, " demands=", resources.demands_size(),
                    " pending_groups=", resources.pending_placement_groups_size(), "\n");
    for (const auto& n : resources.nodes()) {
      std::string total = FormatMap(n.total()), available = FormatMap(n.available());
      absl::StrAppend(&out, Hex(n.node_id()), " total={", total, "}",
                      total == available ? "" : absl::StrCat(" available={", available, "}"), "\n");
    }
    rpc::ListPlacementGroupsReply groups;
    o = CallGrpc(target_.gcs_address, "/manta.rpc.PlacementGroupGcsService/ListPlacementGroups",
                 rpc::ListPlacementGroupsRequest(), target_.token, &groups);
    absl::StrAppend(&out, "groups: ", o.code, "\n");
    for (const auto& g : groups.placement_groups()) {
      absl::StrAppend(&out, Hex(g.placement_group_id()), " state=", g.state(), "\n");
    }
    rpc::ListActorsReply actors;
    o = CallGrpc(target_.gcs_address, "/manta.rpc.ActorGcsService/ListActors", rpc::ListActorsRequest(), target_.token,
                 &actors);
    absl::StrAppend(&out, "actors: ", o.code, " ", actors.actors_size(), "\n");
    for (const char* ns : {"job", "bad_input", ""}) {
      rpc::KvKeysRequest keys_req;
      keys_req.set_ns(ns);
      rpc::KvKeysReply keys;
      o = CallGrpc(target_.gcs_address, "/manta.rpc.InternalKvGcsService/Keys", keys_req, target_.token, &keys);
      absl::StrAppend(&out, "kv ", ns, ": ", o.code, " ", absl::StrJoin(keys.keys(), ","), "\n");
    }
    Outcome jobs =
        SendHttp(target_.dashboard_port, HttpRequest("GET", "/api/jobs/", {"Authorization: Bearer " + target_.token}));
    absl::StrAppend(&out, "jobs: ", jobs.code, "\n");
    auto list = nlohmann::json::parse(jobs.message, nullptr, false);
    for (const auto& j : list.is_array() ? list : nlohmann::json::array()) {
      absl::StrAppend(&out, j.value("submission_id", "?"), " ", j.value("status", "?"), "\n");
    }
    for (const char* sub : {"/runtime_resources/packages", "/logs"}) {
      for (const std::string& f : ListDir(cluster_.session_dir() + sub)) absl::StrAppend(&out, sub, "/", f, "\n");
    }
    return out;
  }

  // Empty when the GCS, the raylet and the dashboard each answer a valid
  // request and every daemon in the session's pid files is alive.
  std::string WhyNotServing() {
    std::string why;
    Outcome o = CallGrpc(target_.gcs_address, "/manta.rpc.NodeInfoGcsService/GetClusterId", rpc::GetClusterIdRequest(),
                         target_.token);
    if (o.code != "OK") absl::StrAppend(&why, "GCS: ", o.code, " ", o.message, "; ");
    o = CallGrpc(target_.raylet_address, "/manta.rpc.NodeManagerService/GetNodeStats", rpc::GetNodeStatsRequest(),
                 target_.token);
    if (o.code != "OK") absl::StrAppend(&why, "raylet: ", o.code, " ", o.message, "; ");
    o = SendHttp(target_.dashboard_port,
                 HttpRequest("GET", "/api/version", {"Authorization: Bearer " + target_.token}));
    if (o.code != "HTTP 200") absl::StrAppend(&why, "dashboard: ", o.code, " ", o.message, "; ");
    for (const std::string& f : ListDir(cluster_.session_dir() + "/pids")) {
      auto pid = ReadPidFile(cluster_.session_dir() + "/pids/" + f);
      if (!pid.ok() || kill(*pid, 0) != 0) absl::StrAppend(&why, f, " is not alive; ");
    }
    return why;
  }

  JobCluster cluster_;
  Target target_;
};

TEST_F(BadInputTableTest, EveryBadInputIsRefusedAndChangesNothing) {
  cli::JobClient client = cluster_.Client();
  ASSERT_TRUE(client.Submit({{"entrypoint", "echo kept"}, {"submission_id", "kept-job"}}).ok());
  ASSERT_TRUE(JobCluster::WaitFor([&] {
    auto job = client.GetJob("kept-job");
    return job.ok() && (*job)["status"] == "SUCCEEDED";
  }));
  ASSERT_TRUE(JobCluster::WaitFor([&] { return WhyNotServing().empty(); })) << WhyNotServing();
  const std::string before = Snapshot();
  std::string expected = before;

  std::vector<BadInput> table;
  for (auto rows : {GcsBadInputs(target_), RayletBadInputs(target_), HttpBadInputs(target_), CliBadInputs(target_)}) {
    for (auto& row : rows) table.push_back(std::move(row));
  }
  std::map<std::string, int> per_entry_point;
  std::vector<std::string> failures;
  for (const BadInput& b : table) {
    bool named = absl::StartsWith(b.entry_point, "GCS") || absl::StartsWith(b.entry_point, "raylet") ||
                 absl::StartsWith(b.entry_point, "manta");
    ++per_entry_point[named ? b.entry_point : "dashboard HTTP"];
    const std::string name = b.entry_point + " [" + b.input + "]";
    Outcome got = b.send();
    if (!b.Matches(got)) {
      failures.push_back(absl::StrCat(name, ": expected ", b.code, " with '", b.message, "', got ", got.code, " '",
                                      got.message.substr(0, 300), "'"));
    }
    if (std::string not_serving = WhyNotServing(); !not_serving.empty()) {
      failures.push_back(absl::StrCat(name, ": daemons stopped serving: ", not_serving));
      break;
    }
    if (std::string after = Snapshot(); after != expected) {
      failures.push_back(absl::StrCat(name, ": state changed from\n", expected, "to\n", after));
      expected = after;
    }
  }
  // A bad `manta start` that got through would have left daemons here.
  cluster_.RunManta({"stop", "--temp-dir", cluster_.temp_dir() + "/bad_start"});
  if (std::string after = Snapshot(); after != before) {
    failures.push_back(absl::StrCat("the whole table: state changed from\n", before, "to\n", after));
  }
  for (const auto& [entry_point, n] : per_entry_point) std::cout << "  " << entry_point << ": " << n << " entries\n";
  for (const std::string& f : failures) std::cout << "FAILED " << f << "\n";
  std::cout << "bad inputs: " << table.size() << " tried, " << failures.size() << " failed" << std::endl;
  EXPECT_TRUE(failures.empty());
}

constexpr int kFlood = 300;

// Opens `kFlood` idle connections and `kFlood` that sent `partial` and stopped.
std::vector<int> Flood(int port, const std::string& partial) {
  std::vector<int> fds;
  for (int i = 0; i < 2 * kFlood; ++i) {
    int fd = ConnectLoopback(port);
    if (fd < 0) continue;
    if (i % 2 == 1) (void)!write(fd, partial.data(), partial.size());
    fds.push_back(fd);
  }
  return fds;
}

TEST_F(BadInputTableTest, IdleAndPartialConnectionsDoNotStarveARealRequest) {
  std::vector<int> dashboard = Flood(target_.dashboard_port, "GET /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  std::vector<int> gcs =
      Flood(std::stoi(target_.gcs_address.substr(target_.gcs_address.rfind(':') + 1)), "PRI * HTTP/2.0\r\n\r\nSM\r\n");
  EXPECT_GE(dashboard.size(), static_cast<size_t>(kFlood));
  EXPECT_GE(gcs.size(), static_cast<size_t>(kFlood));
  Outcome last_http, last_grpc;
  EXPECT_TRUE(JobCluster::WaitFor(
      [&] {
        last_http = SendHttp(target_.dashboard_port,
                             HttpRequest("GET", "/api/jobs/", {"Authorization: Bearer " + target_.token}));
        return last_http.code == "HTTP 200";
      },
      absl::Seconds(10)))
      << last_http.code << " " << last_http.message;
  EXPECT_TRUE(JobCluster::WaitFor(
      [&] {
        last_grpc = CallGrpc(target_.gcs_address, "/manta.rpc.NodeInfoGcsService/GetClusterId",
                             rpc::GetClusterIdRequest(), target_.token);
        return last_grpc.code == "OK";
      },
      absl::Seconds(10)))
      << last_grpc.code << " " << last_grpc.message;
  for (int fd : dashboard) close(fd);
  for (int fd : gcs) close(fd);
  EXPECT_TRUE(JobCluster::WaitFor([&] { return WhyNotServing().empty(); }, absl::Seconds(10))) << WhyNotServing();
}

}  // namespace
}  // namespace manta::testing
