// The server's engine thread: a Batcher over a StepRunner, stepped while
// there is work; text in through the tokenizer, pieces of text out; the
// JetStream metrics of what it does.
//
//   ServingLoop loop(&runner, &tokenizer, &registry, {.hostname = "host-0"});
//   loop.Start();                            // warms up, then healthy()
//   loop.Generate(body, on_piece, on_done);  // any thread
//   loop.Stop(absl::UnavailableError("stopping"));  // in-flight requests end with it
//
// Threads: Generate, healthy and Stop from any thread; the runner is driven
// by the loop's thread only; on_piece and on_done run on it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"
#include "serve/engine/batcher.h"
#include "serve/server/generate_api.h"
#include "train/kernels/tokenizer.h"

namespace manta::serve {

struct ServingLoopOptions {
  std::string hostname;  // the metrics' "id" label
  int max_prefills_per_step = 1;
  // Disaggregated serving: K/V transfers waiting here, and the K/V bytes
  // moved so far (exported when set).
  std::function<size_t()> transfer_backlog;
  std::function<int64_t()> kv_bytes_moved;
};

class ServingLoop {
 public:
  // `runner`, `tokenizer` and `registry` outlive the loop.
  ServingLoop(StepRunner* runner, const train::Tokenizer* tokenizer, metrics::MetricsRegistry* registry,
              ServingLoopOptions options);
  ~ServingLoop();

  // Starts the thread; healthy() once a first generation has run.
  void Start();
  // Ends every request with `why` and joins the thread. Idempotent.
  void Stop(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  // Tokenizes the prompt and queues the request. on_piece gets whole UTF-8
  // text as tokens come; on_done ends it (InvalidArgument when it cannot
  // fit, Unavailable when the loop stops or the runner fails). `cancelled`
  // (optional) is polled each step: true ends the request and frees its slot.
  void Generate(const GenerateBody& body, std::function<void(const std::string&)> on_piece,
                std::function<void(const absl::Status&)> on_done, std::function<bool()> cancelled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  bool healthy() const { return healthy_.load(); }
  // Whether the runner failed (the server must be recreated).
  bool failed() const { return failed_.load(); }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void WarmUp();
  void Observe(const GenerateBody& body, size_t prompt_tokens, int64_t output_tokens, double start, double first_token,
               double end);

  StepRunner* const runner_;
  const train::Tokenizer* const tokenizer_;
  const ServingLoopOptions options_;
  Batcher batcher_;
  std::atomic<bool> healthy_{false}, failed_{false};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(mu_);
  int64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;  // wakes the loop
  std::thread thread_;
  metrics::Histogram *ttft_, *tpot_, *per_request_, *input_length_, *output_length_;
  metrics::Counter* successes_;
  metrics::Counter* cancelled_;  // requests whose client went away
};

}  // namespace manta::serve
