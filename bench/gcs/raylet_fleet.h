// RayletFleet: real raylet processes from the build, all started at once
// against a GcsHead on this machine with low resources (one CPU, 1 GB
// each), as `manta start --address` would start them but without waiting
// for each in turn.
//
//   RayletFleet fleet(*head);
//   RETURN_IF_ERROR(fleet.Start(64));
//   ASSIGN_OR_RETURN(double seconds, fleet.WaitAlive(absl::Minutes(2)));
//   fleet.Stop();   // also by the destructor
//
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/gcs/gcs_head.h"

namespace manta::bench {

class RayletFleet {
 public:
  explicit RayletFleet(const GcsHead& head) : head_(head) {}
  ~RayletFleet() { Stop(); }
  RayletFleet(const RayletFleet&) = delete;
  RayletFleet& operator=(const RayletFleet&) = delete;

  // Spawns `count` raylets (killed with this thread if the benchmark dies).
  absl::Status Start(int count);
  // Seconds from Start() until the GCS lists every raylet alive.
  // DeadlineExceeded after `timeout`; Unavailable when a raylet exited.
  absl::StatusOr<double> WaitAlive(absl::Duration timeout);
  // SIGTERM to all, then waits (SIGKILL after 5 s). Idempotent.
  void Stop();

  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  const GcsHead& head_;
  std::vector<pid_t> pids_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace manta::bench
