#include "train/kernels/memory.h"

#include <cmath>

#include "absl/numeric/int128.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "train/kernels/model.h"
#include "train/kernels/params.h"

namespace manta::train {

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", bytes) : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string MemoryEstimate::DebugString(int chips_per_host) const {
  return absl::StrFormat(
      "%s per host (%d devices x %s: %s parameters, AdamW moments and gradients, %s gathered blocks and "
      "reduction buffers, %s activations)",
      FormatBytes(per_process_bytes), chips_per_host, FormatBytes(per_device_bytes),
      FormatBytes(state_bytes_per_device), FormatBytes(gathered_bytes_per_device),
      FormatBytes(activation_bytes_per_device));
}

absl::StatusOr<MemoryEstimate> EstimateMemory(const Config& config, const DistributedEnv& env, int64_t global_batch) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(config.parallelism, env));
  RETURN_IF_ERROR(ParamLayout::CheckTensorSplit(config.model, mesh.tensor()));
  // Every tensor rank holds blocks of the same sizes.
  const ParamLayout layout(config.model, mesh.tensor(), 0);
  const int fsdp = mesh.fsdp();
  int64_t sizes = 0, shards = 0, padded = 0;
  for (int b = 0; b < layout.num_blocks(); ++b) {
    const int64_t shard = ShardSize(layout.block(b).size, fsdp);
    sizes += layout.block(b).size;
    shards += shard;
    padded += shard * fsdp;
  }
  if (global_batch <= 0) {
    ASSIGN_OR_RETURN(global_batch, GlobalBatch(config, mesh.num_devices()));
  }
  const int64_t rows = std::max<int64_t>(1, global_batch / std::max(1, mesh.batch_shards()));
  const int64_t seq = config.max_target_length;
  // A device runs one micro-batch at a time.
  const int64_t micro = MicroRows(config, rows);
  // A reduced gradient goes through a padded copy of its block, in double
  // for exact sums (with the reduced shard); unreduced, exact sums over
  // several micro-batches add up in a double copy of the block. Counted in
  // 128 bits: a config past any machine's memory is refused with what it
  // asks for, never wrapped into a small number.
  absl::int128 reduction = 0;
  if (fsdp > 1 || mesh.data() > 1) {
    reduction = config.exact_gradient_sums ? absl::int128(padded + shards) * 8 : absl::int128(padded) * 4;
  } else if (config.exact_gradient_sums && rows > micro) {
    reduction = absl::int128(sizes) * 8;
  }
  const absl::int128 floats = DecoderModel::BufferFloats(config.model, layout, micro, seq);
  const absl::int128 activations = floats * 4 + absl::int128(2) * micro * seq * 4;
  const absl::int128 state = absl::int128(4) * shards * 4;
  const absl::int128 gathered = absl::int128(fsdp > 1 ? padded : 0) * 4 + reduction;
  const absl::int128 per_device = state + gathered + activations;
  const absl::int128 per_process = per_device * std::max(1, env.chips_per_host);
  if (per_process > absl::int128(kMaxEstimateBytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the model as configured needs more than %s per host (%d x %d activation rows of %d tokens): lower "
        "max_target_length, per_device_batch_size or the model's sizes",
        FormatBytes(kMaxEstimateBytes), micro, config.model.num_layers, seq));
  }
  MemoryEstimate m;
  m.state_bytes_per_device = static_cast<int64_t>(state);
  m.gathered_bytes_per_device = static_cast<int64_t>(gathered);
  m.activation_bytes_per_device = static_cast<int64_t>(activations);
  m.per_device_bytes = static_cast<int64_t>(per_device);
  m.per_process_bytes = static_cast<int64_t>(per_process);
  return m;
}

}  // namespace manta::train
