// The manta command end to end: start a head, join a TPU host, read status
// and the node list, stop everything; and --block.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/token.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

// Pids of the daemons `manta start` recorded under `temp_dir`.
std::vector<pid_t> RecordedPids(const std::string& temp_dir) {
  std::vector<pid_t> pids;
  auto r = RunAndCapture(
      [&] {
        SpawnOptions o;
        o.executable = "/bin/sh";
        o.args = {"-c", "cat " + temp_dir + "/session_[0-9]*/pids/*.pid 2>/dev/null; true"};
        return o;
      }(),
      absl::Seconds(10));
  if (!r.ok()) return pids;
  for (absl::string_view line : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

int CountAlive(const std::vector<pid_t>& pids) {
  return static_cast<int>(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return IsAlive(p); }));
}

TEST(CliEndToEndTest, StartJoinStatusListStop) {
  Cluster cluster;  // the temp dir, RunManta and teardown on failure
  const std::string temp = cluster.temp_dir() + "/cli";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  const std::string address = absl::StrCat("127.0.0.1:", *port);

  CommandResult head = cluster.RunManta(
      {"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp, "--num-cpus=2", "--memory=2147483648"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_FALSE(absl::StrContains(head.err, "WARNING")) << head.err;
  EXPECT_TRUE(absl::StrContains(head.out, "Local node IP: 127.0.0.1")) << head.out;
  EXPECT_TRUE(absl::StrContains(head.out, "Manta runtime started.")) << head.out;
  EXPECT_TRUE(absl::StrContains(head.out, "manta start --address='" + address + "'")) << head.out;
  EXPECT_TRUE(absl::StrContains(head.out, "manta status --temp-dir=" + temp)) << head.out;
  EXPECT_TRUE(absl::StrContains(head.out, "manta stop --temp-dir=" + temp)) << head.out;
  struct stat st;
  ASSERT_EQ(stat((temp + "/session_latest/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto gcs_address = ReadFile(temp + "/session_latest/gcs_address");
  ASSERT_TRUE(gcs_address.ok());
  EXPECT_EQ(*gcs_address, address + "\n");

  // A single-host v6e-8 slice joins; its token comes from the local session.
  CommandResult join = cluster.RunManta(
      {"start", "--address=" + address, "--temp-dir=" + temp, "--num-cpus=1", "--memory=1073741824", "--labels=zone=a"},
      {{"TPU_ACCELERATOR_TYPE", "v6e-8"}, {"TPU_TOPOLOGY", "2x4"}, {"TPU_WORKER_ID", "0"}, {"TPU_NAME", "solo"}});
  ASSERT_EQ(join.exit_code, 0) << join.err;
  EXPECT_TRUE(absl::StrContains(join.out, "Manta runtime started.")) << join.out;
  EXPECT_TRUE(absl::StrContains(join.out, "manta stop")) << join.out;

  // The head's GCS, raylet and dashboard, and the joined raylet.
  std::vector<pid_t> pids = RecordedPids(temp);
  ASSERT_EQ(pids.size(), 4u);
  EXPECT_EQ(CountAlive(pids), 4);

  CommandResult status = cluster.RunManta({"status", "--temp-dir=" + temp});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_FALSE(absl::StrContains(status.out, "WARNING")) << status.out;
  for (const char* line : {" 0.0/3.0 CPU", " 0.0/8.0 TPU", " 0.0/1.0 TPU-v6e-8-head", " 0.0/1.0 solo",
                           " 0.0/1.0 accelerator_type:TPU-V6E", " 0B/3.00GiB memory"}) {
    EXPECT_TRUE(absl::StrContains(status.out, "\n" + std::string(line) + "\n")) << line << "\n" << status.out;
  }

  CommandResult list = cluster.RunManta({"list", "nodes", "--temp-dir=" + temp});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(absl::StrContains(list.out, "\nTotal: 2\n")) << list.out;
  EXPECT_TRUE(absl::StrContains(list.out, "zone: a")) << list.out;
  EXPECT_TRUE(absl::StrContains(list.out, "manta.io/tpu-pod-type: v6e-8")) << list.out;

  CommandResult stop = cluster.RunManta({"stop", "--temp-dir=" + temp});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(stop.out, "Stopped all 4 Manta processes.\n");
  EXPECT_EQ(CountAlive(pids), 0);
  EXPECT_TRUE(ProcessesMentioning(temp).empty());
  EXPECT_TRUE(RecordedPids(temp).empty()) << "pid files left behind";

  CommandResult again = cluster.RunManta({"stop", "--temp-dir=" + temp});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, "Did not find any active Manta processes.\n");

  CommandResult gone = cluster.RunManta({"status", "--temp-dir=" + temp});
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(gone.err, "manta: error: cannot reach the GCS")) << gone.err;
}

TEST(CliEndToEndTest, AuthNoneWarnsOnEveryStartAndInStatus) {
  Cluster cluster;
  const std::string temp = cluster.temp_dir() + "/cli";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  auto dashboard_port = PickFreePort();
  ASSERT_TRUE(dashboard_port.ok());
  const std::string address = absl::StrCat("127.0.0.1:", *port);

  CommandResult head = cluster.RunManta({"start", "--head", "--auth=none", absl::StrCat("--port=", *port),
                                         "--temp-dir=" + temp, "--num-cpus=1", "--dashboard-host=0.0.0.0",
                                         absl::StrCat("--dashboard-port=", *dashboard_port)});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_TRUE(absl::StrContains(head.err, "WARNING: AUTHENTICATION IS DISABLED (--auth=none)")) << head.err;
  EXPECT_TRUE(absl::StrContains(head.err, absl::StrCat("ADDRESSES: 0.0.0.0:", *dashboard_port, " (dashboard).")))
      << head.err;
  EXPECT_FALSE(absl::StrContains(head.err, "(GCS)")) << head.err;  // it listens on loopback only
  EXPECT_TRUE(absl::StrContains(head.out, "Manta runtime started.")) << head.out;
  EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(head.out), "token")) << head.out;
  EXPECT_TRUE(absl::StrContains(head.out, "    manta start --address='" + address + "'\n")) << head.out;

  CommandResult join = cluster.RunManta({"start", "--address=" + address, "--temp-dir=" + temp, "--num-cpus=1"});
  ASSERT_EQ(join.exit_code, 0) << join.err;
  EXPECT_TRUE(absl::StartsWith(join.err, "WARNING: authentication is disabled (--auth=none)")) << join.err;

  CommandResult status = cluster.RunManta({"status", "--temp-dir=" + temp});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, "\nWARNING: this cluster runs without authentication (--auth=none)"))
      << status.out;

  CommandResult stop = cluster.RunManta({"stop", "--temp-dir=" + temp});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_TRUE(ProcessesMentioning(temp).empty());
}

