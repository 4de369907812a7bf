#include "common/metrics/metrics_server.h"

#include <filesystem>

#include "common/http/gated_http_server.h"
#include "common/token.h"

namespace manta::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options,
                                                                    const MetricsRegistry* registry) {
  http::HttpLimits limits;
  limits.threads = 2;
  limits.max_connections = 256;
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->http_ = std::make_unique<http::GatedHttpServer>(limits);
  const std::string token = options.token;
  server->http_->Get("/metrics", [registry, token](const httplib::Request& req, httplib::Response& res) {
    if (!token.empty()) {
      auto it = req.headers.find("Authorization");
      const std::string header = it == req.headers.end() ? "" : it->second;
      if (!TokenMatches(TokenFromAuthorization(header), token)) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        res.set_content(header.empty() ? "missing cluster token\n" : "wrong cluster token\n",
                        "text/plain; charset=utf-8");
        return;
      }
    }
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
