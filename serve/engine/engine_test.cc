// The engine against the training kernels' own forward pass: greedy output
// token for token, tensor-parallel ranks against one, K/V moved between
// engines, bf16 and int8 weights against F32, and the refusals.
#include "serve/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "serve/engine/sampler.h"
#include "serve/engine/tensor_group.h"
#include "serve/engine/test_util.h"
#include "train/kernels/model.h"

namespace manta::serve {
namespace {

// Greedy continuation by the training model's plain forward pass over the
// whole sequence, recomputed for every token (no cache).
std::vector<int32_t> ReferenceGreedy(const ServingWeights& w, std::vector<int32_t> seq, int n,
                                     std::vector<std::vector<float>>* logits) {
  struct Ops : train::BlockOps {
    const ServingWeights* w;
    const float* AcquireBlock(int b) override { return w->block(b); }
    void BlockGradReady(int, float*) override {}
    void TensorAllReduce(float*, int64_t) override {}
  } ops;
  ops.w = &w;
  std::vector<int32_t> out;
  const int64_t V = w.shape().vocab_size;
  for (int i = 0; i < n; ++i) {
    train::DecoderModel model(w.shape(), w.layout(), 1, static_cast<int64_t>(seq.size()));
    const float* all = model.Forward(seq.data(), &ops);
    const float* last = all + (seq.size() - 1) * V;
    logits->emplace_back(last, last + V);
    out.push_back(Argmax(last, V));
    seq.push_back(out.back());
  }
  return out;
}

TEST(EngineTest, GreedyOutputEqualsThePlainForwardPassTokenForToken) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 2, .max_len = 64}, nullptr);
  for (const std::vector<int32_t>& prompt :
       {std::vector<int32_t>{5}, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}, std::vector<int32_t>{200, 17, 17, 90}}) {
    std::vector<std::vector<float>> want_logits, got_logits;
    const std::vector<int32_t> want = ReferenceGreedy(w, prompt, 12, &want_logits);
    const std::vector<int32_t> got = GreedyRun(engine, 1, prompt, 12, &got_logits);
    EXPECT_EQ(got, want);
    ASSERT_EQ(got_logits.size(), want_logits.size());
    for (size_t i = 0; i < got_logits.size(); ++i) ExpectClose(got_logits[i], want_logits[i], 1e-4);
    engine.Release(1);
  }
}

TEST(EngineTest, TensorParallelRanksEqualOneRank) {
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3};
  const ServingWeights one = TinyWeights(1, 0);
  Engine single(one, {.slots = 1, .max_len = 48}, nullptr);
  std::vector<std::vector<float>> want_logits;
  const std::vector<int32_t> want = GreedyRun(single, 0, prompt, 16, &want_logits);
  for (int tensor : {2, 4}) {
    SharedSum sum(tensor);
    std::vector<std::vector<int32_t>> got(tensor);
    std::vector<std::vector<std::vector<float>>> got_logits(tensor);
    std::vector<std::thread> ranks;
    for (int r = 0; r < tensor; ++r) {
      ranks.emplace_back([&, r] {
        const ServingWeights w = TinyWeights(tensor, r);
        SharedSum::Rank rank(&sum, r);
        Engine engine(w, {.slots = 1, .max_len = 48}, &rank);
        got[r] = GreedyRun(engine, 0, prompt, 16, &got_logits[r]);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < tensor; ++r) {
      EXPECT_EQ(got[r], want) << "tensor " << tensor << " rank " << r;
      for (size_t i = 0; i < want_logits.size(); ++i) ExpectClose(got_logits[r][i], want_logits[i], 1e-4);
    }
  }
}

TEST(EngineTest, AnotherEngineGoesOnFromExportedKv) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine prefill(w, {.slots = 2, .max_len = 40}, nullptr), decode(w, {.slots = 3, .max_len = 40}, nullptr);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<std::vector<float>> unused;
  const std::vector<int32_t> want = GreedyRun(prefill, 1, prompt, 10, &unused);
  prefill.Release(1);

  std::vector<float> logits(w.shape().vocab_size);
  ASSERT_TRUE(prefill.Prefill(0, prompt, logits.data()).ok());
  std::vector<float> kv(prefill.KvFloatsPerToken() * prompt.size());
  EXPECT_EQ(prefill.KvFloatsPerToken(), 2 * w.shape().num_layers * w.shape().num_kv_heads * w.shape().head_dim);
  prefill.ExportKv(0, static_cast<int64_t>(prompt.size()), kv.data());
  ASSERT_TRUE(decode.ImportKv(2, static_cast<int64_t>(prompt.size()), kv.data()).ok());
  EXPECT_FALSE(decode.ImportKv(2, 1, kv.data()).ok());  // the slot is taken now
  std::vector<int32_t> got = {Argmax(logits.data(), w.shape().vocab_size)};
  while (got.size() < want.size()) {
    ASSERT_TRUE(decode.Decode({2}, {got.back()}, logits.data()).ok());
    got.push_back(Argmax(logits.data(), w.shape().vocab_size));
  }
  EXPECT_EQ(got, want);
}

