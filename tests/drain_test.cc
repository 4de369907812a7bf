// Draining a node on real clusters: `manta drain-node` of an idle raylet, a
// busy raylet that keeps its work and refuses new work until it is idle or
// its deadline passes, SIGTERM with --drain_grace_s, and bad requests.
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "gcs_service.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

// Every NodeInfo the GCS published for `node_id_hex` on NODE_INFO, oldest
// first (the publisher keeps a window of recent messages).
std::vector<rpc::NodeInfo> NodeHistory(const Cluster& cluster, const std::string& node_id_hex) {
  auto stub = rpc::PubSubGcsService::NewStub(rpc::MakeChannel(cluster.gcs_address()));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(5));
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_max_wait_ms(0);
  rpc::PollReply reply;
  std::vector<rpc::NodeInfo> out;
  if (!stub->Poll(&ctx, req, &reply).ok()) return out;
  for (const auto& m : reply.messages()) {
    if (ToHex(m.node_info().node_id()) == node_id_hex) out.push_back(m.node_info());
  }
  return out;
}

// Whether NODE_INFO said "draining" (still ALIVE) before it said DEAD.
bool PublishedDrainingBeforeDeath(const Cluster& cluster, const std::string& node_id_hex) {
  bool draining = false;
  for (const rpc::NodeInfo& n : NodeHistory(cluster, node_id_hex)) {
    if (n.state() == rpc::NodeInfo::ALIVE && n.draining()) draining = true;
    if (n.state() == rpc::NodeInfo::DEAD) return draining;
  }
  return false;
}

bool IsDead(Cluster& cluster, const std::string& node_id_hex) {
  auto n = cluster.FindNode(node_id_hex);
  return n.has_value() && n->state() == rpc::NodeInfo::DEAD;
}

// Waits for the raylet process to exit; its exit code, or -1.
int RayletExitCode(const DaemonProcess& raylet, absl::Duration timeout) {
  if (!WaitForExit(raylet.pid, absl::Now() + timeout).ok()) return -1;
  std::optional<int> status = ExitStatusOf(raylet.pid);
  if (!status.has_value() || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

// The GCS's answer to a DrainNode sent as is.
grpc::Status SendDrain(const Cluster& cluster, const rpc::DrainNodeRequest& req, rpc::DrainNodeReply* reply) {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(cluster.gcs_address()));
  grpc::ClientContext ctx;
  rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(5));
  return stub->DrainNode(&ctx, req, reply);
}

void Touch(const std::string& path) { ASSERT_TRUE(WriteFileAtomic(path, "").ok()) << path; }

TEST(DrainTest, IdleNodeDrainedWithTheCliIsPublishedThenExitsCleanly) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  auto index = cluster.AddRaylet();
  ASSERT_TRUE(index.ok()) << index.status();
  const DaemonProcess& raylet = cluster.raylet(*index);

  CommandResult r = cluster.RunManta(
      {"drain-node", raylet.node_id.substr(0, 12), "--reason=preemption", "--deadline=30s"}, cluster.MantaEnv());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "Node " + raylet.node_id.substr(0, 8) + "... is draining (reason: preemption, deadline in 30s)\n");

  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(cluster, raylet.node_id); }, absl::Seconds(10)));
  auto node = cluster.FindNode(raylet.node_id);
  EXPECT_TRUE(node->death_expected());
  EXPECT_TRUE(absl::StrContains(node->death_reason(), "drained: preemption")) << node->death_reason();
  EXPECT_TRUE(PublishedDrainingBeforeDeath(cluster, raylet.node_id));
  EXPECT_EQ(RayletExitCode(raylet, absl::Seconds(10)), 0);

  CommandResult status = cluster.RunManta({"status"}, cluster.MantaEnv());
  EXPECT_TRUE(absl::StrContains(status.out, "Recent failures:\n (no failures)\n")) << status.out;
  EXPECT_EQ(cluster.CountNodes(rpc::NodeInfo::ALIVE), 1);
}

