// The trainer: Ray Train's JaxTrainer for Manta. One function, the training
// loop, runs on a group of worker processes (one per TPU host of whole
// reserved slices, or one per bundle of `resources_per_worker`), started,
// watched and restarted by a controller actor.
//
//   #include <manta/api.h>
//   #include <manta/train.h>
//
//   void TrainLoop(std::vector<std::string> argv) {
//     const manta::train::TrainContext& ctx = manta::train::GetContext();
//     ... jax.distributed.initialize(ctx.coordinator_address, ctx.world_size, ctx.world_rank) ...
//     for (int step = start; step < steps; ++step) {
//       ... train ...
//       manta::train::Report({{"loss", loss}}, saved ? std::optional(manta::train::Checkpoint{dir}) : std::nullopt);
//     }
//   }
//   MANTA_REMOTE(TrainLoop);
//
//   int main(int argc, char** argv) {
//     manta::Init(argc, argv);
//     manta::train::ScalingConfig scaling{.use_tpu = true, .num_workers = 8, .topology = "4x4",
//                                         .accelerator_type = "TPU-V6E", .resources_per_worker = {{"TPU", 4}}};
//     manta::train::RunConfig run{.name = "llama", .failure_config = {.max_failures = 3}};
//     manta::train::JaxTrainer trainer(TrainLoop, std::vector<std::string>(argv + 1, argv + argc), scaling, run);
//     manta::train::Result result = trainer.Fit();
//     if (!result.ok()) std::cerr << result.error << "\n";
//     manta::Shutdown();
//   }
//
// How a run goes (Ray Train v2's controller): INITIALIZING, SCHEDULING
// (reserve whole slices, start the workers), RUNNING (every worker runs the
// loop), then FINISHED; a worker's error, a worker process's death or its
// host's death ends the attempt: the group is torn down, RESTARTING, and a
// new attempt starts from the latest committed checkpoint, while the failures
// stay within FailureConfig::max_failures; past it the run is ERRORED. While
// the resources are not there it waits in RESCHEDULING, up to
// RunConfig::scheduling_timeout. Each attempt gets a fresh distributed
// environment (coordinator, ranks, TPU_* and MEGASCALE_* variables). The run,
// its attempts and workers are recorded in the GCS (`manta list train-runs`).
//
// Thread-safety: Fit may be called from any thread after manta::Init; the
// in-loop calls (GetContext, Report, GetCheckpoint) from any thread of a
// worker while its loop runs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "manta/errors.h"
#include "manta/remote.h"
#include "manta/serialization.h"
#include "manta/task_caller.h"

