// Checking a run's configuration before anything is reserved.
#include "train/scaling.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "manta/maxtext.h"
#include "train/kernels/config.h"
#include "train/kernels/memory.h"

namespace manta::train {
namespace {

ScalingConfig Tpu(WorkerCount n) {
  ScalingConfig s;
  s.use_tpu = true;
  s.num_workers = n;
  s.topology = "4x4";
  s.accelerator_type = "TPU-V6E";
  return s;
}

TEST(ResolveScalingTest, TpuRunsAreWholeSlicesOfWholeHosts) {
  auto spec = ResolveScaling(Tpu(8));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pod_type, "v6e-16");
  EXPECT_EQ(spec->hosts_per_slice, 4);
  EXPECT_EQ(spec->resources_per_worker, (std::map<std::string, double>{{"TPU", 4}}));
  EXPECT_EQ(CandidateSizes(*spec), std::vector<int>{8});

  auto elastic = ResolveScaling(Tpu({4, 12}));
  ASSERT_TRUE(elastic.ok());
  EXPECT_EQ(CandidateSizes(*elastic), (std::vector<int>{4, 8, 12}));
  WorkerGroupShape shape = ShapeOf(*elastic, 8, 1 << 30);
  EXPECT_EQ(shape.num_slices, 2);
  EXPECT_EQ(shape.chips_per_worker, 4);
  EXPECT_TRUE(shape.elastic);
  EXPECT_FALSE(ShapeOf(*spec, 8, 1 << 30).elastic);

  auto six = ResolveScaling(Tpu(6));
  EXPECT_EQ(six.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(six.status().message().find("not a whole number of v6e-16 slices"), std::string::npos) << six.status();
  EXPECT_FALSE(ResolveScaling(Tpu({4, 6})).ok());

  ScalingConfig half = Tpu(4);
  half.resources_per_worker = {{"TPU", 2}};
  EXPECT_NE(ResolveScaling(half).status().message().find("TPU must be 4"), std::string::npos);

  ScalingConfig topo = Tpu(4);
  topo.topology = "3x7";
  EXPECT_EQ(ResolveScaling(topo).status().code(), absl::StatusCode::kInvalidArgument);
  ScalingConfig gen = Tpu(4);
  gen.accelerator_type = "TPU-V99";
  EXPECT_EQ(ResolveScaling(gen).status().code(), absl::StatusCode::kInvalidArgument);
  ScalingConfig missing = Tpu(4);
  missing.topology.clear();
  EXPECT_EQ(ResolveScaling(missing).status().code(), absl::StatusCode::kInvalidArgument);

  // A label selector chooses among slices: by any label of their hosts, not
  // by worker id, and not against the pod type asked for.
  ScalingConfig selected = Tpu(4);
  selected.label_selector = {{"manta.io/tpu-slice-name", "tpu-group-1"}, {"manta.io/tpu-pod-type", "v6e-16"}};
  auto chosen = ResolveScaling(selected);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->label_selector, selected.label_selector);
  for (auto [key, value] : std::map<std::string, std::string>{
           {"manta.io/tpu-worker-id", "0"}, {"manta.io/tpu-pod-type", "v5p-8"}, {"bad key!", "x"}}) {
    ScalingConfig bad = Tpu(4);
    bad.label_selector = {{key, value}};
    auto refused = ResolveScaling(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(refused.status().message().find("label_selector"), std::string::npos) << refused.status();
  }
}

TEST(ResolveScalingTest, BadQuantitiesAndCountsAreRefused) {
  ScalingConfig s;
  s.num_workers = 2;
  auto plain = ResolveScaling(s);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->resources_per_worker, (std::map<std::string, double>{{"CPU", 1}}));
  for (double bad : {std::nan(""), -1.0, std::numeric_limits<double>::infinity(), 2e15}) {
    s.resources_per_worker = {{"CPU", bad}};
    auto r = ResolveScaling(s);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("'CPU'"), std::string::npos) << r.status();
  }
  s.resources_per_worker = {{"", 1}};
  EXPECT_FALSE(ResolveScaling(s).ok());
  s.resources_per_worker = {};
  s.num_workers = 0;
  EXPECT_FALSE(ResolveScaling(s).ok());
  s.num_workers = {3, 2};
  EXPECT_FALSE(ResolveScaling(s).ok());
  s.num_workers = 1;
  s.placement_strategy = "EVERYWHERE";
  EXPECT_NE(ResolveScaling(s).status().message().find("placement_strategy"), std::string::npos);
}

