// Prometheus metrics end to end: a cluster started by `manta up` serves
// /metrics on every daemon, the head lists them in the session's
// service-discovery file, `promtool check metrics` accepts every endpoint,
// and a real Prometheus server (Debian's) scraping from that file answers
// ray_cluster_active_nodes with the live nodes and ray_actors{State="ALIVE"}
// with the live actors, also after a host dies. Over a training run on the
// slice, every panel of Ray's default and train dashboards but the GPU ones
// draws (each of its targets, as Ray writes it, returns data), and the TPU
// chips' utilisation rises while steps run and falls back when idle.
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/metrics/grafana_dashboards.h"
#include "common/process.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_fixture.h"
#include "tests/ray_dashboard_panels.h"
#include "tests/train_config.h"

namespace manta::testing {
namespace {

constexpr char kSdFile[] = "prom_metrics_service_discovery.json";

bool Installed(const std::string& command) {
  return std::system(("command -v " + command + " >/dev/null 2>&1").c_str()) == 0;
}

// The targets the discovery file lists.
std::vector<std::string> Targets(const std::string& session_dir) {
  auto text = ReadFile(session_dir + "/" + kSdFile);
  if (!text.ok()) return {};
  nlohmann::json file = nlohmann::json::parse(*text, nullptr, false);
  if (!file.is_array() || file.size() != 1 || file[0]["labels"]["job"] != "ray") return {};
  return file[0]["targets"].get<std::vector<std::string>>();
}

// Runs a shell command; its output.
CommandResult Shell(const std::string& command) {
  SpawnOptions o;
  o.executable = "/bin/sh";
  o.args = {"-c", command};
  auto r = RunAndCapture(o, absl::Seconds(30));
  return r.ok() ? *r : CommandResult{};
}

// A raylet `manta up` started for a host other than the head.
pid_t AHostsRaylet(const std::string& session_dir) {
  CommandResult r = Shell("for f in " + session_dir +
                          "/pids/raylet_*.pid; do p=$(cat $f); tr '\\0' ' ' < /proc/$p/cmdline | grep -q -- "
                          "' --head' || echo $p; done");
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) return pid;
  }
  return -1;
}

// What `promtool check metrics` finds wrong with `text` beyond what Ray's
// own names make it say (camelCase labels such as SessionName, Ray's
// ray_node_mem_total and its _ms latencies): one problem a line, or a parse
// error; empty when it accepts the text.
std::string PromtoolProblems(const std::string& text, const std::string& dir) {
  const std::string file = dir + "/scrape.txt";
  if (!WriteFileAtomic(file, text).ok()) return "cannot write " + file;
  CommandResult check = Shell("promtool check metrics < " + file + " 2>&1");
  if (check.exit_code == 0) return "";
  // Ray's names, kept so that dashboards written for Ray read Manta: its
  // camelCase labels (SessionName, Name, State, Method) and these metrics.
  static const char* kRaysNames[] = {
      "label names should be written in 'snake_case' not 'camelCase'",
      "ray_node_mem_total non-counter metrics should not have \"_total\" suffix",
      "ray_node_cpu_count non-histogram and non-summary metrics should not have \"_count\" suffix",
      "ray_grpc_server_req_process_time_ms metric names should not contain abbreviated units",
      "ray_grpc_server_req_process_time_ms use base unit \"seconds\" instead of \"milliseconds\"",
      "ray_component_rss_mb metric names should not contain abbreviated units",
      "ray_tpu_memory_total non-counter metrics should not have \"_total\" suffix"};
  std::string problems;
  for (absl::string_view line : absl::StrSplit(check.out, '\n', absl::SkipEmpty())) {
    bool rays = false;
    for (const char* allowed : kRaysNames) rays |= absl::EndsWith(line, allowed);
    if (!rays) absl::StrAppend(&problems, line, "\n");
  }
  return problems.empty() && check.exit_code == 1 ? "" : problems + check.err;
}

httplib::Result Scrape(const std::string& target, const std::string& token) {
  auto colon = target.rfind(':');
  httplib::Client client(target.substr(0, colon), std::stoi(target.substr(colon + 1)));
  client.set_read_timeout(10);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  return client.Get("/metrics", headers);
}

