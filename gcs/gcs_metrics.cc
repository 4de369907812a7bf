#include "gcs/gcs_metrics.h"

#include <unistd.h>

#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/metrics/grafana_dashboards.h"
#include "common/metrics/loop_collector.h"
#include "common/status.h"
#include "gcs/actor_manager.h"
#include "gcs/kv_manager.h"
#include "gcs/node_manager.h"
#include "gcs/placement_group_manager.h"
#include "gcs/resource_manager.h"
#include "gcs/task_event_manager.h"
#include "gcs/train_run_manager.h"
#include "nlohmann/json.hpp"

namespace manta::gcs {
namespace {

void Ignore(const absl::Status&) {}

// How a node is counted in ray_cluster_*_nodes: the head, a TPU host by
// its slice's pod type ("tpu-v6e-16"), or a plain worker.
std::string NodeType(const rpc::NodeInfo& node) {
  if (node.is_head()) return "head";
  auto pod = node.labels().find("manta.io/tpu-pod-type");
  if (pod != node.labels().end() && !pod->second.empty()) return "tpu-" + pod->second;
  return "worker";
}

// Samples of one gauge family, by label values.
using Counts = std::map<std::vector<std::string>, double>;

void Emit(metrics::Exposition& out, const std::string& name, const std::string& help,
          const std::vector<std::string>& label_names, const Counts& counts) {
  out.Family(name, "gauge", help);
  for (const auto& [values, value] : counts) {
    metrics::Labels labels;
    for (size_t i = 0; i < label_names.size(); ++i) labels.emplace_back(label_names[i], values[i]);
    out.Sample(name, labels, value);
  }
}

void CollectNodes(NodeManager* nodes, metrics::Exposition& out) {
  // Every node type the cluster has had gets both samples, zero included,
  // so a panel of failed nodes draws 0 rather than no data.
  Counts active, failed;
  nodes->ForEachNode([&](const rpc::NodeInfo& n) {
    const std::vector<std::string> type = {NodeType(n)};
    double& alive = active[type];
    double& died = failed[type];
    if (n.state() == rpc::NodeInfo::ALIVE) {
      alive += 1;
    } else if (!n.death_expected()) {
      died += 1;
    }
  });
  Emit(out, "ray_cluster_active_nodes", "Nodes alive, by node type.", {"node_type"}, active);
  Emit(out, "ray_cluster_failed_nodes", "Nodes that died unexpectedly, by node type.", {"node_type"}, failed);
  // What Ray's autoscaler reports, from what the head knows: Manta starts
  // no nodes itself, so none is ever pending.
  Counts pending;
  for (const auto& [type, n] : active) pending[type] = 0;
  Emit(out, "autoscaler_active_nodes", "Nodes alive, by node type.", {"NodeType"}, active);
  Emit(out, "autoscaler_recently_failed_nodes", "Nodes that died unexpectedly, by node type.", {"NodeType"}, failed);
  Emit(out, "autoscaler_pending_nodes", "Nodes being started, by node type (Manta starts none itself).", {"NodeType"},
       pending);
}

// autoscaler_cluster_resources and autoscaler_pending_resources: the alive
// nodes' plain resources, and what work waiting for a node asks for (queued
// and infeasible leases, placement groups' bundles without a node).
void CollectClusterResources(ResourceManager* resources, PlacementGroupManager* groups, metrics::Exposition& out) {
  rpc::GetClusterResourcesRequest request;
  request.set_totals_only(true);
  request.set_fold(true);
  rpc::GetClusterResourcesReply reply;
  resources->HandleGetClusterResources(request, &reply, Ignore);
  Counts total, pending;
  for (const auto& [name, q] : reply.totals().total()) {
    total[{name}] = q;
    pending[{name}] = 0;
  }
  for (const rpc::ResourceDemand& d : reply.demands()) {
    const double n = static_cast<double>(d.num_ready_requests_queued() + d.num_infeasible_requests_queued());
    for (const auto& [name, q] : d.shape()) pending[{name}] += q * n;
  }
  groups->ForEachGroup([&](const rpc::PlacementGroupInfo& g) {
    if (g.state() != rpc::PlacementGroupInfo::PENDING && g.state() != rpc::PlacementGroupInfo::RESCHEDULING) return;
    for (const rpc::Bundle& b : g.bundles()) {
      if (!b.node_id().empty()) continue;
      for (const auto& [name, q] : b.resources()) pending[{name}] += q;
    }
  });
  Emit(out, "autoscaler_cluster_resources", "Resources of the alive nodes, by name.", {"resource"}, total);
  Emit(out, "autoscaler_pending_resources",
       "Resources that work waiting for a node asks for (queued and infeasible tasks and actors, placement groups "
       "not yet placed), by name.",
       {"resource"}, pending);
}

// Counts by (name, state, one more label) over entries read in place: the
// strings are viewed, not copied, until each distinct key becomes a sample.
class NameStateCounts {
 public:
  void Add(std::string_view name, int state, std::string_view extra) { counts_[{name, state, extra}] += 1; }
  template <typename StateName>
  Counts Done(StateName state_name) const {
    Counts out;
    for (const auto& [key, n] : counts_) {
      const auto& [name, state, extra] = key;
      out[{std::string(name), state_name(state), std::string(extra)}] = n;
    }
    return out;
  }

