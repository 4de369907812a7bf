// Sharded training matches the one-device run step for step.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "train/kernels/memory.h"
#include "train/kernels/train.h"
#include "train/kernels/training_test_util.h"

namespace manta::train {
namespace {

TEST(TrainLoopTest, LossFallsWellBelowLogVocab) {
  auto config = TinyConfig({"steps=30", "per_device_batch_size=8"});
  auto result = RunTraining(config, LocalEnv(1));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps.size(), 30u);
  EXPECT_NEAR(result->steps[0].loss, std::log(256.0), 1.0);
  EXPECT_LT(result->steps.back().loss, 0.4 * std::log(256.0));
}

// Records what each local device tells the activity, from its own thread.
class RecordingActivity : public DeviceActivity {
 public:
  void StepBegan(int d) override {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_FALSE(in_step[d]);
    in_step[d] = true;
  }
  void StepEnded(int d, double transfer_seconds, int64_t bytes_held) override {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(in_step[d]);
    in_step[d] = false;
    ++ended[d];
    transfer[d] += transfer_seconds;
    bytes[d] = bytes_held;
  }
  std::mutex mu;
  bool in_step[4] = {};
  int ended[4] = {};
  double transfer[4] = {};
  int64_t bytes[4] = {};
};

// Each local device tells the activity of every step it runs, from its own
// thread, with what it moved and what it holds.
TEST(TrainLoopTest, EveryDeviceReportsItsStepsToTheActivity) {
  RecordingActivity activity;
  RunOptions options;
  options.activity = &activity;
  auto result =
      RunTraining(TinyConfig({"steps=3", "per_device_batch_size=2", "ici_fsdp_parallelism=4"}), LocalEnv(4), options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(activity.ended[d], 3) << d;
    EXPECT_FALSE(activity.in_step[d]);
    EXPECT_GT(activity.transfer[d], 0) << "fsdp gathers the parameters";
    EXPECT_GT(activity.bytes[d], 0);
  }
}

// What each device holds once a step ran (its arrays, the reductions'
// copies and the model's buffers) is what the memory estimate says, with
// exact sums (double copies) or without, reduced over fsdp and data or not.
TEST(TrainLoopTest, EachDeviceHoldsWhatTheMemoryEstimateSays) {
  for (const std::string exact : {"false", "true"}) {
    for (const std::vector<std::string>& mesh : std::vector<std::vector<std::string>>{
             {"ici_fsdp_parallelism=2", "ici_data_parallelism=2"}, {"ici_tensor_parallelism=4"}}) {
      std::vector<std::string> overrides = {"steps=1", "per_device_batch_size=2", "max_target_length=16",
                                            "exact_gradient_sums=" + exact};
      overrides.insert(overrides.end(), mesh.begin(), mesh.end());
      const Config c = TinyConfig(overrides);
      auto estimate = EstimateMemory(c, LocalEnv(4));
      ASSERT_TRUE(estimate.ok()) << estimate.status();
      RecordingActivity held;
      RunOptions options;
      options.activity = &held;
      auto run = RunTraining(c, LocalEnv(4), options);
      ASSERT_TRUE(run.ok()) << run.status();
      for (int d = 0; d < 4; ++d) {
        EXPECT_EQ(held.bytes[d], estimate->per_device_bytes) << "exact=" << exact << " " << mesh[0] << " device " << d;
      }
    }
  }
}

class TrainMeshEquivalenceTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(TrainMeshEquivalenceTest, TwentyStepsMatchOneDevice) {
  static const std::vector<double> reference = Losses(RunOrDie(TinyConfig({"per_device_batch_size=8"}), LocalEnv(1)));
  std::vector<std::string> overrides = {"per_device_batch_size=2"};
  for (const auto& o : GetParam()) overrides.push_back(o);
  auto result = RunTraining(TinyConfig(overrides), LocalEnv(4));
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectLossesMatch(reference, Losses(*result));
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, TrainMeshEquivalenceTest,
    ::testing::Values(std::vector<std::string>{"ici_fsdp_parallelism=4"},
                      std::vector<std::string>{"ici_fsdp_parallelism=1", "ici_tensor_parallelism=4"},
                      std::vector<std::string>{"ici_fsdp_parallelism=2", "ici_tensor_parallelism=2"},
                      std::vector<std::string>{"ici_data_parallelism=2", "ici_fsdp_parallelism=2"}));

TEST(TrainLoopTest, TwoProcessesTwoChipsDcnFsdpMatchesOneDevice) {
  const std::vector<double> reference = Losses(RunOrDie(TinyConfig({"per_device_batch_size=8"}), LocalEnv(1)));
  TempDir dir;
  const std::string metrics = dir.path() + "/metrics.jsonl";
  ASSERT_EQ(Launch({"--num_processes=2", "--chips_per_host=2", "--num_slices=2"},
                   {"per_device_batch_size=2", "dcn_data_parallelism=1", "dcn_fsdp_parallelism=2",
                    "ici_fsdp_parallelism=2", "metrics_file=" + metrics}),
            0);
  ExpectLossesMatch(reference, ReadMetricsLosses(metrics));
}

// Two slices of two processes: the fsdp exchanges run inside each slice and
// then across slices.
TEST(TrainLoopTest, TwoSlicesOfTwoProcessesMatchOneDevice) {
  const std::vector<double> reference = Losses(RunOrDie(TinyConfig({"per_device_batch_size=8"}), LocalEnv(1)));
  TempDir dir;
  const std::string metrics = dir.path() + "/metrics.jsonl";
  ASSERT_EQ(Launch({"--num_processes=4", "--chips_per_host=1", "--num_slices=2"},
                   {"per_device_batch_size=2", "dcn_data_parallelism=1", "dcn_fsdp_parallelism=2",
                    "ici_fsdp_parallelism=2", "metrics_file=" + metrics}),
            0);
  ExpectLossesMatch(reference, ReadMetricsLosses(metrics));
}

// Data parallel across two slices, tensor parallel inside each process.
TEST(TrainLoopTest, DcnDataWithTensorInsideMatchesOneDevice) {
  const std::vector<double> reference = Losses(RunOrDie(TinyConfig({"per_device_batch_size=8"}), LocalEnv(1)));
  TempDir dir;
  const std::string metrics = dir.path() + "/metrics.jsonl";
  ASSERT_EQ(Launch({"--num_processes=2", "--chips_per_host=2", "--num_slices=2"},
                   {"per_device_batch_size=2", "dcn_data_parallelism=2", "ici_fsdp_parallelism=1",
                    "ici_tensor_parallelism=2", "metrics_file=" + metrics}),
            0);
  ExpectLossesMatch(reference, ReadMetricsLosses(metrics));
}

TEST(TrainLoopTest, StepLineHasMaxTextsShape) {
  const char* bin_dir = std::getenv("MANTA_BIN_DIR");
  const std::string cmd = std::string(bin_dir ? bin_dir : MANTA_TRAIN_BIN_DIR) + "/manta_train -- " +
                          MANTA_TRAIN_SOURCE_DIR +
                          "/configs/base.yml model_name=tiny steps=3 max_target_length=32 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  EXPECT_EQ(::pclose(pipe), 0) << out;
  const std::regex line(R"(completed step: (\d+), seconds: \d+\.\d{3}, TFLOP/s/device: \d+\.\d{3}, )"
                        R"(Tokens/s/device: \d+\.\d{3}, total_weights: 64, loss: \d+\.\d{3}\n)");
  int lines = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), lines);
    ++lines;
  }
  EXPECT_EQ(lines, 3) << out;
}

TEST(TrainLoopTest, ConfigErrorsReachTheCaller) {
  auto bad_batch = RunTraining(TinyConfig({"per_device_batch_size=0.3"}), LocalEnv(2));
  ASSERT_FALSE(bad_batch.ok());
  EXPECT_NE(bad_batch.status().message().find("per_device_batch_size"), std::string::npos);
  auto bad_mesh = RunTraining(TinyConfig({"ici_fsdp_parallelism=3"}), LocalEnv(4));
  ASSERT_FALSE(bad_mesh.ok());
  EXPECT_NE(bad_mesh.status().message().find("ici_fsdp_parallelism=3"), std::string::npos);
  auto bad_split = RunTraining(TinyConfig({"ici_fsdp_parallelism=1", "ici_tensor_parallelism=4",
                                           "override_model_config=true", "base_num_kv_heads=1"}),
                               LocalEnv(4));
  ASSERT_FALSE(bad_split.ok());
  EXPECT_NE(bad_split.status().message().find("base_num_kv_heads"), std::string::npos);
}

}  // namespace
}  // namespace manta::train