// Adds the metric names a scrape's text serves: each family's, and a
// histogram's _bucket, _sum and _count.
void AddServedNames(const std::string& text, std::set<std::string>& names) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
    std::vector<std::string> name_type = absl::StrSplit(line, ' ');
    if (name_type.size() != 2) continue;
    names.insert(name_type[0]);
    if (name_type[1] != "histogram") continue;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) names.insert(name_type[0] + suffix);
  }
}

// Manta's Grafana dashboards as the head wrote them into the session: each
// is JSON with panels, and every metric of Ray's (ray_, autoscaler_) that a
// panel or variable reads is one that `served` has. (The model server's
// JetStream names: serve_server_test.)
void ExpectDashboardsReadServedMetrics(const std::string& session, const std::set<std::string>& served) {
  for (const char* file :
       {"default_grafana_dashboard.json", "train_grafana_dashboard.json", "serve_grafana_dashboard.json"}) {
    auto text = ReadFile(session + "/" + metrics::kGrafanaDashboardsDir + "/" + file);
    ASSERT_TRUE(text.ok()) << text.status();
    nlohmann::json model = nlohmann::json::parse(*text, nullptr, false);
    ASSERT_TRUE(model.is_object() && model["panels"].is_array() && !model["panels"].empty()) << file;
    for (const std::string& name : metrics::DashboardMetricNames(model)) {
      if (!absl::StartsWith(name, "ray_") && !absl::StartsWith(name, "autoscaler_")) continue;
      EXPECT_TRUE(served.count(name)) << file << " reads " << name << ", which no daemon serves";
    }
  }
}

// A Prometheus server on loopback scraping the cluster every second.
class PrometheusServer {
 public:
  explicit PrometheusServer(const std::string& dir) : dir_(dir) {}
  ~PrometheusServer() {
    if (pid_ > 0) TerminateProcess(pid_, absl::Now() + absl::Seconds(10)).IgnoreError();
  }

  absl::Status Start(const std::string& sd_file, const std::string& token_file) {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    port_ = *port;
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          << "scrape_configs:\n  - job_name: ray\n"
                          << "    file_sd_configs:\n      - files: ['" << sd_file
                          << "']\n        refresh_interval: 1s\n"
                          << "    authorization:\n      type: Bearer\n      credentials_file: " << token_file << "\n";
    SpawnOptions o;
    o.executable = "/usr/bin/prometheus";
    o.args = {"--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/tsdb",
              absl::StrCat("--web.listen-address=127.0.0.1:", port_), "--log.level=warn"};
    o.log_file = dir_ + "/prometheus.out";
    o.kill_with_parent = true;
    auto pid = SpawnDaemon(o);
    if (!pid.ok()) return pid.status();
    pid_ = *pid;
    return absl::OkStatus();
  }

  // The value of an instant query with one result; -1 when there is none.
  double Query(const std::string& promql) {
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!res || res->status != 200) return -1;
    nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
    if (!answer.is_object() || answer["status"] != "success") return -1;
    const auto& result = answer["data"]["result"];
    if (!result.is_array() || result.size() != 1) return -1;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Waits until `promql` evaluates to `value`; the last value seen.
  double WaitFor(const std::string& promql, double value, absl::Duration timeout) {
    double last = -1;
    Cluster::WaitFor([&] { return (last = Query(promql)) == value; }, timeout);
    return last;
  }

  // How many series `promql` gives points for over [start, now] at 1 s
  // steps, as a Grafana panel asks; -1 when the query fails.
  int SeriesWithData(const std::string& promql, absl::Time start) {
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get("/api/v1/query_range",
                          httplib::Params{{"query", promql},
                                          {"start", absl::StrCat(absl::ToUnixSeconds(start))},
                                          {"end", absl::StrCat(absl::ToUnixSeconds(absl::Now()) + 1)},
                                          {"step", "1"}},
                          httplib::Headers{});
    if (!res || res->status != 200) return -1;
    nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
    if (!answer.is_object() || answer["status"] != "success") return -1;
    int n = 0;
    for (const auto& series : answer["data"]["result"]) n += series["values"].empty() ? 0 : 1;
    return n;
  }

