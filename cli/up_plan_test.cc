// `manta up`'s plan: the hosts each slice gets, with GKE's environment, and
// the flags it refuses.
#include <gtest/gtest.h>

#include <map>

#include "cli/up.h"

namespace manta::cli {
namespace {

std::map<std::string, std::string> Env(const SimulatedHost& h) { return {h.env.begin(), h.env.end()}; }

TEST(UpPlanTest, DefaultTopologiesAreTheSquarestRayAccepts) {
  EXPECT_EQ(DefaultTopology("v6e-16").value(), "4x4");
  EXPECT_EQ(DefaultTopology("v6e-8").value(), "2x4");
  EXPECT_EQ(DefaultTopology("v6e-4").value(), "2x2");
  EXPECT_EQ(DefaultTopology("v5litepod-32").value(), "4x8");
  EXPECT_EQ(DefaultTopology("v4-16").value(), "2x2x2");  // 2 cores a chip: 8 chips
  EXPECT_EQ(DefaultTopology("v5p-128").value(), "4x4x4");
  EXPECT_FALSE(DefaultTopology("v6e-15").ok());
  EXPECT_FALSE(DefaultTopology("h100-8").ok());
}

TEST(UpPlanTest, TwoSlicesOfV6e16AreEightHostsWithGkesEnvironment) {
  UpOptions o;
  o.tpu = "v6e-16";
  o.slices = 2;
  auto hosts = PlanHosts(o);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 8u);
  auto first = Env((*hosts)[0]);
  EXPECT_EQ(first["TPU_ACCELERATOR_TYPE"], "v6e-16");
  EXPECT_EQ(first["TPU_TOPOLOGY"], "4x4");
  EXPECT_EQ(first["TPU_WORKER_ID"], "0");
  EXPECT_EQ(first["TPU_NAME"], "tpu-group-0");
  auto last = Env((*hosts)[7]);
  EXPECT_EQ(last["TPU_WORKER_ID"], "3");
  EXPECT_EQ(last["TPU_NAME"], "tpu-group-1");
}

TEST(UpPlanTest, CpuHostsHaveNoTpuEnvironment) {
  UpOptions o;
  o.cpu_hosts = 3;
  auto hosts = PlanHosts(o);
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_TRUE((*hosts)[2].env.empty());
}

TEST(UpPlanTest, BadFlagsAreRefusedNamingTheFlag) {
  auto refused = [](UpOptions o, const std::string& flag) {
    auto hosts = PlanHosts(o);
    ASSERT_FALSE(hosts.ok()) << flag;
    EXPECT_TRUE(absl::IsInvalidArgument(hosts.status()));
    EXPECT_NE(hosts.status().message().find(flag), std::string::npos) << hosts.status();
  };
  UpOptions o;
  o.tpu = "v6e-15";
  refused(o, "--tpu");
  o.tpu = "v6e-16";
  o.topology = "2x2";  // 4 chips, not 16
  refused(o, "--topology");
  o.topology = "";
  o.slices = 65;
  refused(o, "--slices");
  o.slices = 64;  // 256 hosts: the most
  EXPECT_TRUE(PlanHosts(o).ok());
  o.cpu_hosts = 1;
  refused(o, "at most 256 hosts");
  UpOptions only_topology;
  only_topology.topology = "4x4";
  refused(only_topology, "--topology needs --tpu");
  UpOptions negative;
  negative.cpu_hosts = -1;
  refused(negative, "--cpu-hosts");
}

}  // namespace
}  // namespace manta::cli