// The head raylet (the driver's local one) holds a task that needs its
// "victim" resource; another node has plain CPUs.
class DrainBusyNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
    ClusterOptions options;
    options.head.num_cpus = 2;
    options.head.resources = R"({"victim": 1})";
    options.head.env = {{"MANTA_TEST_NODE", "victim"}};
    cluster_ = std::make_unique<Cluster>(options);
    MANTA_ASSERT_OK(cluster_->StartHead());
    RayletOptions other;
    other.num_cpus = 2;
    other.env = {{"MANTA_TEST_NODE", "other"}};
    MANTA_ASSERT_OK(cluster_->AddRaylet(other).status());
    dir_ = cluster_->temp_dir();
    auto pid = cluster_->StartProgram("drain_driver", {"hold", dir_}, dir_ + "/drain_driver.out");
    MANTA_ASSERT_OK(pid.status());
    driver_pid_ = *pid;
    ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(DriverOutput(), "HELD"); }, absl::Seconds(30)))
        << DriverOutput();
  }
  void TearDown() override {
    if (driver_pid_ > 0) TerminateProcess(driver_pid_, absl::Now() + absl::Seconds(2)).IgnoreError();
  }

  std::string DriverOutput() const { return TailFile(dir_ + "/drain_driver.out", 50); }
  const DaemonProcess& victim() const { return cluster_->raylet(0); }
  void Drain(const std::string& deadline) {
    CommandResult r = cluster_->RunManta(
        {"drain-node", victim().node_id, "--reason=preemption", "--deadline=" + deadline}, cluster_->MantaEnv());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  std::unique_ptr<Cluster> cluster_;
  std::string dir_;
  pid_t driver_pid_ = 0;
};

TEST_F(DrainBusyNodeTest, KeepsRunningWorkRefusesNewWorkAndExitsWhenIdle) {
  Drain("60s");
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        auto n = cluster_->FindNode(victim().node_id);
        return n.has_value() && n->draining();
      },
      absl::Seconds(5)));
  CommandResult list = cluster_->RunManta({"list", "nodes"}, cluster_->MantaEnv());
  EXPECT_TRUE(absl::StrContains(list.out, "ALIVE  draining: preemption (deadline ")) << list.out;
  CommandResult status = cluster_->RunManta({"status"}, cluster_->MantaEnv());
  EXPECT_TRUE(absl::StrContains(status.out, "Draining:\n 1 node_" + victim().node_id + ": draining: preemption"))
      << status.out;

  // New work goes elsewhere although the draining node has a free CPU.
  Touch(dir_ + "/drained");
  ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(DriverOutput(), "RAN "); }, absl::Seconds(30)))
      << DriverOutput();
  EXPECT_TRUE(absl::StrContains(DriverOutput(), "RAN other")) << DriverOutput();
  // The held task still runs there, so the node stays.
  auto node = cluster_->FindNode(victim().node_id);
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->state(), rpc::NodeInfo::ALIVE);

  Touch(dir_ + "/release");
  ASSERT_TRUE(WaitForExit(driver_pid_, absl::Now() + absl::Seconds(30)).ok()) << DriverOutput();
  EXPECT_EQ(ExitStatusOf(driver_pid_).value_or(-1), 0) << DriverOutput();
  driver_pid_ = 0;
  EXPECT_TRUE(absl::StrContains(DriverOutput(), "HELD DONE victim")) << DriverOutput();
  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(*cluster_, victim().node_id); }, absl::Seconds(15)));
  node = cluster_->FindNode(victim().node_id);
  EXPECT_TRUE(node->death_expected());
  EXPECT_TRUE(absl::StrContains(node->death_reason(), "drained: preemption")) << node->death_reason();
  EXPECT_EQ(RayletExitCode(victim(), absl::Seconds(10)), 0);
}

TEST_F(DrainBusyNodeTest, DeadlineStopsTheWorkAndTheRaylet) {
  absl::Time drained = absl::Now();
  Drain("2s");
  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(*cluster_, victim().node_id); }, absl::Seconds(15)));
  EXPECT_GE(absl::Now() - drained, absl::Seconds(1)) << "it left before the deadline while busy";
  auto node = cluster_->FindNode(victim().node_id);
  EXPECT_TRUE(node->death_expected());
  EXPECT_TRUE(absl::StrContains(node->death_reason(), "drained: preemption (deadline reached)"))
      << node->death_reason();
  EXPECT_EQ(RayletExitCode(victim(), absl::Seconds(10)), 0);
  // The held task's worker went with it: only the driver itself is left.
  EXPECT_TRUE(Cluster::WaitFor(
      [&] {
        for (pid_t pid : ProcessesMentioning("hold " + dir_)) {
          if (pid != driver_pid_) return false;
        }
        return true;
      },
      absl::Seconds(5)));
}

