#include "raylet/raylet_metrics.h"

#include <map>

#include "common/logging.h"
#include "common/metrics/loop_collector.h"
#include "common/placement_group_resources.h"
#include "common/status.h"

namespace manta::raylet {

RayletMetrics::RayletMetrics(RayletMetricsOptions options, EventLoop* loop,
                             std::function<rpc::NodeResources()> resources)
    : options_(std::move(options)),
      loop_(loop),
      resources_(std::move(resources)),
      registry_(metrics::Labels{{"SessionName", options_.session_name},
                                {"IsHeadNode", options_.is_head ? "true" : "false"},
                                {"RayNodeType", options_.is_head ? "head" : "worker"}}),
      server_metrics_(&registry_),
      node_stats_(options_.host) {
  registry_.AddCollector([this](metrics::Exposition& out) { node_stats_.Collect(out); });
  registry_.AddCollector(
      metrics::OnLoop(loop_, &registry_, alive_, [this](metrics::Exposition& out) { CollectResources(out); }));
}

RayletMetrics::~RayletMetrics() { Stop(); }

absl::Status RayletMetrics::Start() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!enabled()) return absl::OkStatus();
  ASSIGN_OR_RETURN(server_, metrics::MetricsServer::Start(
                                {.host = options_.host, .port = options_.port, .token = options_.token}, &registry_));
  Logger("raylet")->info("metrics on {}:{}", options_.host, server_->port());
  return absl::OkStatus();
}

void RayletMetrics::Stop() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (server_) server_->Stop();
}

void RayletMetrics::CollectResources(metrics::Exposition& out) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  const rpc::NodeResources r = resources_();
  out.Family("ray_resources", "gauge", "This node's logical resources, used and available.");
  for (const auto& [name, total] : r.total()) {
    // Plain resources only: a group's reservation already shows in its base
    // resource's availability, and node:<ip> only places work.
    if (pg::SummarizeName(name).kind != pg::SummaryName::kPlain) continue;
    auto it = r.available().find(name);
    const double available = it == r.available().end() ? 0.0 : it->second;
    out.Sample("ray_resources", {{"Name", name}, {"State", "AVAILABLE"}}, available);
    out.Sample("ray_resources", {{"Name", name}, {"State", "USED"}}, total - available);
  }
}

}  // namespace manta::raylet
