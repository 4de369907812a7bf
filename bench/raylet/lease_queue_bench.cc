// bench_lease_queue: what one lease request and one lease return cost a
// raylet whose queue holds many waiting leases.
//
// In process, no cluster: a LeaseManager on a node of 16 CPUs with a
// ClusterView of the other simulated nodes (64 in all), every one of them
// full, so a lease that cannot run here waits here. Q leases wait over 100
// shapes ({CPU: 1, memory: k MiB}, k = 1..100, in turn), all competing for
// the CPUs. Then, over and over, the oldest granted lease is returned (its
// CPU goes to the oldest waiting lease, whose worker is handed over at
// once) and a new lease is requested (it waits): the mean time of each, for
// Q = 100, 1,000 and 10,000.
//
// The baseline is the lease manager before its queue was keyed by shape
// (lease_manager_before_shapes.h): one list of every waiting lease, each
// re-decided, with a search of every node, on every request and return.
// Same node, view, pool and leases, measured in the same run.
//
//   bench_lease_queue [--queued=100,1000,10000] [--shapes=100] [--nodes=64] [--cycles=2000]
//                     [--baseline-cycles=20] [--quick] [--json FILE]
//
// Figures: request_us_q<Q> and return_us_q<Q> (baseline: before shapes),
// and request_return_growth: request plus return at the largest Q over the
// same at the smallest (baseline: that growth before shapes). Timings are
// reported, never asserted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/common/report.h"
#include "bench/raylet/lease_manager_before_shapes.h"
#include "common/status.h"
#include "raylet/lease_manager.h"

namespace manta::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLocalCpus = 16;
constexpr double kMiB = 1024.0 * 1024.0;

struct Sizes {
  int queued = 0;
  int shapes = 0;
  int nodes = 0;
  int cycles = 0;
};

struct Costs {
  double request_us = 0;
  double return_us = 0;
};

// Hands out a new worker at once; keeps nothing.
class InstantPool : public raylet::WorkerPoolInterface {
 public:
  void PopWorker(const rpc::TaskSpec&, PopCallback cb) override {
    cb(raylet::LeasedWorker{WorkerId::FromRandom(), 10000, 100});
  }
  void PushWorker(const WorkerId&) override {}
  void DisconnectWorker(const WorkerId&, const std::string&) override {}
  void Prestart(const rpc::TaskSpec&, int) override {}
  void KillJobWorkers(const JobId&, const absl::flat_hash_set<WorkerId>&) override {}
};

ResourceSet Resources(const std::map<std::string, double>& m) { return *ResourceSet::FromMap(m); }

// One node's lease manager (either kind) with its resources, view and pool.
template <typename Manager>
class Rig {
 public:
  explicit Rig(const Sizes& sizes)
      : sizes_(sizes),
        local_(Resources({{"CPU", kLocalCpus}, {"memory", 1e12}}), 0),
        view_(self_),
        manager_({self_, "10.0.0.1", {}}, &local_, &view_, &pool_) {
    manager_.SetGrantListener(
        [this](const rpc::TaskSpec& spec, const raylet::LeasedWorker&) { granted_.push_back(spec.task_id()); });
    for (int i = 1; i < sizes.nodes; ++i) AddFullNode(i);
    manager_.OnClusterChanged();
  }

  // Fills the node's CPUs and queues sizes_.queued leases behind them.
  // They are requested from the first grant's reply callback, so the
  // manager decides them in one pass instead of one pass per lease (which
  // would take the baseline minutes).
  absl::Status Fill() {
    bool filled = false;
    Request(0, [&] {
      if (filled) return;
      filled = true;
      for (int i = 1; i < kLocalCpus; ++i) Request(i);
      for (int i = 0; i < sizes_.queued; ++i) Request(i);
    });
    return Check();
  }

  // `cycles` times: returns the oldest granted lease, then requests a new
  // one; timed unless `warmup`.
  absl::Status Cycle(int cycles, bool warmup = false) {
    for (int i = 0; i < cycles; ++i) {
      const std::string returned = granted_.front();
      granted_.pop_front();
      const auto t0 = Clock::now();
      Return(returned);
      const auto t1 = Clock::now();
      Request(next_shape_++);
      const auto t2 = Clock::now();
      if (warmup) continue;
      returns_ += t1 - t0;
      requests_ += t2 - t1;
      ++timed_;
    }
    return Check();
  }

  // The mean cost of a request and of a return over the timed cycles.
  Costs Mean() const {
    auto us = [&](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count() / timed_; };
    return Costs{us(requests_), us(returns_)};
  }

 private:
  void AddFullNode(int i) {
    const NodeId id = NodeId::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_node_ip(absl::StrCat("10.0.", i / 256, ".", i % 256));
    info.set_node_manager_port(7000);
    (*info.mutable_resources_total())["CPU"] = kLocalCpus;
    (*info.mutable_resources_total())["memory"] = 1e12;
    view_.OnNodeInfo(info);
    rpc::NodeResources report;
    report.set_node_id(id.Binary());
    report.set_version(1);
    *report.mutable_total() = info.resources_total();
    (*report.mutable_available())["CPU"] = 0;
    view_.OnNodeResources(report);
  }

  void Request(int shape, std::function<void()> on_done = nullptr) {
    rpc::RequestWorkerLeaseRequest request;
    const std::string id = absl::StrCat("lease-", next_id_++);
    request.set_lease_id(id);
    rpc::TaskSpec* spec = request.mutable_spec();
    spec->set_task_id(id);
    spec->set_job_id(std::string("\0\0\0\1", 4));
    spec->set_worker_executable("/bin/worker");
    (*spec->mutable_resources())["CPU"] = 1;
    (*spec->mutable_resources())["memory"] = (1 + shape % sizes_.shapes) * kMiB;
    replies_.emplace_back();
    manager_.HandleRequestWorkerLease(request, &replies_.back(), [on_done = std::move(on_done)](const absl::Status&) {
      if (on_done) on_done();
    });
  }

