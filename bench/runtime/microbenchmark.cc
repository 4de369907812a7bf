// bench_microbenchmark: Ray's `ray_perf` metrics under the same names, each
// beside a raw gRPC baseline measured in the same run on this machine:
// sequential unary round trips for the sync metrics, 64 calls in flight for
// the async ones (and memcpy bandwidth for put_gigabytes). Each metric and
// its baseline take turns in slices of a tenth of a second, so a machine
// that speeds up or slows down meanwhile moves both alike.
//
//   bench_microbenchmark [--seconds=3] [--json FILE] [--address HOST:PORT]
//
// Without --address it starts a one-node cluster (`manta start --head
// --num-cpus=2`) in a temporary directory and stops it at the end. This
// program is also its own worker: the raylet starts it in worker mode.
#include <manta/api.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/common/cluster.h"
#include "bench/common/report.h"

namespace {

// ---- remote code

int Noop() { return 0; }

class Target {
 public:
  static Target* Create() { return new Target(); }
  int Call() { return ++calls_; }

 private:
  int calls_ = 0;
};

class Caller {
 public:
  static Caller* Create(manta::ActorHandle<Target> target) { return new Caller(std::move(target)); }
  explicit Caller(manta::ActorHandle<Target> target) : target_(std::move(target)) {}
  // `n` calls to the target, `batch` in flight at a time.
  int Run(int n, int batch) {
    for (int done = 0; done < n; done += batch) {
      std::vector<manta::ObjectRef<int>> refs;
      for (int i = 0; i < batch; ++i) refs.push_back(target_.Task(&Target::Call).Remote());
      manta::Get(refs);
    }
    return n;
  }

 private:
  manta::ActorHandle<Target> target_;
};

MANTA_REMOTE(Noop, Target::Create, &Target::Call, Caller::Create, &Caller::Run);

using manta::bench::PairedRate;

constexpr int kBatch = 1000;
enum Baseline { kSequential, kInFlight };
using AddMetric = std::function<void(const std::string& name, const char* unit, Baseline b, int per_round,
                                     const std::function<void()>& round)>;

// Ray's ray_perf metrics, each given to `add` with the baseline it is
// measured beside; `wanted` filters by name.
void MeasureAll(const AddMetric& add, const std::function<bool(const std::string&)>& wanted, double seconds,
                manta::bench::Report* report_out) {
  manta::bench::Report& report = *report_out;
  add("single_client_tasks_sync", "tasks/s", kSequential, 1, [] { manta::Get(manta::Task(Noop).Remote()); });
  add("single_client_tasks_async", "tasks/s", kInFlight, kBatch, [&] {
    std::vector<manta::ObjectRef<int>> refs;
    refs.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) refs.push_back(manta::Task(Noop).Remote());
    manta::Get(refs);
  });

