// The head's GCS killed and restarted: nodes, KV and cluster id come back
// from the durable store, the raylets that were alive re-register without
// restarting, and actors, tasks and placement groups live on. Each scenario
// runs with the tables in SQLite (the session directory) and in an external
// Redis (a real redis-server per test).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/process.h"
#include "common/rpc/grpc_util.h"
#include "gcs/redis_server_process.h"
#include "gtest/gtest.h"
#include "proto/gcs_service.grpc.pb.h"
#include "tests/cluster_fixture.h"
#include "tests/held_work_driver.h"

namespace manta::testing {
namespace {

constexpr char kRedisPassword[] = "restart-test-password";

class GcsRestartTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!redis_backend()) return;
    if (!gcs::RedisServerProcess::Installed()) GTEST_SKIP() << gcs::RedisServerProcess::kNotInstalled;
    redis_ = std::make_unique<gcs::RedisServerProcess>(gcs::RedisServerOptions{.password = kRedisPassword});
    MANTA_ASSERT_OK(redis_->Start());
  }

  bool redis_backend() const { return GetParam() == "redis"; }

  // `options` with the GCS's tables in this test's store. The Redis password
  // comes from Ray's variable, not the command line.
  ClusterOptions WithStore(ClusterOptions options = {}) {
    if (redis_backend()) {
      options.gcs_extra_args.push_back(absl::StrCat("--storage=redis://127.0.0.1:", redis_->port()));
      options.gcs_env.emplace_back("RAY_REDIS_PASSWORD", kRedisPassword);
    }
    return options;
  }

  // Empties the store of a GCS that is down, as a lost disk or a new Redis.
  void WipeStore(const Cluster& cluster) {
    if (redis_backend()) {
      auto reply = redis_->Command({"FLUSHALL"});
      ASSERT_TRUE(reply.ok() && !reply->is_error()) << reply.status() << (reply.ok() ? reply->str : "");
      return;
    }
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::string path = cluster.session_dir() + "/gcs_store.sqlite" + suffix;
      ASSERT_TRUE(unlink(path.c_str()) == 0 || errno == ENOENT) << path;
    }
  }

  // Where the tables are: the Redis hash of the cluster table, or the file.
  void ExpectTablesInTheStore(const Cluster& cluster, const std::string& cluster_id) {
    const bool file = PathExists(cluster.session_dir() + "/gcs_store.sqlite");
    if (!redis_backend()) {
      EXPECT_TRUE(file);
      return;
    }
    EXPECT_FALSE(file) << "the GCS wrote SQLite although told to use Redis";
    auto id = redis_->Command({"HGET", "manta@cluster", "cluster_id"});
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->str, cluster_id);
  }

  std::unique_ptr<gcs::RedisServerProcess> redis_;
};

INSTANTIATE_TEST_SUITE_P(Store, GcsRestartTest, ::testing::Values("sqlite", "redis"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(GcsRestartTest, RestartedHeadRecoversTablesAndRayletsReRegister) {
  Cluster cluster(WithStore());
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
  ExpectTablesInTheStore(cluster, *cluster_id);
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
TEST_P(GcsRestartTest, AJobWhoseDriverDiedWhileTheGcsWasDownIsFinished) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  ClusterOptions options;
  options.head.num_cpus = 2;
  options.head.resources = R"({"victim": 1})";
  Cluster cluster(WithStore(options));
  MANTA_ASSERT_OK(cluster.StartHead());
  const std::string dir = cluster.temp_dir();
  auto driver = cluster.StartProgram("drain_driver", {"hold", dir}, dir + "/driver.out");
  MANTA_ASSERT_OK(driver.status());
  ASSERT_TRUE(
      Cluster::WaitFor([&] { return absl::StrContains(TailFile(dir + "/driver.out", 20), "HELD"); }, absl::Seconds(30)))
      << TailFile(dir + "/driver.out", 20);
  // The GCS hears of the lease with the raylet's next resource report.
  ASSERT_TRUE(Cluster::WaitFor([&] { return !cluster.ResourcesFull(); }, absl::Seconds(10)))
      << "the held task's resources never showed as used";

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
TEST_P(GcsRestartTest, ADriverStartedWhileTheGcsIsDownWaitsForIt) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  ClusterOptions options;
  options.head.num_cpus = 2;
  options.head.env = {{"MANTA_TEST_NODE", "head"}};
  Cluster cluster(WithStore(options));
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
  EXPECT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(output(), "RAN head"); }, absl::Seconds(60))) << output();
  TerminateProcess(*driver, absl::Now() + absl::Seconds(2)).IgnoreError();
}

