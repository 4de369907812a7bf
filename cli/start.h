// `manta start`: starts the head (GCS + head raylet) or joins a raylet to a
// running cluster, as daemons of this host, like `ray start`.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cli/node_flags.h"
#include "common/session.h"

namespace manta::cli {

struct StartOptions {
  bool head = false;
  std::string address;  // join the cluster whose GCS is here
  int port = 6379;      // the GCS port (head only)
  std::string node_ip = "127.0.0.1";
  NodeFlags node;
  std::string temp_dir = kDefaultTempDir;
  bool block = false;
  std::string auth = "token";  // "token" or "none" (head only)
  // Join: where the cluster token is. Head: the token to enforce (default: a new one).
  std::string token_file;
  bool include_dashboard = true;  // head: start the dashboard (Jobs API)
  std::string dashboard_host = "127.0.0.1";
  // -1: 8265, or a free port when 8265 is taken (by another cluster's dashboard).
  int dashboard_port = -1;
  // Head: where the GCS keeps its tables (gcs_server's --storage: sqlite,
  // memory, redis://[:PASSWORD@]HOST:PORT, redis); empty: its default.
  std::string gcs_storage;
  std::string gcs_storage_namespace;  // Redis: empty means gcs_server's default
  // The Prometheus port: the GCS's on the head (-1: 8080, or a free port
  // when 8080 is taken), this host's raylet's on a joining node (-1: a free
  // port). The head's raylet and dashboard take free ports; the head lists
  // them all in <session>/prom_metrics_service_discovery.json.
  int metrics_export_port = -1;
  std::string metrics_auth = "token";  // "token": scrapes need the token; "none"
  absl::Duration gcs_ready_timeout = absl::Seconds(15);
  absl::Duration raylet_ready_timeout = absl::Seconds(20);
  absl::Duration dashboard_ready_timeout = absl::Seconds(20);
};

// Validates everything it can before spawning; on any failure stops what it
// started and returns the error (one line). Prints the next steps on `out`,
// and on `err` a warning when the cluster runs without authentication.
// With `block`, returns only after SIGINT/SIGTERM (OK) or when a daemon dies
// (Unavailable), having stopped the others.
absl::Status RunStart(const StartOptions& options, std::ostream& out, std::ostream& err);

}  // namespace manta::cli
