// What the driver, the controller and the workers say to each other: the
// arguments and results of the trainer's actor methods (msgpack). Internal
// to train/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "manta/actor.h"
#include "manta/serialization.h"
#include "manta/train.h"

namespace manta::train {

class TrainController;

// The scaling config, checked and resolved (see ResolveScaling).
struct ScalingSpec {
  bool use_tpu = false;
  int min_workers = 1;
  int max_workers = 1;
  std::string topology;           // normalized ("4x4"); use_tpu only
  std::string accelerator_version;
  std::string pod_type;           // "v6e-16"
  std::string accelerator_type;   // "TPU-V6E"
  int hosts_per_slice = 0;
  int chips_per_host = 0;
  std::map<std::string, double> resources_per_worker;
  std::string placement_strategy = "PACK";
  MSGPACK_DEFINE(use_tpu, min_workers, max_workers, topology, accelerator_version, pod_type, accelerator_type,
                 hosts_per_slice, chips_per_host, resources_per_worker, placement_strategy);
};

// Everything the controller needs, from the driver.
struct ControllerSpec {
  std::string run_id;
  std::string run_name;
  std::string run_dir;  // <storage_path>/<name>
  std::string loop_name;
  std::string loop_args;
  bool loop_takes_config = false;
  ScalingSpec scaling;
  int max_failures = 0;
  int num_to_keep = 0;
  std::map<std::string, std::string> worker_env;
  int64_t scheduling_timeout_ms = 0;    // <= 0: no limit
  int64_t worker_start_timeout_ms = 0;
  MSGPACK_DEFINE(run_id, run_name, run_dir, loop_name, loop_args, loop_takes_config, scaling, max_failures,
                 num_to_keep, worker_env, scheduling_timeout_ms, worker_start_timeout_ms);
};

// A worker's answer to Setup.
struct WorkerInfo {
  int pid = 0;
  std::string node_id;  // hex
  std::string node_ip;
  int free_port = 0;    // a port free on its host when asked (rank 0's is the coordinator's)
  MSGPACK_DEFINE(pid, node_id, node_ip, free_port);
};

// What a worker runs: the loop, in its place in the group.
struct WorkerRunRequest {
  TrainContext context;
  std::string loop_name;
  std::string loop_args;
  bool loop_takes_config = false;
  std::optional<Checkpoint> checkpoint;  // the latest committed one
  ActorHandle<TrainController> controller;
  std::map<std::string, std::string> env;  // JAX_* variables of this attempt
  MSGPACK_DEFINE(context, loop_name, loop_args, loop_takes_config, checkpoint, controller, env);
};

// One rank's n-th Report.
struct ReportRequest {
  std::string attempt_id;
  int rank = 0;
  int64_t seq = 0;  // 1 for a rank's first report of the attempt
  std::map<std::string, double> metrics;
  std::optional<Checkpoint> checkpoint;
  MSGPACK_DEFINE(attempt_id, rank, seq, metrics, checkpoint);
};

struct ReportReply {
  bool ok = false;
  std::string error;                     // when not ok: the attempt ended
  std::optional<Checkpoint> committed;   // the latest committed checkpoint after this report
  MSGPACK_DEFINE(ok, error, committed);
};

// Fit's result as the controller returns it.
struct RunOutcome {
  std::map<std::string, double> metrics;
  std::optional<Checkpoint> checkpoint;
  int code = 0;  // absl::StatusCode
  std::string message;
  std::string run_id;
  int num_failures = 0;
  int num_attempts = 0;
  MSGPACK_DEFINE(metrics, checkpoint, code, message, run_id, num_failures, num_attempts);
};

}  // namespace manta::train