TEST(CliEndToEndTest, StopForceKillsAtOnce) {
  Cluster cluster;
  const std::string temp = cluster.temp_dir() + "/cli";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  CommandResult head =
      cluster.RunManta({"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp, "--num-cpus=1"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  std::vector<pid_t> pids = RecordedPids(temp);
  ASSERT_EQ(CountAlive(pids), 3);  // GCS, raylet, dashboard
  CommandResult stop = cluster.RunManta({"stop", "--force", "--temp-dir=" + temp});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(stop.out, "Stopped all 3 Manta processes.\n");
  EXPECT_EQ(CountAlive(pids), 0);
  EXPECT_TRUE(ProcessesMentioning(temp).empty());
}

class BlockTest : public ::testing::Test {
 protected:
  // Starts `manta start --head --block` and waits until its daemons run.
  void StartBlocking() {
    temp_ = cluster_.temp_dir() + "/cli";
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok());
    SpawnOptions o;
    o.executable = Cluster::BinDir() + "/manta";
    o.args = {"start", "--head", "--block", absl::StrCat("--port=", *port), "--temp-dir=" + temp_, "--num-cpus=1"};
    o.log_file = cluster_.temp_dir() + "/manta_block.out";
    o.kill_with_parent = true;
    auto pid = SpawnDaemon(o);
    ASSERT_TRUE(pid.ok()) << pid.status();
    manta_ = *pid;
    ASSERT_TRUE(WaitForFile(o.log_file, absl::Now() + absl::Seconds(30), manta_).ok());
    ASSERT_TRUE(
        Cluster::WaitFor([&] { return absl::StrContains(TailFile(o.log_file, 50), "--block"); }, absl::Seconds(30)))
        << TailFile(o.log_file, 50);
    daemons_ = RecordedPids(temp_);
    ASSERT_EQ(CountAlive(daemons_), 3);  // GCS, raylet, dashboard
  }
  void TearDown() override {
    if (manta_ > 0 && IsAlive(manta_)) {
      SendSignal(manta_, SIGKILL).IgnoreError();
      WaitForExit(manta_, absl::Now() + absl::Seconds(5)).IgnoreError();
    }
  }

  Cluster cluster_;
  std::string temp_;
  pid_t manta_ = 0;
  std::vector<pid_t> daemons_;
};

TEST_F(BlockTest, SigtermStopsTheDaemons) {
  StartBlocking();
  ASSERT_TRUE(SendSignal(manta_, SIGTERM).ok());
  ASSERT_TRUE(WaitForExit(manta_, absl::Now() + absl::Seconds(30)).ok());
  EXPECT_EQ(DescribeWaitStatus(*ExitStatusOf(manta_)), "exited with code 0");
  EXPECT_EQ(CountAlive(daemons_), 0);
  EXPECT_TRUE(ProcessesMentioning(temp_).empty());
}

TEST_F(BlockTest, ADyingDaemonStopsTheOthers) {
  StartBlocking();
  // Every daemon but the session's gcs_server dies.
  pid_t gcs = 0;
  for (pid_t p : daemons_) {
    if (RunsExecutable(p, "gcs_server")) gcs = p;
  }
  ASSERT_GT(gcs, 0);
  for (pid_t p : daemons_) {
    if (p != gcs) {
      ASSERT_TRUE(SendSignal(p, SIGKILL).ok());
    }
  }
  ASSERT_TRUE(WaitForExit(manta_, absl::Now() + absl::Seconds(30)).ok());
  EXPECT_EQ(DescribeWaitStatus(*ExitStatusOf(manta_)), "exited with code 1");
  EXPECT_FALSE(IsAlive(gcs));
  EXPECT_TRUE(ProcessesMentioning(temp_).empty());
}

// `manta up` starts the head and two v6e-16 slices (8 hosts) and waits for
// them; a second `manta up` names the running cluster and starts nothing;
// `manta down` leaves no process and no port behind.
TEST(CliEndToEndTest, UpTwiceThenDownLeavesNothing) {
  Cluster cluster;  // the temp dir, RunManta and teardown on failure
  const std::string temp = cluster.temp_dir() + "/up";
  auto port = PickFreePort();
  auto dashboard_port = PickFreePort();
  ASSERT_TRUE(port.ok() && dashboard_port.ok());
  const std::vector<std::string> up_args = {"up",
                                            "--tpu=v6e-16",
                                            "--slices=2",
                                            "--temp-dir=" + temp,
                                            absl::StrCat("--port=", *port),
                                            absl::StrCat("--dashboard-port=", *dashboard_port)};
  CommandResult up = cluster.RunManta(up_args, {}, absl::Seconds(120));
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_TRUE(absl::StrContains(up.out, "hosts joined 8/8")) << up.out;
  EXPECT_TRUE(absl::StrContains(
      up.out, "Manta cluster up: the head and 8 hosts (2 slices of v6e-16, topology 4x4, 4 hosts each)."))
      << up.out;
  EXPECT_TRUE(absl::StrContains(up.out, absl::StrCat("127.0.0.1:", *port))) << up.out;
  EXPECT_TRUE(absl::StrContains(up.out, "manta down --temp-dir=" + temp)) << up.out;

  CommandResult status = cluster.RunManta({"status", "--temp-dir=" + temp});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  int nodes = 0;
  for (absl::string_view line : absl::StrSplit(status.out, '\n')) nodes += absl::StartsWith(line, " 1 node_") ? 1 : 0;
  EXPECT_EQ(nodes, 9) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, "/32.0 TPU")) << status.out;  // 2 slices of 16 chips

  const std::vector<pid_t> pids = RecordedPids(temp);
  ASSERT_GE(pids.size(), 11u);  // the GCS, the dashboard and 9 raylets at least
  ASSERT_EQ(CountAlive(pids), static_cast<int>(pids.size()));

  CommandResult again = cluster.RunManta(up_args, {}, absl::Seconds(60));
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(absl::StrContains(again.out, "already up")) << again.out;
  EXPECT_EQ(RecordedPids(temp), pids);  // nothing new started

  // Another shape over it: refused, naming both, and nothing started.
  std::vector<std::string> other_args = up_args;
  other_args[2] = "--slices=1";
  CommandResult other = cluster.RunManta(other_args, {}, absl::Seconds(60));
  EXPECT_NE(other.exit_code, 0) << other.out;
  EXPECT_TRUE(absl::StrContains(other.err, "8 hosts (2 slices of v6e-16, topology 4x4, 4 hosts each)")) << other.err;
  EXPECT_TRUE(absl::StrContains(other.err, "4 hosts (1 slice of v6e-16, topology 4x4, 4 hosts each)")) << other.err;
  EXPECT_TRUE(absl::StrContains(other.err, "manta down")) << other.err;
  EXPECT_EQ(RecordedPids(temp), pids);

  CommandResult down = cluster.RunManta({"down", "--temp-dir=" + temp});
  ASSERT_EQ(down.exit_code, 0) << down.out << down.err;
  EXPECT_EQ(CountAlive(pids), 0);
  EXPECT_TRUE(CheckPortFree("127.0.0.1", *port).ok());
  EXPECT_TRUE(CheckPortFree("127.0.0.1", *dashboard_port).ok());
  EXPECT_TRUE(RecordedPids(temp).empty());
}