TEST(EngineTest, RefusesWhatDoesNotFit) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 2, .max_len = 4}, nullptr);
  std::vector<float> logits(2 * w.shape().vocab_size);
  EXPECT_FALSE(engine.Prefill(2, {1}, logits.data()).ok());
  EXPECT_FALSE(engine.Prefill(-1, {1}, logits.data()).ok());
  EXPECT_FALSE(engine.Prefill(0, {}, logits.data()).ok());
  EXPECT_FALSE(engine.Prefill(0, {1, 2, 3, 4, 5}, logits.data()).ok());
  EXPECT_FALSE(engine.Prefill(0, {1, 256}, logits.data()).ok());
  EXPECT_FALSE(engine.Decode({0}, {1}, logits.data()).ok());  // not in use
  ASSERT_TRUE(engine.Prefill(0, {1, 2, 3}, logits.data()).ok());
  EXPECT_FALSE(engine.Prefill(0, {1}, logits.data()).ok());  // in use
  EXPECT_FALSE(engine.Decode({0, 0}, {1, 1}, logits.data()).ok());
  EXPECT_FALSE(engine.Decode({0}, {-3}, logits.data()).ok());
  ASSERT_TRUE(engine.Decode({0}, {1}, logits.data()).ok());
  EXPECT_EQ(engine.length(0), 4);
  EXPECT_EQ(engine.Decode({0}, {1}, logits.data()).code(), absl::StatusCode::kOutOfRange);  // full
  engine.Release(0);
  EXPECT_EQ(engine.length(0), 0);
  EXPECT_TRUE(engine.Prefill(0, {7}, logits.data()).ok());
}

