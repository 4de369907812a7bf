// Continuous batching over the slots of a StepRunner (an engine, or a
// tensor-parallel group of them).
//
// Each Step: waiting requests take the free slots (a prefill each, at most
// `max_prefills_per_step`, and the first token is sampled from the prompt's
// logits), then one decode step runs every active slot as one batch, the
// requests admitted this step included. A request that reaches end-of-text
// or max_tokens frees its slot at once, so the next Step reuses it.
//
//   Batcher batcher(&engine);
//   batcher.Submit(std::move(request));        // any thread
//   while (running) batcher.Step();            // one thread: the engine's
//
// With a runner that prefills remotely (disaggregated serving), waiting
// requests are handed off (up to its transfer backlog) and join a free slot
// at the first step after their K/V arrived; decoding never waits for them.
//
// Threads: Submit and Backlog from any thread; Step, FailAll and the rest
// from one thread (the engine's). Callbacks run on that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "serve/engine/engine.h"
#include "serve/engine/sampler.h"

namespace manta::serve {

enum class FinishReason { kEos, kLength, kError };

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  int32_t eos_id = -1;  // a token that ends the output (not emitted); -1: none
  // Each output token, in order.
  std::function<void(int32_t token)> on_token;
  // Once, at the end: OK with kEos or kLength, or the error.
  std::function<void(const absl::Status& status, FinishReason reason)> on_done;
  // Polled before each step (optional): true ends the request with
  // Cancelled and frees its slot (a client that went away).
  std::function<bool()> cancelled;
};

class Batcher {
 public:
  explicit Batcher(StepRunner* runner, int max_prefills_per_step = 1);

  // Queues a request. A request that cannot fit (empty prompt, max_tokens
  // below 1, prompt + max_tokens over the runner's max_len) ends at once
  // with InvalidArgument through on_done.
  void Submit(GenerateRequest request) ABSL_LOCKS_EXCLUDED(mu_);
  // One scheduling step; false when there was nothing to do.
  bool Step() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every waiting and active request with `status` and frees the slots.
  void FailAll(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests waiting for a slot, handed-off prefills included.
  size_t Backlog() const ABSL_LOCKS_EXCLUDED(mu_);
  // Prefills handed off and not yet imported.
  int prefilling() const { return in_flight_.load(); }
  int active() const { return active_.load(); }
  // The runner's last failure other than a refused request (OK if none):
  // a tensor-parallel group that lost a rank cannot go on.
  absl::Status runner_error() const { return runner_error_; }
  int slots() const { return runner_->slots(); }
  int64_t steps() const { return steps_; }

 private:
  struct Slot {
    std::unique_ptr<GenerateRequest> request;
    std::unique_ptr<Sampler> sampler;
    int32_t next = 0;     // the token to feed at the next decode
    int64_t emitted = 0;  // tokens given to on_token
  };
  // Emits a sampled token or finishes the slot; true while it goes on.
  bool Advance(int s, const float* logits);
  bool Emit(int s, int32_t token);
  void Finish(int s, const absl::Status& status, FinishReason reason);
  void Admit();
  void AdmitRemote(RemotePrefill* remote);
  // Takes `slot` for `request`, whose prompt's logits are `logits` (or,
  // when null, whose first token `first` was drawn by a remote prefill).
  void Start(int slot, std::unique_ptr<GenerateRequest> request, const float* logits, int32_t first = 0);
  std::unique_ptr<GenerateRequest> NextWaiting() ABSL_LOCKS_EXCLUDED(mu_);

  StepRunner* const runner_;
  const int max_prefills_;
  std::vector<Slot> slots_;
  std::atomic<int> active_{0};  // read by metrics from any thread
  absl::Status runner_error_;
  int64_t steps_ = 0;
  std::vector<float> logits_;
  std::map<int64_t, std::unique_ptr<GenerateRequest>> prefilling_;  // by id: handed off, not yet imported
  std::atomic<int> in_flight_{0};
  int64_t next_id_ = 1;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<GenerateRequest>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::serve
