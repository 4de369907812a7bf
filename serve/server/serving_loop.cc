#include "serve/server/serving_loop.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace manta::serve {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

ServingLoop::ServingLoop(StepRunner* runner, const train::Tokenizer* tokenizer, metrics::MetricsRegistry* registry,
                         ServingLoopOptions options)
    : runner_(runner),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      batcher_(runner, options_.max_prefills_per_step) {
  ttft_ = registry->AddHistogram("jetstream_time_to_first_token", "Time to first token per request in seconds", {},
                                 {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10});
  tpot_ =
      registry->AddHistogram("jetstream_time_per_output_token", "Average time per output token per request in seconds",
                             {}, {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2.5});
  per_request_ = registry->AddHistogram("jetstream_time_per_request", "End to end request latency in seconds", {},
                                        {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60});
  input_length_ = registry->AddHistogram("jetstream_request_input_length", "Number of input tokens per request", {},
                                         {16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
  output_length_ = registry->AddHistogram("jetstream_request_output_length", "Number of output tokens per request", {},
                                          {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000});
  successes_ = registry->AddCounter("jetstream_request_success_count", "Number of requests successfully completed", {});
  cancelled_ = registry->AddCounter("manta_serve_requests_cancelled_total",
                                    "Requests ended unfinished because their client went away", {});
  registry->AddCollector([this](metrics::Exposition& out) {
    out.Family("jetstream_prefill_backlog_size", "gauge", "Size of prefill queue");
    const double handed_off = batcher_.prefilling();
    out.Sample("jetstream_prefill_backlog_size", {}, static_cast<double>(batcher_.Backlog()) - handed_off);
    out.Family("jetstream_generate_backlog_size", "gauge", "Size of generate queue");
    out.Sample("jetstream_generate_backlog_size", {{"idx", "0"}}, handed_off);
    out.Family("jetstream_transfer_backlog_size", "gauge", "Size of transfer queue");
    out.Sample("jetstream_transfer_backlog_size", {{"idx", "0"}},
               options_.transfer_backlog ? static_cast<double>(options_.transfer_backlog()) : 0.0);
    if (options_.kv_bytes_moved) {
      out.Family("manta_serve_kv_transfer_bytes_total", "counter",
                 "Bytes of K/V cache moved from the prefill engines to the generate engines");
      out.Sample("manta_serve_kv_transfer_bytes_total", {}, static_cast<double>(options_.kv_bytes_moved()));
    }
    out.Family("jetstream_slots_used_percentage", "gauge", "The percentage of decode slots currently being used");
    out.Sample("jetstream_slots_used_percentage", {{"idx", "0"}},
               static_cast<double>(batcher_.active()) / std::max(1, batcher_.slots()));
  });
}

ServingLoop::~ServingLoop() { Stop(absl::UnavailableError("the server is stopping")); }

void ServingLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ServingLoop::Stop(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_status_ = why;
    }
  }
  if (thread_.joinable()) thread_.join();
  healthy_ = false;
}

void ServingLoop::Generate(const GenerateBody& body, std::function<void(const std::string&)> on_piece,
                           std::function<void(const absl::Status&)> on_done, std::function<bool()> cancelled) {
  struct State {
    Utf8Pieces pieces;
    int64_t tokens = 0;
    double start = Now(), first = 0;
  };
  auto state = std::make_shared<State>();
  GenerateRequest r;
  r.prompt = tokenizer_->Encode(body.prompt);
  const size_t prompt_tokens = r.prompt.size();
  r.max_tokens = body.max_tokens;
  r.sampling = body.sampling;
  r.eos_id = body.ignore_eos ? -1 : tokenizer_->eos_id();
  r.cancelled = std::move(cancelled);
  r.on_token = [this, state, on_piece](int32_t token) {
    if (state->tokens++ == 0) state->first = Now();
    std::string piece = state->pieces.Add(tokenizer_->TokenBytes(token));
    if (!piece.empty()) on_piece(piece);
  };
  r.on_done = [this, state, on_piece, on_done, body, prompt_tokens](const absl::Status& s, FinishReason) {
    std::string rest = state->pieces.Flush();
    if (!rest.empty() && s.ok()) on_piece(rest);
    if (s.ok()) Observe(body, prompt_tokens, state->tokens, state->start, state->first, Now());
    if (absl::IsCancelled(s)) cancelled_->Add({});
    on_done(s);
  };
  {
    // Under mu_: a request is either refused here or queued before Run's
    // last FailAll, which then ends it.
    absl::MutexLock lock(&mu_);
    if (!stopping_ && !failed_) {
      batcher_.Submit(std::move(r));
      ++submitted_;
      return;
    }
  }
  on_done(absl::UnavailableError("the server is not serving"));
}

void ServingLoop::Observe(const GenerateBody&, size_t prompt_tokens, int64_t output_tokens, double start,
                          double first_token, double end) {
  successes_->Add({});
  input_length_->Observe({}, static_cast<double>(prompt_tokens));
  output_length_->Observe({}, static_cast<double>(output_tokens));
  per_request_->Observe({}, end - start);
  if (output_tokens > 0) ttft_->Observe({}, first_token - start);
  if (output_tokens > 1) tpot_->Observe({}, (end - first_token) / static_cast<double>(output_tokens - 1));
}

void ServingLoop::WarmUp() {
  // One token through prefill and decode: the first real request does not
  // pay for first-touch allocations.
  GenerateRequest r;
  r.prompt = {0};
  r.max_tokens = std::min<int64_t>(2, runner_->max_len() - 1);
  bool done = false;
  r.on_done = [&done](const absl::Status&, FinishReason) { done = true; };
  batcher_.Submit(std::move(r));
  while (!done && batcher_.Step()) {
  }
  if (batcher_.runner_error().ok()) healthy_ = true;
}

void ServingLoop::Run() {
  WarmUp();
  int64_t seen = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || submitted_ != seen; };
      if (batcher_.active() == 0 && batcher_.Backlog() == 0) {
        mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Seconds(1));
      }
      seen = submitted_;
      if (stopping_) break;
    }
    batcher_.Step();
    if (!batcher_.runner_error().ok()) {
      // A rank of the group is gone: nothing can be served until the group
      // is recreated; requests in flight end now.
      {
        absl::MutexLock lock(&mu_);
        failed_ = true;
      }
      healthy_ = false;
      batcher_.FailAll(
          absl::UnavailableError(absl::StrCat("the serving group failed: ", batcher_.runner_error().message())));
    }
  }
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    why = stop_status_;
  }
  batcher_.FailAll(why);
}

}  // namespace manta::serve
