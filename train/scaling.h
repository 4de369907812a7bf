// Checking and resolving a run's configuration before anything is asked of
// the cluster. Pure; internal to train/.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/train.h"
#include "train/protocol.h"

namespace manta::train {

// Checks `scaling` and fills in what follows from it: the slice shape, the
// default resources per worker. InvalidArgument naming the field for: a
// worker count below 1 or min > max; with use_tpu, an unknown accelerator
// or topology, or a count that is not whole slices; a resource quantity
// that is NaN, infinite, negative or above 9e14, or an empty name; with
// use_tpu, a TPU request other than the host's chips; an unknown placement
// strategy.
absl::StatusOr<ScalingSpec> ResolveScaling(const ScalingConfig& scaling);

// Checks the run config: a name and storage path that are usable as
// directory names (no NUL, name without '/', not "." or ".."), max_failures
// >= -1, num_to_keep >= 0, positive timeouts, valid environment variable
// names. Fills the default name and storage path.
absl::StatusOr<RunConfig> ResolveRunConfig(const RunConfig& run, absl::Time now);

// The worker counts a run may train at, smallest first: min and max, and
// (with use_tpu) every whole number of slices between.
std::vector<int> CandidateSizes(const ScalingSpec& spec);

// The shape a group of `num_workers` has, for Preflight.
WorkerGroupShape ShapeOf(const ScalingSpec& spec, int num_workers, int64_t host_memory_bytes);

// Ray's rendering of a worker's resources: "{'TPU': 4, 'CPU': 0.5}".
std::string PythonDict(const std::map<std::string, double>& resources);

// 32 random lowercase hex digits.
std::string RandomHexId();

}  // namespace manta::train
