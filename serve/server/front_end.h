// What faces users of a serving group: the serving loop over its
// StepRunner, the HTTP routes (guarded by the token) and the Prometheus
// metrics with JetStream's names. The single-host server and a slice's
// leader both run one.
//
//   ASSIGN_OR_RETURN(auto front, FrontEnd::Start(runner, &tokenizer, config, options));
//   ... front->loop().failed() ...
//   front->Stop(absl::UnavailableError("stopping"));
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/gated_http_server.h"
#include "common/metrics/metrics_server.h"
#include "serve/server/serving_loop.h"
#include "train/kernels/config.h"

namespace manta::serve {

struct FrontEndOptions {
  std::string host = "127.0.0.1";
  int port = 8000;       // 0 picks a free one
  std::string token;     // empty: no check
  std::string hostname;  // the metrics' "id" label
  double load_seconds = 0;
  int64_t restarts = 0;                      // times the serving group was recreated before this one
  std::function<size_t()> transfer_backlog;  // disaggregated serving (ServingLoopOptions)
  std::function<int64_t()> kv_bytes_moved;
};

class FrontEnd {
 public:
  // Starts the loop and binds the routes (config: max_prefill_predict_length,
  // max_target_length, prometheus_port). `runner` and `tokenizer` outlive it.
  static absl::StatusOr<std::unique_ptr<FrontEnd>> Start(StepRunner* runner, const train::Tokenizer* tokenizer,
                                                         const train::Config& config, const FrontEndOptions& options);
  ~FrontEnd();

  int port() const { return http_.bound_port(); }
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  ServingLoop& loop() { return *loop_; }
  // Stops taking requests and ends those in flight with `why`. Idempotent.
  void Stop(const absl::Status& why);

 private:
  explicit FrontEnd(const std::string& hostname) : registry_({{"id", hostname}}), http_(http::HttpLimits{}) {}

  metrics::MetricsRegistry registry_;
  std::unique_ptr<ServingLoop> loop_;
  http::GatedHttpServer http_;
  std::unique_ptr<metrics::MetricsServer> metrics_;
  bool stopped_ = false;
};

}  // namespace manta::serve
