// What one process of a training job holds in memory, computed from the
// config and the distributed environment before anything is allocated, so
// a job that cannot fit its hosts is refused with the numbers.
//
//   ASSIGN_OR_RETURN(MemoryEstimate m, EstimateMemory(config, env));
//   if (m.per_process_bytes > host_bytes) ... refuse, citing both
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "train/kernels/config.h"
#include "train/kernels/mesh.h"

namespace manta::train {

struct MemoryEstimate {
  // Per logical device: its FSDP shards of parameters, AdamW moments and
  // gradients; the gathered blocks (fsdp > 1) and the gradients' padded
  // copies for their reductions (in double with exact_gradient_sums; with
  // nothing to reduce, a double accumulator of the blocks when exact sums
  // span several micro-batches); the
  // model's activations and work buffers for one micro-batch; its tokens.
  // What DeviceTrainer::BytesHeld reports once a step ran.
  int64_t state_bytes_per_device = 0;       // parameters + moments + gradients
  int64_t gathered_bytes_per_device = 0;    // full blocks and reduction copies
  int64_t activation_bytes_per_device = 0;  // activations, work buffers, tokens
  int64_t per_device_bytes = 0;
  int64_t per_process_bytes = 0;  // chips_per_host devices

  // "8.1 GiB per host (4 devices x 2.0 GiB: 1.5 GiB parameters and optimizer
  // state, ...)".
  std::string DebugString(int chips_per_host) const;
};

// Larger estimates are refused as past any machine (1 EiB).
inline constexpr int64_t kMaxEstimateBytes = int64_t{1} << 60;

// `global_batch` (rows over all devices) as the run fixes it, or 0 for
// per_device_batch_size on each device of `env`. Errors: those of
// Mesh::Create and the tensor split (InvalidArgument naming the config
// key); InvalidArgument past kMaxEstimateBytes.
absl::StatusOr<MemoryEstimate> EstimateMemory(const Config& config, const DistributedEnv& env,
                                              int64_t global_batch = 0);

// "1.5 GiB", "512.0 MiB", "12 B".
std::string FormatBytes(int64_t bytes);

}  // namespace manta::train