TEST(ResolveRunConfigTest, DefaultsAndBadValues) {
  auto run = ResolveRunConfig(RunConfig{}, absl::FromUnixSeconds(0));
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->name.rfind("manta_train_", 0), 0u);
  EXPECT_FALSE(run->storage_path.empty());
  for (const char* bad : {"..", "a/b", "."}) {
    RunConfig r;
    r.name = bad;
    EXPECT_EQ(ResolveRunConfig(r, absl::Now()).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  RunConfig f;
  f.failure_config.max_failures = -2;
  EXPECT_FALSE(ResolveRunConfig(f, absl::Now()).ok());
  RunConfig k;
  k.checkpoint_config.num_to_keep = -1;
  EXPECT_FALSE(ResolveRunConfig(k, absl::Now()).ok());
  RunConfig e;
  e.worker_env = {{"A=B", "x"}};
  EXPECT_FALSE(ResolveRunConfig(e, absl::Now()).ok());
  RunConfig t;
  t.scheduling_timeout = absl::ZeroDuration();
  EXPECT_FALSE(ResolveRunConfig(t, absl::Now()).ok());
}

TEST(PythonDictTest, RendersAsRayPrintsResources) {
  EXPECT_EQ(PythonDict({{"TPU", 4}}), "{'TPU': 4}");
  EXPECT_EQ(PythonDict({{"TPU", 4}, {"accelerator_type:TPU-V6E", 0.001}}),
            "{'TPU': 4, 'accelerator_type:TPU-V6E': 0.001}");
  EXPECT_EQ(RandomHexId().size(), 32u);
  EXPECT_NE(RandomHexId(), RandomHexId());
}

TEST(ResolveRunConfigTest, NamesPathsAndVariablesMustBeText) {
  RunConfig name;
  name.name = "x\xff";
  auto r = ResolveRunConfig(name, absl::Now());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("RunConfig.name is not UTF-8"), std::string::npos) << r.status();
  RunConfig path;
  path.storage_path = "/tmp/\xfe";
  EXPECT_FALSE(ResolveRunConfig(path, absl::Now()).ok());
  RunConfig env;
  env.worker_env = {{"A", "\xc3("}};
  EXPECT_FALSE(ResolveRunConfig(env, absl::Now()).ok());
}

// An elastic MaxText run sums its gradients exactly (double copies): its
// preflight counts them, so a host that holds the fixed-size run's memory
// but not the elastic run's is refused for the elastic one.
TEST(MaxTextPreflightTest, AnElasticRunCountsItsExactSums) {
  const std::vector<std::string> argv = {std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml", "model_name=tiny",
                                         "ici_fsdp_parallelism=8", "ici_tensor_parallelism=2",
                                         "elastic_fixed_global_batch=true"};
  DistributedEnv env;
  env.num_processes = 4;
  env.chips_per_host = 4;
  int64_t bytes[2] = {};
  for (bool exact : {false, true}) {
    std::vector<std::string> args = argv;
    args.push_back(exact ? "exact_gradient_sums=true" : "exact_gradient_sums=false");
    auto config = LoadConfig(args);
    ASSERT_TRUE(config.ok()) << config.status();
    auto estimate = EstimateMemory(*config, env);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    bytes[exact] = estimate->per_process_bytes;
  }
  ASSERT_LT(bytes[0], bytes[1]);
  auto fixed = ResolveScaling(Tpu(4));
  auto elastic = ResolveScaling(Tpu({4, 8}));
  ASSERT_TRUE(fixed.ok() && elastic.ok());
  const int64_t host = (bytes[0] + bytes[1]) / 2;
  Preflight preflight = MaxTextPreflight(argv);
  EXPECT_TRUE(preflight(ShapeOf(*fixed, 4, host)).ok());
  absl::Status refused = preflight(ShapeOf(*elastic, 4, host));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
}

}  // namespace
}  // namespace manta::train