 private:
  const std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The tiny model over the slice's 16 chips, `steps` steps, as a job that
// `manta job submit` starts and does not wait for.
CommandResult SubmitTraining(Cluster& cluster, const std::string& temp, int steps) {
  const std::string dir = cluster.temp_dir() + "/train";
  return cluster.RunManta({"job", "submit", "--temp-dir=" + temp, "--no-wait", "--",
                           std::filesystem::absolute(Cluster::BinDir()).string() + "/maxtext_trainer",
                           "--scheduling_timeout_s=60", kBaseConfig, "model_name=tiny",
                           "steps=" + std::to_string(steps), "per_device_batch_size=1", "ici_fsdp_parallelism=4",
                           "ici_tensor_parallelism=4", "base_output_directory=" + dir, "run_name=panels"});
}

// Evaluates every non-GPU panel of Ray's dashboards over [start, now], as
// Grafana would draw it; prints one line per panel (its id, title, lines,
// whether it draws) and expects each to draw, every line but those no TPU
// cluster draws having data.
void ExpectEveryPanelDraws(PrometheusServer& prometheus, absl::Time start) {
  int drawing = 0, evaluated = 0;
  for (const RayPanel& panel : RayDashboardPanels()) {
    if (IsGpuPanel(panel)) continue;
    ++evaluated;
    const char* dashboard = panel.dashboard == RayPanel::kDefault ? "default" : "train";
    std::string lines;
    bool draws = false;
    for (size_t t = 0; t < panel.targets.size(); ++t) {
      const int series = prometheus.SeriesWithData(PanelQuery(panel, panel.targets[t]), start);
      draws |= series > 0;
      absl::StrAppend(&lines, t == 0 ? "" : " ", series);
      if (!ExpectedEmpty(panel, t)) {
        EXPECT_GT(series, 0) << dashboard << " panel " << panel.id << " (" << panel.title << ") target " << t << ": "
                             << PanelQuery(panel, panel.targets[t]);
      }
    }
    drawing += draws;
    std::cout << "[panel] " << dashboard << " " << panel.id << " | " << panel.title << " | " << panel.targets.size()
              << " | " << (draws ? "yes" : "no") << " | series per line: " << lines << std::endl;
  }
  std::cout << "[panel] " << drawing << " of " << evaluated << " panels draw" << std::endl;
  EXPECT_EQ(drawing, evaluated);
}

TEST(MetricsTest, PrometheusScrapesEveryLiveDaemonWithRaysNames) {
  if (!Installed("prometheus") || !Installed("promtool")) GTEST_SKIP() << "prometheus is not installed";
  Cluster cluster;  // the temp dir, RunManta and teardown on failure
  auto up = cluster.MantaUp("up", {"--tpu=v6e-16", "--slices=1", "--host-cpus=2"});
  ASSERT_TRUE(up.ok()) << up.status();
  const std::string temp = up->temp_dir;
  const std::string session = up->session();
  auto token = ReadFile(session + "/token");
  ASSERT_TRUE(token.ok());
  const std::string secret(absl::StripAsciiWhitespace(*token));

  // The GCS, 5 raylets (the head and 4 hosts) and the dashboard.
  std::vector<std::string> targets;
  ASSERT_TRUE(Cluster::WaitFor([&] { return (targets = Targets(session)).size() == 7; }, absl::Seconds(20)))
      << targets.size() << " targets";
  std::set<std::string> served;
  for (const std::string& target : targets) {
    auto refused = Scrape(target, "");
    ASSERT_TRUE(refused) << target;
    EXPECT_EQ(refused->status, 401) << target << " serves metrics without the token";
    auto res = Scrape(target, secret);
    ASSERT_TRUE(res) << target;
    ASSERT_EQ(res->status, 200) << target;
    EXPECT_TRUE(absl::StrContains(res->body, "# TYPE ray_")) << target;
    EXPECT_EQ(PromtoolProblems(res->body, cluster.temp_dir()), "") << target;
    AddServedNames(res->body, served);
  }
  ExpectDashboardsReadServedMetrics(session, served);

  PrometheusServer prometheus(cluster.temp_dir());
  const absl::Time began = absl::Now();
  ASSERT_TRUE(prometheus.Start(session + "/" + kSdFile, session + "/token").ok());

  // Three actors held by a driver, each running a call until told to end.
  const std::string go = cluster.temp_dir() + "/go";
  auto driver = cluster.RunManta({"job", "submit", "--temp-dir=" + temp, "--no-wait", "--",
                                  std::filesystem::absolute(Cluster::BinDir()).string() + "/runtime_driver",
                                  "held_actors", "3", go});
  ASSERT_EQ(driver.exit_code, 0) << driver.out << driver.err;

  EXPECT_EQ(prometheus.WaitFor("sum(ray_cluster_active_nodes)", 5, absl::Seconds(60)), 5);
  // With the labels Ray's panels filter on: where each runs, from the head.
  EXPECT_EQ(
      prometheus.WaitFor("sum(ray_actors{State=\"ALIVE\",Source=\"gcs\",NodeAddress!=\"\"})", 3, absl::Seconds(60)), 3);
  // Each actor's creation is a task the GCS keeps (ray_tasks counts them in place).
  EXPECT_TRUE(
      Cluster::WaitFor([&] { return prometheus.Query("sum(ray_tasks{IsRetry=\"0\"})") >= 3; }, absl::Seconds(30)));
  EXPECT_EQ(prometheus.WaitFor("count(up{job=\"ray\"} == 1)", 7, absl::Seconds(30)), 7);
  EXPECT_GT(prometheus.WaitFor("sum(ray_resources{Name=\"TPU\",State=\"AVAILABLE\"})", 16, absl::Seconds(30)), 0);
  EXPECT_GT(prometheus.Query("sum(ray_grpc_server_req_finished_total)"), 0);
  EXPECT_GT(prometheus.Query("max(ray_node_mem_total)"), 0);
  EXPECT_EQ(prometheus.Query("count(ray_node_mem_total{IsHeadNode=\"true\",RayNodeType=\"head\"})"), 1);
  EXPECT_EQ(prometheus.Query("count(ray_node_mem_total{IsHeadNode=\"false\",RayNodeType=\"worker\"})"), 4);
  EXPECT_EQ(prometheus.Query("sum(ray_cluster_failed_nodes)"), 0) << "no failures is 0, not no data";

  // The slice's 16 chips, idle; then busy while a training run steps, and
  // idle again once it is done.
  EXPECT_EQ(prometheus.WaitFor("count(ray_tpu_duty_cycle == 0)", 16, absl::Seconds(30)), 16);
  auto train = SubmitTraining(cluster, temp, 15);
  ASSERT_EQ(train.exit_code, 0) << train.out << train.err;
  EXPECT_EQ(prometheus.WaitFor(R"(sum(ray_train_controller_state{ray_train_controller_state="FINISHED"}))", 1,
                               absl::Seconds(60)),
            1);
  const absl::Duration since = absl::Now() - began;
  for (const char* metric : {"ray_tpu_tensorcore_utilization", "ray_tpu_duty_cycle", "ray_tpu_memory_used"}) {
    EXPECT_GT(
        prometheus.Query(absl::StrCat("min(max_over_time(", metric, "[", absl::ToInt64Seconds(since) + 1, "s]))")), 0)
        << metric << ": every chip computed, holding its arrays, while the steps ran";
  }
  EXPECT_EQ(prometheus.WaitFor("sum(ray_tpu_duty_cycle) + sum(ray_tpu_memory_used)", 0, absl::Seconds(30)), 0)
      << "idle chips, holding nothing, once the run is over";

  // A host dies: it leaves the discovery file and the live count.
  const pid_t host = AHostsRaylet(session);
  ASSERT_GT(host, 0);
  kill(host, SIGKILL);
  EXPECT_TRUE(Cluster::WaitFor([&] { return Targets(session).size() == 6; }, absl::Seconds(20)));
  EXPECT_EQ(prometheus.WaitFor("sum(ray_cluster_active_nodes)", 4, absl::Seconds(60)), 4);
  EXPECT_EQ(prometheus.WaitFor("sum(ray_cluster_failed_nodes)", 1, absl::Seconds(30)), 1);

  ExpectEveryPanelDraws(prometheus, began);
  std::ofstream(go) << "go";
  EXPECT_EQ(cluster.RunManta({"down", "--temp-dir=" + temp}, {}, absl::Seconds(60)).exit_code, 0);
}

}  // namespace
}  // namespace manta::testing