namespace manta::train {

// How many workers: a fixed count (`num_workers = 8`) or, for an elastic run,
// `{min, max}` (`num_workers = {4, 8}`). With use_tpu both must be whole
// slices of the topology.
struct WorkerCount {
  WorkerCount(int n = 1) : min(n), max(n) {}  // NOLINT: implicit, as Ray's int
  WorkerCount(int min_workers, int max_workers) : min(min_workers), max(max_workers) {}
  bool elastic() const { return min != max; }
  int min;
  int max;
};

struct ScalingConfig {
  bool use_tpu = false;
  WorkerCount num_workers = 1;
  // With use_tpu: the slices' topology ("4x4") and accelerator ("TPU-V6E" or
  // "v6e"); one worker per host of whole slices.
  std::string topology = {};
  std::string accelerator_type = {};
  // What each worker holds for its life. Default: {TPU: chips per host}
  // with use_tpu, else {CPU: 1}. With use_tpu, TPU must be all of a host's
  // chips.
  std::map<std::string, double> resources_per_worker = {};
  // PACK, SPREAD, STRICT_PACK or STRICT_SPREAD, for workers not on slices
  // (slices are always one worker per host).
  std::string placement_strategy = "PACK";
  // Node labels every worker's node must match (Ray's label_selector:
  // {"zone": "us-1"}, {"zone": "!us-2"}, {"zone": "in(a,b)"}). With use_tpu,
  // only slices whose every host matches are reserved (select by slice name,
  // pool or any label of the hosts; not by worker id).
  std::map<std::string, std::string> label_selector = {};
};

struct FailureConfig {
  // Attempts that may fail before the run is ERRORED; -1: unlimited.
  int max_failures = 0;
};

struct CheckpointConfig {
  // Committed checkpoints to keep on disk, newest first; older ones are
  // deleted once a newer one is committed. 0: keep all.
  int num_to_keep = 0;
};

struct RunConfig {
  // Default: "manta_train_<date>_<time>".
  std::string name = {};
  // Where runs keep their files (<storage_path>/<name>/). Default:
  // $HOME/manta_results (/tmp/manta_results without HOME).
  std::string storage_path = {};
  FailureConfig failure_config = {};
  CheckpointConfig checkpoint_config = {};
  // Environment variables of every worker process (Ray's
  // worker_runtime_env={"env_vars": ...}).
  std::map<std::string, std::string> worker_env = {};
  // How long the run may wait for its resources (in SCHEDULING and
  // RESCHEDULING) before Fit gives up with DeadlineExceeded.
  absl::Duration scheduling_timeout = absl::Minutes(10);
  // How long a started worker group may take to come up.
  absl::Duration worker_start_timeout = absl::Seconds(60);
};

// A directory holding one checkpoint.
struct Checkpoint {
  std::string path;
  MSGPACK_DEFINE(path);
};

// A worker whose loop failed in the run's last attempt.
struct WorkerFailure {
  int rank = 0;
  std::string where;    // "rank 3 on 10.0.0.4 (pid 123)", as the error message names it
  std::string message;  // the loop's error
  // The front end's own form of the error, when the loop is not C++'s (a
  // Python loop's pickled exception with its traceback); empty otherwise.
  std::string data;
  MSGPACK_DEFINE(rank, where, message, data);
};

struct Result {
  // Rank 0's latest reported metrics.
  std::map<std::string, double> metrics;
  // The latest committed checkpoint, if any.
  std::optional<Checkpoint> checkpoint;
  // OK when the run finished. Otherwise why not: InvalidArgument for a bad
  // configuration (nothing was reserved), DeadlineExceeded when resources
  // did not come within scheduling_timeout, Aborted when the failures
  // exceeded max_failures (the message names each failed rank, its host and
  // its error), Unavailable when the controller itself died.
  absl::Status error;
  std::string path;    // <storage_path>/<name>
  std::string run_id;  // as `manta list train-runs` shows it
  int num_failures = 0;
  int num_attempts = 0;
  // When the run failed because loops failed: each failed worker of the
  // last attempt (of an elastic run: the worker whose failure ended it);
  // empty otherwise.
  std::vector<WorkerFailure> worker_failures;

