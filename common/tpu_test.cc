#include "common/tpu.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace manta::tpu {
namespace {

::testing::AssertionResult Contains(absl::string_view haystack, absl::string_view needle) {
  if (absl::StrContains(haystack, needle)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "\"" << haystack << "\" does not contain \"" << needle << "\"";
}

PodType Pod(const std::string& s) {
  absl::StatusOr<PodType> pod_type = ParsePodType(s);
  EXPECT_TRUE(pod_type.ok()) << pod_type.status();
  return pod_type.value_or(PodType{});
}

std::vector<int> Topo(const std::string& s) {
  absl::StatusOr<std::vector<int>> topology = ParseTopology(s);
  EXPECT_TRUE(topology.ok()) << topology.status();
  return topology.value_or(std::vector<int>{});
}

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The environment GKE gives worker `worker_id` of slice "tpu-group-0".
std::map<std::string, std::string> GkeEnv(const std::string& type, const std::string& topology,
                                          const std::string& worker_id) {
  return {{"TPU_ACCELERATOR_TYPE", type},
          {"TPU_TOPOLOGY", topology},
          {"TPU_WORKER_ID", worker_id},
          {"TPU_NAME", "tpu-group-0"}};
}

TpuHost Detect(const std::map<std::string, std::string>& vars) {
  absl::StatusOr<std::optional<TpuHost>> host = DetectTpuHost(FakeEnv(vars));
  EXPECT_TRUE(host.ok()) << host.status();
  EXPECT_TRUE(host.ok() && host->has_value());
  return host.ok() && host->has_value() ? **host : TpuHost{};
}

absl::Status DetectError(const std::map<std::string, std::string>& vars) {
  absl::StatusOr<std::optional<TpuHost>> host = DetectTpuHost(FakeEnv(vars));
  EXPECT_FALSE(host.ok());
  return host.ok() ? absl::OkStatus() : host.status();
}

TEST(PodTypeTest, ParsesKnownGenerations) {
  EXPECT_EQ(Pod("v6e-16"), (PodType{"v6e", 16}));
  EXPECT_EQ(Pod("v4-16"), (PodType{"v4", 16}));
  EXPECT_EQ(Pod("v5litepod-8"), (PodType{"v5litepod", 8}));
  EXPECT_EQ(Pod("v5p-128"), (PodType{"v5p", 128}));
  EXPECT_EQ(Pod("v2-8"), (PodType{"v2", 8}));
  EXPECT_EQ(Pod("v3-1024"), (PodType{"v3", 1024}));
  EXPECT_EQ(Pod("v7x-8"), (PodType{"v7x", 8}));
  EXPECT_EQ(Pod("v6e-16").ToString(), "v6e-16");
}

TEST(PodTypeTest, NormalizesSpelling) {
  EXPECT_EQ(Pod(" V6E-16 "), (PodType{"v6e", 16}));
  EXPECT_EQ(Pod("tpu7x-16"), (PodType{"v7x", 16}));
  EXPECT_EQ(Pod("TPU-v4-32"), (PodType{"v4", 32}));
}

TEST(PodTypeTest, CountsChips) {
  EXPECT_EQ(Pod("v6e-16").NumChips(), 16);
  EXPECT_EQ(Pod("v4-16").NumChips(), 8);
  EXPECT_EQ(Pod("v5p-8").NumChips(), 4);
}

TEST(PodTypeTest, RejectsUnknownGeneration) {
  for (const char* s : {"v5e-8", "v9-8", "v1-8"}) {
    absl::StatusOr<PodType> pod_type = ParsePodType(s);
    ASSERT_FALSE(pod_type.ok()) << s;
    EXPECT_EQ(pod_type.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(pod_type.status().message(), "unknown TPU generation"));
    EXPECT_TRUE(Contains(pod_type.status().message(), s));
  }
}

TEST(PodTypeTest, RejectsBadSyntax) {
  for (const char* s :
       {"", "v6e", "v6e-", "-16", "v6e-x", "v6e-16-2", "v6e--16", "v6e-0", "v6e--1", "v6e-1.5", "v6e-99999999999"}) {
    absl::StatusOr<PodType> pod_type = ParsePodType(s);
    ASSERT_FALSE(pod_type.ok()) << s;
    EXPECT_EQ(pod_type.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(pod_type.status().message(), "invalid TPU pod type"));
  }
}

TEST(PodTypeTest, RejectsPartialChips) {
  absl::StatusOr<PodType> pod_type = ParsePodType("v4-7");
  ASSERT_FALSE(pod_type.ok());
  EXPECT_TRUE(Contains(pod_type.status().message(), "2 cores per chip"));
  EXPECT_FALSE(ParsePodType("v5p-3").ok());
  EXPECT_TRUE(ParsePodType("v6e-3").ok());
}

TEST(TopologyTest, Parses) {
  EXPECT_EQ(Topo("4x4"), (std::vector<int>{4, 4}));
  EXPECT_EQ(Topo("2x2x2"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(Topo(" 2X4 "), (std::vector<int>{2, 4}));
  EXPECT_EQ(TopologyToString(Topo("16x16")), "16x16");
  EXPECT_EQ(ChipsInTopology(Topo("4x4")), 16);
  EXPECT_EQ(ChipsInTopology(Topo("2x2x2")), 8);
}

TEST(TopologyTest, RejectsMalformed) {
  for (const char* s : {"", "4", "4x", "x4", "0x4", "4x-1", "4x4x4x4", "axb", "4 x 4", "4x4,", "1024x1024x1024"}) {
    absl::StatusOr<std::vector<int>> topology = ParseTopology(s);
    ASSERT_FALSE(topology.ok()) << s;
    EXPECT_EQ(topology.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(topology.status().message(), "invalid TPU topology"));
  }
}

TEST(GenerationTest, CoresPerChip) {
  EXPECT_EQ(CoresPerChip("v2"), 2);
  EXPECT_EQ(CoresPerChip("v3"), 2);
  EXPECT_EQ(CoresPerChip("v4"), 2);
  EXPECT_EQ(CoresPerChip("v5p"), 2);
  EXPECT_EQ(CoresPerChip("v7x"), 2);
  EXPECT_EQ(CoresPerChip("v5litepod"), 1);
  EXPECT_EQ(CoresPerChip("v6e"), 1);
  EXPECT_EQ(CoresPerChip("v5e"), 0);
  EXPECT_EQ(KnownGenerations(), (std::vector<std::string>{"v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x"}));
}

struct SliceCase {
  const char* pod_type;
  const char* topology;
  int chips_per_host;
  int hosts_per_slice;
};

TEST(SliceShapeTest, ChipsPerHostAndHostsPerSlice) {
  const SliceCase cases[] = {
      {"v6e-16", "4x4", 4, 4},  {"v6e-256", "16x16", 4, 64},  {"v6e-8", "2x4", 8, 1},
      {"v6e-4", "2x2", 4, 1},   {"v6e-1", "1x1", 1, 1},       {"v6e-16", "2x8", 4, 4},
      {"v6e-32", "4x8", 4, 8},  {"v5litepod-8", "2x4", 8, 1}, {"v5litepod-16", "4x4", 4, 4},
      {"v4-8", "2x2x1", 4, 1},  {"v4-16", "2x2x2", 4, 2},     {"v4-128", "4x4x4", 4, 16},
      {"v5p-8", "2x2x1", 4, 1}, {"v5p-16", "2x2x2", 4, 2},    {"v5p-128", "4x4x4", 4, 16},
      {"v2-8", "2x2", 4, 1},    {"v2-32", "4x4", 4, 4},       {"v3-8", "2x2", 4, 1},
      {"v3-128", "8x8", 4, 16}, {"v7x-8", "2x2x1", 4, 1},     {"v7x-16", "2x2x2", 4, 2},
      {"v4-2", "1x1x1", 1, 1},
  };
  for (const SliceCase& c : cases) {
    SCOPED_TRACE(std::string(c.pod_type) + " " + c.topology);
    EXPECT_EQ(ChipsPerHost(Pod(c.pod_type), Topo(c.topology)).value_or(-1), c.chips_per_host);
    EXPECT_EQ(HostsPerSlice(Pod(c.pod_type), Topo(c.topology)).value_or(-1), c.hosts_per_slice);
  }
}

TEST(SliceShapeTest, RejectsTopologyThatContradictsPodType) {
  absl::StatusOr<int> chips = ChipsPerHost(Pod("v6e-16"), Topo("2x2"));
  ASSERT_FALSE(chips.ok());
  EXPECT_EQ(chips.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(chips.status().message(), "2x2"));
  EXPECT_TRUE(Contains(chips.status().message(), "v6e-16"));
  // v4 has 2 cores per chip: 4x4 is 32 cores, not 16.
  EXPECT_FALSE(HostsPerSlice(Pod("v4-16"), Topo("4x4")).ok());
  EXPECT_FALSE(ChipsPerHost(Pod("v4-16"), {}).ok());
  EXPECT_FALSE(ChipsPerHost(PodType{"v5e", 16}, Topo("4x4")).ok());
}

TEST(AcceleratorTypeTest, Normalizes) {
  for (const char* s : {"v6e", "V6E", "TPU-V6E", "tpu-v6e", " Tpu-V6e ", "v6e-16", "tpuv6e"}) {
    EXPECT_EQ(AcceleratorTypeName(s).value_or(""), "TPU-V6E") << s;
  }
  EXPECT_EQ(AcceleratorTypeName("v5litepod").value_or(""), "TPU-V5LITEPOD");
  EXPECT_EQ(AcceleratorTypeName("v4").value_or(""), "TPU-V4");
  EXPECT_EQ(AcceleratorTypeName("tpu7x").value_or(""), "TPU-V7X");
  EXPECT_EQ(AcceleratorTypeResourceName("TPU-V6E"), "accelerator_type:TPU-V6E");
}

TEST(AcceleratorTypeTest, RejectsUnknown) {
  for (const char* s : {"", "v5e", "TPU-", "gpu", "TPU-V9"}) {
    absl::StatusOr<std::string> name = AcceleratorTypeName(s);
    ASSERT_FALSE(name.ok()) << s;
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(HeadResourceTest, NamesPodType) {
  EXPECT_EQ(HeadResourceName(Pod("v6e-16")), "TPU-v6e-16-head");
  EXPECT_EQ(HeadResourceName(Pod("v5p-16")), "TPU-v5p-16-head");
}

TEST(PodTypeFromTopologyTest, Derives) {
  EXPECT_EQ(PodTypeFromTopology("v6e", "4x4").value_or(PodType{}), (PodType{"v6e", 16}));
  EXPECT_EQ(PodTypeFromTopology("TPU-V4", "2x2x2").value_or(PodType{}), (PodType{"v4", 16}));
  EXPECT_EQ(PodTypeFromTopology("v5p", "2x2x2").value_or(PodType{}), (PodType{"v5p", 16}));
  EXPECT_EQ(PodTypeFromTopology("TPU-V5LITEPOD", "2x4").value_or(PodType{}), (PodType{"v5litepod", 8}));
  EXPECT_EQ(PodTypeFromTopology("v6e", "16x16").value_or(PodType{}), (PodType{"v6e", 256}));
}

TEST(PodTypeFromTopologyTest, RoundTrips) {
  const std::pair<const char*, const char*> slices[] = {{"v6e-16", "4x4"}, {"v4-16", "2x2x2"},     {"v5p-128", "4x4x4"},
                                                        {"v2-32", "4x4"},  {"v5litepod-8", "2x4"}, {"v7x-16", "2x2x2"}};
  for (const auto& [pod, topology] : slices) {
    const PodType pod_type = Pod(pod);
    const std::string accelerator_type = AcceleratorTypeName(pod_type.generation).value_or("");
    absl::StatusOr<PodType> derived = PodTypeFromTopology(accelerator_type, topology);
    ASSERT_TRUE(derived.ok()) << derived.status();
    EXPECT_EQ(*derived, pod_type) << pod;
    EXPECT_EQ(HeadResourceName(*derived), HeadResourceName(pod_type));
    EXPECT_TRUE(ChipsPerHost(*derived, Topo(topology)).ok()) << pod;
  }
}

TEST(PodTypeFromTopologyTest, RejectsBadInput) {
  EXPECT_EQ(PodTypeFromTopology("v5e", "4x4").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PodTypeFromTopology("v6e", "4x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidTopologyTest, FollowsPerGenerationTable) {
  EXPECT_TRUE(IsValidTopology("v6e", "4x4"));
  EXPECT_TRUE(IsValidTopology("TPU-V6E", "16x16"));
  EXPECT_TRUE(IsValidTopology("v5litepod", "2x8"));
  EXPECT_FALSE(IsValidTopology("v6e", "2x2x2"));
  EXPECT_FALSE(IsValidTopology("v6e", "4x2"));
  EXPECT_TRUE(IsValidTopology("v4", "2x2x2"));
  EXPECT_TRUE(IsValidTopology("v4", "4x4x8"));
  EXPECT_TRUE(IsValidTopology("v4", "12x12x16"));
  EXPECT_FALSE(IsValidTopology("v4", "16x4x4"));
  EXPECT_FALSE(IsValidTopology("v4", "4x4x6"));
  EXPECT_FALSE(IsValidTopology("v4", "4x4"));
  EXPECT_TRUE(IsValidTopology("v5p", "16x16x24"));
  EXPECT_FALSE(IsValidTopology("v5p", "16x16x28"));
  EXPECT_TRUE(IsValidTopology("v2", "16x16"));
  EXPECT_FALSE(IsValidTopology("v2", "16x32"));
  EXPECT_TRUE(IsValidTopology("v3", "32x32"));
  EXPECT_TRUE(IsValidTopology("v7x", "8x16x16"));
  EXPECT_FALSE(IsValidTopology("v7x", "4x4x12"));
  EXPECT_FALSE(IsValidTopology("v5e", "4x4"));
  EXPECT_FALSE(IsValidTopology("v6e", "4x"));
}

TEST(DetectTpuHostTest, NotATpuHost) {
  absl::StatusOr<std::optional<TpuHost>> host = DetectTpuHost(FakeEnv({}));
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE(host->has_value());
  host = DetectTpuHost(FakeEnv({{"TPU_ACCELERATOR_TYPE", ""}, {"TPU_NAME", "x"}}));
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE(host->has_value());
}

TEST(DetectTpuHostTest, V6e16Worker0) {
  auto vars = GkeEnv("v6e-16", "4x4", "0");
  vars["TPU_WORKER_HOSTNAMES"] = "h0,h1,h2,h3";
  vars["TPU_CHIPS_PER_HOST_BOUNDS"] = "2,2,1";
  const TpuHost host = Detect(vars);
  EXPECT_EQ(host.pod_type, (PodType{"v6e", 16}));
  EXPECT_EQ(host.topology, (std::vector<int>{4, 4}));
  EXPECT_EQ(host.topology_str, "4x4");
  EXPECT_EQ(host.slice_name, "tpu-group-0");
  EXPECT_EQ(host.worker_id, 0);
  EXPECT_EQ(host.chips_per_host, 4);
  EXPECT_EQ(host.hosts_per_slice, 4);
  EXPECT_EQ(host.worker_hostnames, (std::vector<std::string>{"h0", "h1", "h2", "h3"}));
  EXPECT_EQ(host.AcceleratorType(), "TPU-V6E");
  EXPECT_EQ(host.Resources(),
            (std::map<std::string, double>{
                {"TPU", 4}, {"accelerator_type:TPU-V6E", 1}, {"tpu-group-0", 1}, {"TPU-v6e-16-head", 1}}));
  EXPECT_EQ(host.Labels(), (std::map<std::string, std::string>{{"manta.io/tpu-slice-name", "tpu-group-0"},
                                                               {"manta.io/tpu-worker-id", "0"},
                                                               {"manta.io/tpu-topology", "4x4"},
                                                               {"manta.io/tpu-pod-type", "v6e-16"},
                                                               {"manta.io/accelerator-type", "TPU-V6E"}}));
}

TEST(DetectTpuHostTest, V6e16Worker3HasNoHead) {
  const TpuHost host = Detect(GkeEnv("v6e-16", "4x4", "3"));
  EXPECT_EQ(host.worker_id, 3);
  EXPECT_TRUE((host.worker_hostnames).empty());
  EXPECT_EQ(host.Resources(),
            (std::map<std::string, double>{{"TPU", 4}, {"accelerator_type:TPU-V6E", 1}, {"tpu-group-0", 1}}));
  EXPECT_EQ(host.Labels(), (std::map<std::string, std::string>{{"manta.io/tpu-slice-name", "tpu-group-0"},
                                                               {"manta.io/tpu-worker-id", "3"},
                                                               {"manta.io/tpu-topology", "4x4"},
                                                               {"manta.io/tpu-pod-type", "v6e-16"},
                                                               {"manta.io/accelerator-type", "TPU-V6E"}}));
}

TEST(DetectTpuHostTest, V4With2CoresPerChip) {
  const TpuHost host = Detect(GkeEnv("v4-16", "2x2x2", "1"));
  EXPECT_EQ(host.chips_per_host, 4);
  EXPECT_EQ(host.hosts_per_slice, 2);
  EXPECT_EQ(host.Resources(),
            (std::map<std::string, double>{{"TPU", 4}, {"accelerator_type:TPU-V4", 1}, {"tpu-group-0", 1}}));
  EXPECT_EQ(host.Labels().at("manta.io/tpu-topology"), "2x2x2");
}

TEST(DetectTpuHostTest, SingleHostV5litepodDefaultsWorkerId) {
  const TpuHost host = Detect({{"TPU_ACCELERATOR_TYPE", "v5litepod-8"}, {"TPU_TOPOLOGY", "2x4"}, {"TPU_NAME", "lite"}});
  EXPECT_EQ(host.worker_id, 0);
  EXPECT_EQ(host.chips_per_host, 8);
  EXPECT_EQ(host.hosts_per_slice, 1);
  EXPECT_EQ(host.Resources(),
            (std::map<std::string, double>{
                {"TPU", 8}, {"accelerator_type:TPU-V5LITEPOD", 1}, {"lite", 1}, {"TPU-v5litepod-8-head", 1}}));
}

TEST(DetectTpuHostTest, OtherGenerations) {
  TpuHost host = Detect(GkeEnv("v5p-16", "2x2x2", "0"));
  EXPECT_EQ(host.Resources().at("TPU"), 4);
  EXPECT_EQ(host.hosts_per_slice, 2);
  EXPECT_EQ(host.Resources().count("TPU-v5p-16-head"), 1u);
  EXPECT_EQ(host.Labels().at("manta.io/accelerator-type"), "TPU-V5P");

  host = Detect(GkeEnv("v2-32", "4x4", "2"));
  EXPECT_EQ(host.chips_per_host, 4);
  EXPECT_EQ(host.hosts_per_slice, 4);
  EXPECT_EQ(host.Resources().count("accelerator_type:TPU-V2"), 1u);

  host = Detect(GkeEnv("v3-8", "2x2", "0"));
  EXPECT_EQ(host.chips_per_host, 4);
  EXPECT_EQ(host.hosts_per_slice, 1);
  EXPECT_EQ(host.Resources().count("TPU-v3-8-head"), 1u);

  host = Detect(GkeEnv("v6e-256", "16x16", "63"));
  EXPECT_EQ(host.chips_per_host, 4);
  EXPECT_EQ(host.hosts_per_slice, 64);
  EXPECT_EQ(host.Resources().count("TPU-v6e-256-head"), 0u);

  host = Detect(GkeEnv("tpu7x-8", "2x2x1", "0"));
  EXPECT_EQ(host.pod_type, (PodType{"v7x", 8}));
  EXPECT_EQ(host.Resources().count("TPU-v7x-8-head"), 1u);
  EXPECT_EQ(host.Resources().count("accelerator_type:TPU-V7X"), 1u);
}

TEST(DetectTpuHostTest, RejectsUnknownType) {
  const absl::Status status = DetectError(GkeEnv("v5e-16", "4x4", "0"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "TPU_ACCELERATOR_TYPE=\"v5e-16\""));
  EXPECT_TRUE(Contains(DetectError(GkeEnv("v6e", "4x4", "0")).message(), "TPU_ACCELERATOR_TYPE"));
}

TEST(DetectTpuHostTest, RejectsContradictingTopology) {
  const absl::Status status = DetectError(GkeEnv("v6e-16", "2x2", "0"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "TPU_TOPOLOGY=\"2x2\""));
  EXPECT_TRUE(Contains(status.message(), "v6e-16"));
  EXPECT_TRUE(Contains(DetectError(GkeEnv("v6e-16", "4by4", "0")).message(), "TPU_TOPOLOGY=\"4by4\""));
}

TEST(DetectTpuHostTest, RejectsBadWorkerId) {
  for (const char* id : {"x", "-1", "4", "1.5", "0x1", "99999999999"}) {
    const absl::Status status = DetectError(GkeEnv("v6e-16", "4x4", id));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_TRUE(Contains(status.message(), "TPU_WORKER_ID=\"")) << id;
    EXPECT_TRUE(Contains(status.message(), "[0, 4)")) << id;
  }
}

TEST(DetectTpuHostTest, RequiresWorkerIdOnMultiHostSlice) {
  auto vars = GkeEnv("v6e-16", "4x4", "0");
  vars.erase("TPU_WORKER_ID");
  EXPECT_TRUE(Contains(DetectError(vars).message(), "TPU_WORKER_ID is not set"));
}

TEST(DetectTpuHostTest, RequiresNameAndTopology) {
  auto vars = GkeEnv("v6e-16", "4x4", "0");
  vars["TPU_NAME"] = "";
  EXPECT_TRUE(Contains(DetectError(vars).message(), "TPU_NAME is not set"));
  vars = GkeEnv("v6e-8", "2x4", "0");
  vars.erase("TPU_TOPOLOGY");
  EXPECT_TRUE(Contains(DetectError(vars).message(), "TPU_TOPOLOGY is not set"));
}

TEST(DetectTpuHostTest, ChecksChipsPerHostBounds) {
  auto vars = GkeEnv("v6e-8", "2x4", "0");
  vars["TPU_CHIPS_PER_HOST_BOUNDS"] = "2,4,1";
  EXPECT_EQ(Detect(vars).chips_per_host, 8);
  for (const char* bounds : {"2,2,1", "2,4,2", "2,x,1", "2,,1", "0,4,1"}) {
    vars["TPU_CHIPS_PER_HOST_BOUNDS"] = bounds;
    const absl::Status status = DetectError(vars);
    EXPECT_TRUE(Contains(status.message(), "TPU_CHIPS_PER_HOST_BOUNDS=\"")) << bounds;
    EXPECT_TRUE(Contains(status.message(), "8 chips per host")) << bounds;
  }
}

TEST(DetectTpuHostTest, ChecksWorkerHostnames) {
  auto vars = GkeEnv("v4-16", "2x2x2", "0");
  vars["TPU_WORKER_HOSTNAMES"] = " a , b ";
  EXPECT_EQ(Detect(vars).worker_hostnames, (std::vector<std::string>{"a", "b"}));
  vars["TPU_WORKER_HOSTNAMES"] = "a,b,c";
  EXPECT_TRUE(Contains(DetectError(vars).message(), "TPU_WORKER_HOSTNAMES=\"a,b,c\": lists 3 hosts"));
}

TEST(VisibleChipsEnvTest, OneChip) {
  EXPECT_EQ(VisibleChipsEnv({2}, 4).value(),
            (std::map<std::string, std::string>{
                {"TPU_VISIBLE_CHIPS", "2"}, {"TPU_CHIPS_PER_HOST_BOUNDS", "1,1,1"}, {"TPU_HOST_BOUNDS", "1,1,1"}}));
}

TEST(VisibleChipsEnvTest, TwoChips) {
  EXPECT_EQ(VisibleChipsEnv({0, 1}, 4).value(),
            (std::map<std::string, std::string>{
                {"TPU_VISIBLE_CHIPS", "0,1"}, {"TPU_CHIPS_PER_HOST_BOUNDS", "1,2,1"}, {"TPU_HOST_BOUNDS", "1,1,1"}}));
  EXPECT_EQ(VisibleChipsEnv({3, 2}, 8).value().at("TPU_VISIBLE_CHIPS"), "3,2");
}

TEST(VisibleChipsEnvTest, FourOfEightChipsGetsNoBounds) {
  EXPECT_EQ(VisibleChipsEnv({4, 5, 6, 7}, 8).value(),
            (std::map<std::string, std::string>{{"TPU_VISIBLE_CHIPS", "4,5,6,7"}}));
}

TEST(VisibleChipsEnvTest, WholeHostGetsNothing) {
  EXPECT_TRUE((VisibleChipsEnv({0, 1, 2, 3}, 4).value()).empty());
  EXPECT_TRUE((VisibleChipsEnv({0, 1, 2, 3, 4, 5, 6, 7}, 8).value()).empty());
  EXPECT_TRUE((VisibleChipsEnv({0}, 1).value()).empty());
}

TEST(VisibleChipsEnvTest, RejectsInvalidCounts) {
  const std::pair<std::vector<int>, int> cases[] = {{{}, 4},     {{0, 1, 2}, 4},      {{0, 1, 2, 3, 4, 5, 6, 7}, 4},
                                                    {{0, 0}, 4}, {{0, 4}, 4},         {{-1}, 4},
                                                    {{0}, 0},    {{0, 1, 2, 3, 4}, 8}};
  for (const auto& [ids, chips_per_host] : cases) {
    absl::StatusOr<std::map<std::string, std::string>> env = VisibleChipsEnv(ids, chips_per_host);
    ASSERT_FALSE(env.ok()) << ids.size() << " of " << chips_per_host;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(TpuRequestTest, OnlyPowersOfTwoUpToEight) {
  for (double n : {1.0, 2.0, 4.0, 8.0}) EXPECT_TRUE(IsValidTpuRequest(n)) << n;
  for (double n : {0.0, 0.5, 3.0, 6.0, 16.0, -1.0, 4.0001}) {
    EXPECT_FALSE(IsValidTpuRequest(n)) << n;
  }
}

}  // namespace
}  // namespace manta::tpu
