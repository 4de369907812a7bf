#include "train/kernels/params.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "train/kernels/check.h"
#include "train/kernels/data.h"

namespace manta::train {
namespace {

// A standard normal value determined by (seed, id, index).
float HashNormal(uint64_t seed, int id, int64_t index) {
  uint64_t h = Mix(Mix(seed * 0x100000001b3ULL + static_cast<uint64_t>(id)) ^ static_cast<uint64_t>(index));
  double u1 = ((h >> 11) + 1.0) * (1.0 / 9007199254740994.0);
  double u2 = (Mix(h) >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace

int64_t TensorSpec::GlobalIndex(int rank, int64_t i) const {
  int64_t r = i / local_cols, c = i % local_cols;
  if (split == Split::kColumns) c += rank * local_cols;
  if (split == Split::kRows) r += rank * local_rows;
  return r * cols + c;
}

absl::Status ParamLayout::CheckTensorSplit(const ModelShape& s, int tensor) {
  const std::pair<const char*, int64_t> dims[] = {
      {"base_num_query_heads", s.num_query_heads}, {"base_num_kv_heads", s.num_kv_heads}, {"base_mlp_dim", s.mlp_dim}};
  for (const auto& [key, v] : dims) {
    if (v % tensor != 0) {
      return absl::InvalidArgumentError(absl::StrCat("config key '", key, "': ", v,
                                                     " does not divide over tensor parallelism ", tensor,
                                                     " (ici_tensor_parallelism x dcn_tensor_parallelism)"));
    }
  }
  return absl::OkStatus();
}

ParamLayout::ParamLayout(const ModelShape& s, int tensor, int tensor_rank)
    : tensor_(tensor), tensor_rank_(tensor_rank) {
  TRAIN_CHECK(CheckTensorSplit(s, tensor).ok());
  const int64_t D = s.emb_dim, hd = s.head_dim;
  const float dense_std = 1.0f / std::sqrt(static_cast<float>(D));
  auto add = [&](BlockSpec& b, int id, const char* name, int64_t rows, int64_t cols, Split split, float std) {
    TensorSpec t;
    t.name = name;
    t.rows = rows;
    t.cols = cols;
    t.split = split;
    t.local_rows = split == Split::kRows ? rows / tensor : rows;
    t.local_cols = split == Split::kColumns ? cols / tensor : cols;
    t.offset = b.size;
    t.init_std = std;
    t.id = id;
    b.size += t.local_size();
    b.tensors.push_back(t);
  };
  BlockSpec embed{"embed", {}, 0};
  add(embed, 0, "embedding", s.vocab_size, D, Split::kReplicated, 1.0f);
  blocks_.push_back(embed);
  for (int64_t l = 0; l < s.num_layers; ++l) {
    BlockSpec b{absl::StrCat("layer_", l), {}, 0};
    const int base = 16 * static_cast<int>(l + 1);
    add(b, base + 0, "attn_norm", 1, D, Split::kReplicated, 0);
    add(b, base + 1, "wq", D, s.num_query_heads * hd, Split::kColumns, dense_std);
    add(b, base + 2, "wk", D, s.num_kv_heads * hd, Split::kColumns, dense_std);
    add(b, base + 3, "wv", D, s.num_kv_heads * hd, Split::kColumns, dense_std);
    add(b, base + 4, "wo", s.num_query_heads * hd, D, Split::kRows,
        1.0f / std::sqrt(static_cast<float>(s.num_query_heads * hd)));
    add(b, base + 5, "mlp_norm", 1, D, Split::kReplicated, 0);
    add(b, base + 6, "w_gate", D, s.mlp_dim, Split::kColumns, dense_std);
    add(b, base + 7, "w_up", D, s.mlp_dim, Split::kColumns, dense_std);
    add(b, base + 8, "w_down", s.mlp_dim, D, Split::kRows, 1.0f / std::sqrt(static_cast<float>(s.mlp_dim)));
    blocks_.push_back(b);
  }
  BlockSpec head{"head", {}, 0};
  add(head, 1, "final_norm", 1, D, Split::kReplicated, 0);
  add(head, 2, "output", D, s.vocab_size, Split::kReplicated, dense_std);
  blocks_.push_back(head);
}

int64_t ParamLayout::max_block_size() const {
  int64_t m = 0;
  for (const BlockSpec& b : blocks_) m = std::max(m, b.size);
  return m;
}

void ParamLayout::InitBlock(int b, uint64_t seed, float* out) const { InitRange(b, seed, 0, blocks_[b].size, out); }

void ParamLayout::InitRange(int b, uint64_t seed, int64_t begin, int64_t end, float* out) const {
  for (const TensorSpec& t : blocks_[b].tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.local_size());
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t i = e - t.offset;
      out[e - begin] = t.init_std == 0 ? 1.0f : t.init_std * HashNormal(seed, t.id, t.GlobalIndex(tensor_rank_, i));
    }
  }
}

}  // namespace manta::train
