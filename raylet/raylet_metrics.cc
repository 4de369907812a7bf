#include "raylet/raylet_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common/logging.h"
#include "common/metrics/loop_collector.h"
#include "common/metrics/stats_page.h"
#include "common/placement_group_resources.h"
#include "common/status.h"
#include "common/tpu.h"

namespace manta::raylet {
namespace {

int64_t HostOomKills() {
  std::ifstream in("/proc/vmstat");
  std::stringstream text;
  text << in.rdbuf();
  return metrics::ParseVmstat(text.str(), "oom_kill");
}

}  // namespace

metrics::TpuChipStats::Host TpuHostOf(const LocalResources& resources, const std::string& ip) {
  metrics::TpuChipStats::Host host;
  host.ip = ip;
  const double chips = resources.total.Get(tpu::kTpuResource).ToDouble();
  if (chips < 1) return host;
  host.chips = static_cast<int>(chips);
  auto label = [&](const char* name) {
    auto it = resources.labels.find(name);
    return it == resources.labels.end() ? std::string() : it->second;
  };
  auto pod = tpu::ParsePodType(label(tpu::kLabelPodType));
  host.type = pod.ok() ? "tpu-" + pod->generation + "-slice" : "tpu";
  host.topology = label(tpu::kLabelTopology);
  const std::string slice = label(tpu::kLabelSliceName);
  host.device_prefix = slice.empty() ? ip : slice + "-" + label(tpu::kLabelWorkerId);
  double memory = resources.total.Get("memory").ToDouble();
  if (memory <= 0) {
    std::ifstream in("/proc/meminfo");
    std::stringstream text;
    text << in.rdbuf();
    memory = static_cast<double>(metrics::ParseMeminfo(text.str(), "MemTotal"));
  }
  host.memory_per_chip = static_cast<int64_t>(std::max(0.0, memory) / chips);
  return host;
}

RayletMetrics::RayletMetrics(RayletMetricsOptions options, EventLoop* loop,
                             std::function<rpc::NodeResources()> resources,
                             std::function<std::vector<WorkerProcess>()> workers)
    : options_(std::move(options)),
      loop_(loop),
      resources_(std::move(resources)),
      workers_(std::move(workers)),
      registry_(metrics::Labels{{"SessionName", options_.session_name},
                                {"IsHeadNode", options_.is_head ? "true" : "false"},
                                {"RayNodeType", options_.is_head ? "head" : "worker"}}),
      server_metrics_(&registry_),
      node_stats_(options_.host),
      components_(options_.host),
      evictions_(registry_.AddCounter("ray_memory_manager_worker_eviction_total",
                                      "Workers of this node the kernel's OOM killer ended, by kind and by the actor "
                                      "class or function they ran.",
                                      {"Type", "Name"})),
      oom_kills_(HostOomKills()) {
  evictions_->Add({"", ""}, 0);  // none is 0, not no data
  if (options_.tpu.chips > 0 && !options_.stats_dir.empty()) {
    chips_ = std::make_unique<metrics::TpuChipStats>(options_.tpu, options_.stats_dir);
  }
  registry_.AddCollector([this](metrics::Exposition& out) { node_stats_.Collect(out); });
  registry_.AddCollector(
      metrics::OnLoop(loop_, &registry_, alive_, [this](metrics::Exposition& out) { CollectResources(out); }));
  registry_.AddCollector([this](metrics::Exposition& out) { CollectProcesses(out); });
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

void RayletMetrics::OnWorkerExit(const WorkerId& id, bool unexpected_sigkill, const std::string& name, bool actor) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!options_.stats_dir.empty()) {
    absl::MutexLock lock(&mu_);
    exited_.push_back(id);
  }
  if (!unexpected_sigkill) return;
  const int64_t kills = HostOomKills();
  if (kills > oom_kills_) {
    evictions_->Add({actor ? "MemoryManager.ActorEviction.Total" : "MemoryManager.TaskEviction.Total", name});
  }
  oom_kills_ = kills;
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

void RayletMetrics::CollectProcesses(metrics::Exposition& out) {
  std::optional<std::vector<WorkerProcess>> workers = metrics::FromLoop(loop_, alive_, workers_);
  std::vector<metrics::ComponentStats::Process> processes = {{::getpid(), "raylet", true}};
  for (const WorkerProcess& w : workers.value_or(std::vector<WorkerProcess>{})) {
    processes.push_back({w.pid, w.component, false});
  }
  components_.Collect(processes, out);
  if (chips_) chips_->Collect(out);
  if (options_.stats_dir.empty() || !workers.has_value()) return;
  std::vector<WorkerId> exited;
  {
    absl::MutexLock lock(&mu_);
    exited.swap(exited_);
  }
  for (const WorkerId& id : exited) std::remove(metrics::WorkerPagePath(options_.stats_dir, id.Hex()).c_str());
  double heap = 0;
  for (const WorkerProcess& w : *workers) {
    auto page = metrics::ReadStatsPage(metrics::WorkerPagePath(options_.stats_dir, w.id.Hex()));
    if (page.ok()) heap += static_cast<double>((*page)[metrics::kWorkerHeapBytes]);
  }
  out.Family("ray_object_store_memory", "gauge",
             "Bytes of objects this node's workers hold, by where: WORKER_HEAP, in their own memory.");
  out.Sample("ray_object_store_memory", {{"Location", "WORKER_HEAP"}}, heap);
}

}  // namespace manta::raylet
