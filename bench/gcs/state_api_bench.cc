// bench_state_api: the dashboard's State API over a large cluster's tables.
//
// A real gcs_server with N simulated raylets (SimulatedRaylets) and A actors
// created over the real RPCs (TableFiller), then the real `dashboard`
// process on that GCS. Measured, one request after another with the token:
// GET /api/v0/actors?limit=100, GET /api/v0/nodes?limit=100 and GET
// /api/cluster_status (the overview's full load), p50 and p99 each. The
// baseline of each is the GCS read beneath it, made over gRPC from this
// process in the same run (ListActors of the first 100, GetAllNodeInfo of
// every node, the two calls of `manta status`): the ratio is what HTTP, the
// JSON shapes and the query add. Also the read of every actor, which a
// filtered actor list makes.
//
// The web page: its full load as a browser makes it (the page, its script,
// styles and uPlot, the sign-in check, the overview's status and the first
// page of 200 nodes), beside the gRPC reads beneath it. And metrics: the
// GCS's CPU while scraped once a second (its /metrics reads every table),
// beside its CPU idle over the same time, and one scrape's latency.
//
//   bench_state_api [--nodes=2000 --actors=10000 --requests=50 --scrape-seconds=20] [--quick] [--json FILE]
//
// Timings are reported, never asserted.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/common/cluster.h"
#include "bench/common/proc_stats.h"
#include "bench/common/report.h"
#include "bench/gcs/gcs_head.h"
#include "bench/gcs/sim_raylets.h"
#include "bench/gcs/table_filler.h"
#include "common/file_util.h"
#include "common/process.h"
#include "common/session.h"
#include "common/status.h"
#include "gcs/client/sync_gcs_client.h"
#include "nlohmann/json.hpp"

namespace manta::bench {
namespace {

using Clock = std::chrono::steady_clock;

void Progress(const std::string& line) {
  std::fprintf(stderr, "[bench_state_api] %s\n", line.c_str());
  std::fflush(stderr);
}

// `runs` calls of `call`, one after another; each one's milliseconds.
absl::StatusOr<std::vector<double>> Time(int runs, const std::function<absl::Status()>& call) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    RETURN_IF_ERROR(call());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return ms;
}

// The dashboard on `head`'s session; its port.
absl::StatusOr<std::pair<pid_t, int>> StartDashboard(const GcsHead& head) {
  SessionPaths session{head.session_dir()};
  const std::string ready = session.ready() + "/dashboard.json";
  SpawnOptions opts;
  opts.executable = head.bin() + "/dashboard";
  opts.args = {"--port=0",
               "--session_dir=" + head.session_dir(),
               "--gcs_address=" + head.address(),
               "--token_file=" + session.token(),
               "--ready_file=" + ready,
               "--log_file=" + session.logs() + "/dashboard.log"};
  opts.log_file = session.logs() + "/dashboard.out";
  opts.kill_with_parent = true;
  ASSIGN_OR_RETURN(pid_t pid, SpawnDaemon(opts));
  ASSIGN_OR_RETURN(std::string text,
                   WaitForFile(ready, absl::Now() + absl::Seconds(20), pid, session.logs() + "/dashboard.log"));
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json["port"].is_number_integer()) {
    return absl::InternalError("the dashboard wrote an unreadable ready file: " + text);
  }
  return std::make_pair(pid, json["port"].get<int>());
}

struct Config {
  int nodes = 2000;
  int actors = 10000;
  int requests = 50;
  int scrape_seconds = 20;
  std::string json;
};

// The GCS's metrics port, from its ready file.
absl::StatusOr<int> GcsMetricsPort(const GcsHead& head) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(SessionPaths{head.session_dir()}.ready() + "/gcs_server.json"));
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json["metrics_port"].is_number_integer() || json["metrics_port"].get<int>() <= 0) {
    return absl::InternalError("the GCS serves no metrics: " + text);
  }
  return json["metrics_port"].get<int>();
}

// The GCS's CPU seconds over `seconds`, scraped once a second (or not at
// all); the scrapes' milliseconds.
absl::StatusOr<double> GcsCpu(const GcsHead& head, int port, int seconds, bool scrape, std::vector<double>* ms) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer " + head.token()}};
  const double before = CpuSeconds(head.pid());
  const auto start = Clock::now();
  for (int i = 0; i < seconds; ++i) {
    if (scrape) {
      const auto t0 = Clock::now();
      auto res = client.Get("/metrics", auth);
      if (!res || res->status != 200) return absl::InternalError("a scrape of the GCS failed");
      ms->push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::this_thread::sleep_until(start + std::chrono::seconds(i + 1));
  }
  return CpuSeconds(head.pid()) - before;
}

