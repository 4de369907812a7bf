// Where every parameter lives: the blocks of the decoder (embedding, one
// per layer, final norm + output projection), the tensors inside each block,
// and how each tensor is split over the tensor-parallel axis.
//
// A block's tensors for one tensor rank are packed into one flat buffer
// (the "local block"); FSDP then splits that buffer into equal shards.
// Initial values are a pure function of (seed, tensor, global element), so
// every mesh starts from the same model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "train/kernels/config.h"

namespace manta::train {

enum class Split { kReplicated, kColumns, kRows };

struct TensorSpec {
  std::string name;
  int64_t rows = 0, cols = 0;  // global shape
  Split split = Split::kReplicated;
  int64_t local_rows = 0, local_cols = 0;  // shape on one tensor rank
  int64_t offset = 0;                      // in the local block
  float init_std = 0;                      // 0 means "all ones"
  int id = 0;                              // unique across the model

  int64_t local_size() const { return local_rows * local_cols; }
  // Global row-major index of local element `i` on tensor rank `rank`.
  int64_t GlobalIndex(int rank, int64_t i) const;
};

// The tensors of a layer block, in their order in BlockSpec::tensors; a head
// block holds the final norm, then the output projection.
enum LayerTensor { kAttnNorm, kWq, kWk, kWv, kWo, kMlpNorm, kWGate, kWUp, kWDown };
enum HeadTensor { kFinalNorm, kOutput };

struct BlockSpec {
  std::string name;
  std::vector<TensorSpec> tensors;
  int64_t size = 0;  // local block size in floats
};

// Immutable; one per (shape, tensor size, tensor rank).
class ParamLayout {
 public:
  // OK when heads, kv heads and the MLP width divide by `tensor`; the error
  // names the model key and the parallelism.
  static absl::Status CheckTensorSplit(const ModelShape& shape, int tensor);

  ParamLayout(const ModelShape& shape, int tensor, int tensor_rank);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  const BlockSpec& block(int b) const { return blocks_[b]; }
  static int embed_block() { return 0; }
  int layer_block(int layer) const { return 1 + layer; }
  int head_block() const { return num_blocks() - 1; }
  int tensor() const { return tensor_; }
  int tensor_rank() const { return tensor_rank_; }
  int64_t max_block_size() const;

  // Writes the initial values of block `b` (local to this tensor rank).
  void InitBlock(int b, uint64_t seed, float* out) const;
  // Writes elements [begin, end) of that block's initial values to out[0,
  // end - begin): what one FSDP shard needs, without the rest.
  void InitRange(int b, uint64_t seed, int64_t begin, int64_t end, float* out) const;

 private:
  int tensor_;
  int tensor_rank_;
  std::vector<BlockSpec> blocks_;
};

// Floats in one FSDP shard of a block of `size` floats split `fsdp` ways
// (the last shard is zero-padded).
inline int64_t ShardSize(int64_t size, int fsdp) { return (size + fsdp - 1) / fsdp; }

}  // namespace manta::train
