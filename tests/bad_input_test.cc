// Bad input to `manta start` (and to the raylet itself): one clear line on
// stderr, a non-zero exit, and no process left running.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

const Env kV6e16Worker0 = {
    {"TPU_ACCELERATOR_TYPE", "v6e-16"}, {"TPU_TOPOLOGY", "4x4"}, {"TPU_WORKER_ID", "0"}, {"TPU_NAME", "tpu-group-0"}};

Env WithTpu(const std::string& type, const std::string& topology) {
  return {{"TPU_ACCELERATOR_TYPE", type}, {"TPU_TOPOLOGY", topology}, {"TPU_WORKER_ID", "0"}, {"TPU_NAME", "s0"}};
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    temp_dir_ = cluster_.temp_dir() + "/cli";
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
  }

  // Runs `manta start` and checks the contract of a refused start.
  void ExpectRefused(const std::vector<std::string>& args, const Env& env, const std::string& expected_text) {
    std::vector<std::string> full = {"start"};
    full.insert(full.end(), args.begin(), args.end());
    full.push_back("--temp-dir=" + temp_dir_);
    std::string cmd = absl::StrJoin(full, " ");
    SCOPED_TRACE(cmd);
    CommandResult r = cluster_.RunManta(full, env);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(absl::StartsWith(r.err, "manta: error: ")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, expected_text)) << r.err;
    EXPECT_TRUE(ProcessesMentioning(temp_dir_).empty()) << "processes left running";
    EXPECT_TRUE(RunningPidFiles().empty()) << "pid files of running processes left";
  }

  std::vector<std::string> RunningPidFiles() {
    std::vector<std::string> live;
    glob_t g;
    if (glob((temp_dir_ + "/session_[0-9]*/pids/*.pid").c_str(), 0, nullptr, &g) != 0) return live;
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      auto pid = ReadPidFile(g.gl_pathv[i]);
      if (pid.ok() && IsAlive(*pid)) live.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    return live;
  }

  std::string Head() { return absl::StrCat("--port=", port_); }

  Cluster cluster_;
  std::string temp_dir_;
  int port_ = 0;
};

TEST_F(BadInputTest, InvalidResources) {
  ExpectRefused({"--head", Head(), "--resources={\"custom\": "}, {}, "not valid JSON");
  ExpectRefused({"--head", Head(), "--resources={\"custom\": -1}"}, {}, "negative");
  ExpectRefused({"--head", Head(), "--resources={\"custom\": NaN}"}, {}, "NaN");
  ExpectRefused({"--head", Head(), "--resources={\"custom\": 1e999}"}, {}, "infinite");
  ExpectRefused({"--head", Head(), "--resources={\"custom\": 1e300}"}, {}, "larger than");
  ExpectRefused({"--head", Head(), "--resources=[1]"}, {}, "JSON object");
  ExpectRefused({"--head", Head(), "--num-cpus=nan"}, {}, "NaN");
  ExpectRefused({"--head", Head(), "--num-cpus=-2"}, {}, "negative");
  ExpectRefused({"--head", Head(), "--num-cpus=inf"}, {}, "infinite");
  ExpectRefused({"--head", Head(), "--memory=1e300"}, {}, "larger than");
  ExpectRefused({"--head", Head(), "--labels=a b=c"}, {}, "--labels");
}

TEST_F(BadInputTest, QuantitiesAboveTheMaximumAreRefusedNotWrapped) {
  ExpectRefused({"--head", Head(), "--resources={\"x\": 9.3e14}"}, {},
                "--resources: resource 'x': quantity 9.3e+14 is larger than the maximum 9e+14");
  ExpectRefused({"--head", Head(), "--num-cpus=1e15"}, {},
                "--num-cpus: quantity 1e+15 is larger than the maximum 9e+14");
  ExpectRefused({"--head", Head(), "--memory=1e15"}, {}, "--memory: quantity 1e+15 is larger than the maximum 9e+14");
}

TEST_F(BadInputTest, ReservedAndRepeatedResourceNames) {
  ExpectRefused({"--head", Head(), "--resources={\"node:__internal_head__\": 1}"}, {},
                "--resources: resource 'node:__internal_head__' is reserved");
  ExpectRefused({"--head", Head(), "--resources={\"TPU\": 4}"}, {}, "--resources: resource 'TPU' is reserved");
  ExpectRefused({"--head", Head(), "--resources={\"TPU-v6e-16-head\": 1}"}, {},
                "--resources: resource 'TPU-v6e-16-head' is reserved");
  // A TPU worker other than worker 0 may not claim its slice's head.
  Env worker1 = kV6e16Worker0;
  worker1[2].second = "1";
  ExpectRefused({"--head", Head(), "--resources={\"TPU-v6e-16-head\": 1}"}, worker1,
                "--resources: resource 'TPU-v6e-16-head' is reserved");
  ExpectRefused({"--head", Head(), "--resources={\"x\": 1, \"x\": 2}"}, {}, "--resources: resource 'x' is given twice");
}

