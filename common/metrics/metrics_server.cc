#include "common/metrics/metrics_server.h"

#include <filesystem>

#include "common/http/gated_http_server.h"

namespace manta::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options,
                                                                    const MetricsRegistry* registry) {
  http::HttpLimits limits;
  limits.threads = 2;
  limits.max_connections = 256;
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->http_ = std::make_unique<http::GatedHttpServer>(limits);
  // Nothing but a scrape: GET /metrics with the token; any body is refused
  // (413, 411) before it is read.
  http::FrontPolicy front;
  front.routes = {{"GET", "/metrics"}};
  if (!options.token.empty()) {
    front.authenticate = [token = options.token](const http::RequestHead& head) {
      return http::BearerCredential(head, token);
    };
  }
  server->http_->SetFront(std::move(front));
  server->http_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  absl::Status bound = server->http_->Bind(options.host, options.port);
  if (!bound.ok() && options.any_port_if_taken && options.port != 0) bound = server->http_->Bind(options.host, 0);
  if (!bound.ok()) return bound;
  server->port_ = server->http_->bound_port();
  server->http_->Serve();
  return server;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (http_) http_->StopServing();
}

absl::StatusOr<std::string> MetricsToken(const std::string& metrics_auth, const std::string& token) {
  if (metrics_auth == "none") return std::string();
  if (metrics_auth == "token") return token;
  return absl::InvalidArgumentError("--metrics-auth must be token or none, not '" + metrics_auth + "'");
}

std::string SessionNameOf(const std::string& session_dir) {
  std::filesystem::path p = std::filesystem::path(session_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace manta::metrics
