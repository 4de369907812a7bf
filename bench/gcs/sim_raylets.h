// SimulatedRaylets: many raylets in one process, as a GCS sees them.
//
// Each node listens on a port of its own on 127.0.0.1 and serves the
// raylet's NodeManagerService there: health checks, worker leases
// (granted when its books hold the demand) and the placement-group bundle
// calls, with SimNode's books. Toward the GCS each node does what a raylet
// does, over a connection of its own: RegisterNode (again after a timeout),
// ReportResources after each change (at most one every 100 ms, one in
// flight), and a Subscribe stream of NODE_INFO and NODE_RESOURCES that
// re-reads the node table and every node's resources after a gap. Replies are
// read for their sequence only: the messages, which each raylet would parse
// on its own machine, are skipped, so this process takes less of the GCS's
// machine. The workers the nodes grant live in one child process
// (bench_gcs_sim_workers) that accepts every actor's creation task at once,
// so actors become ALIVE without a process each, and the GCS's connection
// to each worker is held there.
//
//   SimOptions o{.nodes = 2000, .resources = cpus, .gcs_address = head, .token = token,
//                .workers_bin = bin + "/bench_gcs_sim_workers", .scratch_dir = dir};
//   ASSIGN_OR_RETURN(auto sim, SimulatedRaylets::Start(o));
//   RETURN_IF_ERROR(sim->RegisterAll(absl::Minutes(5)));
//   ...
//   sim->Stop();   // after the GCS is gone, so held polls have ended
//
// Threads: one EventLoop thread owns every node's state; gRPC handlers post
// to it (health checks are answered on gRPC's threads from state fixed at
// Start). Public methods: any one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/resources.h"

namespace manta::bench {

struct SimOptions {
  int nodes = 0;
  ResourceSet resources;  // what each node offers
  std::string gcs_address;
  std::string token;
  // Subscribe each node, as raylets do; off only to measure what it costs.
  bool poll = true;
  std::string workers_bin;  // bench_gcs_sim_workers
  std::string scratch_dir;  // for the workers' port file and log
};

// Counts since Start.
struct SimStats {
  int64_t registered = 0;
  int64_t register_retries = 0;  // RegisterNode calls that timed out or found the GCS unavailable
  // Nodes registered more than 5 s after their first attempt: a raylet with
  // the default --gcs_connect_timeout_s would have given up and exited.
  int64_t late_registrations = 0;
  int64_t health_checks = 0;
  int64_t health_checks_late = 0;  // answered with under 500 ms of their deadline left
  int64_t health_check_gaps = 0;   // over 3 s between two checks of a node
  int64_t reports = 0;
  int64_t keepalives = 0;     // reports that only say the node lives
  int64_t polls = 0;          // poll replies
  int64_t poll_messages = 0;  // messages in them
  int64_t poll_bytes = 0;     // their size on the wire
  int64_t poll_gaps = 0;      // replies that made a node re-read everything
  int64_t leases_granted = 0;
  int64_t leases_rejected = 0;
  int64_t bundle_calls = 0;
  int64_t errors = 0;  // calls that failed other than by unavailability
};

class SimulatedRaylets {
 public:
  // Starts the workers' process, binds every node's port and starts the
  // loop; registers nothing yet. Internal when a port cannot be bound.
  static absl::StatusOr<std::unique_ptr<SimulatedRaylets>> Start(SimOptions options);
  ~SimulatedRaylets();
  SimulatedRaylets(const SimulatedRaylets&) = delete;
  SimulatedRaylets& operator=(const SimulatedRaylets&) = delete;

  // Registers every node at once (retrying while the GCS is unavailable or
  // slow, as a raylet does, but without giving up) and returns when the GCS
  // has accepted them all.
  // DeadlineExceeded after `timeout`; the GCS's error when it refuses one.
  absl::Status RegisterAll(absl::Duration timeout);
  // Waits until no node has a resource change left to report and none is
  // in flight; DeadlineExceeded after `timeout`.
  absl::Status WaitReported(absl::Duration timeout);

  SimStats stats() const;
  // An error when a call failed unexpectedly or the GCS does not count every
  // node alive (it declared some dead).
  absl::Status Healthy() const;

  // Stops serving and waits (up to 10 s) for calls to the GCS to end.
  // Idempotent.
  void Stop();

 private:
  class Impl;
  explicit SimulatedRaylets(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::bench
