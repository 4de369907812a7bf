// Tensor parallelism over the chips of one host: one engine per tensor rank,
// each on its own thread, running every call together and summing their
// partial outputs through shared memory (in rank order, so the sum is the
// same every time). It is a StepRunner: a batcher drives it as one engine,
// and it returns rank 0's logits (every rank computes the same ones).
//
//   ASSIGN_OR_RETURN(auto group, LocalTensorGroup::Create(weights_of_each_rank, options));
//   Batcher batcher(group.get());
//
// Threads: the StepRunner calls come from one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "serve/engine/engine.h"

namespace manta::serve {

// The ranks' Sum calls meet here; each returns the sum of all, in rank order.
class SharedSum {
 public:
  explicit SharedSum(int ranks) : ranks_(ranks), parts_(ranks) {}
  void Sum(int rank, float* data, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  // The TensorSum of one rank.
  class Rank : public TensorSum {
   public:
    Rank(SharedSum* group, int rank) : group_(group), rank_(rank) {}
    void Sum(float* data, int64_t n) override { group_->Sum(rank_, data, n); }

   private:
    SharedSum* group_;
    int rank_;
  };

 private:
  const int ranks_;
  absl::Mutex mu_;
  std::vector<std::vector<float>> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<float> total_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int left_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;
};

class LocalTensorGroup : public StepRunner {
 public:
  // weights[r] is rank r of weights.size() ranks.
  LocalTensorGroup(std::vector<const ServingWeights*> weights, const EngineOptions& options);
  ~LocalTensorGroup() override;

  absl::Status Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) override;
  absl::Status Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) override;
  void Release(int slot) override;
  int slots() const override { return engines_[0]->slots(); }
  int64_t max_len() const override { return engines_[0]->max_len(); }
  int64_t vocab() const override { return engines_[0]->vocab(); }

 private:
  // Runs job(rank) on every rank's thread and waits for all; rank 0's status.
  absl::Status RunAll(const std::function<absl::Status(int rank)>& job) ABSL_LOCKS_EXCLUDED(mu_);
  void RankLoop(int rank) ABSL_LOCKS_EXCLUDED(mu_);

  SharedSum sum_;
  std::vector<std::unique_ptr<SharedSum::Rank>> rank_sums_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<std::vector<float>> scratch_;  // [rank]: where ranks other than 0 put logits
  absl::Mutex mu_;
  const std::function<absl::Status(int)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace manta::serve