// A browser's first load of the page: its files, the sign-in check, the
// overview and the first page of nodes.
absl::Status LoadPage(const std::function<absl::Status(const std::string&)>& get) {
  for (const char* path :
       {"/", "/static/app.js", "/static/app.css", "/static/uPlot.iife.min.js", "/static/uPlot.min.css",
        "/api/gcs_healthz", "/api/cluster_status", "/api/v0/nodes?limit=200&offset=0"}) {
    RETURN_IF_ERROR(get(path));
  }
  return absl::OkStatus();
}

// The web page's load and the GCS's cost of a scrape a second.
absl::Status MeasurePageAndScrapes(const Config& cfg, const GcsHead& head, gcs::SyncGcsClient& gcs,
                                   const std::function<absl::Status(const std::string&)>& get, Report& report) {
  RETURN_IF_ERROR(LoadPage(get));  // warm
  ASSIGN_OR_RETURN(std::vector<double> page, Time(cfg.requests, [&] { return LoadPage(get); }));
  ASSIGN_OR_RETURN(std::vector<double> beneath, Time(cfg.requests, [&]() -> absl::Status {
                     RETURN_IF_ERROR(head.TimeStatusCalls(1).status());
                     return gcs
                         .Call<rpc::GetAllNodeInfoReply>([](gcs::GcsClient& c, auto done) {
                           c.GetAllNodeInfo(rpc::GetAllNodeInfoRequest(), std::move(done));
                         })
                         .status();
                   }));
  report.Add("page_full_load_p50", Quantile(page, 0.5), "ms", Quantile(beneath, 0.5));
  report.Add("page_full_load_p99", Quantile(page, 0.99), "ms", Quantile(beneath, 0.99));
  Progress(absl::StrCat("page full load: p50 ", Quantile(page, 0.5),
                        " ms (gRPC reads beneath: ", Quantile(beneath, 0.5), " ms)"));
  ASSIGN_OR_RETURN(int port, GcsMetricsPort(head));
  std::vector<double> scrapes;
  ASSIGN_OR_RETURN(double idle, GcsCpu(head, port, cfg.scrape_seconds, /*scrape=*/false, nullptr));
  ASSIGN_OR_RETURN(double scraped, GcsCpu(head, port, cfg.scrape_seconds, /*scrape=*/true, &scrapes));
  const double percent = 100.0 * scraped / cfg.scrape_seconds;
  report.Add("gcs_cpu_scraped_1hz", percent, "% of a core", 100.0 * idle / cfg.scrape_seconds);
  report.Add("gcs_cpu_per_scrape", 1000.0 * (scraped - idle) / cfg.scrape_seconds, "ms");
  report.Add("gcs_scrape_p50", Quantile(scrapes, 0.5), "ms");
  Progress(absl::StrCat("GCS CPU scraped once a second: ", percent, "% (idle: ", 100.0 * idle / cfg.scrape_seconds,
                        "%); a scrape takes ", Quantile(scrapes, 0.5), " ms"));
  return absl::OkStatus();
}

