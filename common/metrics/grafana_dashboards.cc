#include "common/metrics/grafana_dashboards.h"

#include <cctype>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"

namespace manta::metrics {
namespace {

using nlohmann::json;

// Grafana's grid is 24 wide: two panels a line, each 8 high under a row 1 high.
constexpr int kPanelWidth = 12;
constexpr int kPanelHeight = 8;
// Rows take ids above every panel's.
constexpr int kFirstRowId = 1000;

json Datasource() { return {{"type", "prometheus"}, {"uid", "${datasource}"}}; }

json AllSelected(bool multi) {
  if (multi) return {{"selected", true}, {"text", {"All"}}, {"value", {"$__all"}}};
  return {{"selected", true}, {"text", "All"}, {"value", "$__all"}};
}

json DatasourceVariable() {
  return {{"name", "datasource"},
          {"label", "Data source"},
          {"type", "datasource"},
          {"query", "prometheus"},
          {"description", "The Prometheus that scrapes the cluster."},
          {"current", json::object()},
          {"options", json::array()},
          {"refresh", 1},
          {"regex", ""},
          {"hide", 0}};
}

// A query variable (label_values) or a custom one (a fixed list), with All.
json Variable(const json& v) {
  const bool multi = v.value("multi", false);
  json out = {{"name", v.at("name")},
              {"description", v.value("description", "")},
              {"includeAll", true},
              {"allValue", ".+"},
              {"multi", multi},
              {"current", AllSelected(multi)},
              {"hide", 0}};
  if (v.contains("values")) {
    json options = json::array({{{"selected", true}, {"text", "All"}, {"value", "$__all"}}});
    std::string query;
    for (const json& value : v.at("values")) {
      options.push_back({{"selected", false}, {"text", value}, {"value", value}});
      absl::StrAppend(&query, query.empty() ? "" : ",", value.get<std::string>());
    }
    out.update({{"type", "custom"}, {"query", query}, {"options", std::move(options)}});
    return out;
  }
  const std::string query = v.at("query").get<std::string>();
  out.update({{"type", "query"},
              {"datasource", Datasource()},
              {"definition", query},
              {"query", {{"query", query}, {"refId", "PrometheusVariableQueryEditor-VariableQuery"}}},
              {"refresh", 2},  // on every change of the time range
              {"sort", 1},
              {"regex", ""},
              {"options", json::array()}});
  return out;
}

// MAX and MAX + PENDING are drawn as dashed lines over the stacked series.
json DashedLine(const std::string& legend, const std::string& color) {
  return {{"matcher", {{"id", "byName"}, {"options", legend}}},
          {"properties",
           {{{"id", "custom.lineStyle"}, {"value", {{"fill", "dash"}, {"dash", {10, 10}}}}},
            {{"id", "custom.fillOpacity"}, {"value", 0}},
            {{"id", "custom.stacking"}, {"value", {{"mode", "none"}, {"group", "A"}}}},
            {{"id", "color"}, {"value", {{"mode", "fixed"}, {"fixedColor", color}}}}}}};
}

json Panel(const json& p, int x, int y) {
  const bool stack = p.value("stack", false);
  json targets = json::array(), overrides = json::array();
  for (const json& t : p.at("targets")) {
    const std::string legend = t.at("legend").get<std::string>();
    // refIds A, B, ... in order.
    targets.push_back({{"refId", std::string(1, static_cast<char>('A' + targets.size()))},
                       {"datasource", Datasource()},
                       {"expr", t.at("expr")},
                       {"legendFormat", legend},
                       {"range", true}});
    if (legend == "MAX") overrides.push_back(DashedLine(legend, "#1F60C4"));
    if (legend == "MAX + PENDING") overrides.push_back(DashedLine(legend, "#777777"));
  }
  json custom = {{"drawStyle", "line"},
                 {"lineWidth", 1},
                 {"fillOpacity", stack ? 10 : 0},
                 {"showPoints", "never"},
                 {"spanNulls", true},
                 {"stacking", {{"mode", stack ? "normal" : "none"}, {"group", "A"}}}};
  return {
      {"id", p.at("id")},
      {"type", "timeseries"},
      {"title", p.at("title")},
      {"description", p.value("description", "")},
      {"datasource", Datasource()},
      {"gridPos", {{"h", kPanelHeight}, {"w", kPanelWidth}, {"x", x}, {"y", y}}},
      {"fieldConfig",
       {{"defaults", {{"unit", p.at("unit")}, {"custom", std::move(custom)}}}, {"overrides", std::move(overrides)}}},
      {"options",
       {{"legend",
         {{"showLegend", true}, {"displayMode", "table"}, {"placement", "bottom"}, {"calcs", {"lastNotNull"}}}},
        {"tooltip", {{"mode", "multi"}, {"sort", "desc"}}}}},
      {"targets", std::move(targets)}};
}

// Throws json::exception where the definition lacks a field or has the
// wrong type.
GrafanaDashboard Expand(const json& def) {
  json variables = json::array({DatasourceVariable()});
  for (const json& v : def.value("variables", json::array())) variables.push_back(Variable(v));
  json panels = json::array();
  int y = 0, row_id = kFirstRowId;
  for (const json& row : def.at("rows")) {
    panels.push_back({{"id", row_id++},
                      {"type", "row"},
                      {"title", row.at("title")},
                      {"collapsed", false},
                      {"gridPos", {{"h", 1}, {"w", 2 * kPanelWidth}, {"x", 0}, {"y", y}}},
                      {"panels", json::array()}});
    y += 1;
    int index = 0;
    for (const json& p : row.at("panels")) {
      panels.push_back(Panel(p, (index % 2) * kPanelWidth, y + (index / 2) * kPanelHeight));
      ++index;
    }
    y += (index + 1) / 2 * kPanelHeight;
  }
  json model = {{"title", def.at("title")},
                {"uid", def.at("uid")},
                {"description", def.value("description", "")},
                {"tags", {"manta"}},
                {"editable", true},
                {"graphTooltip", 1},  // a shared crosshair
                {"schemaVersion", 39},
                {"version", 1},
                {"refresh", "30s"},
                {"time", {{"from", "now-30m"}, {"to", "now"}}},
                {"timezone", ""},
                {"annotations",
                 {{"list",
                   {{{"builtIn", 1},
                     {"datasource", {{"type", "grafana"}, {"uid", "-- Grafana --"}}},
                     {"enable", true},
                     {"hide", true},
                     {"iconColor", "rgba(0, 211, 255, 1)"},
                     {"name", "Annotations & Alerts"},
                     {"type", "dashboard"}}}}}},
                {"templating", {{"list", std::move(variables)}}},
                {"panels", std::move(panels)}};
  return {def.at("file").get<std::string>(), std::move(model)};
}

bool IdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IdentifierPart(char c) { return IdentifierStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Past the string literal that starts at `i`.
size_t SkipString(std::string_view e, size_t i) {
  const char quote = e[i++];
  while (i < e.size() && e[i] != quote) i += (e[i] == '\\' && quote != '`') ? 2 : 1;
  return i + 1;
}

// Past the bracket that closes the one at `i`, strings inside skipped.
size_t SkipGroup(std::string_view e, size_t i) {
  const char open = e[i], close = open == '{' ? '}' : open == '[' ? ']' : ')';
  int depth = 0;
  while (i < e.size()) {
    const char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(e, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return i;
}

void AddLabelValuesMetric(const std::string& query, std::set<std::string>& names) {
  // label_values(selector, label): the selector's; label_values(label) has none.
  const std::string kPrefix = "label_values(";
  if (!absl::StartsWith(query, kPrefix)) return;
  const size_t comma = query.rfind(',');
  if (comma == std::string::npos) return;
  for (const std::string& name : PromqlMetricNames(query.substr(kPrefix.size(), comma - kPrefix.size()))) {
    names.insert(name);
  }
}

void CollectNames(const json& node, std::set<std::string>& names) {
  if (node.is_array()) {
    for (const json& child : node) CollectNames(child, names);
    return;
  }
  if (!node.is_object()) return;
  for (const auto& [key, value] : node.items()) {
    if (key == "expr" && value.is_string()) {
      for (const std::string& name : PromqlMetricNames(value.get<std::string>())) names.insert(name);
    } else if (key == "query" && value.is_string()) {
      AddLabelValuesMetric(value.get<std::string>(), names);
    } else {
      CollectNames(value, names);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<GrafanaDashboard>> GrafanaDashboards() {
  std::vector<GrafanaDashboard> out;
  for (const GrafanaDefinition& d : GrafanaDefinitions()) {
    json def = json::parse(d.bytes, nullptr, /*allow_exceptions=*/false);
    if (def.is_discarded())
      return absl::InternalError(absl::StrCat("grafana/", std::string(d.name), ".json is not JSON"));
    try {
      out.push_back(Expand(def));
    } catch (const json::exception& e) {
      return absl::InternalError(absl::StrCat("grafana/", std::string(d.name), ".json: ", e.what()));
    }
  }
  return out;
}

absl::Status WriteGrafanaDashboards(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<GrafanaDashboard> dashboards, GrafanaDashboards());
  RETURN_IF_ERROR(MakeDirs(dir));
  for (const GrafanaDashboard& d : dashboards) {
    RETURN_IF_ERROR(WriteFileAtomic(dir + "/" + d.file_name, d.model.dump(2) + "\n"));
  }
  return absl::OkStatus();
}

std::set<std::string> PromqlMetricNames(std::string_view e) {
  // Words that are never metric names here: keywords, and the aggregations
  // (which need not be followed by their parenthesis: "sum by (x) (...)").
  static const absl::flat_hash_set<std::string_view> kKeywords = {
      "and",        "or",           "unless",  "bool", "offset",   "by",  "without", "on",     "ignoring",
      "group_left", "group_right",  "sum",     "min",  "max",      "avg", "group",   "stddev", "stdvar",
      "count",      "count_values", "bottomk", "topk", "quantile", "inf", "nan",     "atan2"};
  // Keywords followed by a list of label names.
  static const absl::flat_hash_set<std::string_view> kLabelLists = {"by",       "without",    "on",
                                                                    "ignoring", "group_left", "group_right"};
  std::set<std::string> names;
  size_t i = 0;
  while (i < e.size()) {
    const char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(e, i);
    } else if (c == '{' || c == '[') {
      i = SkipGroup(e, i);  // label matchers; a range or subquery's durations
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < e.size() && std::isdigit(e[i + 1]))) {
      while (i < e.size() && (IdentifierPart(e[i]) || e[i] == '.')) ++i;  // 1e6, 0.5, 5m
    } else if (IdentifierStart(c)) {
      const size_t start = i;
      while (i < e.size() && IdentifierPart(e[i])) ++i;
      const std::string_view word = e.substr(start, i - start);
      size_t next = i;
      while (next < e.size() && std::isspace(static_cast<unsigned char>(e[next]))) ++next;
      const bool call = next < e.size() && e[next] == '(';
      if (call && kLabelLists.contains(word)) {
        i = SkipGroup(e, next);
      } else if (!call && !kKeywords.contains(word)) {
        names.emplace(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

std::set<std::string> DashboardMetricNames(const json& dashboard) {
  std::set<std::string> names;
  CollectNames(dashboard, names);
  return names;
}

}  // namespace manta::metrics
