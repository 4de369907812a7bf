#include "dashboard/dashboard_metrics.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "dashboard/web_assets.h"

namespace manta::dashboard {

DashboardMetrics::DashboardMetrics(std::string session_name)
    : registry_(metrics::Labels{{"SessionName", std::move(session_name)}}),
      requests_(registry_.AddCounter("ray_dashboard_api_requests_count_requests_total",
                                     "Requests the dashboard answered.", {"method", "endpoint", "http_status"})),
      duration_(registry_.AddHistogram("ray_dashboard_api_requests_duration_seconds",
                                       "Time the dashboard took to answer a request.", {"method", "endpoint"},
                                       {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10})) {
  registry_.AddCollector([this](metrics::Exposition& out) {
    if (components_) components_->Collect({{::getpid(), "dashboard", true}}, out);
  });
}

DashboardMetrics::~DashboardMetrics() { Stop(); }

absl::Status DashboardMetrics::Start(const std::string& host, int port, const std::string& token) {
  components_ = std::make_unique<metrics::ComponentStats>(host);  // before anything is served
  ASSIGN_OR_RETURN(server_, metrics::MetricsServer::Start({.host = host, .port = port, .token = token}, &registry_));
  return absl::OkStatus();
}

void DashboardMetrics::Stop() {
  if (server_) server_->Stop();
}

void DashboardMetrics::Record(const std::string& method, const std::string& path, int status, absl::Duration took) {
  const std::string endpoint = Endpoint(path);
  requests_->Add({method, endpoint, std::to_string(status)});
  duration_->Observe({method, endpoint}, absl::ToDoubleSeconds(took));
}

std::string DashboardMetrics::Endpoint(const std::string& path) {
  for (const WebAsset& asset : WebAssets()) {
    if (path == asset.path) return path;
  }
  std::vector<std::string> parts = absl::StrSplit(path, '/');  // "", "api", ...
  if (parts.size() < 3 || parts[1] != "api") return "other";
  if (parts[2] == "jobs") {
    if (parts.size() == 3 || (parts.size() == 4 && parts[3].empty())) return "/api/jobs/";
    std::string route = "/api/jobs/{submission_id}";
    for (size_t i = 4; i < parts.size() && i < 6; ++i) {
      if (parts[i] != "logs" && parts[i] != "tail" && parts[i] != "stop") return "other";
      route += "/" + parts[i];
    }
    return parts.size() > 6 ? "other" : route;
  }
  if (parts[2] == "packages") return "/api/packages/{protocol}/{name}";
  static const char* kFixed[] = {
      "/api/version",        "/api/login",           "/api/logout",    "/api/gcs_healthz",
      "/api/cluster_status", "/api/v0/nodes",        "/api/v0/actors", "/api/v0/placement_groups",
      "/api/v0/tasks",       "/api/train/v2/runs/v1"};
  for (const char* fixed : kFixed) {
    if (path == fixed) return path;
  }
  return "other";
}

}  // namespace manta::dashboard
