// The parameters one tensor rank of a serving mesh holds: every block of
// the decoder, whole (no FSDP), split over `tensor` ranks as in training
// (query and KV heads and the MLP width). Read from a trainer's checkpoint
// step directory whatever layout wrote it (resharded as the trainer
// resharding restore does), with the tokenizer saved beside it.
//
//   ASSIGN_OR_RETURN(ServingWeights w, ServingWeights::Load(step_dir, /*tensor=*/4, rank));
//
// Immutable once loaded: may be read from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/kernels/buffer.h"
#include "train/kernels/config.h"
#include "train/kernels/params.h"
#include "train/kernels/tokenizer.h"

namespace manta::serve {

class ServingWeights {
 public:
  // `step_dir` is <run>/checkpoints/<step> (it holds manifest.json). The
  // model's heads and MLP width must divide by `tensor`.
  static absl::StatusOr<ServingWeights> Load(const std::string& step_dir, int tensor, int tensor_rank);
  // The initial values of a training run with this seed (tests, benchmarks).
  static absl::StatusOr<ServingWeights> Init(const train::ModelShape& shape, uint64_t seed, int tensor,
                                             int tensor_rank);

  const train::ModelShape& shape() const { return shape_; }
  const train::ParamLayout& layout() const { return *layout_; }
  const float* block(int b) const { return blocks_[b].data(); }
  // The tokenizer saved with the checkpoint, if any.
  const std::optional<train::Tokenizer>& tokenizer() const { return tokenizer_; }
  int64_t step() const { return step_; }

 private:
  ServingWeights(const train::ModelShape& shape, int tensor, int tensor_rank);

  train::ModelShape shape_;
  std::shared_ptr<const train::ParamLayout> layout_;
  std::vector<train::FloatBuffer> blocks_;  // 2 MiB pages: a gigabyte loads without a fault per 4 KiB
  std::optional<train::Tokenizer> tokenizer_;
  int64_t step_ = 0;
};

}  // namespace manta::serve
