#include "dashboard/state_api.h"

#include <httplib.h>

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/id.h"
#include "dashboard/http_reply.h"
#include "dashboard/state_query.h"
#include "gcs/client/sync_gcs_client.h"
#include "state/gcs_reads.h"
#include "state/list_actors.h"
#include "state/list_format.h"
#include "state/list_placement_groups.h"
#include "state/list_train_runs.h"
#include "state/status_format.h"

namespace manta::dashboard {
namespace {

using nlohmann::json;

// Ray's envelope of a dashboard answer.
json Envelope(const std::string& msg, json data) { return {{"result", true}, {"msg", msg}, {"data", std::move(data)}}; }

QueryParams ParamsOf(const httplib::Request& req) { return QueryParams(req.params.begin(), req.params.end()); }

// The structured form of `manta status`: usage as [used, total] by resource,
// the nodes by state, the demands.
json ClusterStatusJson(const state::ClusterView& view) {
  json usage = json::object();
  for (const state::NodeUsage& u : view.usage) {
    if (!u.node_id.empty()) continue;  // the summary's sums only
    for (const auto& [name, total] : u.total) {
      auto it = u.available.find(name);
      const double available = it == u.available.end() ? 0.0 : it->second;
      usage[name] = json::array({total - available, total});
    }
  }
  json demands = json::array();
  for (const state::DemandView& d : view.demands) {
    demands.push_back({{"shape", d.shape}, {"ready", d.num_ready}, {"infeasible", d.num_infeasible}});
  }
  json active = json::object(), failed = json::array();
  for (const state::NodeView& n : view.nodes) {
    if (n.alive) {
      active["node_" + n.node_id] = 1;
    } else if (!n.death_expected) {
      failed.push_back(json::array({n.node_ip, "node_" + n.node_id}));
    }
  }
  json pending_groups = state::PlacementGroupListJson(view.pending_placement_groups);
  return {{"loadMetricsReport", {{"usage", usage}, {"resourceDemand", demands}, {"pgDemand", pending_groups}}},
          {"autoscalerReport", {{"activeNodes", active}, {"pendingNodes", json::array()}, {"failedNodes", failed}}}};
}

// The node list, each alive node with its available resources too (plain
// names only: what placement groups reserve shows as not available).
json NodesWithAvailable(const state::ClusterView& view) {
  json nodes = state::NodeListJson(view.nodes);
  std::map<std::string, const state::NodeUsage*> usage;
  for (const state::NodeUsage& u : view.usage) usage[u.node_id] = &u;
  for (json& node : nodes) {
    auto it = usage.find(node["node_id"].get<std::string>());
    json available = json::object();
    if (it != usage.end()) {  // an alive node: what is not listed is all in use
      for (const auto& [name, total] : node["resources_total"].items()) {
        auto a = it->second->available.find(name);
        available[name] = a == it->second->available.end() ? 0.0 : a->second;
      }
    }
    node["resources_available"] = std::move(available);
  }
  return nodes;
}

}  // namespace

void StateApi::Register(httplib::Server* server) {
  server->Get("/api/gcs_healthz", [this](const httplib::Request&, httplib::Response& res) {
    auto id = gcs_->Call<rpc::GetClusterIdReply>([](gcs::GcsClient& c, auto done) { c.GetClusterId(std::move(done)); });
    if (!id.ok()) return Text(res, 503, "the GCS cannot be reached: " + std::string(id.status().message()));
    res.set_content("success", "text/plain; charset=utf-8");
  });
  server->Get("/api/cluster_status", [this](const httplib::Request& req, httplib::Response& res) {
    state::ClusterViewOptions options;
    options.summary = true;
    auto summary = state::FetchClusterView(*gcs_, options);
    if (!summary.ok()) return Error(res, summary.status());
    if (req.get_param_value("format") == "1") {
      return Json(res, Envelope("Got formatted cluster status.",
                                {{"clusterStatus", state::FormatStatus(*summary, absl::Now(), absl::UTCTimeZone())}}));
    }
    Json(res, Envelope("Got cluster status.", {{"autoscalingStatus", nullptr},
                                               {"autoscalingError", nullptr},
                                               {"clusterStatus", ClusterStatusJson(*summary)}}));
  });
  // A list route. `fetch(limit, &total)` reads up to `limit` entries (0:
  // all) and how many there are: a query without filters reads only what
  // it returns; one with filters reads every entry and filters here.
  // `columns`: those of the list's entries, a filter on another is refused
  // (before anything is read), whether or not there are entries.
  using Fetch = std::function<absl::StatusOr<json>(int limit, int64_t* total)>;
  auto list = [server](const std::string& path, std::set<std::string> columns, Fetch fetch) {
    server->Get(path, [fetch, columns](const httplib::Request& req, httplib::Response& res) {
      auto query = ParseListQuery(ParamsOf(req));
      if (!query.ok()) return Error(res, query.status());
      if (absl::Status s = CheckFilterColumns(*query, columns); !s.ok()) return Error(res, s);
      const bool pushed = query->filters.empty();
      int64_t total = -1;
      // Without filters the GCS is asked for the page's entries and those before them only.
      auto entries = fetch(pushed ? query->limit + query->offset : 0, &total);
      if (!entries.ok()) return Error(res, entries.status());
      auto answer = AnswerListQuery(*query, *entries, pushed ? total : -1, columns);
      if (!answer.ok()) return Error(res, answer.status());
      Json(res, Envelope("", {{"result", std::move(*answer)}}));
    });
  };
  state::ClusterView one_node;
  one_node.nodes.emplace_back();
  list("/api/v0/nodes", ColumnsOf(NodesWithAvailable(one_node)),
       [this](int limit, int64_t* total) -> absl::StatusOr<json> {
         auto view = state::FetchClusterView(*gcs_, state::ClusterViewOptions());
         if (!view.ok()) return view.status();
         *total = static_cast<int64_t>(view->nodes.size());
         // Only the page's nodes (and those before them) become JSON.
         if (limit > 0 && view->nodes.size() > static_cast<size_t>(limit)) view->nodes.resize(limit);
         return NodesWithAvailable(*view);
       });
  list("/api/v0/actors", ColumnsOf(state::ActorListJson({state::ActorView{}})),
       [this](int limit, int64_t* total) -> absl::StatusOr<json> {
         auto actors = state::FetchActors(*gcs_, limit, total);
         if (!actors.ok()) return actors.status();
         return state::ActorListJson(*actors);
       });
  list("/api/v0/placement_groups", ColumnsOf(state::PlacementGroupListJson({state::PlacementGroupView{}})),
       [this](int limit, int64_t* total) -> absl::StatusOr<json> {
         auto groups = state::FetchPlacementGroups(*gcs_, limit, total);
         if (!groups.ok()) return groups.status();
         return state::PlacementGroupListJson(*groups);
       });
  list("/api/v0/tasks", ColumnsOf(state::TaskListJson({state::TaskView{}})),
       [this](int limit, int64_t* total) -> absl::StatusOr<json> {
         auto tasks = state::FetchTasks(*gcs_, limit);
         if (!tasks.ok()) return tasks.status();
         *total = tasks->total;
         return state::TaskListJson(tasks->tasks);
       });
  server->Get("/api/train/v2/runs/v1", [this](const httplib::Request&, httplib::Response& res) {
    auto runs = state::FetchTrainRuns(*gcs_, 0, /*with_metrics=*/true);
    if (!runs.ok()) return Error(res, runs.status());
    json out = state::TrainRunListJson(*runs);
    std::reverse(out.begin(), out.end());  // newest first, as Ray's
    Json(res, {{"train_runs", std::move(out)}});
  });
}

}  // namespace manta::dashboard