  auto target = manta::Actor(Target::Create).Remote();
  add("1_1_actor_calls_sync", "calls/s", kSequential, 1, [&] { manta::Get(target.Task(&Target::Call).Remote()); });
  add("1_1_actor_calls_async", "calls/s", kInFlight, kBatch, [&] {
    std::vector<manta::ObjectRef<int>> refs;
    refs.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) refs.push_back(target.Task(&Target::Call).Remote());
    manta::Get(refs);
  });

  const int n = 2;  // one per core
  std::vector<manta::ActorHandle<Target>> targets;
  for (int i = 0; i < n; ++i) targets.push_back(manta::Actor(Target::Create).Remote());
  add("1_n_actor_calls_async", "calls/s", kInFlight, kBatch, [&] {
    std::vector<manta::ObjectRef<int>> refs;
    refs.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) refs.push_back(targets[i % n].Task(&Target::Call).Remote());
    manta::Get(refs);
  });

  std::vector<manta::ActorHandle<Caller>> callers;
  for (int i = 0; i < n; ++i) callers.push_back(manta::Actor(Caller::Create).Remote(targets[i]));
  add("n_n_actor_calls_async", "calls/s", kInFlight, n * kBatch, [&] {
    std::vector<manta::ObjectRef<int>> refs;
    for (auto& c : callers) refs.push_back(c.Task(&Caller::Run).Remote(kBatch, 100));
    manta::Get(refs);
  });

  add("single_client_put_calls", "puts/s", kSequential, 1, [] { manta::Put(42); });
  auto small = manta::Put(42);
  add("single_client_get_calls", "gets/s", kSequential, 1, [&] { manta::Get(small); });
  // Ray's: 1,000 tasks, then wait for them one ready ref at a time.
  add("single_client_wait_1k_refs", "rounds/s", kInFlight, 1, [&] {
    std::vector<manta::ObjectRef<int>> not_ready;
    not_ready.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) not_ready.push_back(manta::Task(Noop).Remote());
    while (!not_ready.empty()) not_ready = manta::Wait(not_ready, 1).not_ready;
  });

  const size_t kBig = 100 << 20;
  std::vector<uint8_t> big(kBig, 7);
  if (wanted("single_client_put_gigabytes")) {
    std::vector<uint8_t> copy(kBig);
    auto r = PairedRate(
        seconds, 1, [&] { manta::Put(big); }, 1, [&] { std::memcpy(copy.data(), big.data(), kBig); });
    const double gb = static_cast<double>(kBig) / 1e9;
    report.Add("single_client_put_gigabytes", r.value * gb, "GB/s", r.baseline * gb);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (manta::core::CoreWorker::IsWorkerProcess()) manta::Init(argc, argv);  // never returns

  CLI::App app{"Ray's ray_perf metrics on Manta, beside raw gRPC."};
  double seconds = 3;
  std::string json_path, address;
  app.add_option("--seconds", seconds, "Seconds per metric.");
  app.add_option("--json", json_path, "Write the figures here as JSON.");
  app.add_option("--address", address, "Use this cluster instead of starting one.");
  std::string only;
  app.add_option("--only", only, "Run only the metrics whose name contains this.");
  CLI11_PARSE(app, argc, argv);

  manta::bench::LocalCluster cluster;
  manta::bench::ClusterSpec spec;
  spec.num_cpus = 2;
  if (auto st = cluster.Start(address, spec); !st.ok()) {
    std::cerr << "cannot start a cluster: " << st.message() << "\n";
    return 1;
  }
  auto stop_cluster = [&cluster] { cluster.Stop(); };
  const std::string bin = cluster.bin_dir();
  address = cluster.address();
  const std::string temp_dir = cluster.temp_dir();

  manta::InitOptions init;
  init.address = address;
  init.temp_dir = temp_dir;
  if (auto s = manta::TryInit(init); !s.ok()) {
    std::cerr << "cannot join the cluster: " << s.message() << "\n";
    stop_cluster();
    return 1;
  }

  manta::bench::RawGrpc raw;
  if (!raw.Start(bin)) {
    std::cerr << "cannot start the raw gRPC baseline server\n";
    manta::Shutdown();
    stop_cluster();
    return 1;
  }
  auto wanted = [&](const std::string& name) { return only.empty() || name.find(only) != std::string::npos; };
  manta::bench::Report report;
  // Each metric beside its own baseline, measured in alternating slices.
  auto add = [&](const std::string& name, const char* unit, Baseline b, int per_round,
                 const std::function<void()>& round) {
    if (!wanted(name)) return;
    auto r = b == kSequential ? PairedRate(seconds, per_round, round, 100, [&] { raw.Sequential(100); })
                              : PairedRate(seconds, per_round, round, kBatch, [&] { raw.InFlight(kBatch); });
    report.Add(name, r.value, unit, r.baseline);
  };

  MeasureAll(add, wanted, seconds, &report);

  report.Print();
  int rc = 0;
  if (!json_path.empty()) {
    if (auto s = report.WriteJson(json_path); !s.ok()) {
      std::cerr << s.message() << "\n";
      rc = 1;
    }
  }
  manta::Shutdown();
  stop_cluster();
  return rc;
}
