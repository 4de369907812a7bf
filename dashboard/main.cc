// dashboard: the head's HTTP server (Jobs REST API). Parses flags, builds the
// server, runs the loop until SIGTERM or SIGINT.
#include <limits.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/metrics/metrics_server.h"
#include "common/token.h"
#include "dashboard/dashboard_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to serve HTTP on; loopback unless told otherwise.");
ABSL_FLAG(int, port, 8265, "HTTP port (0: any free port).");
ABSL_FLAG(bool, port_fallback, false,
          "When --port is taken, serve on a free port instead (the ready file says which).");
ABSL_FLAG(std::string, session_dir, "", "The cluster's session directory (required).");
ABSL_FLAG(std::string, gcs_address, "", "The GCS, HOST:PORT (required).");
ABSL_FLAG(std::string, token_file, "", "File holding the cluster token (required unless --auth=none).");
ABSL_FLAG(std::string, auth, "token", "token: every request must carry the cluster token; none: no check.");
ABSL_FLAG(int64_t, max_package_bytes, 100 << 20, "Largest working-dir package accepted, and its unpacked size.");
ABSL_FLAG(int64_t, max_json_bytes, 1 << 20, "Largest JSON request body accepted.");
ABSL_FLAG(double, stop_grace_s, 10, "Seconds between SIGTERM and SIGKILL when a job is stopped.");
ABSL_FLAG(int, metrics_export_port, -1, "Port of the Prometheus endpoint (/metrics); 0 picks a free one, -1: none.");
ABSL_FLAG(std::string, metrics_auth, "token",
          "token: a scrape must carry the cluster token (Authorization: Bearer); none: no check.");
ABSL_FLAG(std::string, ready_file, "", "Written (JSON: port, pid) once serving.");
ABSL_FLAG(std::string, log_file, "", "Log file; standard error when empty.");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "dashboard: error: %s\n", message.c_str());
  return 1;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Manta dashboard: the Jobs REST API on the head node.");
  absl::ParseCommandLine(argc, argv);
  // Debian's abseil checks every Mutex acquisition (gRPC's included) for
  // lock-order cycles; under load that cost a fifth of the daemon's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::signal(SIGPIPE, SIG_IGN);

  manta::dashboard::DashboardOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.any_port_if_taken = absl::GetFlag(FLAGS_port_fallback);
  if (options.port < 0 || options.port > 65535) return Fail("--port must be 0 to 65535");
  options.session_dir = absl::GetFlag(FLAGS_session_dir);
  if (options.session_dir.empty()) return Fail("--session_dir is required");
  options.gcs_address = absl::GetFlag(FLAGS_gcs_address);
  if (options.gcs_address.empty()) return Fail("--gcs_address is required");
  auto token = manta::LoadDaemonToken(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(std::string(token.status().message()));
  options.token = *token;
  options.metrics_port = absl::GetFlag(FLAGS_metrics_export_port);
  if (options.metrics_port < -1 || options.metrics_port > 65535)
    return Fail("--metrics_export_port must be -1 to 65535");
  auto metrics_token = manta::metrics::MetricsToken(absl::GetFlag(FLAGS_metrics_auth), options.token);
  if (!metrics_token.ok()) return Fail(std::string(metrics_token.status().message()));
  options.metrics_token = *metrics_token;
  int64_t max_package = absl::GetFlag(FLAGS_max_package_bytes);
  int64_t max_json = absl::GetFlag(FLAGS_max_json_bytes);
  if (max_package <= 0 || max_json <= 0) return Fail("body limits must be positive");
  options.max_package_bytes = static_cast<size_t>(max_package);
  options.max_unpacked_bytes = static_cast<uint64_t>(max_package);
  options.max_json_bytes = static_cast<size_t>(max_json);
  double grace = absl::GetFlag(FLAGS_stop_grace_s);
  if (!(grace >= 0 && grace <= 3600)) return Fail("--stop_grace_s must be 0 to 3600");
  options.stop_grace = absl::Seconds(grace);
  options.runner_path = SelfDir() + "/job_runner";
  if (access(options.runner_path.c_str(), X_OK) != 0) return Fail("cannot find " + options.runner_path);

  manta::InitLogging({absl::GetFlag(FLAGS_log_file)});
  manta::EventLoop loop;
  manta::dashboard::DashboardServer server(options, &loop);
  if (auto s = server.Start(); !s.ok()) {
    manta::Logger("dashboard")->error("cannot start: {}", s.ToString());
    return Fail(std::string(s.message()));
  }
  bool stopping = false;
  auto shutdown = [&] {
    if (stopping) return;
    stopping = true;
    server.Shutdown([&] { loop.Stop(); });
  };
  loop.OnSignal(SIGTERM, shutdown);
  loop.OnSignal(SIGINT, shutdown);

  std::string ready = absl::GetFlag(FLAGS_ready_file);
  if (!ready.empty()) {
    std::string json = absl::StrCat("{\"port\": ", server.port(), ", \"pid\": ", getpid(), ", \"url\": \"http://",
                                    options.host, ":", server.port(), "\"}\n");
    if (auto s = manta::WriteFileAtomic(ready, json); !s.ok()) return Fail(std::string(s.message()));
  }
  loop.Run();
  manta::Logger("dashboard")->info("dashboard stopped");
  return 0;
}
