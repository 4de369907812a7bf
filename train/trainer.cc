// JaxTrainer::Fit in the driver: checks the configuration, creates the
// controller next to the driver and waits for its outcome.
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "manta/state.h"
#include "manta/train.h"
#include "train/controller.h"
#include "train/scaling.h"

namespace manta::train {
namespace {

// Whether `dir` could be made: its nearest existing ancestor is a directory
// this process may write in (or `dir` is one already).
absl::Status CheckCanCreate(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  while (!p.empty() && !std::filesystem::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  if (!std::filesystem::is_directory(p, ec) || access(p.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create the run's directory ", dir, ": ", p.string(),
                                                   " is not a directory this process may write in"));
  }
  return absl::OkStatus();
}

Result Failed(absl::Status error) {
  Result r;
  r.error = std::move(error);
  return r;
}

// The least `memory` of the alive nodes the workers may land on; 0 when
// none is known.
int64_t HostMemory(const ScalingSpec& spec, const std::vector<NodeInfo>& nodes) {
  int64_t least = 0;
  for (const NodeInfo& n : nodes) {
    if (!n.alive) continue;
    if (spec.use_tpu) {
      auto pod = n.labels.find("manta.io/tpu-pod-type");
      if (pod == n.labels.end() || pod->second != spec.pod_type) continue;
    }
    auto mem = n.resources_total.find("memory");
    if (mem == n.resources_total.end()) continue;
    const int64_t bytes = static_cast<int64_t>(mem->second);
    if (least == 0 || bytes < least) least = bytes;
  }
  return least;
}

// Where the controller goes: the driver's node. The head's marker when the
// driver runs on the head's address, else the driver's address.
std::map<std::string, double> ControllerPlacement(const std::vector<NodeInfo>& nodes) {
  const std::string ip = GetRuntimeContext().node_ip;
  for (const NodeInfo& n : nodes) {
    if (n.alive && n.is_head && n.ip == ip) return {{"node:__internal_head__", 0.001}};
  }
  return {{"node:" + ip, 0.001}};
}

Result ToResult(const RunOutcome& o, const std::string& run_dir) {
  Result r;
  r.metrics = o.metrics;
  r.checkpoint = o.checkpoint;
  r.error = absl::Status(static_cast<absl::StatusCode>(o.code), o.message);
  r.path = run_dir;
  r.run_id = o.run_id;
  r.num_failures = o.num_failures;
  r.num_attempts = o.num_attempts;
  r.worker_failures = o.worker_failures;
  return r;
}

}  // namespace

namespace internal {

std::string LoopName(const void* key, const std::type_info& type) {
  return manta::internal::RemoteFunctionName(key, type);
}

Result Fit(const FitRequest& request) {
  if (!IsInitialized())
    throw Error(absl::FailedPreconditionError("JaxTrainer::Fit: manta::Init() has not been called"));
  auto scaling = ResolveScaling(request.scaling);
  if (!scaling.ok()) return Failed(scaling.status());
  auto run = ResolveRunConfig(request.run, absl::Now());
  if (!run.ok()) return Failed(run.status());
  auto nodes = TryNodes();
  if (!nodes.ok()) return Failed(nodes.status());
  if (request.preflight) {
    const int64_t memory = HostMemory(*scaling, *nodes);
    for (int n : CandidateSizes(*scaling)) {
      absl::Status s = request.preflight(ShapeOf(*scaling, n, memory));
      if (!s.ok()) return Failed(s);
    }
  }
  ControllerSpec spec;
  spec.run_id = RandomHexId();
  spec.run_name = run->name;
  spec.run_dir = run->storage_path + "/" + run->name;
  spec.loop_name = request.loop_name;
  spec.loop_args = request.loop_args;
  spec.loop_takes_config = request.loop_takes_config;
  spec.scaling = *scaling;
  spec.max_failures = run->failure_config.max_failures;
  spec.num_to_keep = run->checkpoint_config.num_to_keep;
  spec.worker_env = run->worker_env;
  spec.scheduling_timeout_ms = absl::ToInt64Milliseconds(run->scheduling_timeout);
  spec.worker_start_timeout_ms = absl::ToInt64Milliseconds(run->worker_start_timeout);
  // Nothing is made there until something is written (a checkpoint), but
  // a place that could never be written is refused now.
  if (absl::Status s = CheckCanCreate(spec.run_dir); !s.ok()) return Failed(s);

  try {
    auto controller = Actor(TrainController::Create)
                          .SetResources(ControllerPlacement(*nodes))
                          .SetMaxConcurrency(2 * scaling->max_workers + 4)
                          .Remote(spec);
    absl::StatusOr<std::shared_ptr<RunOutcome>> outcome =
        TryGet(controller.Task(&TrainController::Run).Remote(controller));
    Kill(controller);
    if (!outcome.ok()) {
      return Failed(
          absl::UnavailableError(absl::StrCat("the training controller failed: ", outcome.status().message())));
    }
    return ToResult(**outcome, spec.run_dir);
  } catch (const Error& e) {
    return Failed(e.status());
  }
}

}  // namespace internal
}  // namespace manta::train
