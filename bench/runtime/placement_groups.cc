// bench_placement_groups: placement group and TPU slice reservation speed,
// beside a raw gRPC baseline measured in the same run.
//
//   bench_placement_groups [--seconds=3] [--rounds=50] [--json FILE] [--address HOST:PORT]
//
// Metrics:
//   placement_group_create_remove  groups of one bundle created, waited for
//                                  and removed per second (baseline: raw
//                                  sequential unary round trips per second)
//   placement_group_create_remove_x4
//                                  the same with four threads calling at
//                                  once, 25 groups at a time each (baseline:
//                                  the one-caller rate)
//   placement_group_{create,wait,remove}_us
//                                  mean microseconds of each call in the
//                                  one-caller loop (baseline: one raw round
//                                  trip, us)
//   raw_grpc_cpu_us                CPU microseconds the machine spends on one
//                                  raw round trip (client and server)
//   placement_group_cpu_us         CPU microseconds the machine spends on one
//                                  group in the one-caller loop (baseline:
//                                  the five raw round trips a group makes)
//   placement_group_round_trip_bound
//                                  groups per second if a group cost only the
//                                  four round trips its caller waits for in
//                                  turn (create, wait, remove, and the
//                                  removal's return of the bundle on its
//                                  raylet), at the raw rate (baseline: the
//                                  goal, 2,000 a second)
//   slice_reserve_2x_v6e16_p50/p99 milliseconds to reserve two whole v6e-16
//                                  slices (baseline: one raw round trip, ms)
//   slice_reserve_2x_v6e64_p50/p99 the same for two v6e-64 slices (16 hosts
//                                  each), on a second cluster of 32 TPU hosts
//                                  (--v6e64=false, or --address, skips it)
//
// Without --address it starts a head and two simulated v6e-16 slices (8 TPU
// hosts) in a temporary directory and stops them at the end. This program is
// also its own worker.
#include <manta/api.h>
#include <manta/placement_group.h>
#include <manta/tpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/common/cluster.h"
#include "bench/common/proc_stats.h"
#include "bench/common/report.h"

