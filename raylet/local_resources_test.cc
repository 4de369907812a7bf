#include "raylet/local_resources.h"

#include <map>

#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

tpu::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LocalResourcesTest, TpuHostContributesChipsSliceAndHead) {
  LocalResourceOptions opts;
  opts.num_cpus = 8;
  opts.memory_bytes = 1 << 30;
  opts.labels = "pool=tpu";
  auto r = DetectLocalResources(opts, Env({{"TPU_ACCELERATOR_TYPE", "v6e-16"},
                                           {"TPU_TOPOLOGY", "4x4"},
                                           {"TPU_WORKER_ID", "0"},
                                           {"TPU_NAME", "tpu-group-0"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total.Get("TPU").ToDouble(), 4.0);
  EXPECT_EQ(r->total.Get("tpu-group-0").ToDouble(), 1.0);
  EXPECT_EQ(r->total.Get("TPU-v6e-16-head").ToDouble(), 1.0);
  EXPECT_EQ(r->total.Get("accelerator_type:TPU-V6E").ToDouble(), 1.0);
  EXPECT_EQ(r->total.Get("CPU").ToDouble(), 8.0);
  EXPECT_EQ(r->total.Get("node:127.0.0.1").ToDouble(), 1.0);
  EXPECT_EQ(r->labels.at("manta.io/tpu-slice-name"), "tpu-group-0");
  EXPECT_EQ(r->labels.at("pool"), "tpu");
}

TEST(LocalResourcesTest, NonHeadWorkerHasNoHeadResource) {
  auto r = DetectLocalResources({}, Env({{"TPU_ACCELERATOR_TYPE", "v6e-16"},
                                         {"TPU_TOPOLOGY", "4x4"},
                                         {"TPU_WORKER_ID", "3"},
                                         {"TPU_NAME", "tpu-group-0"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->total.Get("TPU-v6e-16-head").IsZero());
  EXPECT_GT(r->total.Get("CPU").ToDouble(), 0);
  EXPECT_GT(r->total.Get("memory").ToDouble(), 0);
}

TEST(LocalResourcesTest, ReservedNamesAndDuplicatesInResourcesAreRefused) {
  for (const char* json :
       {R"({"node:__internal_head__": 1})", R"({"node:10.0.0.9": 1})", R"({"TPU": 4})", R"({"TPU-v6e-16-head": 1})"}) {
    LocalResourceOptions opts;
    opts.resources_json = json;
    auto r = DetectLocalResources(opts, Env({}));
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find("--resources"), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("is reserved"), std::string::npos) << r.status();
  }
  // A TPU worker that is not worker 0 may not claim its slice's head either.
  LocalResourceOptions claim_head;
  claim_head.resources_json = R"({"TPU-v6e-16-head": 1})";
  EXPECT_FALSE(DetectLocalResources(claim_head, Env({{"TPU_ACCELERATOR_TYPE", "v6e-16"},
                                                     {"TPU_TOPOLOGY", "4x4"},
                                                     {"TPU_WORKER_ID", "3"},
                                                     {"TPU_NAME", "tpu-group-0"}}))
                   .ok());
  LocalResourceOptions twice;
  twice.resources_json = R"({"x": 1, "x": 2})";
  auto r = DetectLocalResources(twice, Env({}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'x' is given twice"), std::string::npos) << r.status();
}

TEST(LocalResourcesTest, QuantitiesAboveTheMaximumAreRefusedNotWrapped) {
  LocalResourceOptions cpus;
  cpus.num_cpus = 1e15;
  LocalResourceOptions memory;
  memory.memory_bytes = 1e15;
  LocalResourceOptions custom;
  custom.resources_json = R"({"x": 9.3e14})";
  for (const LocalResourceOptions& opts : {cpus, memory, custom}) {
    auto r = DetectLocalResources(opts, Env({}));
    ASSERT_FALSE(r.ok()) << r->total.DebugString();
    EXPECT_NE(r.status().message().find("larger than the maximum"), std::string::npos) << r.status();
  }
}

TEST(LocalResourcesTest, BadInputIsRejectedWithTheFlagNamed) {
  auto no_env = Env({});
  for (const char* json : {"{bad", R"({"x": -1})", R"({"x": 1e300})", R"({"CPU": 2})", R"({"x": "1"})"}) {
    LocalResourceOptions opts;
    opts.resources_json = json;
    auto r = DetectLocalResources(opts, no_env);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find("--resources"), std::string::npos) << r.status();
  }
  LocalResourceOptions nan_cpus;
  nan_cpus.num_cpus = std::nan("");
  EXPECT_FALSE(DetectLocalResources(nan_cpus, no_env).ok());
  LocalResourceOptions bad_labels;
  bad_labels.labels = "novalue";
  EXPECT_FALSE(DetectLocalResources(bad_labels, no_env).ok());
  bad_labels.labels = "manta.io/tpu-slice-name=x";
  EXPECT_FALSE(DetectLocalResources(bad_labels, no_env).ok());
  EXPECT_FALSE(DetectLocalResources({}, Env({{"TPU_ACCELERATOR_TYPE", "v9z-16"}})).ok());
  EXPECT_FALSE(
      DetectLocalResources(
          {},
          Env({{"TPU_ACCELERATOR_TYPE", "v6e-16"}, {"TPU_TOPOLOGY", "2x2"}, {"TPU_NAME", "s"}, {"TPU_WORKER_ID", "0"}}))
          .ok());
}

}  // namespace
}  // namespace manta::raylet