 private:
  absl::flat_hash_map<std::tuple<std::string_view, int, std::string_view>, double> counts_;
};

// Labels (name, state, node) with `source` appended, into `into`.
void AddSource(const Counts& counts, const std::string& source, Counts* into) {
  for (const auto& [labels, n] : counts) {
    std::vector<std::string> l = labels;
    l.push_back(source);
    (*into)[std::move(l)] = n;
  }
}

// Source is Ray's: "gcs" for the states the head decides; "executor" for
// what alive actors' workers do, as their task events show it (RUNNING_TASK
// while one of its calls runs, else IDLE). `running`: the actors with a
// call running.
void CollectActorsAndGroups(ActorManager* actors, PlacementGroupManager* groups,
                            const absl::flat_hash_set<std::string_view>& running, metrics::Exposition& out) {
  NameStateCounts by_state, by_activity;
  actors->ForEachActor([&](const rpc::ActorInfo& a) {
    by_state.Add(a.class_name(), a.state(), a.address().ip());
    if (a.state() == rpc::ActorInfo::ALIVE) {
      by_activity.Add(a.class_name(), running.contains(a.actor_id()) ? 1 : 0, a.address().ip());
    }
  });
  Counts with_source;
  AddSource(by_state.Done([](int s) { return rpc::ActorInfo::State_Name(static_cast<rpc::ActorInfo::State>(s)); }),
            "gcs", &with_source);
  AddSource(by_activity.Done([](int s) { return std::string(s == 1 ? "RUNNING_TASK" : "IDLE"); }), "executor",
            &with_source);
  Emit(out, "ray_actors", "Actors by class, state, the node they run on and who tells the state.",
       {"Name", "State", "NodeAddress", "Source"}, with_source);
  Counts group_states;
  groups->ForEachGroup(
      [&](const rpc::PlacementGroupInfo& g) { group_states[{rpc::PlacementGroupInfo::State_Name(g.state())}] += 1; });
  Emit(out, "ray_placement_groups", "Placement groups by state.", {"State"}, group_states);
}

// ray_tasks; returns the actors with a call running (views into the table,
// valid until the loop moves on).
absl::flat_hash_set<std::string_view> CollectTasks(TaskEventManager* tasks, metrics::Exposition& out) {
  NameStateCounts by_state;
  absl::flat_hash_set<std::string_view> running;
  tasks->ForEachTask([&](const rpc::TaskEvent& t) {
    by_state.Add(t.name(), t.state(), t.attempt() > 0 ? "1" : "0");
    if (t.type() == rpc::TaskSpec::ACTOR_TASK && t.state() == rpc::TaskEvent::RUNNING) running.insert(t.actor_id());
  });
  Emit(out, "ray_tasks",
       "Tasks by function, state and whether the attempt is a retry (the latest state of each attempt kept).",
       {"Name", "State", "IsRetry"},
       by_state.Done([](int s) { return rpc::TaskEvent::State_Name(static_cast<rpc::TaskEvent::State>(s)); }));
  return running;
}

void CollectTrainRuns(TrainRunManager* runs, metrics::Exposition& out) {
  rpc::ListTrainRunsRequest request;
  request.set_with_metrics(true);
  rpc::ListTrainRunsReply reply;
  runs->HandleListTrainRuns(request, &reply, Ignore);
  Counts states;
  // The latest point's value of each metric a run reports, by Prometheus name.
  const std::vector<std::pair<std::string, std::string>> kPoint = {
      {"ray_train_loss", "loss"},
      {"ray_train_step_time_s", "seconds"},
      {"ray_train_tokens_per_second_per_device", "tokens_per_second_per_device"},
      {"ray_train_tflops_per_device", "tflops_per_device"}};
  std::map<std::string, Counts> points;
  Counts steps, started, shut_down, blocked;
  for (const rpc::TrainRunInfo& run : reply.runs()) {
    started[{run.name(), run.run_id()}] = run.worker_group_start_total_time_s();
    shut_down[{run.name(), run.run_id()}] = run.worker_group_shutdown_total_time_s();
    if (!run.attempts().empty()) {
      for (const rpc::TrainWorkerInfo& w : run.attempts().rbegin()->workers()) {
        blocked[{run.name(), run.run_id(), std::to_string(w.world_rank()), ToHex(w.actor_id())}] =
            w.report_total_blocked_time_s();
      }
    }
    for (int s = rpc::TrainRunInfo::State_MIN; s <= rpc::TrainRunInfo::State_MAX; ++s) {
      if (!rpc::TrainRunInfo::State_IsValid(s)) continue;
      states[{run.name(), rpc::TrainRunInfo::State_Name(static_cast<rpc::TrainRunInfo::State>(s))}] =
          run.state() == s ? 1 : 0;
    }
    if (run.metrics().empty()) continue;
    const rpc::TrainMetricPoint& last = *run.metrics().rbegin();
    steps[{run.name()}] = static_cast<double>(last.step());
    for (const auto& [name, key] : kPoint) {
      auto it = last.metrics().find(key);
      if (it != last.metrics().end()) points[name][{run.name()}] = it->second;
    }
  }
  Emit(out, "ray_train_controller_state", "1 for a training run's current controller state, 0 for the others.",
       {"ray_train_run_name", "ray_train_controller_state"}, states);
  Emit(out, "ray_train_step", "The latest step a training run reported.", {"ray_train_run_name"}, steps);
  Emit(out, "ray_train_worker_group_start_total_time_s",
       "Seconds the run's controller spent reserving and starting worker groups, over all attempts.",
       {"ray_train_run_name", "ray_train_run_id"}, started);
  Emit(out, "ray_train_worker_group_shutdown_total_time_s",
       "Seconds the run's controller spent shutting worker groups down, over all attempts.",
       {"ray_train_run_name", "ray_train_run_id"}, shut_down);
  Emit(out, "ray_train_report_total_blocked_time_s",
       "Seconds each worker of the run's latest attempt waited in its reports for the controller's answer.",
       {"ray_train_run_name", "ray_train_run_id", "ray_train_worker_world_rank", "ray_train_worker_actor_id"}, blocked);
  for (const auto& [name, key] : kPoint) {
    Emit(out, name, "The latest step's " + key + ", as the training run reported it.", {"ray_train_run_name"},
         points[name]);
  }
}

}  // namespace

GcsMetrics::GcsMetrics(GcsMetricsOptions options, EventLoop* loop, Tables tables)
    : options_(std::move(options)),
      loop_(loop),
      tables_(tables),
      registry_(metrics::Labels{{"SessionName", options_.session_name}}),
      server_metrics_(&registry_),
      component_(options_.host) {
  // Scrapes come on the server's threads; the tables live on the loop.
  registry_.AddCollector(metrics::OnLoop(
      loop_, &registry_, alive_, [this](metrics::Exposition& out) { Collect(out); }, kCollectTimeout));
  registry_.AddCollector([this](metrics::Exposition& out) { component_.Collect({{::getpid(), "gcs", true}}, out); });
}

GcsMetrics::~GcsMetrics() { Stop(); }

absl::Status GcsMetrics::Start() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (options_.port < 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(server_, metrics::MetricsServer::Start({.host = options_.host,
                                                           .port = options_.port,
                                                           .token = options_.token,
                                                           .any_port_if_taken = options_.any_port_if_taken},
                                                          &registry_));
  Logger("gcs")->info("metrics on {}:{}", options_.host, server_->port());
  OnTargetsChanged();
  if (!options_.session_dir.empty()) {
    writer_.Submit([dir = options_.session_dir + "/" + metrics::kGrafanaDashboardsDir] {
      if (absl::Status s = metrics::WriteGrafanaDashboards(dir); !s.ok()) {
        Logger("gcs")->warn("cannot write the Grafana dashboards into {}: {}", dir, s.ToString());
      }
    });
  }
  return absl::OkStatus();
}

void GcsMetrics::Stop() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!server_) return;
  server_->Stop();
  writer_.Stop();
  server_.reset();
  // Nothing to scrape here any more.
  if (!options_.session_dir.empty()) {
    nlohmann::json file = nlohmann::json::array();
    file.push_back({{"labels", {{"job", "ray"}}}, {"targets", nlohmann::json::array()}});
    WriteFileAtomic(options_.session_dir + "/" + kServiceDiscoveryFile, file.dump() + "\n").IgnoreError();
  }
}