absl::Status Run(const Config& cfg, Report& report) {
  // Declared first, destroyed last: the GCS stops first, ending held polls.
  std::unique_ptr<SimulatedRaylets> sim;
  ASSIGN_OR_RETURN(auto head, GcsHead::Start(BinDir(), {"--metrics_export_port=0"}));
  const int cpus = (cfg.actors + cfg.nodes - 1) / cfg.nodes + 1;
  ASSIGN_OR_RETURN(ResourceSet offer, ResourceSet::FromMap({{"CPU", static_cast<double>(cpus)}, {"memory", 16e9}}));
  ASSIGN_OR_RETURN(sim, SimulatedRaylets::Start({cfg.nodes, offer, head->address(), head->token(), true,
                                                 head->bin() + "/bench_gcs_sim_workers", head->session_dir()}));
  RETURN_IF_ERROR(sim->RegisterAll(absl::Minutes(5)));
  RETURN_IF_ERROR(sim->WaitReported(absl::Minutes(2)));
  Progress(absl::StrCat(cfg.nodes, " nodes registered"));
  TableFiller filler(head->address(), head->token());
  RETURN_IF_ERROR(filler.AddJob());
  RETURN_IF_ERROR(filler.CreateActors(cfg.actors, /*cpus=*/1, absl::Minutes(20)));
  Progress(absl::StrCat(cfg.actors, " actors ALIVE"));

  ASSIGN_OR_RETURN(auto dashboard, StartDashboard(*head));
  httplib::Client http("127.0.0.1", dashboard.second);
  http.set_read_timeout(60, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer " + head->token()}};
  auto get = [&](const std::string& path) -> absl::Status {
    auto res = http.Get(path, auth);
    if (!res || res->status != 200) {
      return absl::InternalError(absl::StrCat(
          "GET ", path, ": ", res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error())));
    }
    return absl::OkStatus();
  };
  auto gcs = gcs::SyncGcsClient::Connect(head->address(), head->token(), absl::Seconds(30));

  struct Route {
    std::string metric, path;
    std::function<absl::Status(gcs::SyncGcsClient&)> baseline;
  };
  const std::vector<Route> routes = {
      {"api_actors_limit100", "/api/v0/actors?limit=100",
       [](gcs::SyncGcsClient& g) {
         rpc::ListActorsRequest first100;
         first100.set_limit(100);
         return g
             .Call<rpc::ListActorsReply>(
                 [first100](gcs::GcsClient& c, auto done) { c.ListActors(first100, std::move(done)); })
             .status();
       }},
      {"api_nodes_limit100", "/api/v0/nodes?limit=100",
       [](gcs::SyncGcsClient& g) {
         return g
             .Call<rpc::GetAllNodeInfoReply>(
                 [](gcs::GcsClient& c, auto done) { c.GetAllNodeInfo(rpc::GetAllNodeInfoRequest(), std::move(done)); })
             .status();
       }},
      {"api_cluster_status", "/api/cluster_status", nullptr},
  };
  for (const Route& r : routes) {
    RETURN_IF_ERROR(get(r.path));  // warm: connections, first reads
    ASSIGN_OR_RETURN(std::vector<double> api, Time(cfg.requests, [&] { return get(r.path); }));
    std::vector<double> base;
    if (r.baseline) {
      ASSIGN_OR_RETURN(base, Time(cfg.requests, [&] { return r.baseline(*gcs); }));
    } else {
      ASSIGN_OR_RETURN(base, head->TimeStatusCalls(cfg.requests));
    }
    report.Add(r.metric + "_p50", Quantile(api, 0.5), "ms", Quantile(base, 0.5));
    report.Add(r.metric + "_p99", Quantile(api, 0.99), "ms", Quantile(base, 0.99));
    Progress(
        absl::StrCat(r.path, ": p50 ", Quantile(api, 0.5), " ms (gRPC read beneath: ", Quantile(base, 0.5), " ms)"));
  }
  ASSIGN_OR_RETURN(std::vector<double> all, Time(cfg.requests, [&] {
                     return gcs
                         ->Call<rpc::ListActorsReply>([](gcs::GcsClient& c, auto done) {
                           c.ListActors(rpc::ListActorsRequest(), std::move(done));
                         })
                         .status();
                   }));
  report.Add("grpc_list_every_actor_p50", Quantile(all, 0.5), "ms");
  RETURN_IF_ERROR(MeasurePageAndScrapes(cfg, *head, *gcs, get, report));
  TerminateProcess(dashboard.first, absl::Now() + absl::Seconds(5)).IgnoreError();
  head->Stop();  // ends the held polls
  sim->Stop();
  return absl::OkStatus();
}

}  // namespace
}  // namespace manta::bench

int main(int argc, char** argv) {
  manta::bench::Config cfg;
  bool quick = false;
  CLI::App app("The dashboard's State API over a large cluster's tables, beside the GCS reads beneath it.");
  app.add_option("--nodes", cfg.nodes, "Simulated nodes.");
  app.add_option("--actors", cfg.actors, "Actors created on them.");
  app.add_option("--requests", cfg.requests, "Requests per route.");
  app.add_option("--scrape-seconds", cfg.scrape_seconds, "Seconds the GCS is measured idle, then scraped each second.");
  app.add_flag("--quick", quick, "A few nodes and actors: a smoke run.");
  app.add_option("--json", cfg.json, "Write the figures here as JSON.");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    cfg.nodes = 20;
    cfg.actors = 50;
    cfg.requests = 5;
    cfg.scrape_seconds = 2;
  }
  manta::bench::Report report;
  absl::Status s = manta::bench::Run(cfg, report);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_state_api: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  report.Print();
  if (!cfg.json.empty()) {
    if (absl::Status w = report.WriteJson(cfg.json); !w.ok()) {
      std::fprintf(stderr, "bench_state_api: %s\n", std::string(w.message()).c_str());
      return 1;
    }
  }
  return 0;
}
