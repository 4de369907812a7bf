// raylet: the Manta node daemon. Parses flags, detects resources, runs the
// loop until SIGINT, SIGTERM (which drains first with --drain_grace_s), a
// drain that completes, or until it must exit (GCS gone, node refused). When
// the GCS declared the node dead while it ran, it executes itself again to
// rejoin as a new node.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "common/id.h"
#include "common/logging.h"
#include "common/metrics/metrics_server.h"
#include "common/token.h"
#include "raylet/raylet.h"
#include "raylet/rejoin.h"

ABSL_FLAG(std::string, gcs_address, "", "host:port of the GCS (required).");
ABSL_FLAG(std::string, node_ip_address, "127.0.0.1", "This node's address; the server binds to it.");
ABSL_FLAG(int, port, 0, "Port to serve on; 0 picks a free one.");
ABSL_FLAG(std::string, node_name, "", "Name shown in listings; the node address by default.");
ABSL_FLAG(std::string, session_dir, "", "The session directory on this host.");
ABSL_FLAG(std::string, token_file, "", "File holding the cluster token (required unless --auth=none).");
ABSL_FLAG(std::string, auth, "token", "token or none.");
ABSL_FLAG(bool, head, false, "This is the head node.");
ABSL_FLAG(double, num_cpus, -1, "CPUs to offer; detected when negative.");
ABSL_FLAG(double, memory, -1, "Memory in bytes to offer; detected when negative.");
ABSL_FLAG(std::string, resources, "", "Custom resources as a JSON object, e.g. '{\"ssd\": 1}'.");
ABSL_FLAG(std::string, labels, "", "Node labels, e.g. 'zone=a,pool=tpu'.");
ABSL_FLAG(int, gcs_connect_timeout_s, 5, "Give up joining when the GCS cannot be reached this long.");
ABSL_FLAG(int, gcs_reconnect_timeout_s, 60, "Exit when a joined GCS has been unreachable this long.");
ABSL_FLAG(std::string, ready_file, "", "Written (JSON: node_id, port, pid) once registered.");
ABSL_FLAG(int, metrics_export_port, -1, "Port of the Prometheus endpoint (/metrics); 0 picks a free one, -1: none.");
ABSL_FLAG(std::string, metrics_auth, "token",
          "token: a scrape must carry the cluster token (Authorization: Bearer); none: no check.");
ABSL_FLAG(std::string, log_file, "", "Log file; standard error when empty.");
ABSL_FLAG(int, max_workers, -1,
          "Workers started ahead of need only while fewer are alive; max(4, 2 x CPUs) when negative.");
ABSL_FLAG(int, idle_worker_timeout_ms, 60000, "Idle workers beyond a small minimum are stopped after this long.");
ABSL_FLAG(int, worker_start_timeout_ms, 30000, "A worker that has not registered this long after spawn is killed.");
ABSL_FLAG(int, drain_grace_s, 0,
          "When > 0, SIGTERM drains this node (no new work; exit once idle, at most this many seconds later) "
          "instead of stopping at once; a second SIGTERM or SIGINT stops at once.");
ABSL_FLAG(std::string, cluster_id, "",
          "Hex id of the cluster this node belongs to; a GCS serving another one refuses it. Set when rejoining.");
ABSL_FLAG(bool, rejoin_when_dead, true,
          "When the GCS declares this live node dead (e.g. after a network partition), stop every worker and rejoin "
          "as a new node; otherwise exit 1.");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "raylet: error: %s\n", message.c_str());
  return 1;
}

