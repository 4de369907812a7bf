// gcs_server: the Manta head service. Parses flags, builds the server, runs
// the loop until SIGTERM or SIGINT.
#include <unistd.h>

#include <csignal>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/metrics/metrics_server.h"
#include "common/token.h"
#include "gcs/gcs_server.h"

ABSL_FLAG(int, port, 6379, "Port to serve on.");
ABSL_FLAG(std::string, bind_address, "127.0.0.1", "Address to bind; loopback unless told otherwise.");
ABSL_FLAG(std::string, session_dir, "", "The cluster's session directory (required).");
ABSL_FLAG(std::string, token_file, "", "File holding the cluster token (required unless --auth=none).");
ABSL_FLAG(std::string, auth, "token", "token: every call must carry the cluster token; none: no check.");
ABSL_FLAG(std::string, storage, "",
          "Table storage: sqlite (durable, the default), memory, redis://[:PASSWORD@]HOST:PORT, or redis (the "
          "Redis at $MANTA_REDIS_ADDRESS or $RAY_REDIS_ADDRESS, which also select redis when this is empty).");
ABSL_FLAG(std::string, storage_path, "", "SQLite file; default <session_dir>/gcs_store.sqlite.");
ABSL_FLAG(std::string, storage_password_file, "",
          "File whose first line is the Redis password (else $MANTA_REDIS_PASSWORD or $RAY_REDIS_PASSWORD).");
ABSL_FLAG(std::string, storage_namespace, "manta",
          "Redis: the tables are hashes <namespace>@<table>; one namespace per cluster sharing a Redis.");
ABSL_FLAG(int, health_check_period_ms, 2000, "How often each raylet is routinely health-checked.");
ABSL_FLAG(int, health_check_timeout_ms, 1000, "Deadline of one health check.");
ABSL_FLAG(int, health_check_failure_threshold, 3, "Consecutive failed checks before a node is dead.");
ABSL_FLAG(int, health_check_unresponsive_timeout_ms, 15000,
          "A raylet whose checks time out (rather than being refused) is dead only after this long unanswered.");
ABSL_FLAG(int, health_check_suspect_period_ms, 100,
          "How often a raylet whose connection dropped is checked until it answers.");
ABSL_FLAG(int, metrics_export_port, -1, "Port of the Prometheus endpoint (/metrics); 0 picks a free one, -1: none.");
ABSL_FLAG(bool, metrics_export_port_fallback, false,
          "When --metrics_export_port is taken, serve metrics on a free port instead (the ready file says which).");
ABSL_FLAG(std::string, metrics_auth, "token",
          "token: a scrape must carry the cluster token (Authorization: Bearer); none: no check.");
ABSL_FLAG(std::string, ready_file, "", "Written (JSON: port, pid, cluster_id, metrics_port) once serving.");
ABSL_FLAG(std::string, log_file, "", "Log file; standard error when empty.");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "gcs_server: error: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Manta GCS head service.");
  absl::ParseCommandLine(argc, argv);
  // Debian's abseil checks every Mutex acquisition (gRPC's included) for
  // lock-order cycles; under load that cost a fifth of the daemon's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::signal(SIGPIPE, SIG_IGN);

  std::string session_dir = absl::GetFlag(FLAGS_session_dir);
  if (session_dir.empty()) return Fail("--session_dir is required");
  manta::gcs::GcsServerOptions options;
  options.port = absl::GetFlag(FLAGS_port);
  if (options.port < 0 || options.port > 65535) return Fail("--port must be 0 to 65535");
  options.bind_address = absl::GetFlag(FLAGS_bind_address);
  auto token = manta::LoadDaemonToken(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(std::string(token.status().message()));
  options.token = *token;
  manta::gcs::StorageFlags storage;
  storage.storage = absl::GetFlag(FLAGS_storage);
  storage.sqlite_path = absl::GetFlag(FLAGS_storage_path);
  if (storage.sqlite_path.empty()) storage.sqlite_path = session_dir + "/gcs_store.sqlite";
  storage.password_file = absl::GetFlag(FLAGS_storage_password_file);
  storage.ns = absl::GetFlag(FLAGS_storage_namespace);
  auto storage_config = manta::gcs::ResolveStorage(storage, [](const char* name) { return std::getenv(name); });
  if (!storage_config.ok()) return Fail(std::string(storage_config.status().message()));
  options.storage = *storage_config;
  options.health_check.period = absl::Milliseconds(absl::GetFlag(FLAGS_health_check_period_ms));
  options.health_check.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_health_check_timeout_ms));
  options.health_check.failure_threshold = absl::GetFlag(FLAGS_health_check_failure_threshold);
  options.health_check.suspect_period = absl::Milliseconds(absl::GetFlag(FLAGS_health_check_suspect_period_ms));
  options.health_check.unresponsive_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_health_check_unresponsive_timeout_ms));
  options.health_check.tick = std::min(options.health_check.period, options.health_check.suspect_period);
  if (options.health_check.period <= absl::ZeroDuration() || options.health_check.timeout <= absl::ZeroDuration() ||
      options.health_check.suspect_period <= absl::ZeroDuration() || options.health_check.failure_threshold < 1 ||
      options.health_check.unresponsive_timeout < absl::ZeroDuration()) {
    return Fail("health check period, timeout and threshold must be positive");
  }

  options.metrics.port = absl::GetFlag(FLAGS_metrics_export_port);
  options.metrics.any_port_if_taken = absl::GetFlag(FLAGS_metrics_export_port_fallback);
  if (options.metrics.port < -1 || options.metrics.port > 65535)
    return Fail("--metrics_export_port must be -1 to 65535");
  auto metrics_token = manta::metrics::MetricsToken(absl::GetFlag(FLAGS_metrics_auth), options.token);
  if (!metrics_token.ok()) return Fail(std::string(metrics_token.status().message()));
  options.metrics.token = *metrics_token;
  options.metrics.host = options.bind_address;
  options.metrics.session_dir = session_dir;
  options.metrics.session_name = manta::metrics::SessionNameOf(session_dir);

  manta::InitLogging({absl::GetFlag(FLAGS_log_file)});
  manta::EventLoop loop;
  manta::gcs::GcsServer server(options, &loop);
  if (auto s = server.Start(); !s.ok()) {
    manta::Logger("gcs")->error("cannot start: {}", s.ToString());
    return Fail(std::string(s.message()));
  }
  loop.OnSignal(SIGTERM, [&] { server.Shutdown(); });
  loop.OnSignal(SIGINT, [&] { server.Shutdown(); });

  std::string ready = absl::GetFlag(FLAGS_ready_file);
  if (!ready.empty()) {
    std::string json = "{\"port\": " + std::to_string(server.port()) + ", \"pid\": " + std::to_string(getpid()) +
                       ", \"cluster_id\": \"" + server.cluster_id_hex() +
                       "\", \"metrics_port\": " + std::to_string(server.metrics_port()) + "}\n";
    if (auto s = manta::WriteFileAtomic(ready, json); !s.ok()) return Fail(std::string(s.message()));
  }
  loop.Run();
  manta::Logger("gcs")->info("GCS stopped");
  return 0;
}
