#include "common/rpc/server_metrics.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/time/clock.h"

namespace manta::rpc {
namespace {

using grpc::experimental::InterceptionHookPoints;

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(ServerMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(absl::Now()) {
    metrics_->Started(method_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->Finished(method_, methods->GetSendStatus().ok(), absl::ToDoubleMilliseconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  ServerMetrics* const metrics_;
  const std::string method_;
  const absl::Time start_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(ServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, metrics_->Label(info->method()));
  }

 private:
  ServerMetrics* const metrics_;
};

}  // namespace

ServerMetrics::ServerMetrics(metrics::MetricsRegistry* registry)
    : started_(registry->AddCounter("ray_grpc_server_req_new_total", "New requests to the gRPC server.", {"Method"})),
      finished_(
          registry->AddCounter("ray_grpc_server_req_finished_total", "Requests the gRPC server finished.", {"Method"})),
      succeeded_(registry->AddCounter("ray_grpc_server_req_succeeded_total", "Requests that finished OK.", {"Method"})),
      failed_(registry->AddCounter("ray_grpc_server_req_failed_total", "Requests that finished with an error.",
                                   {"Method"})),
      time_ms_(registry->AddHistogram("ray_grpc_server_req_process_time_ms",
                                      "Time from a request's start to its status, in milliseconds.", {"Method"},
                                      {0.1, 1, 10, 100, 1000, 10000})) {}

void ServerMetrics::Install(grpc::ServerBuilder* builder) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<Factory>(this));
  builder->experimental().SetInterceptorCreators(std::move(factories));
}

std::string ServerMetrics::MethodLabel(const std::string& full_method) {
  // "/package.Service/Method" -> "Service.grpc_server.Method".
  const size_t slash = full_method.rfind('/');
  if (full_method.empty() || full_method[0] != '/' || slash == 0 || slash == std::string::npos) return full_method;
  std::string service = full_method.substr(1, slash - 1);
  const size_t dot = service.rfind('.');
  if (dot != std::string::npos) service = service.substr(dot + 1);
  return service + ".grpc_server." + full_method.substr(slash + 1);
}

std::string ServerMetrics::Label(const std::string& full_method) {
  std::string label = MethodLabel(full_method);
  absl::MutexLock lock(&mu_);
  if (labels_.contains(label)) return label;
  if (labels_.size() >= kMaxMethods) return "other";
  labels_.insert(label);
  return label;
}

void ServerMetrics::Started(const std::string& method) { started_->Add({method}); }

void ServerMetrics::Finished(const std::string& method, bool ok, double millis) {
  finished_->Add({method});
  (ok ? succeeded_ : failed_)->Add({method});
  time_ms_->Observe({method}, millis);
}

}  // namespace manta::rpc
