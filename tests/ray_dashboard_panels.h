// The panels of Ray's own Grafana dashboards, as data: each panel's id,
// title and the PromQL of its targets (its lines) exactly as Ray's
// dashboard definitions write them, Python format braces and Grafana
// template variables included:
//
//   default_dashboard_panels.py at ray-project/ray@008813f15de064132596e562334f090323b289eb (29 panels)
//   train_dashboard_panels.py   at ray-project/ray@b25b6caf71bdc17f1d7ff45c5ccb08cf8d714d56 (13 panels)
//
// PanelQuery() expands a target as Ray and Grafana do: {global_filters}
// becomes the dashboard's standard filters, doubled braces single ones, and
// every template variable its "All" value (the allValue regex of Ray's
// dashboard JSON: .+ or .*). MetricsTest evaluates each against a real
// Prometheus scraping a live cluster.
#pragma once

#include <string>
#include <vector>

namespace manta::testing {

struct RayPanel {
  enum Dashboard { kDefault, kTrain };
  Dashboard dashboard;
  int id;
  const char* title;
  std::vector<const char*> targets;
};

// MAX_CPUS, PENDING_CPUS and max_plus_pending() of default_dashboard_panels.py, composed as its f-strings do.
#define RAY_MAX_CPUS R"(sum(autoscaler_cluster_resources{{resource="CPU",{global_filters}}}))"
#define RAY_PENDING_CPUS R"(sum(autoscaler_pending_resources{{resource="CPU",{global_filters}}}))"
#define RAY_MAX_GPUS R"(sum(autoscaler_cluster_resources{{resource="GPU",{global_filters}}}))"
#define RAY_PENDING_GPUS R"(sum(autoscaler_pending_resources{{resource="GPU",{global_filters}}}))"
#define RAY_MAX_PLUS_PENDING(max, pending) "(" max " or vector(0)) + (" pending " or vector(0))"

// A table, one panel to a row as Ray writes them, laid out by hand.
// clang-format off
inline const std::vector<RayPanel>& RayDashboardPanels() {
  static const auto* panels = new std::vector<RayPanel>{
      // ---- default_dashboard_panels.py ----
      {RayPanel::kDefault, 26, "Scheduler Task State",
       {R"(sum(max_over_time(ray_tasks{{IsRetry="0",State=~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}[14d])) by (State) or clamp_min(sum(ray_tasks{{IsRetry="0",State!~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}) by (State), 0))",
        R"(sum(max_over_time(ray_tasks{{IsRetry!="0",State=~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}[14d])) by (State) or clamp_min(sum(ray_tasks{{IsRetry!="0",State!~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}) by (State), 0))"}},
      {RayPanel::kDefault, 35, "Requested Live Tasks by Name",
       {R"(clamp_min(sum(ray_tasks{{IsRetry="0",State!~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}) by (Name), 0))",
        R"(clamp_min(sum(ray_tasks{{IsRetry!="0",State!~"FINISHED|FAILED",instance=~"$Instance",{global_filters}}}) by (Name), 0))"}},
      {RayPanel::kDefault, 38, "Running Tasks by Name",
       {R"(clamp_min(sum(ray_tasks{{IsRetry="0",State=~"RUNNING*",instance=~"$Instance",{global_filters}}}) by (Name), 0))",
        R"(clamp_min(sum(ray_tasks{{IsRetry!="0",State=~"RUNNING*",instance=~"$Instance",{global_filters}}}) by (Name), 0))"}},
      {RayPanel::kDefault, 33, "Scheduler Actor State",
       {R"(sum(ray_actors{{Source="gcs",{global_filters}}}) by (State))"}},
      {RayPanel::kDefault, 42, "Live Actor State",
       {R"(sum(ray_actors{{Source="executor",NodeAddress=~"$Instance",{global_filters}}}) by (State))"}},
      {RayPanel::kDefault, 36, "Live Actors by Name",
       {R"(sum(ray_actors{{State!="DEAD",Source="executor",NodeAddress=~"$Instance",{global_filters}}}) by (Name))"}},
      {RayPanel::kDefault, 27, "Scheduler CPUs (logical slots)",
       {R"(sum(ray_resources{{Name="CPU",State="USED",instance=~"$Instance",{global_filters}}}) by (instance))",
        R"(sum(ray_resources{{Name="CPU",instance=~"$Instance",{global_filters}}}))",
        "(" RAY_MAX_PLUS_PENDING(RAY_MAX_CPUS, RAY_PENDING_CPUS) " and " RAY_MAX_PLUS_PENDING(
            RAY_MAX_CPUS, RAY_PENDING_CPUS) " > (" RAY_MAX_CPUS " or vector(0)))"}},
      {RayPanel::kDefault, 29, "Object Store Memory",
       {R"(sum(ray_object_store_memory{{instance=~"$Instance",{global_filters}}}) by (Location))",
        R"(sum(ray_resources{{Name="object_store_memory",instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 28, "Scheduler GPUs (logical slots)",
       {R"(sum(ray_resources{{Name="GPU",State="USED",instance=~"$Instance",{global_filters}}}) by (instance))",
        R"(sum(ray_resources{{Name="GPU",instance=~"$Instance",{global_filters}}}))",
        "(" RAY_MAX_PLUS_PENDING(RAY_MAX_GPUS, RAY_PENDING_GPUS) " and " RAY_MAX_PLUS_PENDING(
            RAY_MAX_GPUS, RAY_PENDING_GPUS) " > (" RAY_MAX_GPUS " or vector(0)))"}},
      {RayPanel::kDefault, 40, "Scheduler Placement Groups",
       {R"(sum(ray_placement_groups{{{global_filters}}}) by (State))"}},
      {RayPanel::kDefault, 2, "Node CPU (hardware utilization)",
       {R"(sum(ray_node_cpu_utilization{{instance=~"$Instance", IsHeadNode="false", {global_filters}}} * ray_node_cpu_count{{instance=~"$Instance",{global_filters}}} / 100) by (instance))",
        R"(sum(ray_node_cpu_utilization{{instance=~"$Instance", IsHeadNode="true", {global_filters}}} * ray_node_cpu_count{{instance=~"$Instance",{global_filters}}} / 100) by (instance))",
        R"(sum(ray_node_cpu_count{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 8, "Node GPU (hardware utilization)",
       {R"(sum(ray_node_gpus_utilization{{instance=~"$Instance", IsHeadNode="false", {global_filters}}} / 100) by (instance, GpuIndex, GpuDeviceName))",
        R"(sum(ray_node_gpus_utilization{{instance=~"$Instance", IsHeadNode="true", {global_filters}}} / 100) by (instance, GpuIndex, GpuDeviceName))",
        R"(sum(ray_node_gpus_available{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 6, "Node Disk",
       {R"(sum(ray_node_disk_usage{{instance=~"$Instance", IsHeadNode="false", {global_filters}}}) by (instance))",
        R"(sum(ray_node_disk_usage{{instance=~"$Instance", IsHeadNode="true", {global_filters}}}) by (instance))",
        R"(sum(ray_node_disk_free{{instance=~"$Instance",{global_filters}}}) + sum(ray_node_disk_usage{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 32, "Node Disk IO Speed",
       {R"(sum(ray_node_disk_io_write_speed{{instance=~"$Instance", IsHeadNode="false", {global_filters}}}) by (instance))",
        R"(sum(ray_node_disk_io_write_speed{{instance=~"$Instance", IsHeadNode="true", {global_filters}}}) by (instance))",
        R"(sum(ray_node_disk_io_read_speed{{instance=~"$Instance", IsHeadNode="false", {global_filters}}}) by (instance))",
        R"(sum(ray_node_disk_io_read_speed{{instance=~"$Instance", IsHeadNode="true", {global_filters}}}) by (instance))"}},
      {RayPanel::kDefault, 4, "Node Memory (heap + object store)",
       {R"(sum(ray_node_mem_used{{instance=~"$Instance", IsHeadNode="false", {global_filters}}}) by (instance))",
        R"(sum(ray_node_mem_used{{instance=~"$Instance", IsHeadNode="true", {global_filters}}}) by (instance))",
        R"(sum(ray_node_mem_total{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 48, "Node Memory Percentage (heap + object store)",
       {R"(sum(ray_node_mem_used{{instance=~"$Instance", IsHeadNode="false", {global_filters}}}/ray_node_mem_total{{instance=~"$Instance", IsHeadNode="false", {global_filters}}} * 100) by (instance))",
        R"(sum(ray_node_mem_used{{instance=~"$Instance", IsHeadNode="true", {global_filters}}}/ray_node_mem_total{{instance=~"$Instance", IsHeadNode="true", {global_filters}}} * 100) by (instance))"}},
      {RayPanel::kDefault, 44, "Node Out of Memory Failures by Name",
       {R"(sum(ray_memory_manager_worker_eviction_total{{instance=~"$Instance",{global_filters}}}) by (Name, instance))"}},
      {RayPanel::kDefault, 34, "Node Memory by Component",
       {R"((sum(ray_component_rss_mb{{instance=~"$Instance",{global_filters}}} * 1e6) by (Component)) - (sum(ray_component_mem_shared_bytes{{instance=~"$Instance",{global_filters}}}) by (Component)))",
        R"(sum(ray_node_mem_shared_bytes{{instance=~"$Instance",{global_filters}}}))",
        R"(sum(ray_node_mem_total{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 37, "Node CPU by Component",
       {R"(sum(ray_component_cpu_percentage{{instance=~"$Instance",{global_filters}}}) by (Component) / 100)",
        R"(sum(ray_node_cpu_count{{instance=~"$Instance",{global_filters}}}))"}},
      {RayPanel::kDefault, 18, "Node GPU Memory (GRAM)",
       {R"(sum(ray_node_gram_used{{instance=~"$Instance",{global_filters}}} * 1024 * 1024) by (instance, GpuIndex, GpuDeviceName))",
        R"((sum(ray_node_gram_available{{instance=~"$Instance",{global_filters}}}) + sum(ray_node_gram_used{{instance=~"$Instance",{global_filters}}})) * 1024 * 1024)"}},
      {RayPanel::kDefault, 50, "Node TPU Tensorcore Utilization (Percentage)",
       {R"(sum(ray_tpu_tensorcore_utilization{{instance=~"$Instance",{global_filters}}}) by (instance, TpuIndex, TpuDeviceName, TpuType, TpuTopology))"}},
      {RayPanel::kDefault, 51, "Node TPU High Bandwidth Memory Utilization (Percentage)",
       {R"(sum(ray_tpu_memory_bandwidth_utilization{{instance=~"$Instance",{global_filters}}}) by (instance, TpuIndex, TpuDeviceName, TpuType, TpuTopology))"}},
      {RayPanel::kDefault, 52, "Node TPU Duty Cycle (Percentage)",
       {R"(sum(ray_tpu_duty_cycle{{instance=~"$Instance",{global_filters}}}) by (instance, TpuIndex, TpuDeviceName, TpuType, TpuTopology) or vector(0))"}},
      {RayPanel::kDefault, 53, "Node TPU Memory Used",
       {R"(sum(ray_tpu_memory_used{{instance=~"$Instance",{global_filters}}}) by (instance, TpuIndex, TpuDeviceName, TpuType, TpuTopology) or vector(0))",
        R"(sum(ray_tpu_memory_total{{instance=~"$Instance",{global_filters}}}) by (instance, TpuIndex, TpuDeviceName, TpuType, TpuTopology) or vector(0))"}},
      {RayPanel::kDefault, 20, "Node Network",
       {R"(sum(ray_node_network_receive_speed{{instance=~"$Instance",{global_filters}}}) by (instance))",
        R"(sum(ray_node_network_send_speed{{instance=~"$Instance",{global_filters}}}) by (instance))"}},
      {RayPanel::kDefault, 24, "Node Count",
       {R"(sum(autoscaler_active_nodes{{{global_filters}}}) by (NodeType))",
        R"(sum(autoscaler_recently_failed_nodes{{{global_filters}}}) by (NodeType))",
        R"(sum(autoscaler_pending_nodes{{{global_filters}}}) by (NodeType))"}},
      {RayPanel::kDefault, 41, "Cluster Utilization",
       {R"(avg(ray_node_cpu_utilization{{instance=~"$Instance",{global_filters}}}))",
        R"(sum(ray_node_gpus_utilization{{instance=~"$Instance",{global_filters}}}) / on() (sum(ray_node_gpus_available{{instance=~"$Instance",{global_filters}}}) or vector(0)))",
        R"(sum(ray_node_mem_used{{instance=~"$Instance",{global_filters}}}) / on() (sum(ray_node_mem_total{{instance=~"$Instance",{global_filters}}})) * 100)",
        R"(sum(ray_node_gram_used{{instance=~"$Instance",{global_filters}}}) / on() (sum(ray_node_gram_available{{instance=~"$Instance",{global_filters}}}) + sum(ray_node_gram_used{{instance=~"$Instance",{global_filters}}})) * 100)",
        R"(sum(ray_object_store_memory{{instance=~"$Instance",{global_filters}}}) / on() sum(ray_resources{{Name="object_store_memory",instance=~"$Instance",{global_filters}}}) * 100)",
        R"(sum(ray_node_disk_usage{{instance=~"$Instance",{global_filters}}}) / on() (sum(ray_node_disk_free{{instance=~"$Instance",{global_filters}}}) + sum(ray_node_disk_usage{{instance=~"$Instance",{global_filters}}})) * 100)"}},
      {RayPanel::kDefault, 45, "Node GPU by Component",
       {R"(sum(ray_component_gpu_percentage{{{global_filters}}} / 100) by (Component))"}},
      {RayPanel::kDefault, 46, "Node GPU Memory by Component",
       {R"(sum(ray_component_gpu_memory_mb{{{global_filters}}}) by (Component))",
        R"((sum(ray_node_gram_available{{instance=~"$Instance",{global_filters}}}) + sum(ray_node_gram_used{{instance=~"$Instance",{global_filters}}}))*1024*1024)"}},

      // ---- train_dashboard_panels.py ----
      {RayPanel::kTrain, 1, "Controller State",
       {R"(sum(ray_train_controller_state{{ray_train_run_name=~"$TrainRunName", ray_train_run_id=~"$TrainRunId", {global_filters}}}) by (ray_train_run_name, ray_train_controller_state))"}},
      {RayPanel::kTrain, 2, "Controller Operation Time",
       {R"(sum(ray_train_worker_group_start_total_time_s{{ray_train_run_name=~"$TrainRunName", ray_train_run_id=~"$TrainRunId", {global_filters}}}) by (ray_train_run_name))",
        R"(sum(ray_train_worker_group_shutdown_total_time_s{{ray_train_run_name=~"$TrainRunName", ray_train_run_id=~"$TrainRunId", {global_filters}}}) by (ray_train_run_name))"}},
      {RayPanel::kTrain, 3, "Checkpoint Report Time",
       {R"(sum(ray_train_report_total_blocked_time_s{{ray_train_run_name=~"$TrainRunName", ray_train_run_id=~"$TrainRunId", ray_train_worker_world_rank=~"$TrainWorkerWorldRank", ray_train_worker_actor_id=~"$TrainWorkerActorId", {global_filters}}}) by (ray_train_run_name, ray_train_worker_world_rank, ray_train_worker_actor_id))"}},
      {RayPanel::kTrain, 4, "CPU Usage",
       {R"(sum(ray_node_cpu_utilization{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}} * ray_node_cpu_count{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}} / 100) by (instance, RayNodeType))",
        R"(sum(ray_node_cpu_count{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}))"}},
      {RayPanel::kTrain, 5, "Total Memory Usage",
       {R"(sum(ray_node_mem_used{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_mem_total{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}))"}},
      {RayPanel::kTrain, 6, "Memory Allocation Details",
       {R"(sum(ray_node_mem_available{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_mem_shared_bytes{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))"}},
      {RayPanel::kTrain, 7, "GPU Usage",
       {R"(sum(ray_node_gpus_utilization{{instance=~"$Instance", RayNodeType=~"$RayNodeType", GpuIndex=~"$GpuIndex", GpuDeviceName=~"$GpuDeviceName", {global_filters}}} / 100) by (instance, RayNodeType, GpuIndex, GpuDeviceName))",
        R"(sum(ray_node_gpus_available{{instance=~"$Instance", RayNodeType=~"$RayNodeType", GpuIndex=~"$GpuIndex", GpuDeviceName=~"$GpuDeviceName", {global_filters}}}))"}},
      {RayPanel::kTrain, 8, "GPU Memory Usage",
       {R"(sum(ray_node_gram_used{{instance=~"$Instance", RayNodeType=~"$RayNodeType", GpuIndex=~"$GpuIndex", GpuDeviceName=~"$GpuDeviceName", {global_filters}}} * 1024 * 1024) by (instance, RayNodeType, GpuIndex, GpuDeviceName))",
        R"((sum(ray_node_gram_available{{instance=~"$Instance", RayNodeType=~"$RayNodeType", GpuIndex=~"$GpuIndex", GpuDeviceName=~"$GpuDeviceName", {global_filters}}}) + sum(ray_node_gram_used{{instance=~"$Instance", RayNodeType=~"$RayNodeType", GpuIndex=~"$GpuIndex", GpuDeviceName=~"$GpuDeviceName", {global_filters}}})) * 1024 * 1024)"}},
      {RayPanel::kTrain, 9, "Disk Space Usage",
       {R"(sum(ray_node_disk_usage{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_disk_free{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) + sum(ray_node_disk_usage{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}))"}},
      {RayPanel::kTrain, 10, "Disk Throughput",
       {R"(sum(ray_node_disk_io_read_speed{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_disk_io_write_speed{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))"}},
      {RayPanel::kTrain, 11, "Disk Operations",
       {R"(sum(ray_node_disk_read_iops{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_disk_write_iops{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))"}},
      {RayPanel::kTrain, 12, "Network Throughput",
       {R"(sum(ray_node_network_receive_speed{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_network_send_speed{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))"}},
      {RayPanel::kTrain, 13, "Network Total Traffic",
       {R"(sum(ray_node_network_sent{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))",
        R"(sum(ray_node_network_received{{instance=~"$Instance", RayNodeType=~"$RayNodeType", {global_filters}}}) by (instance, RayNodeType))"}},
  };
  return *panels;
}
// clang-format on

#undef RAY_MAX_PLUS_PENDING
#undef RAY_PENDING_GPUS
#undef RAY_MAX_GPUS
#undef RAY_PENDING_CPUS
#undef RAY_MAX_CPUS

// GPU panels: empty on a TPU cluster, as on Ray's. Not evaluated.
inline bool IsGpuPanel(const RayPanel& p) {
  if (p.dashboard == RayPanel::kDefault) return p.id == 8 || p.id == 18 || p.id == 28 || p.id == 45 || p.id == 46;
  return p.id == 7 || p.id == 8;
}

// The lines of the other panels that need not draw, by (dashboard, id,
// target index): the "(retry)" lines, drawn only once a task is retried;
// the MAX + PENDING line, drawn only while work waits for resources; GPU
// lines of a mixed panel; and what reads Ray's plasma store capacity
// (Manta's nodes have no object_store_memory resource).
inline bool ExpectedEmpty(const RayPanel& p, size_t target) {
  if (p.dashboard != RayPanel::kDefault) return false;
  if (p.id == 26 || p.id == 35 || p.id == 38) return target == 1;
  if (p.id == 27) return target == 2;
  if (p.id == 29) return target == 1;
  if (p.id == 41) return target == 1 || target == 3 || target == 4;
  return false;
}

// A target as Grafana sends it with every template variable at "All".
inline std::string PanelQuery(const RayPanel& p, const std::string& expr) {
  auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
    return s;
  };
  // standard_global_filters of each DashboardConfig, and the allValue of
  // each variable in its base JSON.
  const bool train = p.dashboard == RayPanel::kTrain;
  std::string q = replace_all(
      expr, "{global_filters}",
      train ? R"(SessionName=~"$SessionName")" : R"(SessionName=~"$SessionName",ray_io_cluster=~"$Cluster")");
  q = replace_all(replace_all(q, "{{", "{"), "}}", "}");
  const std::vector<std::pair<std::string, std::string>> all = {{"$SessionName", train ? ".*" : ".+"},
                                                                {"$Instance", ".+"},
                                                                {"$Cluster", ".*"},
                                                                {"$RayNodeType", ".+"},
                                                                {"$TrainRunName", ".*"},
                                                                {"$TrainRunId", ".*"},
                                                                {"$TrainWorkerWorldRank", ".*"},
                                                                {"$TrainWorkerActorId", ".*"},
                                                                {"$GpuIndex", ".*"},
                                                                {"$GpuDeviceName", ".*"}};
  for (const auto& [var, value] : all) q = replace_all(q, var, value);
  return q;
}

}  // namespace manta::testing
