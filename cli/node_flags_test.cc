#include "cli/node_flags.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace manta::cli {
namespace {

absl::StatusCode CodeOf(const NodeFlags& f) { return RayletResourceArgs(f).status().code(); }

TEST(NodeFlagsTest, ValidFlagsBecomeRayletFlags) {
  NodeFlags f;
  f.num_cpus = "8";
  f.memory = "17179869184";
  f.resources = "{\"custom\": 0.5, \"ssd\": 4}";
  f.labels = "zone=us-east1, team=ml";
  f.node_name = "host-1";
  auto args = RayletResourceArgs(f);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"--num_cpus=8", "--memory=17179869184",
                                             "--resources={\"custom\":0.5,\"ssd\":4.0}",
                                             "--labels=team=ml,zone=us-east1", "--node_name=host-1"}));
  auto none = RayletResourceArgs(NodeFlags());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(NodeFlagsTest, BadResourcesAreRejectedWithOneLine) {
  for (const char* bad : {"{\"custom\": ", "[1, 2]", "{\"custom\": -1}", "{\"custom\": NaN}", "{\"custom\": 1e300}",
                          "{\"custom\": 1e999}", "{\"custom\": \"four\"}", "{\"bad name\": 1}", "{\"CPU\": 4}",
                          "{\"custom\": 0.00001}"}) {
    NodeFlags f;
    f.resources = bad;
    auto args = RayletResourceArgs(f);
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(std::string(args.status().message()).find('\n'), std::string::npos) << args.status();
    EXPECT_EQ(std::string(args.status().message()).rfind("--resources: ", 0), 0u) << args.status();
  }
}

TEST(NodeFlagsTest, NonJsonQuantitiesAreExplained) {
  NodeFlags f;
  f.resources = "{\"custom\": NaN}";
  EXPECT_EQ(RayletResourceArgs(f).status().message(), "--resources: NaN is not a quantity");
  f.resources = "{\"custom\": Infinity}";
  EXPECT_EQ(RayletResourceArgs(f).status().message(), "--resources: infinite quantities are not allowed");
  f.resources = "{\"custom\": 1e999}";
  EXPECT_EQ(RayletResourceArgs(f).status().message(), "--resources: quantity 1e999 is infinite");
  f.resources = "{\"custom\": }";
  EXPECT_EQ(RayletResourceArgs(f).status().message(), "--resources: resources are not valid JSON: {\"custom\": }");
}

TEST(NodeFlagsTest, ReservedResourceNamesAreRefused) {
  for (const char* name : {"node:__internal_head__", "node:10.1.2.3", "TPU", "TPU-v6e-16-head"}) {
    NodeFlags f;
    f.resources = std::string("{\"") + name + "\": 1}";
    auto args = RayletResourceArgs(f);
    ASSERT_FALSE(args.ok()) << name;
    EXPECT_EQ(
        std::string(args.status().message()).rfind(std::string("--resources: resource '") + name + "' is reserved", 0),
        0u)
        << args.status();
  }
}

TEST(NodeFlagsTest, ResourceGivenTwiceIsRefused) {
  NodeFlags f;
  f.resources = R"({"banana": 1, "ssd": 2, "banana": 3})";
  EXPECT_EQ(RayletResourceArgs(f).status().message(), "--resources: resource 'banana' is given twice");
}

TEST(NodeFlagsTest, QuantitiesAboveTheMaximumAreRefusedNotWrapped) {
  NodeFlags cpus;
  cpus.num_cpus = "1e15";
  EXPECT_EQ(RayletResourceArgs(cpus).status().message(), "--num-cpus: quantity 1e+15 is larger than the maximum 9e+14");
  NodeFlags memory;
  memory.memory = "1e15";
  EXPECT_EQ(RayletResourceArgs(memory).status().message(), "--memory: quantity 1e+15 is larger than the maximum 9e+14");
  NodeFlags custom;
  custom.resources = R"({"x": 9.3e14})";
  EXPECT_EQ(RayletResourceArgs(custom).status().message(),
            "--resources: resource 'x': quantity 9.3e+14 is larger than the maximum 9e+14");
  NodeFlags largest;
  largest.num_cpus = "9e14";
  largest.memory = "900000000000000";
  largest.resources = R"({"x": 9e14})";
  auto args = RayletResourceArgs(largest);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"--num_cpus=900000000000000", "--memory=900000000000000",
                                             "--resources={\"x\":900000000000000.0}"}));
}

TEST(NodeFlagsTest, BadCountsAreRejected) {
  for (const char* bad : {"-1", "nan", "NaN", "inf", "-inf", "1e300", "2.5", "four", ""}) {
    NodeFlags f;
    f.num_cpus = bad;
    if (std::string(bad).empty()) {
      EXPECT_TRUE(RayletResourceArgs(f).ok());
      continue;
    }
    EXPECT_EQ(CodeOf(f), absl::StatusCode::kInvalidArgument) << bad;
    NodeFlags m;
    m.memory = bad;
    EXPECT_EQ(CodeOf(m), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(NodeFlagsTest, Labels) {
  auto ok = ParseLabels("a=1,b.c/d=x_y-z,empty=");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at("a"), "1");
  EXPECT_EQ(ok->at("b.c/d"), "x_y-z");
  EXPECT_EQ(ok->at("empty"), "");
  for (const char* bad : {"novalue", "=v", "a=1,a=2", "a=b c", "sp ace=1", "manta.io/tpu-worker-id=3", "a=x/y"}) {
    EXPECT_EQ(ParseLabels(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(NodeFlagsTest, HostPort) {
  auto hp = ParseHostPort("10.0.0.1:6379");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "10.0.0.1");
  EXPECT_EQ(hp->port, 6379);
  EXPECT_TRUE(ParseHostPort("head-0.cluster:1").ok());
  for (const char* bad : {"10.0.0.1", ":6379", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000", "a b:1", "h:x"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
  }
}

TEST(NodeFlagsTest, TpuEnvironment) {
  unsetenv("TPU_ACCELERATOR_TYPE");
  EXPECT_TRUE(CheckTpuEnvironment().ok());
  setenv("TPU_ACCELERATOR_TYPE", "v6e-16", 1);
  setenv("TPU_TOPOLOGY", "4x4", 1);
  setenv("TPU_WORKER_ID", "1", 1);
  setenv("TPU_NAME", "tpu-group-0", 1);
  EXPECT_TRUE(CheckTpuEnvironment().ok());
  setenv("TPU_TOPOLOGY", "2x2", 1);
  EXPECT_EQ(CheckTpuEnvironment().code(), absl::StatusCode::kInvalidArgument);
  setenv("TPU_ACCELERATOR_TYPE", "v99-8", 1);
  EXPECT_EQ(CheckTpuEnvironment().code(), absl::StatusCode::kInvalidArgument);
  for (const char* v : {"TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY", "TPU_WORKER_ID", "TPU_NAME"}) unsetenv(v);
}

}  // namespace
}  // namespace manta::cli
