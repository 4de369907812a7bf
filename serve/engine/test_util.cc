#include "serve/engine/test_util.h"

#include <cmath>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "serve/engine/sampler.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {

ServingWeights TinyWeights(int tensor, int rank) {
  const train::ModelShape shape = train::TinyConfig({}).model;
  absl::StatusOr<ServingWeights> w = ServingWeights::Init(shape, /*seed=*/7, tensor, rank);
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

absl::StatusOr<ServingWeights> TrainedTinyWeights(const train::TempDir& dir, int steps) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on the mat " + std::to_string(i * 7919 % 1000) + "\n";
  std::ofstream(dir.path() + "/corpus.txt") << text;
  const std::string n = std::to_string(steps);
  train::RunOrDie(train::TinyConfig({"override_model_config=true", "vocab_size=300", "dataset_type=text",
                                     "dataset_path=" + dir.path() + "/corpus.txt", "run_name=g",
                                     "base_output_directory=" + dir.path(), "enable_checkpointing=true",
                                     "checkpoint_period=" + n, "steps=" + n}),
                  train::LocalEnv(1));
  return ServingWeights::Load(dir.path() + "/g/checkpoints/" + n, 1, 0);
}

std::vector<int32_t> GreedyRun(Engine& engine, int slot, const std::vector<int32_t>& prompt, int n,
                               std::vector<std::vector<float>>* logits) {
  const int64_t V = engine.vocab();
  std::vector<float> buf(V);
  std::vector<int32_t> out;
  absl::Status s = engine.Prefill(slot, prompt, buf.data());
  EXPECT_TRUE(s.ok()) << s;
  for (int i = 0; s.ok() && i < n; ++i) {
    if (i > 0) {
      s = engine.Decode({slot}, {out.back()}, buf.data());
      EXPECT_TRUE(s.ok()) << s;
    }
    logits->push_back(buf);
    out.push_back(Argmax(buf.data(), V));
  }
  return out;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tolerance) << "at " << i;
}

}  // namespace manta::serve
