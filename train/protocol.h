// What the driver, the controller and the workers say to each other: the
// arguments and results of the trainer's actor methods (msgpack). Internal
// to train/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
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
  std::string topology;  // normalized ("4x4"); use_tpu only
  std::string accelerator_version;
  std::string pod_type;          // "v6e-16"
  std::string accelerator_type;  // "TPU-V6E"
  int hosts_per_slice = 0;
  int chips_per_host = 0;
  std::map<std::string, double> resources_per_worker;
  std::string placement_strategy = "PACK";
  std::map<std::string, std::string> label_selector;
  bool elastic() const { return min_workers != max_workers; }  // resizes between them
  MSGPACK_DEFINE(use_tpu, min_workers, max_workers, topology, accelerator_version, pod_type, accelerator_type,
                 hosts_per_slice, chips_per_host, resources_per_worker, placement_strategy, label_selector);
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
  int64_t scheduling_timeout_ms = 0;  // <= 0: no limit
  int64_t worker_start_timeout_ms = 0;
  MSGPACK_DEFINE(run_id, run_name, run_dir, loop_name, loop_args, loop_takes_config, scaling, max_failures, num_to_keep,
                 worker_env, scheduling_timeout_ms, worker_start_timeout_ms);
};

// A worker's answer to Setup.
struct WorkerInfo {
  int pid = 0;
  std::string node_id;  // hex
  std::string node_ip;
  int free_port = 0;  // a port free on its host when asked (rank 0's is the coordinator's)
  MSGPACK_DEFINE(pid, node_id, node_ip, free_port);
};

// How a worker gets its state when it joins a group (an epoch): the
// kernels' StateSource.
struct JoinInstruction {
  enum Source { kInit = 0, kRestore = 1, kKeep = 2, kPeers = 3, kDefault = 4 };
  int source = kDefault;           // kDefault: the loop's own rule (a fixed-size run)
  std::string restore_from;        // kRestore
  int64_t step = 0;                // kKeep, kPeers: the next step
  std::vector<int> source_slices;  // kPeers: slices whose workers hold the state
  MSGPACK_DEFINE(source, restore_from, step, source_slices);
};

// A worker of an elastic run, stable across its groups: host `host` (its
// worker id) of the slice named `slice`. Empty in a run of fixed size.
struct WorkerKey {
  std::string slice;
  int host = 0;

  // "<slice>/<host>", as the logs name the worker.
  std::string ToString() const { return absl::StrCat(slice, "/", host); }
  bool operator==(const WorkerKey& o) const { return slice == o.slice && host == o.host; }
  bool operator!=(const WorkerKey& o) const { return !(*this == o); }
  bool operator<(const WorkerKey& o) const { return std::tie(slice, host) < std::tie(o.slice, o.host); }
  MSGPACK_DEFINE(slice, host);
};

// What a worker runs: the loop, in its place in the group.
struct WorkerRunRequest {
  TrainContext context;
  std::string loop_name;
  std::string loop_args;
  bool loop_takes_config = false;
  std::optional<Checkpoint> checkpoint;  // the latest committed one
  ActorHandle<TrainController> controller;
  std::map<std::string, std::string> env;  // JAX_* (and MEGASCALE_*) variables of this group
  JoinInstruction join;
  WorkerKey worker_key;
  MSGPACK_DEFINE(context, loop_name, loop_args, loop_takes_config, checkpoint, controller, env, join, worker_key);
};

// One rank's n-th report of a group (epoch).
struct ReportRequest {
  std::string attempt_id;
  int64_t epoch = 0;
  int rank = 0;
  int64_t seq = 0;  // 1 for a rank's first report of the group
  std::map<std::string, double> metrics;
  std::optional<Checkpoint> checkpoint;
  // From loops that keep their state across groups (internal::CommitStep):
  // the report commits the step it names; `replicated` says every slice
  // holds the whole state (data parallelism across slices).
  bool resizable = false;
  bool replicated = false;
  MSGPACK_DEFINE(attempt_id, epoch, rank, seq, metrics, checkpoint, resizable, replicated);
};

struct ReportReply {
  bool ok = false;
  std::string error;                         // when not ok: the group ended (the step is not committed)
  std::optional<Checkpoint> committed;       // the latest committed checkpoint after this report
  bool pause = false;                        // apply this step, then wait for the next group
  std::optional<PreemptionInfo> preemption;  // nodes of the group are draining
  MSGPACK_DEFINE(ok, error, committed, pause, preemption);
};

// A resizable worker whose group ended asks how to go on.
struct AwaitRequest {
  std::string attempt_id;
  WorkerKey worker_key;
  int64_t epoch = 0;      // the group that ended
  int64_t next_step = 0;  // the steps its state holds
  std::string why;        // "paused", or why the group broke
  // A checkpoint saved after the group's last committed step, not yet
  // reported: committed when every worker of the group reports it here.
  std::optional<Checkpoint> checkpoint;
  MSGPACK_DEFINE(attempt_id, worker_key, epoch, next_step, why, checkpoint);
};

struct AwaitReply {
  bool leave = false;  // this worker is not in the next group: end the loop
  TrainContext context;
  JoinInstruction join;
  std::map<std::string, std::string> env;
  MSGPACK_DEFINE(leave, context, join, env);
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
  std::vector<WorkerFailure> worker_failures;
  MSGPACK_DEFINE(metrics, checkpoint, code, message, run_id, num_failures, num_attempts, worker_failures);
};

}  // namespace manta::train
