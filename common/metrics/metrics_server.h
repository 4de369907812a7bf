// MetricsServer: serves a MetricsRegistry at GET /metrics in the Prometheus
// text format, on a port of its own (a daemon's --metrics-export-port),
// through a GatedHttpServer, so idle or slow connections cannot hold it.
// With a token, a scrape must send "Authorization: Bearer <token>" (what
// Prometheus sends from `authorization: {credentials_file: <session>/token}`);
// anything else gets 401 before any body is read, and no route takes a body
// (http_front.h). `--metrics-auth=none` serves without the check.
//
//   MetricsRegistry registry(Labels{{"SessionName", session}});
//   ASSIGN_OR_RETURN(auto server, MetricsServer::Start({.host = ip, .port = 8080, .token = token}, &registry));
//   ... server->port() ...
//   server->Stop();
//
// Thread: Start and Stop from one thread; scrapes run on the server's own
// threads and call registry->Render() there. `registry` outlives the server.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"

namespace manta::http {
class GatedHttpServer;
}

namespace manta::metrics {

struct MetricsServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;       // 0: any free port
  std::string token;  // empty: no check (--metrics-auth=none or --auth=none)
  // When `port` is taken, serve on a free one instead (a default port, such
  // as `manta start`'s 8080, that another cluster on this host may hold).
  bool any_port_if_taken = false;
};

class MetricsServer {
 public:
  // Binds and serves. UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const MetricsServerOptions& options,
                                                              const MetricsRegistry* registry);
  ~MetricsServer();

  int port() const { return port_; }
  // Stops serving and waits for scrapes in flight. Idempotent.
  void Stop();

 private:
  MetricsServer() = default;
  std::unique_ptr<http::GatedHttpServer> http_;
  int port_ = 0;
};

// The token a daemon's metrics port checks: `token` unless `metrics_auth` is
// "none"; InvalidArgument for anything but "token" or "none".
absl::StatusOr<std::string> MetricsToken(const std::string& metrics_auth, const std::string& token);

// The SessionName label of a session directory: its last component
// ("session_2026-11-27_10-20-30_1234").
std::string SessionNameOf(const std::string& session_dir);

}  // namespace manta::metrics
