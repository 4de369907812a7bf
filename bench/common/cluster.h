// What the runtime benchmarks share: a cluster of real daemons in a
// temporary directory (or an existing one), a raw gRPC baseline server
// measured in the same run, and a rate loop.
//
//   manta::bench::LocalCluster cluster;
//   RETURN_IF_ERROR(cluster.Start(address_flag, {.num_cpus = 2, .tpu_slices = {{"tpu-group-0", "v6e-16", "4x4"}}}));
//   manta::bench::RawGrpc raw;
//   if (!raw.Start(cluster.bin_dir())) ...
//   double calls = manta::bench::Rate(3, 100, [&] { raw.Sequential(100); });
//   auto r = manta::bench::PairedRate(3, 1, [&] { ... }, 100, [&] { raw.Sequential(100); });
//   ...
//   cluster.Stop();   // also on SIGINT/SIGTERM, from its own thread
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace manta::bench {

// Runs `round` (which does `per_round` operations) until `seconds` pass, after
// one warm-up round; returns operations per second.
double Rate(double seconds, int per_round, const std::function<void()>& round);

// A rate and its baseline measured side by side: `round` and
// `baseline_round` take turns in slices of a tenth of a second until each
// has run `seconds`, so both see the same machine, whatever else it is
// doing meanwhile. Operations per second of each.
struct PairedRates {
  double value = 0;
  double baseline = 0;
};
PairedRates PairedRate(double seconds, int per_round, const std::function<void()>& round, int baseline_per_round,
                       const std::function<void()>& baseline_round);

// The directory holding this program (build/bin).
std::string BinDir();

// Runs `manta ARGS` with extra environment; returns its exit code (stderr is
// printed on failure).
int RunManta(const std::string& bin, std::vector<std::string> args,
             std::vector<std::pair<std::string, std::string>> env = {});

struct TpuSlice {
  std::string name;      // TPU_NAME
  std::string pod_type;  // "v6e-16"
  std::string topology;  // "4x4"
};

struct ClusterSpec {
  int num_cpus = 2;                  // of the head node
  std::vector<TpuSlice> tpu_slices;  // one raylet per host of each
};

// Two v6e-16 slices (4 hosts of 4 chips each), tpu-group-0 and tpu-group-1.
inline TpuSlice V6e16(int index) { return {"tpu-group-" + std::to_string(index), "v6e-16", "4x4"}; }
inline ClusterSpec TwoV6e16Slices() { return {2, {V6e16(0), V6e16(1)}}; }

// A cluster started with `manta start` in a temporary directory, stopped by
// Stop(), by the destructor, or when the process gets SIGINT or SIGTERM.
// Start() blocks those signals in the calling thread: call it before
// starting other threads.
class LocalCluster {
 public:
  LocalCluster() = default;
  ~LocalCluster() { Stop(); }
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // With a non-empty `address` uses that cluster and starts nothing.
  absl::Status Start(const std::string& address, const ClusterSpec& spec);
  void Stop();

  // Starts one more TPU host (a raylet with GKE's TPU variables): a host
  // that returns after its VM was preempted.
  absl::Status StartTpuHost(const TpuSlice& slice, int worker) const;
  // The pid of the raylet of host `worker` of `slice` (its pid file and
  // environment); -1 if none runs.
  pid_t TpuHostRaylet(const std::string& slice, int worker) const;

  const std::string& address() const { return address_; }
  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& bin_dir() const { return bin_; }

 private:
  std::string bin_ = BinDir();
  std::string address_;
  std::string temp_dir_;  // empty when using an existing cluster
  std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
};

// A bare gRPC server process serving the raylet's service (HealthCheck
// answers at once), killed with this object or with the benchmark.
class RawGrpc {
 public:
  RawGrpc();
  ~RawGrpc();
  bool Start(const std::string& bin);
  // `n` sequential unary round trips; returns how many succeeded.
  int Sequential(int n);
  // `n` calls with 64 in flight.
  void InFlight(int n);

 private:
  struct State;
  pid_t server_ = -1;
  std::unique_ptr<State> state_;
};

}  // namespace manta::bench
