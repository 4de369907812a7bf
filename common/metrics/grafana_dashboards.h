// Manta's Grafana dashboards: the cluster (Ray's default dashboard's panels),
// training (Ray Train's, with each step's loss, tokens/s and TFLOP/s) and
// serving (JetStream's metrics). Their panels are data, dashboard/grafana/
// *.json, built into the binary; GrafanaDashboards() expands each into
// Grafana's dashboard model (time-series panels in a two-column grid under
// their rows, a Prometheus data source chosen by the user, the definition's
// variables with "All"). Every query reads Ray's metric names, so the
// dashboards draw a Ray cluster as well as a Manta one.
//
// The head writes them into <session>/metrics/grafana/dashboards/, beside
// its service-discovery file, as Ray writes its own there:
//
//   ASSIGN_OR_RETURN(auto dashboards, GrafanaDashboards());
//   RETURN_IF_ERROR(WriteGrafanaDashboards(session_dir + "/" + kGrafanaDashboardsDir));
//
// A definition: {"title", "uid", "file", "description", "variables": [{"name",
// "description", "query" (label_values(...)) or "values" [...], "multi"}],
// "rows": [{"title", "panels": [{"id", "ray" (the ids of the panels of Ray's
// dashboards it stands for), "title", "unit" (Grafana's), "description",
// "stack", "targets": [{"expr", "legend"}]}]}]}. A target whose legend is
// MAX or MAX + PENDING is drawn as a dashed line over the others.
//
// Thread-safe: no state.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace manta::metrics {

// Under the session directory.
inline constexpr char kGrafanaDashboardsDir[] = "metrics/grafana/dashboards";

// A definition as built into the binary (dashboard/grafana/<name>.json).
struct GrafanaDefinition {
  std::string_view name;  // "default", "train", "serve"
  std::string_view content_type;
  std::string_view bytes;
};
const std::vector<GrafanaDefinition>& GrafanaDefinitions();

struct GrafanaDashboard {
  std::string file_name;  // "default_grafana_dashboard.json"
  nlohmann::json model;   // Grafana's dashboard JSON
};

// Every dashboard, expanded. InternalError names the definition that is
// malformed (the unit tests keep that from shipping).
absl::StatusOr<std::vector<GrafanaDashboard>> GrafanaDashboards();

// Writes every dashboard into `dir` (made if missing), each atomically.
absl::Status WriteGrafanaDashboards(const std::string& dir);

// The metric names a PromQL expression selects: not its label names,
// functions, keywords, durations or strings.
std::set<std::string> PromqlMetricNames(std::string_view expr);

// The metric names a dashboard's panels and variables read (a Grafana
// dashboard model or a definition).
std::set<std::string> DashboardMetricNames(const nlohmann::json& dashboard);

}  // namespace manta::metrics