TEST(DrainTest, SigtermWithAGraceDrainsAndSigintStopsAtOnce) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  RayletOptions graceful;
  graceful.extra_args = {"--drain_grace_s=30"};
  auto ids = cluster.AddRaylets({graceful, graceful});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const DaemonProcess& drained = cluster.raylet((*ids)[0]);
  const DaemonProcess& stopped = cluster.raylet((*ids)[1]);

  absl::Time start = absl::Now();
  MANTA_ASSERT_OK(cluster.KillRaylet((*ids)[0], SIGTERM));
  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(cluster, drained.node_id); }, absl::Seconds(15)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "an idle node waited for its grace";
  auto node = cluster.FindNode(drained.node_id);
  EXPECT_TRUE(node->death_expected());
  EXPECT_TRUE(absl::StrContains(node->death_reason(), "drained: preemption")) << node->death_reason();
  EXPECT_TRUE(PublishedDrainingBeforeDeath(cluster, drained.node_id));
  EXPECT_EQ(RayletExitCode(drained, absl::Seconds(10)), 0);

  MANTA_ASSERT_OK(cluster.KillRaylet((*ids)[1], SIGINT));
  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(cluster, stopped.node_id); }, absl::Seconds(10)));
  node = cluster.FindNode(stopped.node_id);
  EXPECT_TRUE(node->death_expected());
  EXPECT_TRUE(absl::StrContains(node->death_reason(), "SIGINT")) << node->death_reason();
  for (const rpc::NodeInfo& n : NodeHistory(cluster, stopped.node_id)) EXPECT_FALSE(n.draining());
  EXPECT_EQ(RayletExitCode(stopped, absl::Seconds(10)), 0);
}

TEST(DrainTest, BadRequestsAreRefusedAndChangeNothing) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  auto ids = cluster.AddRaylets({RayletOptions(), RayletOptions()});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const std::string node = cluster.raylet((*ids)[0]).node_id;
  auto drain = [&](const std::vector<std::string>& args) {
    std::vector<std::string> all = {"drain-node"};
    all.insert(all.end(), args.begin(), args.end());
    return cluster.RunManta(all, cluster.MantaEnv());
  };

  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{"deadbeefdeadbeef", "--reason=preemption"}, "no node with id deadbeefdeadbeef"},
           {{"6b43", "--reason=preemption"}, "too short"},
           {{"not-a-node-id", "--reason=preemption"}, "not hexadecimal"},
           {{node, "--reason="}, "--reason is required"},
           {{node}, "--reason is required"},
           {{node, "--reason=" + std::string(300, 'x')}, "at most 256"},
           {{node, "--reason=preemption", "--deadline=-30s"}, "--deadline may not be negative"},
           {{node, "--reason=preemption", "--deadline=soon"}, "not a duration"},
       }) {
    CommandResult r = drain(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args[0] << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.error)) << r.err;
  }
  // What the CLI cannot send, straight to the GCS.
  rpc::DrainNodeRequest req;
  req.set_node_id(*FromHex(node));
  req.set_reason("preemption");
  req.set_deadline_ms(absl::ToUnixMillis(absl::Now() - absl::Minutes(1)));
  rpc::DrainNodeReply reply;
  grpc::Status s = SendDrain(cluster, req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "in the past")) << s.error_message();
  req.set_deadline_ms(0);
  req.set_node_id("short");
  EXPECT_EQ(SendDrain(cluster, req, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  auto info = cluster.FindNode(node);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), rpc::NodeInfo::ALIVE);
  EXPECT_FALSE(info->draining());
  for (const rpc::NodeInfo& n : NodeHistory(cluster, node)) EXPECT_FALSE(n.draining());
  EXPECT_TRUE(IsAlive(cluster.raylet((*ids)[0]).pid));

  // A dead node: the GCS's rejection is the error.
  const std::string dead = cluster.raylet((*ids)[1]).node_id;
  MANTA_ASSERT_OK(cluster.KillRaylet((*ids)[1], SIGINT));
  ASSERT_TRUE(Cluster::WaitFor([&] { return IsDead(cluster, dead); }, absl::Seconds(10)));
  CommandResult r = drain({dead.substr(0, 10), "--reason=preemption"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "is already dead")) << r.err;
}

