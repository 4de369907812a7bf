// Helpers of the engine tests.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "serve/engine/engine.h"
#include "serve/engine/weights.h"

namespace manta::serve {

// The training tests' tiny model (model_name=tiny: 256 ids) with initial
// weights (seed 7), rank `rank` of `tensor`.
ServingWeights TinyWeights(int tensor, int rank);

// Prefills `prompt` into `slot` and decodes greedily: n tokens, and the
// logits each was picked from.
std::vector<int32_t> GreedyRun(Engine& engine, int slot, const std::vector<int32_t>& prompt, int n,
                               std::vector<std::vector<float>>* logits);

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tolerance);

// Tensor-parallel ranks as threads of one process: each rank's Sum waits
// for all of them and returns the sum, added in rank order.
class ThreadSum {
 public:
  explicit ThreadSum(int ranks) : ranks_(ranks), parts_(ranks) {}

  class Rank : public TensorSum {
   public:
    Rank(ThreadSum* group, int rank) : group_(group), rank_(rank) {}
    void Sum(float* data, int64_t n) override { group_->Sum(rank_, data, n); }

   private:
    ThreadSum* group_;
    int rank_;
  };

 private:
  void Sum(int rank, float* data, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  const int ranks_;
  absl::Mutex mu_;
  std::vector<std::vector<float>> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<float> total_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int left_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::serve
