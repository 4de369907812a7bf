// Ray's gRPC server metrics for a daemon's services, kept by a server
// interceptor: ray_grpc_server_req_new_total, _finished_total,
// _succeeded_total and _failed_total (counters) and
// ray_grpc_server_req_process_time_ms (a histogram, bounds 0.1 ms to 10 s),
// each by Method, named as Ray names it ("NodeInfoGcsService.grpc_server.RegisterNode").
// A call's time runs from its start on the server to its status being sent.
//
//   metrics::MetricsRegistry registry(...);
//   rpc::ServerMetrics server_metrics(&registry);
//   grpc::ServerBuilder builder;
//   server_metrics.Install(&builder);
//
// Thread-safe: calls are counted from gRPC's threads.
#pragma once

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"

namespace grpc {
class ServerBuilder;
}

namespace manta::rpc {

class ServerMetrics {
 public:
  explicit ServerMetrics(metrics::MetricsRegistry* registry);
  // Adds the interceptor to `builder`; this object outlives the server.
  void Install(grpc::ServerBuilder* builder);

  // "/manta.rpc.NodeInfoGcsService/RegisterNode" as Ray labels it.
  static std::string MethodLabel(const std::string& full_method);

  // MethodLabel, or "other" once kMaxMethods labels are in use (a caller
  // naming methods no service has cannot grow the series without bound).
  std::string Label(const std::string& full_method) ABSL_LOCKS_EXCLUDED(mu_);

  void Started(const std::string& method);
  void Finished(const std::string& method, bool ok, double millis);

 private:
  static constexpr size_t kMaxMethods = 256;

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> labels_ ABSL_GUARDED_BY(mu_);
  metrics::Counter* const started_;
  metrics::Counter* const finished_;
  metrics::Counter* const succeeded_;
  metrics::Counter* const failed_;
  metrics::Histogram* const time_ms_;
};

}  // namespace manta::rpc