// bf16 and int8 weights against F32, on the tiny model trained for 20 steps
// (an untrained one has near ties between its best tokens that any rounding
// flips). Rounding moves a bf16 weight by at most 2^-8 of itself and an
// int8 weight by at most 1/254 of its column's largest magnitude; roundings
// of different weights are independent and mostly cancel in each sum. The
// bound on each logit is twice that as a part of the step's F32 logit range
// (max - min, about 14 here): 2^-7 (0.78%) for bf16, 1/127 (0.79%) for
// int8. This model moves by 0.11% and 0.27%.
class QuantizedEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new train::TempDir();
    absl::StatusOr<ServingWeights> w = TrainedTinyWeights(*dir_, 20);
    ASSERT_TRUE(w.ok()) << w.status();
    weights_ = new ServingWeights(*std::move(w));
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete dir_;
  }

  // Greedy runs of F32 and `format` from the same weights: tokens equal on
  // every prompt, each step's logits within `tolerance` of the range, and
  // not all equal (the format is in use).
  static void ExpectCloseToF32(WeightFormat format, float tolerance) {
    Engine f32(*weights_, {.slots = 1, .max_len = 64}, nullptr);
    Engine other(*weights_, {.slots = 1, .max_len = 64, .weights = format}, nullptr);
    float moved = 0;
    for (const char* text : {"the cat sat on", "the mat 12", "sat on the", "the cat sat on the mat 9"}) {
      const std::vector<int32_t> prompt = weights_->tokenizer()->Encode(text);
      std::vector<std::vector<float>> want_logits, got_logits;
      const std::vector<int32_t> want = GreedyRun(f32, 0, prompt, 24, &want_logits);
      const std::vector<int32_t> got = GreedyRun(other, 0, prompt, 24, &got_logits);
      f32.Release(0);
      other.Release(0);
      EXPECT_EQ(got, want) << WeightFormatName(format) << " after '" << text << "'";
      for (size_t i = 0; i < want_logits.size() && i < got_logits.size(); ++i) {
        const auto [lo, hi] = std::minmax_element(want_logits[i].begin(), want_logits[i].end());
        for (size_t j = 0; j < want_logits[i].size(); ++j) {
          const float d = std::fabs(got_logits[i][j] - want_logits[i][j]) / (*hi - *lo);
          ASSERT_LE(d, tolerance) << WeightFormatName(format) << " after '" << text << "', token " << i << ", id " << j;
          moved = std::max(moved, d);
        }
      }
    }
    EXPECT_GT(moved, 0) << WeightFormatName(format) << " logits equal F32's exactly";
    std::printf("%s: logits within %.3f%% of their range of F32's\n", WeightFormatName(format), 100 * moved);
  }

  static train::TempDir* dir_;
  static ServingWeights* weights_;
};

train::TempDir* QuantizedEngineTest::dir_ = nullptr;
ServingWeights* QuantizedEngineTest::weights_ = nullptr;

TEST_F(QuantizedEngineTest, Bf16GivesF32sTokensWithLogitsWithinTwiceItsRounding) {
  ExpectCloseToF32(WeightFormat::kBf16, 1.0f / 128);
}

TEST_F(QuantizedEngineTest, Int8GivesF32sTokensWithLogitsWithinTwiceItsRounding) {
  ExpectCloseToF32(WeightFormat::kInt8, 1.0f / 127);
}

TEST_F(QuantizedEngineTest, TheFormatSetsTheBytesADecodeStepReads) {
  const int64_t f32 = Engine(*weights_, {.slots = 1, .max_len = 8}, nullptr).weight_bytes();
  EXPECT_EQ(Engine(*weights_, {.slots = 1, .max_len = 8, .weights = WeightFormat::kBf16}, nullptr).weight_bytes(),
            f32 / 2);
  const int64_t int8 =
      Engine(*weights_, {.slots = 1, .max_len = 8, .weights = WeightFormat::kInt8}, nullptr).weight_bytes();
  EXPECT_GT(int8, f32 / 4);  // and a scale per column
  EXPECT_LT(int8, f32 / 3);
}

TEST(SamplerTest, GreedySeededAndTopK) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(logits.data(), 5), 1);  // the first of two equal
  Sampler greedy({});
  EXPECT_EQ(greedy.Next(logits.data(), 5), 1);
  Sampler top1({.temperature = 5, .top_k = 1, .seed = 3});
  EXPECT_EQ(top1.Next(logits.data(), 5), 1);
  // A seed reproduces its draws; top_k = 2 draws only the two best.
  Sampler a({.temperature = 1, .top_k = 2, .seed = 11}), b({.temperature = 1, .top_k = 2, .seed = 11});
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 400; ++i) {
    const int32_t x = a.Next(logits.data(), 5);
    EXPECT_EQ(x, b.Next(logits.data(), 5));
    ++counts[x];
  }
  EXPECT_EQ(counts[0] + counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 100);
  EXPECT_GT(counts[4], 100);
  // A high temperature over all tokens reaches the unlikely ones too.
  Sampler hot({.temperature = 100, .seed = 5});
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 400; ++i) ++seen[hot.Next(logits.data(), 5)];
  for (int c : seen) EXPECT_GT(c, 20);
}

}  // namespace
}  // namespace manta::serve