  bool ok() const { return error.ok(); }
};

// Where one worker stands in the group of the current attempt.
struct TrainContext {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;  // among the workers on this node
  int local_world_size = 1;
  int node_rank = 0;  // this node among the group's nodes
  int slice_id = 0;   // this worker's slice (0 without use_tpu)
  int num_slices = 1;
  int worker_id = 0;                // TPU_WORKER_ID within the slice
  int chips = 0;                    // TPU chips this worker holds
  std::string coordinator_address;  // "ip:port" of rank 0, for jax.distributed.initialize
  std::string run_name;
  std::string run_id;
  std::string attempt_id;
  int attempt_number = 1;    // 1 for the run's first attempt
  std::string storage_path;  // the run's <storage_path>/<name>
  int64_t epoch = 1;         // the group this context is of (an elastic run re-forms its group)
  int max_world_size = 1;    // the most workers the run may have (ScalingConfig num_workers max)
  int max_slices = 1;
  MSGPACK_DEFINE(world_rank, world_size, local_rank, local_world_size, node_rank, slice_id, num_slices, worker_id,
                 chips, coordinator_address, run_name, run_id, attempt_id, attempt_number, storage_path, epoch,
                 max_world_size, max_slices);
};

// In a worker while its loop runs: where it stands. Throws manta::Error
// (FailedPrecondition) anywhere else.
const TrainContext& GetContext();

// In a worker while its loop runs: reports metrics and, optionally, a
// checkpoint this rank wrote its part of. A barrier: returns once every rank
// of the attempt has made the same report (the n-th call of each rank). The
// checkpoint counts only when every rank reported one; it is then committed
// with rank 0's path and is what GetCheckpoint and a restarted attempt see.
// Rank 0's metrics are the run's. Throws manta::Error when the attempt was
// ended meanwhile (Aborted) or the controller is gone.
void Report(const std::map<std::string, double>& metrics, const std::optional<Checkpoint>& checkpoint = std::nullopt);

// A preemption notice for the current group (Ray Train's
// get_preemption_info): nodes of the group are draining (`manta
// drain-node`, a spot VM's notice) and will leave by `deadline_ms`.
struct PreemptionInfo {
  int64_t deadline_ms = 0;            // unix epoch ms: the earliest deadline; 0 when none was given
  std::vector<int> ranks;             // world ranks on the draining nodes, ascending
  std::vector<std::string> node_ids;  // hex
  std::string reason;                 // the drain's reason ("preemption", ...)
  MSGPACK_DEFINE(deadline_ms, ranks, node_ids, reason);
};

// In a worker while its loop runs: the preemption notice for its group, as
// of its latest report (every rank sees the same one after the same
// report); nullopt when none of the group's nodes is draining.
std::optional<PreemptionInfo> GetPreemptionInfo();

// In a worker: the latest committed checkpoint when this attempt started
// (or since, through Report), if any.
std::optional<Checkpoint> GetCheckpoint();

// What a worker group will look like, for checks before anything is reserved.
struct WorkerGroupShape {
  int num_workers = 0;
  int num_slices = 0;  // 0 without use_tpu
  int hosts_per_slice = 0;
  int chips_per_worker = 0;  // TPU chips per worker
  std::string topology;
  std::string pod_type;  // "v6e-16"
  // The least memory (the `memory` resource) of the nodes the workers may
  // land on; 0 when no such node is known yet.
  int64_t host_memory_bytes = 0;
  bool elastic = false;  // the run resizes between min and max workers
  int max_workers = 0;
};
// A check of the loop's own configuration (a mesh that does not match the
// devices, a model too big for a host), run by Fit for every size the run
// may train at, before anything is reserved. A non-OK status fails the run
// with it.
using Preflight = std::function<absl::Status(const WorkerGroupShape&)>;

namespace internal {

struct FitRequest {
  std::string loop_name;
  std::string loop_args;  // the serialized loop config; empty for a loop without one
  bool loop_takes_config = false;
  ScalingConfig scaling;
  RunConfig run;
  Preflight preflight;
};
Result Fit(const FitRequest& request);
// The registered name of `loop`, or throws manta::Error.
std::string LoopName(const void* key, const std::type_info& type);

}  // namespace internal

// Runs `loop(loop_config)` on every worker. The loop must be registered with
// MANTA_REMOTE; it may return void or absl::Status, and may take its config
// by value or const reference (or take nothing).
template <typename Config = Nil>
class JaxTrainer {
 public:
  template <typename R, typename P>
  JaxTrainer(R (*loop)(P), Config loop_config, ScalingConfig scaling, RunConfig run = {}) {
    static_assert(std::is_same_v<std::decay_t<P>, Config>, "the loop's parameter must be the config's type");
    request_.loop_name = internal::LoopName(manta::internal::FunctionKey(loop), typeid(loop));
    absl::StatusOr<std::string> bytes = Serialize(loop_config);
    manta::internal::ThrowIfError(bytes.status());
    request_.loop_args = *std::move(bytes);
    request_.loop_takes_config = true;
    request_.scaling = std::move(scaling);
    request_.run = std::move(run);
  }
  template <typename R>
  JaxTrainer(R (*loop)(), ScalingConfig scaling, RunConfig run = {}) {
    request_.loop_name = internal::LoopName(manta::internal::FunctionKey(loop), typeid(loop));
    request_.scaling = std::move(scaling);
    request_.run = std::move(run);
  }

  // A check run before anything is reserved (see Preflight).
  JaxTrainer& SetPreflight(Preflight preflight) {
    request_.preflight = std::move(preflight);
    return *this;
  }

  // Runs the training to its end and returns how it ended. Blocks. Throws
  // manta::Error only when Init has not been called.
  Result Fit() { return internal::Fit(request_); }

 private:
  internal::FitRequest request_;
};

template <typename R, typename P, typename Config>
JaxTrainer(R (*)(P), Config, ScalingConfig, RunConfig) -> JaxTrainer<Config>;
template <typename R, typename P, typename Config>
JaxTrainer(R (*)(P), Config, ScalingConfig) -> JaxTrainer<Config>;

}  // namespace manta::train