// Whether a live process of the cluster under `temp` runs with `arg`.
bool SomeProcessHasArg(const std::string& temp, const std::string& arg) {
  for (pid_t pid : ProcessesMentioning(temp)) {
    auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (cmdline.ok() && absl::StrContains(*cmdline, arg)) return true;
  }
  return false;
}

TEST(DrainTest, StartPassesTheGraceToRayletsAndStopStaysFast) {
  Cluster cluster;  // the temp dir, RunManta and teardown on failure
  const std::string temp = cluster.temp_dir() + "/cli";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  CommandResult head = cluster.RunManta({"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp,
                                         "--num-cpus=1", "--include-dashboard=false", "--drain-grace-s=30"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  CommandResult join = cluster.RunManta({"start", absl::StrCat("--address=127.0.0.1:", *port), "--temp-dir=" + temp,
                                         "--num-cpus=1", "--drain-grace-s=45"});
  ASSERT_EQ(join.exit_code, 0) << join.err;
  EXPECT_TRUE(SomeProcessHasArg(temp, "--drain_grace_s=30"));
  EXPECT_TRUE(SomeProcessHasArg(temp, "--drain_grace_s=45"));
  CommandResult bad = cluster.RunManta({"start", "--head", "--temp-dir=" + temp + "2", "--drain-grace-s=-1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "--drain-grace-s")) << bad.err;

  absl::Time start = absl::Now();
  CommandResult stop = cluster.RunManta({"stop", "--temp-dir=" + temp});
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_TRUE(absl::StrContains(stop.out, "Stopped all 3 Manta processes.")) << stop.out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(8)) << "manta stop waited for a drain";
  EXPECT_TRUE(ProcessesMentioning(temp).empty());
}

// The driver's local raylet stopped (SIGSTOP) for three seconds while a task
// is submitted: the node is not dead, so the task waits and runs.
TEST(RayletStallTest, ATaskSubmittedDuringAShortStallOfTheLocalRayletRuns) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  ClusterOptions options;
  options.head.num_cpus = 2;
  options.head.env = {{"MANTA_TEST_NODE", "head"}};
  Cluster cluster(options);
  MANTA_ASSERT_OK(cluster.StartHead());
  const std::string dir = cluster.temp_dir();
  auto driver = cluster.StartProgram("drain_driver", {"submit_after", dir}, dir + "/stall_driver.out");
  MANTA_ASSERT_OK(driver.status());
  auto output = [&] { return TailFile(dir + "/stall_driver.out", 20); };
  ASSERT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(output(), "READY"); }, absl::Seconds(30))) << output();
  const pid_t raylet = cluster.raylet(0).pid;
  ASSERT_EQ(kill(raylet, SIGSTOP), 0);
  { std::ofstream(dir + "/go") << "go"; }
  absl::SleepFor(absl::Seconds(3));  // the stall itself
  ASSERT_EQ(kill(raylet, SIGCONT), 0);
  EXPECT_TRUE(Cluster::WaitFor([&] { return absl::StrContains(output(), "RAN head"); }, absl::Seconds(60))) << output();
  EXPECT_FALSE(absl::StrContains(output(), "FAIL")) << output();
  TerminateProcess(*driver, absl::Now() + absl::Seconds(2)).IgnoreError();
}

// Drivers and workers ignore SIGPIPE: a write to a peer that died (a
// collective's connection) is an error, not the death of the process.
TEST(SigpipeTest, WritesToAClosedPipeFailInsteadOfKillingDriversAndWorkers) {
  if (!PathExists(Cluster::BinDir() + "/drain_driver")) GTEST_SKIP() << "drain_driver was not built";
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  CommandResult r = cluster.RunProgram("drain_driver", {"write_to_closed_pipe"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "EPIPE worker")) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "EPIPE driver")) << r.out << r.err;
}

}  // namespace
}  // namespace manta::testing