TEST_F(BadInputTest, BadFlagsAndAddresses) {
  ExpectRefused({"--head", Head(), "--bogus"}, {}, "--bogus");
  ExpectRefused({"--head", "--port=70000"}, {}, "out of range");
  ExpectRefused({"--head", Head(), "--node-ip-address=999.1.1.1"}, {}, "IPv4");
  ExpectRefused({"--address=nohostport"}, {}, "HOST:PORT");
  ExpectRefused({}, {}, "--head");
  // Nothing listens there.
  ExpectRefused({absl::StrCat("--address=127.0.0.1:", port_)}, {}, "cannot reach the GCS");
}

TEST_F(BadInputTest, TpuEnvironment) {
  ExpectRefused({"--head", Head()}, WithTpu("v99-16", "4x4"), "TPU");
  ExpectRefused({"--head", Head()}, WithTpu("v6e-16", "2x2"), "TPU");
  ExpectRefused({"--head", Head()}, WithTpu("v4-16", "4x4x4"), "TPU");
}

TEST_F(BadInputTest, PortInUse) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Port 0: the kernel picks a free port and it is ours at once (a port
  // picked free earlier may have been taken meanwhile by a parallel test).
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  port_ = ntohs(addr.sin_port);
  ExpectRefused({"--head", Head()}, {}, "in use");
  close(fd);
}

TEST_F(BadInputTest, RayletFailingAfterTheGcsStartedLeavesNothing) {
  // A raylet that refuses to start once the GCS runs: the CLI must stop the
  // GCS it started.
  std::string bin = cluster_.temp_dir() + "/bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  std::string real_gcs = Cluster::BinDir() + "/gcs_server";
  char resolved[PATH_MAX];
  ASSERT_NE(realpath(real_gcs.c_str(), resolved), nullptr);
  ASSERT_EQ(symlink(resolved, (bin + "/gcs_server").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(bin + "/raylet",
                              "#!/bin/sh\necho 'raylet: error: simulated failure after the GCS started' >&2\nexit 1\n",
                              0755)
                  .ok());
  ExpectRefused({"--head", Head()}, {{"MANTA_BIN_DIR", bin}}, "simulated failure after the GCS started");
}

TEST(RayletBadInputTest, RayletReportsUnknownTpuTypeItself) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  for (const Env& env : {WithTpu("v99-16", "4x4"), WithTpu("v6e-16", "2x2")}) {
    RayletOptions o;
    o.env = env;
    auto index = cluster.AddRaylet(o);
    ASSERT_FALSE(index.ok());
    EXPECT_EQ(index.status().code(), absl::StatusCode::kUnavailable) << index.status();
    EXPECT_TRUE(absl::StrContains(index.status().message(), "exited with code 1")) << index.status();
    const DaemonProcess& failed = cluster.raylet(cluster.num_raylets() - 1);
    EXPECT_FALSE(IsAlive(failed.pid));
    std::string out = TailFile(failed.out_file, 100);
    EXPECT_TRUE(absl::StrContains(out, "TPU")) << out;
  }
  EXPECT_EQ(cluster.CountNodes(rpc::NodeInfo::ALIVE), 1);
}

TEST(RayletBadInputTest, RayletRefusesReservedAndHugeResourcesItself) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  struct Case {
    RayletOptions options;
    std::string message;
  };
  RayletOptions head_marker;
  head_marker.resources = R"({"node:__internal_head__": 1})";
  RayletOptions tpu;
  tpu.resources = R"({"TPU": 4})";
  RayletOptions twice;
  twice.resources = R"({"x": 1, "x": 2})";
  RayletOptions huge;
  huge.resources = R"({"x": 9.3e14})";
  RayletOptions cpus;
  cpus.num_cpus = 1e15;
  for (const Case& c : std::vector<Case>{{head_marker, "'node:__internal_head__' is reserved"},
                                         {tpu, "'TPU' is reserved"},
                                         {twice, "'x' is given twice"},
                                         {huge, "is larger than the maximum 9e+14"},
                                         {cpus, "--num-cpus: quantity 1e+15 is larger than the maximum 9e+14"}}) {
    SCOPED_TRACE(c.message);
    auto index = cluster.AddRaylet(c.options);
    ASSERT_FALSE(index.ok());
    const DaemonProcess& failed = cluster.raylet(cluster.num_raylets() - 1);
    EXPECT_FALSE(IsAlive(failed.pid));
    std::string out = TailFile(failed.out_file, 100);
    EXPECT_TRUE(absl::StrContains(out, c.message)) << out;
  }
  EXPECT_EQ(cluster.CountNodes(rpc::NodeInfo::ALIVE), 1);
}

}  // namespace
}  // namespace manta::testing