void GcsMetrics::Collect(metrics::Exposition& out) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  CollectNodes(tables_.nodes, out);
  CollectClusterResources(tables_.resources, tables_.groups, out);
  const absl::flat_hash_set<std::string_view> running = CollectTasks(tables_.tasks, out);
  CollectActorsAndGroups(tables_.actors, tables_.groups, running, out);
  CollectTrainRuns(tables_.train_runs, out);
}

std::string GcsMetrics::DiscoveryJson() {
  rpc::GetAllNodeInfoRequest request;
  request.set_filter_alive(true);
  rpc::GetAllNodeInfoReply reply;
  tables_.nodes->HandleGetAllNodeInfo(request, &reply, Ignore);
  // This GCS: at its bind address, or the head node's when it binds them all.
  std::string own_ip = options_.host;
  nlohmann::json targets = nlohmann::json::array();
  for (const rpc::NodeInfo& n : reply.nodes()) {
    if (n.is_head() && (own_ip == "0.0.0.0" || own_ip == "::")) own_ip = n.node_ip();
    if (n.metrics_export_port() > 0) targets.push_back(absl::StrCat(n.node_ip(), ":", n.metrics_export_port()));
  }
  targets.insert(targets.begin(), absl::StrCat(own_ip, ":", server_->port()));
  if (const std::string* dashboard = tables_.kv->Find(kMetricsKvNamespace, kDashboardMetricsKey)) {
    targets.push_back(*dashboard);
  }
  nlohmann::json file = nlohmann::json::array();
  file.push_back({{"labels", {{"job", "ray"}}}, {"targets", std::move(targets)}});
  return file.dump() + "\n";
}

void GcsMetrics::OnTargetsChanged() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!server_ || options_.session_dir.empty()) return;
  std::string json = DiscoveryJson();
  if (json == written_) return;
  written_ = json;
  writer_.Submit([path = options_.session_dir + "/" + kServiceDiscoveryFile, json = std::move(json)] {
    if (absl::Status s = WriteFileAtomic(path, json); !s.ok()) {
      Logger("gcs")->warn("cannot write {}: {}", path, s.ToString());
    }
  });
}

}  // namespace manta::gcs