  void Return(const std::string& id) {
    rpc::ReturnWorkerRequest request;
    request.set_lease_id(id);
    rpc::ReturnWorkerReply reply;
    manager_.HandleReturnWorker(request, &reply, [](const absl::Status&) {});
  }

  absl::Status Check() const {
    if (manager_.num_queued() != static_cast<size_t>(sizes_.queued) ||
        granted_.size() != static_cast<size_t>(kLocalCpus)) {
      return absl::InternalError(absl::StrCat("expected ", sizes_.queued, " queued and ", kLocalCpus,
                                              " granted leases, found ", manager_.num_queued(), " and ",
                                              granted_.size()));
    }
    return absl::OkStatus();
  }

  const Sizes sizes_;
  const NodeId self_ = NodeId::FromRandom();
  raylet::LocalResourceManager local_;
  raylet::ClusterView view_;
  InstantPool pool_;
  Manager manager_;
  std::deque<rpc::RequestWorkerLeaseReply> replies_;  // stable: held calls point into it
  std::deque<std::string> granted_;                   // oldest first
  int next_id_ = 0;
  int next_shape_ = 0;
  Clock::duration returns_{}, requests_{};
  int timed_ = 0;
};

// One rig per queue size for each manager, filled; then, slice by slice,
// each rig in turn runs its share of cycles, so that a machine that slows
// down or speeds up meanwhile moves every figure alike. (shapes, baseline)
// costs per size.
absl::StatusOr<std::vector<std::pair<Costs, Costs>>> Run(const std::vector<int>& queued, Sizes sizes,
                                                         int baseline_cycles) {
  constexpr int kSlices = 10;
  std::vector<std::unique_ptr<Rig<raylet::LeaseManager>>> now;
  std::vector<std::unique_ptr<Rig<raylet::before_shapes::LeaseManager>>> before;
  for (int q : queued) {
    sizes.queued = q;
    now.push_back(std::make_unique<Rig<raylet::LeaseManager>>(sizes));
    before.push_back(std::make_unique<Rig<raylet::before_shapes::LeaseManager>>(sizes));
    RETURN_IF_ERROR(now.back()->Fill());
    RETURN_IF_ERROR(before.back()->Fill());
    RETURN_IF_ERROR(now.back()->Cycle(std::min(sizes.cycles, 10), /*warmup=*/true));
    RETURN_IF_ERROR(before.back()->Cycle(1, /*warmup=*/true));
  }
  const int slice = (sizes.cycles + kSlices - 1) / kSlices;
  const int baseline_slice = (baseline_cycles + kSlices - 1) / kSlices;
  for (int s = 0; s < kSlices; ++s) {
    for (size_t i = 0; i < queued.size(); ++i) {
      RETURN_IF_ERROR(now[i]->Cycle(slice));
      RETURN_IF_ERROR(before[i]->Cycle(baseline_slice));
    }
  }
  std::vector<std::pair<Costs, Costs>> out;
  for (size_t i = 0; i < queued.size(); ++i) out.emplace_back(now[i]->Mean(), before[i]->Mean());
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"bench_lease_queue: a raylet's lease request and return under a deep queue"};
  std::vector<int> queued = {100, 1000, 10000};
  Sizes sizes{.shapes = 100, .nodes = 64, .cycles = 2000};
  int baseline_cycles = 20;
  bool quick = false;
  std::string json;
  app.add_option("--queued", queued, "queued leases, one run per size")->delimiter(',');
  app.add_option("--shapes", sizes.shapes, "lease shapes");
  app.add_option("--nodes", sizes.nodes, "simulated nodes, this one included");
  app.add_option("--cycles", sizes.cycles, "returns and requests timed per size");
  app.add_option("--baseline-cycles", baseline_cycles, "the same for the baseline");
  app.add_flag("--quick", quick, "tiny sizes: a smoke run");
  app.add_option("--json", json, "write the figures here");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    queued = {10, 100};
    sizes = Sizes{.shapes = 10, .nodes = 4, .cycles = 20};
    baseline_cycles = 5;
  }
  if (queued.empty() || sizes.shapes < 1 || sizes.nodes < 1 || sizes.cycles < 1 || baseline_cycles < 1) {
    std::fprintf(stderr, "sizes must be positive\n");
    return 2;
  }

  auto by_size = Run(queued, sizes, baseline_cycles);
  if (!by_size.ok()) {
    std::fprintf(stderr, "%s\n", std::string(by_size.status().message()).c_str());
    return 1;
  }
  Report report;
  for (size_t i = 0; i < queued.size(); ++i) {
    const auto& [now, before] = (*by_size)[i];
    report.Add(absl::StrCat("request_us_q", queued[i]), now.request_us, "us", before.request_us);
    report.Add(absl::StrCat("return_us_q", queued[i]), now.return_us, "us", before.return_us);
  }
  auto sum = [](const Costs& c) { return c.request_us + c.return_us; };
  report.Add("request_return_growth", sum(by_size->back().first) / sum(by_size->front().first), "x",
             sum(by_size->back().second) / sum(by_size->front().second));
  report.Print();
  if (!json.empty()) {
    if (auto s = report.WriteJson(json); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace manta::bench

int main(int argc, char** argv) { return manta::bench::Main(argc, argv); }
