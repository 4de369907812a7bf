#include "serve/engine/tensor_group.h"

namespace manta::serve {

void SharedSum::Sum(int rank, float* data, int64_t n) {
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

LocalTensorGroup::LocalTensorGroup(std::vector<const ServingWeights*> weights, const EngineOptions& options)
    : sum_(static_cast<int>(weights.size())), scratch_(weights.size()) {
  const int ranks = static_cast<int>(weights.size());
  for (int r = 0; r < ranks; ++r) {
    rank_sums_.push_back(std::make_unique<SharedSum::Rank>(&sum_, r));
    engines_.push_back(std::make_unique<Engine>(*weights[r], options, ranks > 1 ? rank_sums_[r].get() : nullptr));
    scratch_[r].resize(static_cast<size_t>(options.slots) * engines_[r]->vocab());
  }
  for (int r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { RankLoop(r); });
}

LocalTensorGroup::~LocalTensorGroup() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void LocalTensorGroup::RankLoop(int rank) {
  int64_t seen = 0;
  while (true) {
    const std::function<absl::Status(int)>* job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(rank).IgnoreError();  // rank 0's status speaks for the group
    absl::MutexLock lock(&mu_);
    ++done_;
  }
}

absl::Status LocalTensorGroup::RunAll(const std::function<absl::Status(int)>& job) {
  {
    absl::MutexLock lock(&mu_);
    job_ = &job;
    done_ = 0;
    ++generation_;
  }
  absl::Status status = job(0);  // rank 0 on the caller's thread
  absl::MutexLock lock(&mu_);
  const int others = static_cast<int>(threads_.size());
  auto all_done = [this, others]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == others; };
  mu_.Await(absl::Condition(&all_done));
  job_ = nullptr;
  return status;
}

absl::Status LocalTensorGroup::Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) {
  return RunAll([&](int r) { return engines_[r]->Prefill(slot, prompt, r == 0 ? logits : scratch_[r].data()); });
}

absl::Status LocalTensorGroup::Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens,
                                      float* logits) {
  return RunAll([&](int r) { return engines_[r]->Decode(slots, tokens, r == 0 ? logits : scratch_[r].data()); });
}

void LocalTensorGroup::Release(int slot) {
  for (auto& e : engines_) e->Release(slot);
}

}  // namespace manta::serve
