// RayletMetrics: a raylet's Prometheus endpoint (--metrics_export_port).
//
// Owns the raylet's metrics registry, the gRPC server metrics installed on
// its service (ray_grpc_server_req_*), the host's node metrics
// (ray_node_cpu_utilization, ray_node_mem_*: node_stats.h) and the HTTP
// server. At each scrape it reads, as Ray's raylets and reporter agents
// report them:
//   ray_resources{Name,State}     this node's resources, USED or AVAILABLE
//   ray_component_*{Component}    the raylet's and its workers' CPU and
//                                 memory (component_stats.h); a worker is
//                                 "ray::<Class>" while it hosts an actor,
//                                 "ray::<function>" while leased for tasks,
//                                 "ray::IDLE" otherwise
//   ray_object_store_memory{Location="WORKER_HEAP"}  bytes of objects the
//                                 workers hold in their own memory (Manta's
//                                 only object store), from their stats pages
//   ray_memory_manager_worker_eviction_total{Type,Name}  workers the kernel's
//                                 OOM killer ended (0, without a name, while
//                                 there were none)
//   ray_tpu_*                     this TPU host's chips (tpu_chips.h)
// Every series carries SessionName, IsHeadNode and RayNodeType.
//
// Workers publish their pages in `stats_dir` (MANTA_STATS_DIR); the page of
// an exited worker is removed at the next scrape.
//
// Thread: construction, Start, Stop and OnWorkerExit on the loop thread;
// scrapes on the metrics server's threads (they wait for the loop, at most
// 2 s, and read /proc and the pages off it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/event_loop.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/id.h"
#include "common/metrics/component_stats.h"
#include "common/metrics/metrics.h"
#include "common/metrics/metrics_server.h"
#include "common/metrics/node_stats.h"
#include "common/metrics/tpu_chips.h"
#include "common/rpc/server_metrics.h"
#include "proto/common.pb.h"
#include "raylet/local_resources.h"

namespace manta::raylet {

struct RayletMetricsOptions {
  int port = -1;  // -1: no metrics port
  std::string host = "127.0.0.1";
  std::string token;  // empty: scrapes need no token
  std::string session_name;
  // Every series says whether it is the head's (Ray's IsHeadNode and
  // RayNodeType labels, on which its dashboards split and filter).
  bool is_head = false;
  // Where workers publish their stats pages; empty: no pages are read.
  std::string stats_dir;
  // This node's chips, when it is a TPU host (chips > 0).
  metrics::TpuChipStats::Host tpu;
};

// The chips of a TPU host as its resources and labels describe them
// (chips 0 for another host): TpuType "tpu-<generation>-slice" as GKE's
// device plugin names it, the slice's topology, devices named
// "<slice>-<worker id>-<index>", and the host's memory shared among them.
metrics::TpuChipStats::Host TpuHostOf(const LocalResources& resources, const std::string& ip);

// A worker process of this node, as the scrape sees it.
struct WorkerProcess {
  WorkerId id;
  int pid = 0;
  std::string component;  // "ray::IDLE", "ray::Counter", ...
};

class RayletMetrics {
 public:
  // `resources` and `workers` are called on the loop: this node's total and
  // available resources, and its live worker processes.
  RayletMetrics(RayletMetricsOptions options, EventLoop* loop, std::function<rpc::NodeResources()> resources,
                std::function<std::vector<WorkerProcess>()> workers);
  ~RayletMetrics();

  bool enabled() const { return options_.port >= 0; }
  rpc::ServerMetrics* server_metrics() { return &server_metrics_; }
  absl::Status Start();
  void Stop();
  // The bound port; 0 before Start or when disabled.
  int port() const { return server_ ? server_->port() : 0; }
  // Where workers publish their pages (MANTA_STATS_DIR); empty: nowhere.
  const std::string& stats_dir() const { return options_.stats_dir; }

  // Worker `id` exited: its page goes at the next scrape. One ended by a
  // SIGKILL the raylet did not send, while the host's count of OOM kills
  // (/proc/vmstat oom_kill) rose, counts as an eviction of `name` (its
  // actor's class, or the function it ran).
  void OnWorkerExit(const WorkerId& id, bool unexpected_sigkill, const std::string& name, bool actor);

 private:
  void CollectResources(metrics::Exposition& out);
  // Off the loop: the processes' CPU and memory and the workers' objects.
  void CollectProcesses(metrics::Exposition& out);

  const RayletMetricsOptions options_;
  EventLoop* const loop_;
  const std::function<rpc::NodeResources()> resources_;
  const std::function<std::vector<WorkerProcess>()> workers_;
  metrics::MetricsRegistry registry_;
  rpc::ServerMetrics server_metrics_;
  metrics::NodeStats node_stats_;
  metrics::ComponentStats components_;
  std::unique_ptr<metrics::TpuChipStats> chips_;  // TPU hosts only
  metrics::Counter* const evictions_;
  int64_t oom_kills_ = 0;  // the host's count when last read; loop thread only
  absl::Mutex mu_;
  std::vector<WorkerId> exited_ ABSL_GUARDED_BY(mu_);  // whose pages go at the next scrape
  std::unique_ptr<metrics::MetricsServer> server_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace manta::raylet