// A program that finds no cluster says so in one line and exits 1; usage
// needs no cluster at all.
TEST(CliEndToEndTest, ProgramsWithoutAClusterSayWhyInOneLine) {
  Cluster cluster;
  const std::string nowhere = "--temp-dir=" + cluster.temp_dir() + "/no_cluster_here";
  for (const char* program : {"maxtext_trainer", "maxtext_elastic_trainer"}) {
    SpawnOptions help;
    help.executable = std::string(std::getenv("MANTA_BIN_DIR")) + "/" + program;
    help.args = {"--help"};
    help.unset_env = {"MANTA_ADDRESS", "RAY_ADDRESS"};
    auto r = RunAndCapture(help, absl::Seconds(30));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit_code, 0) << program << ": " << r->err;
    EXPECT_TRUE(absl::StrContains(r->out, "usage: maxtext_")) << r->out;
  }
  for (const char* program : {"maxtext_trainer", "example_counter", "example_tpu_hosts", "example_placement_group"}) {
    SpawnOptions run;
    run.executable = std::string(std::getenv("MANTA_BIN_DIR")) + "/" + program;
    run.args = {nowhere, std::string(MANTA_SOURCE_DIR) + "/train/kernels/configs/base.yml"};
    run.unset_env = {"MANTA_ADDRESS", "RAY_ADDRESS"};
    auto r = RunAndCapture(run, absl::Seconds(30));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit_code, 1) << program << ": " << r->out << r->err;
    EXPECT_FALSE(absl::StrContains(r->err, "terminate called")) << program << ": " << r->err;
    EXPECT_EQ(std::count(r->err.begin(), r->err.end(), '\n'), 1) << program << ": " << r->err;
  }
}

