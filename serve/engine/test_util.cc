#include "serve/engine/test_util.h"

#include <cmath>

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

void ThreadSum::Sum(int rank, float* data, int64_t n) {
  absl::MutexLock lock(&mu_);
  auto writable = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !reading_; };
  mu_.Await(absl::Condition(&writable));
  parts_[rank].assign(data, data + n);
  if (++arrived_ == ranks_) {
    total_.assign(n, 0.0f);
    for (const std::vector<float>& part : parts_) {
      for (int64_t i = 0; i < n; ++i) total_[i] += part[i];
    }
    reading_ = true;
    ++round_;
  } else {
    const int64_t round = round_;
    auto next_round = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return round_ != round; };
    mu_.Await(absl::Condition(&next_round));
  }
  std::copy(total_.begin(), total_.end(), data);
  if (++left_ == ranks_) {
    arrived_ = 0;
    left_ = 0;
    reading_ = false;
  }
}

}  // namespace manta::serve
