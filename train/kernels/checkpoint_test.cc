// Checkpoints: resharding restore and saves killed midway.
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/train.h"
#include "train/kernels/training_test_util.h"

namespace manta::train {
namespace {

const std::vector<double>& Uninterrupted() {
  static const std::vector<double> losses = Losses(RunOrDie(TinyConfig({"per_device_batch_size=8"}), LocalEnv(1)));
  return losses;
}

TEST(TrainCheckpointTest, SaveOnOneMeshRestoreOnAnotherContinuesIdentically) {
  TempDir dir;
  const std::vector<std::string> ckpt = {"enable_checkpointing=true", "checkpoint_period=10", "run_name=reshard",
                                         "base_output_directory=" + dir.path(), "per_device_batch_size=2"};
  auto first = ckpt;
  first.push_back("steps=10");
  first.push_back("ici_fsdp_parallelism=4");
  TrainingResult a = RunOrDie(TinyConfig(first), LocalEnv(4));
  EXPECT_EQ(a.restored_step, -1);
  ExpectLossesMatch(std::vector<double>(Uninterrupted().begin(), Uninterrupted().begin() + 10), Losses(a));
  const std::string step_dir = dir.path() + "/reshard/checkpoints/10";
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/reshard/checkpoints/5"));
  EXPECT_TRUE(std::filesystem::exists(step_dir + "/manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(step_dir + "/t0_f3.bin"));

  auto second = ckpt;
  second.push_back("ici_fsdp_parallelism=2");
  second.push_back("ici_tensor_parallelism=2");
  TrainingResult b = RunOrDie(TinyConfig(second), LocalEnv(4));
  EXPECT_EQ(b.restored_step, 10);
  ExpectLossesMatch(Uninterrupted(), Losses(b), 10);
}

TEST(TrainCheckpointTest, RestoreOnADifferentProcessCount) {
  TempDir dir;
  const std::vector<std::string> ckpt = {"enable_checkpointing=true", "checkpoint_period=10", "run_name=procs",
                                         "base_output_directory=" + dir.path()};
  auto first = ckpt;
  first.push_back("steps=10");
  first.push_back("per_device_batch_size=4");
  first.push_back("ici_tensor_parallelism=2");
  first.push_back("ici_fsdp_parallelism=1");
  RunOrDie(TinyConfig(first), LocalEnv(2));
  const std::string metrics = dir.path() + "/metrics.jsonl";
  auto second = ckpt;
  second.push_back("per_device_batch_size=2");
  second.push_back("metrics_file=" + metrics);
  ASSERT_EQ(Launch({"--num_processes=2", "--chips_per_host=2"}, second), 0);
  ExpectLossesMatch(Uninterrupted(), ReadMetricsLosses(metrics), 10);
}

TEST(TrainCheckpointTest, SavesEveryPeriodAndAfterTheLastStep) {
  TempDir dir;
  RunOrDie(TinyConfig({"enable_checkpointing=true", "checkpoint_period=5", "steps=7", "run_name=periodic",
                       "base_output_directory=" + dir.path()}),
           LocalEnv(1));
  CheckpointStore store(dir.path() + "/periodic/checkpoints");
  EXPECT_TRUE(store.ReadManifest(5).ok());
  auto last = store.ReadManifest(7);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->data_position, 7);
  EXPECT_EQ(*store.LatestStep(), 7);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/periodic/checkpoints/6"));
}

TEST(TrainCheckpointTest, ShouldStopEndsEveryDeviceAtTheSameStepWithACheckpoint) {
  TempDir dir;
  RunOptions options;
  int seen = 0;
  options.on_step = [&](const StepMetrics& m) { EXPECT_EQ(m.step, seen++); };
  options.should_stop = [&] { return seen == 3; };
  TrainingResult r =
      RunOrDie(TinyConfig({"enable_checkpointing=true", "checkpoint_period=10", "run_name=stopped",
                           "base_output_directory=" + dir.path(), "per_device_batch_size=2", "ici_fsdp_parallelism=4"}),
               LocalEnv(4), options);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(*CheckpointStore(dir.path() + "/stopped/checkpoints").LatestStep(), 3);
}

TEST(TrainCheckpointTest, SaveKilledMidwayLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::vector<std::string> ckpt = {"enable_checkpointing=true", "checkpoint_period=5", "run_name=killed",
                                         "base_output_directory=" + dir.path(), "per_device_batch_size=4"};
  auto first = ckpt;
  first.push_back("steps=15");
  EXPECT_NE(Launch({"--num_processes=2", "--chips_per_host=1", "--fault_exit_during_save_step=10"}, first), 0);
  // The save of step 10 got its shards renamed into place but no manifest.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/killed/checkpoints/10"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/killed/checkpoints/10/manifest.json"));
  CheckpointStore store(dir.path() + "/killed/checkpoints");
  auto latest = store.LatestStep();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 5);

  auto second = ckpt;
  second.push_back("per_device_batch_size=8");
  TrainingResult resumed = RunOrDie(TinyConfig(second), LocalEnv(1));
  EXPECT_EQ(resumed.restored_step, 5);
  ExpectLossesMatch(Uninterrupted(), Losses(resumed), 5);
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/killed/checkpoints/10/manifest.json"));
  EXPECT_EQ(*store.LatestStep(), 20);
}

TEST(TrainCheckpointTest, RestoreFromChoosesTheCheckpointAndStepDoneNamesEachSave) {
  TempDir dir;
  const std::vector<std::string> ckpt = {"enable_checkpointing=true",
                                         "checkpoint_period=4",
                                         "steps=8",
                                         "run_name=chosen",
                                         "base_output_directory=" + dir.path(),
                                         "per_device_batch_size=8",
                                         "learning_rate_schedule_steps=20"};
  const std::vector<double> first10(Uninterrupted().begin(), Uninterrupted().begin() + 10);
  RunOptions first;
  std::vector<std::string> saved;
  first.on_step_done = [&](const StepMetrics& m) { saved.push_back(m.checkpoint_dir); };
  RunOrDie(TinyConfig(ckpt), LocalEnv(1), first);
  const std::string base = dir.path() + "/chosen/checkpoints/";
  EXPECT_EQ(saved, (std::vector<std::string>{"", "", "", base + "4", "", "", "", base + "8"}));

  // An explicit older checkpoint, although a later one exists.
  auto more = ckpt;
  more.push_back("steps=10");
  RunOptions from4;
  from4.restore_from = base + "4";
  TrainingResult a = RunOrDie(TinyConfig(more), LocalEnv(1), from4);
  EXPECT_EQ(a.restored_step, 4);
  ExpectLossesMatch(first10, Losses(a), 4);

  // Empty: start afresh although checkpoints exist.
  RunOptions fresh;
  fresh.restore_from = "";
  TrainingResult b = RunOrDie(TinyConfig(more), LocalEnv(1), fresh);
  EXPECT_EQ(b.restored_step, -1);
  ExpectLossesMatch(first10, Losses(b));

  RunOptions bad;
  bad.restore_from = dir.path() + "/chosen/checkpoints/latest";
  EXPECT_EQ(RunTraining(TinyConfig(more), LocalEnv(1), bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// A manifest is read from disk, so nothing it says is trusted: a split the
// model's heads do not divide by, an absurd shape or shard count is a
// DataLoss error naming the file, never a crash or an allocation.
TEST(TrainCheckpointTest, AHostileManifestIsAnErrorNotACrash) {
  TempDir dir;
  CheckpointStore store(dir.path());
  std::filesystem::create_directories(dir.path() + "/3");
  const std::string shape =
      R"("emb_dim": 8, "num_query_heads": 2, "num_kv_heads": 2, "head_dim": 4, "mlp_dim": 16, "vocab_size": 16)";
  auto manifest = [&](const std::string& fields, const std::string& layers) {
    std::ofstream(dir.path() + "/3/manifest.json")
        << R"({"step": 3, "data_position": 0, )" << fields << R"(, "model": {)" << shape << R"(, "num_layers": )"
        << layers << "}}";
    return store.ReadManifest(3);
  };
  ASSERT_TRUE(manifest(R"("tensor": 2, "fsdp": 2)", "1").ok());
  for (const auto& [fields, layers] : std::vector<std::pair<std::string, std::string>>{
           {R"("tensor": 3, "fsdp": 1)", "1"},           // 2 heads over 3 ranks
           {R"("tensor": 1, "fsdp": 1000000000)", "1"},  // more shards than any job
           {R"("tensor": 1, "fsdp": 1)", "0"},
           {R"("tensor": 1, "fsdp": 1)", "-4"},
           {R"("tensor": 1, "fsdp": 1)", "1099511627776"}}) {
    auto m = manifest(fields, layers);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << fields << " layers " << layers;
    EXPECT_NE(m.status().message().find("manifest"), std::string::npos) << m.status();
  }
}

TEST(TrainCheckpointTest, AShardWriteReportsEveryByteItWrites) {
  TempDir dir;
  CheckpointStore store(dir.path());
  ASSERT_TRUE(store.BeginSave(5).ok());
  std::vector<std::vector<float>> arrays(6, std::vector<float>(1000, 1.0f));  // 3 fields x 2 blocks
  ShardView view;
  view.shard_sizes = {1000, 600};
  view.fields.resize(3);
  for (int f = 0; f < 3; ++f) view.fields[f] = {arrays[2 * f].data(), arrays[2 * f + 1].data()};
  int64_t reported = 0;
  int calls = 0;
  auto progress = [&](int64_t bytes) {
    reported += bytes;
    ++calls;
  };
  ASSERT_TRUE(store.WriteShard(5, 0, 0, view, progress).ok());
  EXPECT_EQ(reported, static_cast<int64_t>(sizeof(float)) * 3 * (1000 + 600));
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(dir.path() + "/5.tmp/t0_f0.bin")), reported);
}

}  // namespace
}  // namespace manta::train
