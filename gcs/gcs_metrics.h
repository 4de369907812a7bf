// GcsMetrics: the head's Prometheus endpoint and its service-discovery file.
//
// Owns the GCS's metrics registry, the gRPC server metrics installed on its
// services (ray_grpc_server_req_*), the metrics HTTP server on
// --metrics_export_port, and <session_dir>/prom_metrics_service_discovery.json.
// At each scrape it reads the GCS's tables on the loop and reports, in Ray's
// names: ray_cluster_active_nodes{node_type}, ray_cluster_failed_nodes{node_type},
// what Ray's autoscaler reports from what the head knows
// (autoscaler_active_nodes, _recently_failed_nodes and _pending_nodes by
// NodeType; autoscaler_cluster_resources and _pending_resources by
// resource), ray_actors{Name,State,NodeAddress,Source} (Source "gcs": the
// head's states; "executor": IDLE or RUNNING_TASK for alive actors, from
// their workers' task events), ray_placement_groups{State},
// ray_tasks{Name,State,IsRetry},
// ray_train_controller_state{ray_train_run_name,ray_train_controller_state},
// each run's latest step (ray_train_step, _loss, _step_time_s,
// _tokens_per_second_per_device, _tflops_per_device), its controller's
// ray_train_worker_group_start_total_time_s and _shutdown_total_time_s, and
// ray_train_report_total_blocked_time_s of its latest attempt's workers; and
// its own process's ray_component_*{Component="gcs"}. Every series carries
// SessionName.
//
// The discovery file lists every live metrics target, as Ray's does:
// [{"labels": {"job": "ray"}, "targets": ["ip:port", ...]}]: this GCS, each
// alive node's raylet (NodeInfo.metrics_export_port) and the dashboard (KV
// namespace "metrics", key "dashboard"). It is rewritten, atomically and off
// the loop, whenever the list changes. Beside it, at Start, the head writes
// Manta's Grafana dashboards into <session_dir>/metrics/grafana/dashboards/
// (common/metrics/grafana_dashboards.h), as Ray's head writes its own.
//
// Thread: construction, Start, Stop and the On* calls on the loop thread;
// scrapes come on the metrics server's threads and wait for the loop (at
// most kCollectTimeout; a stalled loop yields the gRPC families alone).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/metrics/component_stats.h"
#include "common/metrics/discovery.h"
#include "common/metrics/metrics.h"
#include "common/metrics/metrics_server.h"
#include "common/rpc/server_metrics.h"
#include "common/thread_pool.h"

namespace manta::gcs {

class NodeManager;
class ActorManager;
class PlacementGroupManager;
class TaskEventManager;
class TrainRunManager;
class KvManager;
class ResourceManager;

struct GcsMetricsOptions {
  int port = -1;                   // -1: no metrics port (and no discovery file)
  bool any_port_if_taken = false;  // MetricsServerOptions::any_port_if_taken
  std::string host = "127.0.0.1";
  std::string token;  // empty: scrapes need no token
  std::string session_name;
  std::string session_dir;  // where the discovery file goes; empty: none
};

// The file's name in the session directory.
inline constexpr char kServiceDiscoveryFile[] = "prom_metrics_service_discovery.json";
// Where the dashboard registers its metrics address (KV namespace and key).
using metrics::kDashboardMetricsKey;
using metrics::kMetricsKvNamespace;

class GcsMetrics {
 public:
  static constexpr absl::Duration kCollectTimeout = absl::Seconds(2);

  struct Tables {
    NodeManager* nodes;
    ActorManager* actors;
    PlacementGroupManager* groups;
    TaskEventManager* tasks;
    TrainRunManager* train_runs;
    KvManager* kv;
    ResourceManager* resources;
  };

  GcsMetrics(GcsMetricsOptions options, EventLoop* loop, Tables tables);
  ~GcsMetrics();

  // To install on the gRPC server's builder before it starts.
  rpc::ServerMetrics* server_metrics() { return &server_metrics_; }
  // Binds the metrics port and writes the discovery file and the Grafana
  // dashboards. A no-op when the port is -1.
  absl::Status Start();
  void Stop();
  int port() const { return server_ ? server_->port() : -1; }

  // The set of targets may have changed (a node joined or died, the
  // dashboard registered): rewrites the discovery file when it did.
  void OnTargetsChanged();

 private:
  // On the loop: the GCS's families, appended to `out`.
  void Collect(metrics::Exposition& out);
  std::string DiscoveryJson();

  const GcsMetricsOptions options_;
  EventLoop* const loop_;
  const Tables tables_;
  metrics::MetricsRegistry registry_;
  rpc::ServerMetrics server_metrics_;
  metrics::ComponentStats component_;  // this process
  std::unique_ptr<metrics::MetricsServer> server_;
  // Writes the discovery file off the loop, one write at a time.
  ThreadPool writer_{1};
  std::string written_;  // the file's content as last written; loop thread only
  // Expires with this object: a collection posted before finds it gone.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace manta::gcs
