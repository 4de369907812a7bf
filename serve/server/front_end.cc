#include "serve/server/front_end.h"

#include "serve/server/http_routes.h"

namespace manta::serve {

absl::StatusOr<std::unique_ptr<FrontEnd>> FrontEnd::Start(StepRunner* runner, const train::Tokenizer* tokenizer,
                                                          const train::Config& config, const FrontEndOptions& options) {
  const auto start = absl::Now();
  std::unique_ptr<FrontEnd> f(new FrontEnd(options.hostname));
  f->registry_.AddGauge("jetstream_model_load_time", "Total time taken to load the model", {})
      ->Set({}, options.load_seconds);
  f->registry_
      .AddCounter("manta_serve_group_restarts_total",
                  "Times the serving group (leader and workers) was recreated after one of its processes died", {})
      ->Add({}, static_cast<double>(options.restarts));
  f->loop_ = std::make_unique<ServingLoop>(runner, tokenizer, &f->registry_,
                                           ServingLoopOptions{.hostname = options.hostname,
                                                              .transfer_backlog = options.transfer_backlog,
                                                              .kv_bytes_moved = options.kv_bytes_moved});
  f->loop_->Start();
  RouteOptions routes;
  routes.token = options.token;
  routes.max_prompt_tokens = config.max_prefill_predict_length;
  routes.default_max_tokens = config.max_target_length - config.max_prefill_predict_length;
  InstallRoutes(&f->http_, f->loop_.get(), tokenizer, routes);
  if (absl::Status s = f->http_.Bind(options.host, options.port); !s.ok()) {
    f->Stop(absl::UnavailableError("the server did not start"));
    return s;
  }
  if (config.prometheus_port >= 0) {
    auto m = metrics::MetricsServer::Start(
        {.host = options.host, .port = static_cast<int>(config.prometheus_port), .token = options.token},
        &f->registry_);
    if (!m.ok()) {
      f->Stop(absl::UnavailableError("the server did not start"));
      return m.status();
    }
    f->metrics_ = *std::move(m);
  }
  f->registry_.AddGauge("jetstream_server_startup_latency", "Total time taken to start the Jetstream server", {})
      ->Set({}, options.load_seconds + absl::ToDoubleSeconds(absl::Now() - start));
  f->http_.Serve();
  return f;
}

FrontEnd::~FrontEnd() { Stop(absl::UnavailableError("the server is stopping")); }

void FrontEnd::Stop(const absl::Status& why) {
  if (stopped_) return;
  stopped_ = true;
  if (loop_) loop_->Stop(why);  // requests in flight end now, then the handlers return
  http_.StopServing();
  if (metrics_) metrics_->Stop();
}

}  // namespace manta::serve