// Work in flight lives through a kill -9 of the head: the actor keeps its
// process and state and answers, the held task finishes, the placement
// group keeps its bundles and runs tasks, new tasks and actors run, and
// nothing is leaked.
TEST_P(GcsRestartTest, ActorsTasksAndGroupsLiveThroughAKilledHead) {
  if (!HeldWorkDriver::Built()) GTEST_SKIP() << "drain_driver was not built";
  Cluster cluster(WithStore(HeldWorkDriver::Options()));
  HeldWorkDriver driver(&cluster, "restart_driver");
  ASSERT_TRUE(driver.StartAndWaitReady());

  MANTA_ASSERT_OK(cluster.KillGcs());
  MANTA_ASSERT_OK(cluster.RestartGcs());
  EXPECT_TRUE(driver.GoAndExitOk());
  for (int i = 0; i < cluster.num_raylets(); ++i) {
    EXPECT_TRUE(RunsExecutable(cluster.raylet(i).pid, "raylet")) << "raylet " << i << " restarted or died";
  }
  std::string why;
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.ResourcesFull(&why); }, absl::Seconds(30))) << why;
}

// A CreatePlacementGroup answered is in the store: a GCS killed (-9) right
// after the answers still has every group when it restarts, and places them.
TEST_P(GcsRestartTest, GroupsWhoseCreateWasAnsweredLiveThroughAKilledHead) {
  ClusterOptions options;
  options.head.num_cpus = 2;
  Cluster cluster(WithStore(options));
  MANTA_ASSERT_OK(cluster.StartHead());
  auto stub = rpc::PlacementGroupGcsService::NewStub(rpc::MakeChannel(cluster.gcs_address()));
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    rpc::CreatePlacementGroupRequest req;
    rpc::PlacementGroupInfo* spec = req.mutable_spec();
    spec->set_placement_group_id(PlacementGroupId::FromRandom().Binary());
    spec->set_strategy(rpc::PlacementGroupInfo::PACK);
    spec->set_detached(true);
    rpc::Bundle* b = spec->add_bundles();
    b->set_index(0);
    (*b->mutable_resources())["CPU"] = 0.01;
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(10));
    rpc::CreatePlacementGroupReply reply;
    grpc::Status s = stub->CreatePlacementGroup(&ctx, req, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ids.push_back(spec->placement_group_id());
  }
  MANTA_ASSERT_OK(cluster.KillGcs());  // at once after the last answer
  MANTA_ASSERT_OK(cluster.RestartGcs());

  stub = rpc::PlacementGroupGcsService::NewStub(rpc::MakeChannel(cluster.gcs_address()));
  for (const std::string& id : ids) {
    rpc::WaitPlacementGroupReadyRequest req;
    req.set_placement_group_id(id);
    req.set_timeout_ms(30000);
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(40));
    rpc::WaitPlacementGroupReadyReply reply;
    grpc::Status s = stub->WaitPlacementGroupReady(&ctx, req, &reply);
    ASSERT_TRUE(s.ok()) << PlacementGroupId::FromBinary(id)->Hex() << " is gone: " << s.error_message();
    EXPECT_TRUE(reply.ready()) << reply.placement_group().ShortDebugString();
  }
}

// A head whose store was wiped (a lost disk, a new or flushed Redis) serves a
// new cluster: the raylets of the old one are refused and exit.
TEST_P(GcsRestartTest, AWipedStoreMakesTheOldRayletsExit) {
  Cluster cluster(WithStore());
  MANTA_ASSERT_OK(cluster.StartHead());
  ASSERT_TRUE(cluster.AddRaylet().ok());
  auto old_id = cluster.GetClusterId();
  ASSERT_TRUE(old_id.ok()) << old_id.status();

  MANTA_ASSERT_OK(cluster.KillGcs());
  WipeStore(cluster);
  MANTA_ASSERT_OK(cluster.RestartGcs());
  auto new_id = cluster.GetClusterId();
  ASSERT_TRUE(new_id.ok()) << new_id.status();
  EXPECT_NE(*new_id, *old_id);
  for (int i = 0; i < cluster.num_raylets(); ++i) {
    const DaemonProcess& raylet = cluster.raylet(i);
    ASSERT_TRUE(Cluster::WaitFor([&] { return !IsAlive(raylet.pid); }, absl::Seconds(30)))
        << "raylet " << i << " still runs: " << TailFile(raylet.out_file, 10);
    auto status = ExitStatusOf(raylet.pid);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << DescribeWaitStatus(*status);
    EXPECT_TRUE(absl::StrContains(TailFile(raylet.out_file, 20), "cluster")) << TailFile(raylet.out_file, 20);
  }
  EXPECT_EQ(cluster.CountNodes(rpc::NodeInfo::ALIVE), 0);
}

}  // namespace
}  // namespace manta::testing
