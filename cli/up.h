// `manta up` / `manta down`: a simulated cluster on this machine in one
// command. `manta up --tpu v6e-16 --slices 2` starts the head (`manta start
// --head`) and every host of every slice (`manta start --address`, each
// with the environment GKE gives a TPU pod: TPU_ACCELERATOR_TYPE,
// TPU_TOPOLOGY, TPU_WORKER_ID, TPU_NAME), waits until the GCS lists them all
// alive, printing "hosts joined k/N" as they come, and prints how to reach
// the cluster. A cluster already up under the temp dir is named, not
// started again. `manta down` stops it all (`manta stop`).
//
//   manta up --tpu v6e-16 --slices 2 --temp-dir /tmp/try   # head + 8 hosts
//   manta down --temp-dir /tmp/try
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/session.h"

namespace manta::cli {

struct UpOptions {
  std::string tpu;       // pod type of each slice, e.g. "v6e-16"; empty: no TPU hosts
  std::string topology;  // of each slice; empty: the squarest valid one for the pod type
  int slices = 1;
  int cpu_hosts = 0;  // plain hosts besides the slices
  int host_cpus = 1;  // CPUs each simulated host offers
  std::string temp_dir = kDefaultTempDir;
  int port = 6379;               // the GCS's
  int dashboard_port = -1;       // as `manta start`'s
  int metrics_export_port = -1;  // the GCS's, as `manta start --head`'s (hosts take free ports)
  absl::Duration timeout = absl::Seconds(120);
};

// One host to start: its `manta start` environment (empty for a plain host).
struct SimulatedHost {
  std::vector<std::pair<std::string, std::string>> env;
  std::string label;  // "tpu-group-1 worker 3", "cpu host 0"
};

// The hosts `options` asks for, validated: InvalidArgument naming the flag
// for an unknown pod type, a topology that disagrees with it, a slice count
// outside [0, 64] or more than 256 hosts in all. The slices are named
// tpu-group-0, tpu-group-1, ... as KubeRay names worker groups.
absl::StatusOr<std::vector<SimulatedHost>> PlanHosts(const UpOptions& options);

// The most nearly square topology that Ray accepts for `pod_type` ("v6e-16"
// -> "4x4", "v4-16" -> "2x2x2"); InvalidArgument when there is none.
absl::StatusOr<std::string> DefaultTopology(const std::string& pod_type);

absl::Status RunUp(const UpOptions& options, std::ostream& out, std::ostream& err);
absl::Status RunDown(const std::string& temp_dir, std::ostream& out);

}  // namespace manta::cli