std::optional<std::string> GetEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Runs the raylet until its loop stops. Returns its exit code, or fills
// `rejoin_cluster` (hex) when it should rejoin as a new node.
int RunRaylet(const manta::raylet::RayletOptions& options, bool* rejoin, std::string* rejoin_cluster) {
  manta::EventLoop loop;
  manta::raylet::Raylet raylet(options, &loop);
  if (auto s = raylet.Start(); !s.ok()) return Fail(std::string(s.message()));
  loop.OnSignal(SIGTERM, [&] { raylet.OnSigterm(); });
  loop.OnSignal(SIGINT, [&] { raylet.Shutdown(0, "SIGINT"); });
  loop.Run();
  *rejoin = raylet.rejoin_requested();
  *rejoin_cluster = raylet.cluster_id_hex();
  return raylet.exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Manta node daemon.");
  const std::vector<std::string> original_args(argv, argv + argc);
  absl::ParseCommandLine(argc, argv);
  // Debian's abseil checks every Mutex acquisition (gRPC's included) for
  // lock-order cycles; under load that cost a fifth of the daemon's CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::signal(SIGPIPE, SIG_IGN);

  manta::raylet::RayletOptions options;
  options.gcs_address = absl::GetFlag(FLAGS_gcs_address);
  if (options.gcs_address.empty()) return Fail("--gcs_address is required");
  options.node_ip = absl::GetFlag(FLAGS_node_ip_address);
  options.port = absl::GetFlag(FLAGS_port);
  if (options.port < 0 || options.port > 65535) return Fail("--port must be 0 to 65535");
  options.node_name = absl::GetFlag(FLAGS_node_name);
  options.is_head = absl::GetFlag(FLAGS_head);
  auto token = manta::LoadDaemonToken(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(std::string(token.status().message()));
  options.token = *token;
  manta::raylet::LocalResourceOptions ropts;
  ropts.num_cpus = absl::GetFlag(FLAGS_num_cpus);
  ropts.memory_bytes = absl::GetFlag(FLAGS_memory);
  ropts.resources_json = absl::GetFlag(FLAGS_resources);
  ropts.labels = absl::GetFlag(FLAGS_labels);
  ropts.node_ip = options.node_ip;
  ropts.is_head = options.is_head;
  auto resources = manta::raylet::DetectLocalResources(ropts, GetEnv);
  if (!resources.ok()) return Fail(std::string(resources.status().message()));
  options.resources = std::move(*resources);
  if (absl::GetFlag(FLAGS_gcs_connect_timeout_s) <= 0 || absl::GetFlag(FLAGS_gcs_reconnect_timeout_s) <= 0) {
    return Fail("GCS timeouts must be positive");
  }
  options.gcs_connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_gcs_connect_timeout_s));
  options.gcs_reconnect_timeout = absl::Seconds(absl::GetFlag(FLAGS_gcs_reconnect_timeout_s));
  options.ready_file = absl::GetFlag(FLAGS_ready_file);
  options.session_dir = absl::GetFlag(FLAGS_session_dir);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  int max_workers = absl::GetFlag(FLAGS_max_workers);
  options.max_workers = max_workers >= 0 ? max_workers : std::max(4, 2 * manta::raylet::DetectCpus());
  if (absl::GetFlag(FLAGS_idle_worker_timeout_ms) <= 0 || absl::GetFlag(FLAGS_worker_start_timeout_ms) <= 0) {
    return Fail("--idle_worker_timeout_ms and --worker_start_timeout_ms must be positive");
  }
  options.idle_worker_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_idle_worker_timeout_ms));
  options.worker_start_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_worker_start_timeout_ms));
  int drain_grace_s = absl::GetFlag(FLAGS_drain_grace_s);
  if (drain_grace_s < 0 || drain_grace_s > 86400) return Fail("--drain_grace_s must be 0 to 86400");
  options.drain_grace = absl::Seconds(drain_grace_s);
  if (std::string hex = absl::GetFlag(FLAGS_cluster_id); !hex.empty()) {
    auto id = manta::FromHex(hex);
    if (!id.ok()) return Fail("--cluster_id: " + std::string(id.status().message()));
    options.cluster_id = *id;
  }
  options.rejoin_when_dead = absl::GetFlag(FLAGS_rejoin_when_dead);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_export_port);
  if (options.metrics_port < -1 || options.metrics_port > 65535)
    return Fail("--metrics_export_port must be -1 to 65535");
  auto metrics_token = manta::metrics::MetricsToken(absl::GetFlag(FLAGS_metrics_auth), options.token);
  if (!metrics_token.ok()) return Fail(std::string(metrics_token.status().message()));
  options.metrics_token = *metrics_token;
  options.session_name = manta::metrics::SessionNameOf(options.session_dir);

  manta::InitLogging({absl::GetFlag(FLAGS_log_file)});
  bool rejoin = false;
  std::string cluster;
  int code = RunRaylet(options, &rejoin, &cluster);
  if (!rejoin) return code;
  // The new run writes the ready file again, with its new node id.
  if (!options.ready_file.empty()) unlink(options.ready_file.c_str());
  auto s = manta::raylet::ReExec(
      manta::raylet::RejoinArgs(original_args, cluster, absl::GetFlag(FLAGS_gcs_reconnect_timeout_s)));
  return Fail("cannot rejoin: " + std::string(s.message()));
}
