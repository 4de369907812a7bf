// The head's GCS killed and restarted on the same session directory: nodes,
// KV and cluster id come back from the durable store, and the raylets that
// were alive re-register without restarting.
#include <signal.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

TEST(GcsRestartTest, RestartedHeadRecoversTablesAndRayletsReRegister) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  ASSERT_TRUE(cluster.AddRaylets({RayletOptions(), RayletOptions()}).ok());
  auto cluster_id = cluster.GetClusterId();
  ASSERT_TRUE(cluster_id.ok()) << cluster_id.status();
  MANTA_ASSERT_OK(cluster.KvPut("test", "durable-key", "durable-value"));

  std::vector<pid_t> pids;
  std::vector<std::string> node_ids;
  for (int i = 0; i < cluster.num_raylets(); ++i) {
    pids.push_back(cluster.raylet(i).pid);
    node_ids.push_back(cluster.raylet(i).node_id);
  }
  pid_t old_gcs = cluster.gcs().pid;

  MANTA_ASSERT_OK(cluster.KillGcs());
  MANTA_ASSERT_OK(cluster.RestartGcs());
  EXPECT_NE(cluster.gcs().pid, old_gcs);

  auto recovered_id = cluster.GetClusterId();
  ASSERT_TRUE(recovered_id.ok()) << recovered_id.status();
  EXPECT_EQ(*recovered_id, *cluster_id);
  auto value = cluster.KvGet("test", "durable-key");
  ASSERT_TRUE(value.ok()) << value.status();
  ASSERT_TRUE(value->has_value());
  EXPECT_EQ(**value, "durable-value");

  auto all_alive = [&] {
    auto reply = cluster.GetAllNodeInfo();
    if (!reply.ok() || reply->nodes_size() != static_cast<int>(node_ids.size())) return false;
    for (const auto& id : node_ids) {
      auto node = cluster.FindNode(id);
      if (!node || node->state() != rpc::NodeInfo::ALIVE) return false;
    }
    return true;
  };
  EXPECT_TRUE(Cluster::WaitFor(all_alive, absl::Seconds(10)));
  // They stay alive through a few health-check rounds of the new GCS.
  bool stayed_alive = true;
  absl::Time until = absl::Now() + absl::Seconds(3);
  Cluster::WaitFor(
      [&] {
        if (!all_alive()) stayed_alive = false;
        return !stayed_alive || absl::Now() > until;
      },
      absl::Seconds(5));
  EXPECT_TRUE(stayed_alive);
  for (size_t i = 0; i < pids.size(); ++i) {
    EXPECT_TRUE(RunsExecutable(pids[i], "raylet")) << "raylet " << i << " restarted or died";
    EXPECT_EQ(cluster.raylet(static_cast<int>(i)).pid, pids[i]);
  }
  auto resources = cluster.GetClusterResources();
  ASSERT_TRUE(resources.ok());
  EXPECT_EQ(resources->nodes_size(), 3);

  CommandResult status = cluster.RunManta({"status"}, cluster.MantaEnv());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, "(no failures)")) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, "\n 0.0/3.0 CPU\n")) << status.out;
}

// A driver that exits while the GCS is down never says so; the restarted GCS
// finishes its job once the driver fails to return, which stops its workers
// and gives back what they held.
TEST(GcsRestartTest, AJobWhoseDriverDiedWhileTheGcsWasDownIsFinished) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  ClusterOptions options;
  options.head.num_cpus = 2;
  options.head.resources = R"({"victim": 1})";
  Cluster cluster(options);
  MANTA_ASSERT_OK(cluster.StartHead());
  const std::string dir = cluster.temp_dir();
  auto driver = cluster.StartProgram("drain_driver", {"hold", dir}, dir + "/driver.out");
  MANTA_ASSERT_OK(driver.status());
  ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(TailFile(dir + "/driver.out", 20), "HELD"); },
                               absl::Seconds(30)))
      << TailFile(dir + "/driver.out", 20);
  EXPECT_FALSE(cluster.ResourcesFull());

  MANTA_ASSERT_OK(cluster.KillGcs());
  MANTA_ASSERT_OK(TerminateProcess(*driver, absl::Now() + absl::Seconds(5), SIGKILL));
  MANTA_ASSERT_OK(cluster.RestartGcs());
  // The held task would hold its CPU and "victim" for another minute.
  std::string why;
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.ResourcesFull(&why); }, absl::Seconds(30)))
      << "the dead driver's job still holds resources: " << why;
}

// A driver started while the head is down waits for it (within
// MANTA_GCS_RECONNECT_TIMEOUT_S) instead of failing at once, then runs tasks.
TEST(GcsRestartTest, ADriverStartedWhileTheGcsIsDownWaitsForIt) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  ClusterOptions options;
  options.head.num_cpus = 2;
  options.head.env = {{"MANTA_TEST_NODE", "head"}};
  Cluster cluster(options);
  MANTA_ASSERT_OK(cluster.StartHead());
  const std::string dir = cluster.temp_dir();
  MANTA_ASSERT_OK(cluster.KillGcs());
  auto driver = cluster.StartProgram("drain_driver", {"submit_after", dir}, dir + "/waiting_driver.out");
  MANTA_ASSERT_OK(driver.status());
  auto output = [&] { return TailFile(dir + "/waiting_driver.out", 20); };
  // Still waiting for the head, not failed.
  EXPECT_FALSE(Cluster::WaitFor([&] { return !IsAlive(*driver); }, absl::Seconds(2))) << output();
  MANTA_ASSERT_OK(cluster.RestartGcs());
  ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(output(), "READY"); }, absl::Seconds(60))) << output();
  { std::ofstream(dir + "/go") << "go"; }
  EXPECT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(output(), "RAN head"); }, absl::Seconds(60)))
      << output();
  TerminateProcess(*driver, absl::Now() + absl::Seconds(2)).IgnoreError();
}

}  // namespace
}  // namespace manta::testing
