#include "serve/engine/weights.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "train/kernels/checkpoint.h"

namespace manta::serve {

ServingWeights::ServingWeights(const train::ModelShape& shape, int tensor, int tensor_rank)
    : shape_(shape), layout_(std::make_shared<const train::ParamLayout>(shape, tensor, tensor_rank)) {
  blocks_.resize(layout_->num_blocks());
  for (int b = 0; b < layout_->num_blocks(); ++b) blocks_[b].assign(layout_->block(b).size, 0.0f);
}

absl::StatusOr<ServingWeights> ServingWeights::Init(const train::ModelShape& shape, uint64_t seed, int tensor,
                                                    int tensor_rank) {
  RETURN_IF_ERROR(train::ParamLayout::CheckTensorSplit(shape, tensor));
  if (tensor_rank < 0 || tensor_rank >= tensor) return absl::InvalidArgumentError("tensor rank out of range");
  ServingWeights w(shape, tensor, tensor_rank);
  for (int b = 0; b < w.layout_->num_blocks(); ++b) w.layout_->InitBlock(b, seed, w.blocks_[b].data());
  return w;
}

absl::StatusOr<ServingWeights> ServingWeights::Load(const std::string& step_dir, int tensor, int tensor_rank) {
  const std::filesystem::path dir = std::filesystem::path(step_dir).lexically_normal();
  const std::string name = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
  int64_t step = 0;
  if (!absl::SimpleAtoi(name, &step) || step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "load_parameters_path must be a checkpoint step folder (<run>/checkpoints/<step>), got ", step_dir));
  }
  const std::string checkpoints = (dir.has_filename() ? dir : dir.parent_path()).parent_path().string();
  const train::CheckpointStore store(checkpoints);
  ASSIGN_OR_RETURN(train::CheckpointManifest manifest, store.ReadManifest(step));
  RETURN_IF_ERROR(train::ParamLayout::CheckTensorSplit(manifest.model, tensor));
  if (tensor_rank < 0 || tensor_rank >= tensor) return absl::InvalidArgumentError("tensor rank out of range");
  ServingWeights w(manifest.model, tensor, tensor_rank);
  train::ShardView view;
  view.fields.resize(1);
  for (int b = 0; b < w.layout_->num_blocks(); ++b) {
    view.fields[0].push_back(w.blocks_[b].data());
    view.shard_sizes.push_back(w.layout_->block(b).size);
  }
  RETURN_IF_ERROR(store.Restore(manifest, *w.layout_, /*fsdp=*/1, /*fsdp_rank=*/0, view));
  const std::string tok = store.StepDir(step) + "/tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tok, ec)) {
    ASSIGN_OR_RETURN(train::Tokenizer t, train::Tokenizer::Load(tok));
    if (t.vocab_size() != manifest.model.vocab_size) {
      return absl::DataLossError(
          absl::StrCat(tok, " has ", t.vocab_size(), " ids, the model ", manifest.model.vocab_size));
    }
    w.tokenizer_ = std::move(t);
  }
  w.step_ = step;
  return w;
}

}  // namespace manta::serve