TEST(CliEndToEndTest, UpRefusesABadSliceBeforeStartingAnything) {
  Cluster cluster;
  const std::string temp = cluster.temp_dir() + "/up_bad";
  CommandResult up = cluster.RunManta({"up", "--tpu=v6e-16", "--topology=2x2", "--temp-dir=" + temp});
  EXPECT_NE(up.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(up.err, "--topology")) << up.err;
  EXPECT_TRUE(RecordedPids(temp).empty());
}

// A head given --token-file enforces that token (a Kubernetes Secret shared
// with the workers); a token file others can read is refused.
TEST(CliEndToEndTest, AHeadEnforcesTheTokenItIsGiven) {
  Cluster cluster;
  const std::string temp = cluster.temp_dir() + "/given";
  const std::string file = cluster.temp_dir() + "/secret_token";
  const std::string token = GenerateToken();
  ASSERT_TRUE(WriteTokenFile(file, token).ok());
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  CommandResult head = cluster.RunManta({"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp,
                                         "--token-file=" + file, "--include-dashboard=false"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  auto session_token = ReadFile(temp + "/session_latest/token");
  ASSERT_TRUE(session_token.ok());
  EXPECT_EQ(std::string(absl::StripAsciiWhitespace(*session_token)), token);
  CommandResult status =
      cluster.RunManta({"status", absl::StrCat("--address=127.0.0.1:", *port)}, {{"MANTA_TOKEN", token}});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  CommandResult wrong =
      cluster.RunManta({"status", absl::StrCat("--address=127.0.0.1:", *port)}, {{"MANTA_TOKEN", GenerateToken()}});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_EQ(cluster.RunManta({"stop", "--temp-dir=" + temp}).exit_code, 0);

  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  CommandResult loose = cluster.RunManta({"start", "--head", absl::StrCat("--port=", *port), "--temp-dir=" + temp,
                                          "--token-file=" + file, "--include-dashboard=false"});
  EXPECT_NE(loose.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(loose.err, "--token-file")) << loose.err;
  EXPECT_EQ(CountAlive(RecordedPids(temp)), 0);
}

}  // namespace
}  // namespace manta::testing
