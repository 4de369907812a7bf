// RayletMetrics: a raylet's Prometheus endpoint (--metrics_export_port).
//
// Owns the raylet's metrics registry, the gRPC server metrics installed on
// its service (ray_grpc_server_req_*), the host's node metrics
// (ray_node_cpu_utilization, ray_node_mem_*: node_stats.h) and the HTTP
// server. At each scrape it reads this node's resources on the loop:
// ray_resources{Name,State} with State USED or AVAILABLE, as Ray's raylets
// report them. Every series carries SessionName.
//
// Thread: construction, Start and Stop on the loop thread; scrapes on the
// metrics server's threads (they wait for the loop, at most 2 s).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/event_loop.h"
#include "common/metrics/metrics.h"
#include "common/metrics/metrics_server.h"
#include "common/metrics/node_stats.h"
#include "common/rpc/server_metrics.h"
#include "proto/common.pb.h"

namespace manta::raylet {

struct RayletMetricsOptions {
  int port = -1;  // -1: no metrics port
  std::string host = "127.0.0.1";
  std::string token;  // empty: scrapes need no token
  std::string session_name;
  // Every series says whether it is the head's (Ray's IsHeadNode and
  // RayNodeType labels, on which its dashboards split and filter).
  bool is_head = false;
};

class RayletMetrics {
 public:
  // `resources` is called on the loop: this node's total and available.
  RayletMetrics(RayletMetricsOptions options, EventLoop* loop, std::function<rpc::NodeResources()> resources);
  ~RayletMetrics();

  bool enabled() const { return options_.port >= 0; }
  rpc::ServerMetrics* server_metrics() { return &server_metrics_; }
  absl::Status Start();
  void Stop();
  // The bound port; 0 before Start or when disabled.
  int port() const { return server_ ? server_->port() : 0; }

 private:
  void CollectResources(metrics::Exposition& out);

  const RayletMetricsOptions options_;
  EventLoop* const loop_;
  const std::function<rpc::NodeResources()> resources_;
  metrics::MetricsRegistry registry_;
  rpc::ServerMetrics server_metrics_;
  metrics::NodeStats node_stats_;
  std::unique_ptr<metrics::MetricsServer> server_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace manta::raylet
