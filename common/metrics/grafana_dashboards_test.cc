#include "common/metrics/grafana_dashboards.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "common/process.h"
#include "gtest/gtest.h"

namespace manta::metrics {
namespace {

using nlohmann::json;

std::vector<GrafanaDashboard> Dashboards() {
  auto dashboards = GrafanaDashboards();
  EXPECT_TRUE(dashboards.ok()) << dashboards.status();
  return dashboards.ok() ? *dashboards : std::vector<GrafanaDashboard>{};
}

json Definition(std::string_view name) {
  for (const GrafanaDefinition& d : GrafanaDefinitions()) {
    if (d.name == name) return json::parse(d.bytes);
  }
  ADD_FAILURE() << "no definition " << name;
  return json::object();
}

// Every panel that is not a row, of a Grafana model.
std::vector<json> Panels(const json& model) {
  std::vector<json> out;
  for (const json& p : model["panels"]) {
    if (p["type"] != "row") out.push_back(p);
  }
  return out;
}

TEST(GrafanaDashboardsTest, EachExpandsIntoAGrafanaModelWithAGridOfPanels) {
  std::vector<GrafanaDashboard> dashboards = Dashboards();
  ASSERT_EQ(dashboards.size(), 3u);
  std::set<std::string> files, uids;
  for (const GrafanaDashboard& d : dashboards) {
    SCOPED_TRACE(d.file_name);
    EXPECT_TRUE(absl::EndsWith(d.file_name, "_grafana_dashboard.json"));
    EXPECT_TRUE(files.insert(d.file_name).second);
    EXPECT_TRUE(uids.insert(d.model["uid"].get<std::string>()).second);
    EXPECT_EQ(json::parse(d.model.dump()), d.model);
    EXPECT_EQ(d.model["templating"]["list"][0]["type"], "datasource");
    std::set<std::string> variables = {"__rate_interval", "__interval", "__range"};
    for (const json& v : d.model["templating"]["list"]) variables.insert(v["name"].get<std::string>());

    std::set<int> ids;
    std::set<std::pair<int, int>> cells;  // (x, y) of every grid cell a panel covers
    for (const json& p : d.model["panels"]) {
      EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "panel id " << p["id"] << " twice";
      const json& g = p["gridPos"];
      EXPECT_LE(g["x"].get<int>() + g["w"].get<int>(), 24) << p["title"];
      for (int x = g["x"]; x < g["x"].get<int>() + g["w"].get<int>(); ++x) {
        for (int y = g["y"]; y < g["y"].get<int>() + g["h"].get<int>(); ++y) {
          EXPECT_TRUE(cells.insert({x, y}).second) << p["title"] << " overlaps another panel";
        }
      }
    }
    for (const json& p : Panels(d.model)) {
      SCOPED_TRACE(p["title"].get<std::string>());
      EXPECT_EQ(p["type"], "timeseries");
      EXPECT_EQ(p["datasource"]["uid"], "${datasource}");
      EXPECT_FALSE(p["description"].get<std::string>().empty());
      ASSERT_FALSE(p["targets"].empty());
      std::set<std::string> refs;
      for (const json& t : p["targets"]) {
        EXPECT_TRUE(refs.insert(t["refId"].get<std::string>()).second);
        const std::string expr = t["expr"];
        EXPECT_FALSE(PromqlMetricNames(expr).empty()) << expr;
        // Every $Variable it names is the dashboard's or Grafana's own.
        static const std::regex kVariable(R"(\$(\w+))");
        for (std::sregex_iterator m(expr.begin(), expr.end(), kVariable), end; m != end; ++m) {
          EXPECT_TRUE(variables.count((*m)[1].str()) > 0) << (*m)[1].str() << " in " << expr;
        }
      }
    }
  }
}

// Ray's panels by id, at ray-project/ray 008813f15de0
// (python/ray/dashboard/modules/metrics/dashboards/default_dashboard_panels.py)
// and b25b6caf71bd (train_dashboard_panels.py). The GPU-only ones stand
// for a TPU panel each, but for GPU use and GPU memory by component (45, 46),
// which a TPU cluster has no counterpart of.
TEST(GrafanaDashboardsTest, TogetherTheyCoverEveryPanelOfRaysDefaultAndTrainDashboards) {
  const std::set<int> kRayDefault = {26, 35, 38, 33, 42, 36, 27, 29, 28, 40, 2,  8,  6,  32, 4,
                                     48, 44, 34, 37, 18, 50, 51, 52, 53, 20, 24, 41, 45, 46};
  const std::set<int> kGpuOnly = {45, 46};
  const std::set<int> kRayTrain = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  auto covered = [](const json& def) {
    std::set<int> ids;
    for (const json& row : def["rows"]) {
      for (const json& p : row["panels"]) {
        for (const json& id : p.value("ray", json::array())) ids.insert(id.get<int>());
      }
    }
    return ids;
  };
  std::set<int> want;
  for (int id : kRayDefault) {
    if (!kGpuOnly.count(id)) want.insert(id);
  }
  EXPECT_EQ(covered(Definition("default")), want);
  EXPECT_EQ(covered(Definition("train")), kRayTrain);
}

TEST(GrafanaDashboardsTest, BeyondRaysTheyDrawTheTrainersStepsAndTheServersJetStreamFigures) {
  std::map<std::string, std::set<std::string>> names;
  for (const GrafanaDashboard& d : Dashboards()) names[d.file_name] = DashboardMetricNames(d.model);
  for (const char* name : {"ray_train_loss", "ray_train_tokens_per_second_per_device", "ray_train_tflops_per_device",
                           "ray_train_step_time_s"}) {
    EXPECT_TRUE(names["train_grafana_dashboard.json"].count(name)) << name;
  }
  for (const char* name : {"jetstream_time_to_first_token_bucket", "jetstream_time_per_output_token_bucket",
                           "jetstream_slots_used_percentage", "jetstream_request_success_count"}) {
    EXPECT_TRUE(names["serve_grafana_dashboard.json"].count(name)) << name;
  }
  // Each name is one that a scrape test checks against what the daemons
  // serve: ray_ and autoscaler_ (tests/metrics_test.cc), jetstream_ and
  // manta_serve_ (serve/server/server_test.cc).
  for (const auto& [file, in_file] : names) {
    for (const std::string& name : in_file) {
      EXPECT_TRUE(absl::StartsWith(name, "ray_") || absl::StartsWith(name, "autoscaler_") ||
                  absl::StartsWith(name, "jetstream_") || absl::StartsWith(name, "manta_serve_"))
          << name << " in " << file;
    }
  }
}

TEST(GrafanaDashboardsTest, MetricNamesLeaveOutLabelsFunctionsKeywordsAndDurations) {
  using Names = std::set<std::string>;
  EXPECT_EQ(PromqlMetricNames(R"(sum by (ray_train_run_name) (ray_train_loss{ray_train_run_name=~"$Run"}))"),
            Names{"ray_train_loss"});
  EXPECT_EQ(PromqlMetricNames("histogram_quantile(0.99, sum by (le) (rate(a_bucket{id=~\"x}\"}[$__rate_interval])))"),
            Names{"a_bucket"});
  EXPECT_EQ(PromqlMetricNames("sum(a{x=\"1\"} * b / 100) without (ip) + on (instance) group_left (y) c offset 5m"),
            (Names{"a", "b", "c"}));
  EXPECT_EQ(PromqlMetricNames("sum(x) by (State) or max(rss_mb * 1e6) - avg(z[5m:1m]) > bool 0.5"),
            (Names{"x", "rss_mb", "z"}));
  // Variables: label_values' selector, not the label.
  json variables = {{"query", "label_values(ray_node_network_receive_speed{SessionName=~\"$S\"}, instance)"}};
  EXPECT_EQ(DashboardMetricNames(variables), Names{"ray_node_network_receive_speed"});
  EXPECT_EQ(DashboardMetricNames(json{{"query", "head,worker"}}), Names{});
}

// Every query with its variables at "All" is PromQL that Prometheus parses.
TEST(GrafanaDashboardsTest, EveryQueryIsPromqlThatPromtoolAccepts) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool is not installed";
  char dir[] = "/tmp/grafana_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  json rules = json::array();
  int n = 0;
  for (const GrafanaDashboard& d : Dashboards()) {
    for (const json& p : Panels(d.model)) {
      for (const json& t : p["targets"]) {
        static const std::regex kVariable(R"(\$\w+)");
        std::string expr = absl::StrReplaceAll(t["expr"].get<std::string>(), {{"$__rate_interval", "1m"}});
        expr = std::regex_replace(expr, kVariable, ".+");
        rules.push_back({{"record", absl::StrCat("panel_", n++)}, {"expr", expr}});
      }
    }
  }
  // YAML is a superset of JSON.
  const std::string file = std::string(dir) + "/rules.yml";
  ASSERT_TRUE(WriteFileAtomic(file, json{{"groups", {{{"name", "panels"}, {"rules", rules}}}}}.dump()).ok());
  SpawnOptions o;
  o.executable = "/bin/sh";
  o.args = {"-c", "promtool check rules " + file + " 2>&1"};
  auto r = RunAndCapture(o, absl::Seconds(30));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, absl::StrCat("SUCCESS: ", n, " rules found"))) << r->out;
}

TEST(GrafanaDashboardsTest, WritingPutsEachModelInTheDirectoryItMakes) {
  char dir[] = "/tmp/grafana_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/" + kGrafanaDashboardsDir;
  ASSERT_TRUE(WriteGrafanaDashboards(out).ok());
  for (const GrafanaDashboard& d : Dashboards()) {
    auto text = ReadFile(out + "/" + d.file_name);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(json::parse(*text), d.model);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace manta::metrics
