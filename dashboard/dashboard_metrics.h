// DashboardMetrics: the dashboard's Prometheus endpoint
// (--metrics_export_port): Ray's dashboard request metrics,
// ray_dashboard_api_requests_count_requests_total{method,endpoint,http_status}
// and ray_dashboard_api_requests_duration_seconds{method,endpoint}, where
// endpoint is the route ("/api/jobs/{submission_id}/logs"), never a raw
// path, so ids cannot grow the series; and its own process's
// ray_component_*{Component="dashboard"} (component_stats.h). Every series
// carries SessionName.
//
// Thread-safe: requests are counted from the HTTP server's threads.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/metrics/component_stats.h"
#include "common/metrics/metrics.h"
#include "common/metrics/metrics_server.h"

namespace manta::dashboard {

class DashboardMetrics {
 public:
  explicit DashboardMetrics(std::string session_name);
  ~DashboardMetrics();

  // Serves on `host`:`port` (0: a free port); scrapes need `token` unless empty.
  absl::Status Start(const std::string& host, int port, const std::string& token);
  void Stop();
  int port() const { return server_ ? server_->port() : 0; }

  // A request was answered.
  void Record(const std::string& method, const std::string& path, int status, absl::Duration took);

  // The route a path belongs to, for the endpoint label.
  static std::string Endpoint(const std::string& path);

 private:
  metrics::MetricsRegistry registry_;
  metrics::Counter* const requests_;
  metrics::Histogram* const duration_;
  std::unique_ptr<metrics::ComponentStats> components_;  // set by Start, before serving
  std::unique_ptr<metrics::MetricsServer> server_;
};

}  // namespace manta::dashboard
