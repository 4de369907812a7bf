// The memory estimate: it counts what the model really allocates, and it
// refuses an 8B model on one v6e-16 slice of ordinary hosts.
#include "train/kernels/memory.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "train/kernels/model.h"
#include "train/kernels/params.h"

namespace manta::train {
namespace {

Config Load(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml");
  auto c = LoadConfig(overrides);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

DistributedEnv Hosts(int processes, int chips, int slices = 1) {
  DistributedEnv env;
  env.num_processes = processes;
  env.chips_per_host = chips;
  env.num_slices = slices;
  return env;
}

TEST(TrainMemoryTest, ActivationCountMatchesWhatTheModelAllocates) {
  for (const auto& [model, tensor, batch, seq] : std::vector<std::tuple<std::string, int, int64_t, int64_t>>{
           {"tiny", 1, 2, 16}, {"tiny", 2, 3, 32}, {"default", 2, 1, 64}}) {
    Config c = Load({"model_name=" + model});
    ParamLayout layout(c.model, tensor, 0);
    DecoderModel m(c.model, layout, batch, seq);
    EXPECT_EQ(m.allocated_floats(), DecoderModel::BufferFloats(c.model, layout, batch, seq)) << model;
  }
}

TEST(TrainMemoryTest, ShardsShrinkWithFsdpAndAnEightBillionModelDoesNotFitAHost) {
  Config c = Load({"model_name=llama3-8b", "per_device_batch_size=1", "max_target_length=4096",
                   "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4"});
  auto one = EstimateMemory(c, Hosts(4, 4));
  ASSERT_TRUE(one.ok()) << one.status();
  // 8.0e9 parameters, each with two moments and a gradient (16 bytes), over
  // 16 devices; the embedding and output projection are replicated over the
  // tensor axis, so a device holds more than a 16th.
  const double params = static_cast<double>(c.model.ParamCount());
  EXPECT_GE(one->state_bytes_per_device, params);
  EXPECT_LT(one->state_bytes_per_device, 1.5 * params);
  EXPECT_GT(one->per_process_bytes, int64_t{64} << 30);
  EXPECT_NE(one->DebugString(4).find("GiB per host (4 devices x"), std::string::npos) << one->DebugString(4);

  Config two = c;
  two.parallelism.dcn_fsdp = 2;
  two.parallelism.dcn_data = 1;
  auto spread = EstimateMemory(two, Hosts(8, 4, 2));
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_NEAR(static_cast<double>(spread->state_bytes_per_device), one->state_bytes_per_device / 2.0,
              one->state_bytes_per_device * 0.01);

  Config tiny = Load({"model_name=tiny", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4"});
  auto small = EstimateMemory(tiny, Hosts(4, 4));
  ASSERT_TRUE(small.ok());
  EXPECT_LT(small->per_process_bytes, int64_t{64} << 20);
}

TEST(TrainMemoryTest, AMeshThatDoesNotMatchTheDevicesIsAnError) {
  Config c = Load({"model_name=tiny", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4"});
  auto bad = EstimateMemory(c, Hosts(2, 4));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainMemoryTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.5 GiB");
}

TEST(TrainMemoryTest, AnEstimatePastAnyMachineIsAnErrorNotANumber) {
  // Every size within its bound, their product past an exabyte.
  Config c = Load({"model_name=llama3-70b", "per_device_batch_size=65536", "max_target_length=1048576"});
  auto huge = EstimateMemory(c, Hosts(1, 1));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("lower max_target_length"), std::string::npos) << huge.status();
  // Large but countable: a positive number of bytes.
  Config big = Load({"model_name=llama3-8b", "max_target_length=131072"});
  auto fits = EstimateMemory(big, Hosts(1, 1));
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_GT(fits->per_process_bytes, int64_t{1} << 40);
}

// An elastic run fixes its global batch at its largest size: at a smaller
// size each device runs more micro-batches, and one device summing them
// exactly does so in a double copy of every block.
TEST(TrainMemoryTest, AGlobalBatchFixedAtTheLargestSizeIsCountedAtASmallerOne) {
  const Config c = Load({"model_name=tiny", "per_device_batch_size=1", "exact_gradient_sums=true"});
  auto own = EstimateMemory(c, Hosts(1, 1));
  auto fixed = EstimateMemory(c, Hosts(1, 1), /*global_batch=*/4);
  ASSERT_TRUE(own.ok() && fixed.ok());
  EXPECT_EQ(own->gathered_bytes_per_device, 0);
  const ParamLayout layout(c.model, 1, 0);
  int64_t sizes = 0;
  for (int b = 0; b < layout.num_blocks(); ++b) sizes += layout.block(b).size;
  EXPECT_EQ(fixed->gathered_bytes_per_device, sizes * 8);
  EXPECT_EQ(fixed->activation_bytes_per_device, own->activation_bytes_per_device) << "one micro-batch at a time";
}

}  // namespace
}  // namespace manta::train
