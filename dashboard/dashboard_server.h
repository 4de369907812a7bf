// DashboardServer: the head's HTTP server. Owns the job store client, the
// package store, the JobManager, the State API and the httplib server; serves HTTP on its
// own thread pool while the JobManager's supervision runs on the dashboard's
// main EventLoop.
//
//   EventLoop loop;
//   DashboardServer server(options, &loop);
//   RETURN_IF_ERROR(server.Start());       // binds; port() is known after
//   loop.OnSignal(SIGTERM, [&] { server.Shutdown([&] { loop.Stop(); }); });
//   loop.Run();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "dashboard/session_store.h"

namespace httplib {
class Server;
}

namespace manta::gcs {
class SyncGcsClient;
}

namespace manta::http {
class GatedHttpServer;
}

namespace manta::dashboard {

class JobStore;
class PackageStore;
class JobManager;
class JobsApi;
class StateApi;
class DashboardMetrics;
struct GuardConfig;

// Installs on `http` what answers a request before and around the routes
// (request_guard.h's checks before each handler, the error and exception
// handlers), the web page (web_page.h), the Jobs API's routes and
// (when given) the State API's; `metrics` (when given) counts every request.
// `config` is read on every request.
void InstallRoutes(httplib::Server* http, std::shared_ptr<const GuardConfig> config, JobsApi* api,
                   StateApi* state = nullptr, DashboardMetrics* metrics = nullptr);

struct DashboardOptions {
  std::string host = "127.0.0.1";
  int port = 8265;                 // 0: any free port
  bool any_port_if_taken = false;  // `port` taken: serve on a free one (the ready file says which)
  std::string session_dir;
  std::string gcs_address;
  std::string token;  // empty: --auth=none
  std::string runner_path;
  size_t max_json_bytes = 1 << 20;
  size_t max_package_bytes = 100 << 20;
  uint64_t max_unpacked_bytes = 100ull << 20;
  absl::Duration stop_grace = absl::Seconds(10);
  int http_threads = 24;
  int metrics_port = -1;      // -1: no metrics port
  std::string metrics_token;  // empty: scrapes need no token
};

class DashboardServer {
 public:
  DashboardServer(DashboardOptions options, EventLoop* loop);
  ~DashboardServer();

  // Loop thread, before loop->Run(). Loads the jobs, binds and starts serving.
  absl::Status Start();
  int port() const { return port_; }

  // Loop thread: stops serving HTTP, stops the running jobs, then `done`.
  void Shutdown(std::function<void()> done);

 private:
  // Serves the metrics port and registers its address with the GCS.
  absl::Status StartMetrics();

  const DashboardOptions options_;
  EventLoop* const loop_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<PackageStore> packages_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobsApi> api_;
  std::unique_ptr<gcs::SyncGcsClient> state_gcs_;  // the State API's reads
  std::unique_ptr<StateApi> state_api_;
  std::unique_ptr<DashboardMetrics> metrics_;
  std::string metrics_address_;
  // The page's sign-ins (thread-safe; the front and the handlers read them).
  SessionStore sessions_;
  LoginThrottle login_throttle_;
  std::unique_ptr<http::GatedHttpServer> http_;
  int port_ = 0;
};

}  // namespace manta::dashboard