namespace {

using Clock = std::chrono::steady_clock;

int Noop() { return 0; }
MANTA_REMOTE(Noop);

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Creates, waits for and removes `batch` groups of `options`, in three
// passes of blocking calls; adds each pass's seconds to `seconds`, if given.
void CreateWaitRemove(const manta::PlacementGroupOptions& options, int batch, double* seconds = nullptr) {
  auto start = Clock::now();
  auto lap = [&](int pass) {
    const auto now = Clock::now();
    if (seconds != nullptr) seconds[pass] += std::chrono::duration<double>(now - start).count();
    start = now;
  };
  std::vector<manta::PlacementGroup> groups;
  groups.reserve(batch);
  for (int i = 0; i < batch; ++i) groups.push_back(manta::CreatePlacementGroup(options));
  lap(0);
  for (auto& g : groups) {
    if (!g.Wait(absl::Seconds(30))) throw std::runtime_error("a placement group was not ready in 30 s");
  }
  lap(1);
  for (auto& g : groups) manta::RemovePlacementGroup(g);
  lap(2);
}

// Groups per second that `callers` threads create, wait for and remove at
// once, `batch` at a time each, for about `seconds`.
double ConcurrentCreateRemove(double seconds, int callers, int batch, const manta::PlacementGroupOptions& options) {
  std::atomic<int64_t> made{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string error;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  auto call = [&] {
    try {
      while (!stop.load()) {
        CreateWaitRemove(options, batch);
        made += batch;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      error = e.what();
      stop = true;
    }
  };
  try {
    for (int t = 0; t < callers; ++t) threads.emplace_back(call);
  } catch (...) {  // a thread that could not start: the others end first
    stop = true;
    for (auto& t : threads) t.join();
    throw;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measured span
  stop = true;
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error(error);
  return static_cast<double>(made.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

// Reserves and releases two whole slices `rounds` times; reports p50 and p99
// as slice_reserve_2x_<name>_*, beside one raw round trip (ms).
void MeasureReservations(const std::string& name, const std::string& topology, int rounds, double raw_ms,
                         manta::bench::Report& report) {
  manta::tpu::SliceOptions slices;
  slices.topology = topology;
  slices.accelerator_version = "v6e";
  slices.num_slices = 2;
  std::vector<double> ms;
  for (int i = 0; i <= rounds; ++i) {
    auto start = Clock::now();
    manta::tpu::SliceReservation r = manta::tpu::ReserveSlices(slices);
    double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    r.Release();
    if (i > 0) ms.push_back(elapsed);  // the first warms up connections
  }
  report.Add("slice_reserve_2x_" + name + "_p50", Percentile(ms, 0.5), "ms", raw_ms);
  report.Add("slice_reserve_2x_" + name + "_p99", Percentile(ms, 0.99), "ms", raw_ms);
}

// Two v6e-64 slices (16 hosts of 4 chips each): a second cluster, 32 raylets.
absl::Status MeasureV6e64(int rounds, double raw_ms, manta::bench::Report& report) {
  manta::bench::LocalCluster cluster;
  manta::bench::ClusterSpec spec{2, {{"tpu-big-0", "v6e-64", "8x8"}, {"tpu-big-1", "v6e-64", "8x8"}}};
  if (auto s = cluster.Start("", spec); !s.ok()) return s;
  manta::InitOptions init;
  init.address = cluster.address();
  init.temp_dir = cluster.temp_dir();
  if (auto s = manta::TryInit(init); !s.ok()) return s;
  absl::Status status;
  try {
    MeasureReservations("v6e64", "8x8", rounds, raw_ms, report);
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  manta::Shutdown();
  cluster.Stop();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (manta::core::CoreWorker::IsWorkerProcess()) manta::Init(argc, argv);  // never returns

  CLI::App app{"Placement group and TPU slice reservation speed on Manta, beside raw gRPC."};
  double seconds = 3;
  int rounds = 50;
  std::string json_path, address;
  app.add_option("--seconds", seconds, "Seconds for the create/remove rate.");
  app.add_option("--rounds", rounds, "Slice reservations to time.")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "Write the figures here as JSON.");
  app.add_option("--address", address, "Use this cluster (with two free v6e-16 slices) instead of starting one.");
  bool v6e64 = true;
  app.add_option("--v6e64", v6e64, "Also time two v6e-64 slices, on a second cluster of 32 TPU hosts.");
  CLI11_PARSE(app, argc, argv);

  manta::bench::LocalCluster cluster;
  if (auto s = cluster.Start(address, manta::bench::TwoV6e16Slices()); !s.ok()) {
    std::cerr << "cannot start a cluster: " << s.message() << "\n";
    return 1;
  }
  manta::InitOptions init;
  init.address = cluster.address();
  init.temp_dir = cluster.temp_dir();
  if (auto s = manta::TryInit(init); !s.ok()) {
    std::cerr << "cannot join the cluster: " << s.message() << "\n";
    return 1;
  }
  manta::bench::RawGrpc raw;
  if (!raw.Start(cluster.bin_dir())) {
    std::cerr << "cannot start the raw gRPC baseline server\n";
    manta::Shutdown();
    return 1;
  }
  int rc = 0;
  try {
    // The machine's CPU is read around each loop, as a group's work spans
    // the driver, the GCS and the raylets; anything else running on the
    // machine counts too, the idle cluster's upkeep in the raw loop among
    // it. Reported only when /proc/stat can be read.
    int64_t raw_calls = 0;
    // Busy seconds between two readings; -1 when either failed.
    auto busy_between = [](double from, double to) { return from < 0 || to < 0 ? -1 : to - from; };
    double busy = manta::bench::MachineBusySeconds();
    double raw_seq = manta::bench::Rate(seconds, 100, [&] { raw_calls += raw.Sequential(100); });
    const double raw_busy = busy_between(busy, manta::bench::MachineBusySeconds());
    const double raw_cpu_us = raw_busy < 0 ? -1 : 1e6 * raw_busy / std::max<int64_t>(1, raw_calls);
    manta::bench::Report report;
    report.Add("raw_grpc_sequential", raw_seq, "calls/s");
    if (raw_cpu_us >= 0) report.Add("raw_grpc_cpu_us", raw_cpu_us, "us");

    // Create, wait for and remove groups of one small bundle, 100 at a time.
    const int kBatch = 100;
    manta::PlacementGroupOptions one;
    one.bundles = {{{{"CPU", 0.01}}, {}}};
    // Where the time goes: the three calls' seconds, summed over the rounds.
    double phase[3] = {0, 0, 0};
    int64_t groups_made = 0;
    busy = manta::bench::MachineBusySeconds();
    double create_remove = manta::bench::Rate(seconds, kBatch, [&] {
      CreateWaitRemove(one, kBatch, phase);
      groups_made += kBatch;
    });
    const double group_busy = busy_between(busy, manta::bench::MachineBusySeconds());
    report.Add("placement_group_create_remove", create_remove, "groups/s", raw_seq);
    if (group_busy >= 0 && raw_cpu_us >= 0) {
      report.Add("placement_group_cpu_us", 1e6 * group_busy / groups_made, "us", 5 * raw_cpu_us);
    }
    report.Add("placement_group_round_trip_bound", raw_seq / 4, "groups/s", 2000);
    report.Add("placement_group_create_remove_x4", ConcurrentCreateRemove(seconds, 4, kBatch / 4, one), "groups/s",
               create_remove);
    const char* kPhases[] = {"create", "wait", "remove"};
    for (int i = 0; i < 3; ++i) {
      report.Add(std::string("placement_group_") + kPhases[i] + "_us", 1e6 * phase[i] / groups_made, "us",
                 1e6 / raw_seq);
    }

    // Reserve and release two whole v6e-16 slices, then two v6e-64 ones.
    const double raw_ms = 1000.0 / raw_seq;
    MeasureReservations("v6e16", "4x4", rounds, raw_ms, report);
    manta::Shutdown();
    cluster.Stop();
    if (v6e64 && address.empty()) {
      if (auto s = MeasureV6e64(rounds, raw_ms, report); !s.ok()) throw std::runtime_error(std::string(s.message()));
    }
    report.Print();
    if (!json_path.empty()) {
      if (auto s = report.WriteJson(json_path); !s.ok()) {
        std::cerr << s.message() << "\n";
        rc = 1;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << "\n";
    rc = 1;
  }
  manta::Shutdown();  // both are idempotent
  cluster.Stop();
  return rc;
}
