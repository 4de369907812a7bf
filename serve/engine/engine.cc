#include "serve/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "train/kernels/blas.h"

namespace manta::serve {

using train::Gemm;

Engine::Engine(const ServingWeights& weights, const EngineOptions& options, TensorSum* sum)
    : weights_(weights),
      shape_(weights.shape()),
      options_(options),
      sum_(sum),
      heads_(shape_.num_query_heads / weights.layout().tensor()),
      kv_heads_(shape_.num_kv_heads / weights.layout().tensor()),
      mlp_(shape_.mlp_dim / weights.layout().tensor()),
      qw_(heads_ * shape_.head_dim),
      kvw_(kv_heads_ * shape_.head_dim),
      cache_stride_(options.max_len * kvw_),
      rope_(options.max_len, shape_.head_dim, shape_.rope_max_timescale),
      lengths_(options.slots, 0),
      busy_(options.slots, false) {
  const int64_t rows = std::max<int64_t>(options.max_len, options.slots), D = shape_.emb_dim;
  kcache_.assign(options.slots * shape_.num_layers * cache_stride_, 0.0f);
  vcache_.assign(kcache_.size(), 0.0f);
  for (const auto& [buf, width] : std::initializer_list<std::pair<std::vector<float>*, int64_t>>{
           {&x_, D}, {&h_, D}, {&proj_, D}, {&q_, qw_}, {&o_, qw_}, {&k_, kvw_}, {&v_, kvw_}, {&gate_, mlp_},
           {&up_, mlp_}}) {
    buf->assign(rows * width, 0.0f);
  }
  rinv_.assign(rows, 0.0f);
  scores_.assign(options.max_len, 0.0f);
  // Every projection also transposed, for decode steps (GemmFewRows).
  auto transposed = [](const float* w, int64_t k, int64_t n) {
    std::vector<float> t(k * n);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) t[j * k + i] = w[i * n + j];
    }
    return t;
  };
  for (int l = 0; l < shape_.num_layers; ++l) {
    const int b = weights_.layout().layer_block(l);
    const train::BlockSpec& spec = weights_.layout().block(b);
    const float* p = weights_.block(b);
    for (const auto& [t, k, n] : std::initializer_list<std::tuple<train::LayerTensor, int64_t, int64_t>>{
             {train::kWq, D, qw_}, {train::kWk, D, kvw_}, {train::kWv, D, kvw_}, {train::kWo, qw_, D},
             {train::kWGate, D, mlp_}, {train::kWUp, D, mlp_}, {train::kWDown, mlp_, D}}) {
      transposed_[{l, t}] = transposed(p + spec.tensors[t].offset, k, n);
    }
  }
  const train::BlockSpec& head = weights_.layout().block(weights_.layout().head_block());
  head_t_ = transposed(weights_.block(weights_.layout().head_block()) + head.tensors[train::kOutput].offset, D,
                       shape_.vocab_size);
}

void Engine::Project(int64_t n, const float* in, int64_t k, const float* w, const float* wt, int64_t out_width,
                     float* out) {
  if (n <= train::kFewRows) {
    train::GemmFewRows(n, out_width, k, in, k, wt, k, out, out_width);
  } else {
    Gemm(false, false, n, out_width, k, 1.0f, in, k, w, out_width, 0.0f, out, out_width);
  }
}

absl::Status Engine::Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) {
  if (slot < 0 || slot >= options_.slots) return absl::InvalidArgumentError(absl::StrCat("no slot ", slot));
  if (busy_[slot]) return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is in use"));
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n == 0 || n > options_.max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("a prompt must have 1 to ", options_.max_len, " tokens, got ", n));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= shape_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token ", t, " out of range"));
    }
  }
  std::vector<int> row_slot(n, slot);
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(i);
  busy_[slot] = true;
  Forward(n, prompt.data(), row_slot.data(), positions.data(), /*last_only=*/true, logits);
  lengths_[slot] = n;
  return absl::OkStatus();
}

absl::Status Engine::Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) {
  const int64_t n = static_cast<int64_t>(slots.size());
  if (n == 0 || tokens.size() != slots.size() || n > options_.slots) {
    return absl::InvalidArgumentError("decode needs one token for each of 1 to slots() slots");
  }
  std::vector<bool> seen(options_.slots, false);
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) {
    const int s = slots[i];
    if (s < 0 || s >= options_.slots || !busy_[s] || seen[s]) {
      return absl::InvalidArgumentError(absl::StrCat("slot ", s, " is not a distinct slot in use"));
    }
    if (lengths_[s] >= options_.max_len) {
      return absl::OutOfRangeError(absl::StrCat("slot ", s, " is full (", options_.max_len, " tokens)"));
    }
    if (tokens[i] < 0 || tokens[i] >= shape_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token ", tokens[i], " out of range"));
    }
    seen[s] = true;
    positions[i] = static_cast<int32_t>(lengths_[s]);
  }
  Forward(n, tokens.data(), slots.data(), positions.data(), /*last_only=*/false, logits);
  for (int s : slots) ++lengths_[s];
  return absl::OkStatus();
}

void Engine::Release(int slot) {
  if (slot < 0 || slot >= options_.slots) return;
  busy_[slot] = false;
  lengths_[slot] = 0;
}

void Engine::ExportKv(int slot, int64_t len, float* out) const {
  auto* self = const_cast<Engine*>(this);
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::memcpy(out, self->KCache(slot, l), sizeof(float) * len * kvw_);
    out += len * kvw_;
    std::memcpy(out, self->VCache(slot, l), sizeof(float) * len * kvw_);
    out += len * kvw_;
  }
}

absl::Status Engine::ImportKv(int slot, int64_t len, const float* in) {
  if (slot < 0 || slot >= options_.slots || busy_[slot]) {
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not a free slot"));
  }
  if (len < 1 || len > options_.max_len) return absl::InvalidArgumentError(absl::StrCat("bad K/V length ", len));
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::memcpy(KCache(slot, l), in, sizeof(float) * len * kvw_);
    in += len * kvw_;
    std::memcpy(VCache(slot, l), in, sizeof(float) * len * kvw_);
    in += len * kvw_;
  }
  busy_[slot] = true;
  lengths_[slot] = len;
  return absl::OkStatus();
}

void Engine::Forward(int64_t n, const int32_t* tokens, const int* row_slot, const int32_t* positions,
                     bool last_only, float* out) {
  const int64_t D = shape_.emb_dim, V = shape_.vocab_size;
  const float* table = weights_.block(train::ParamLayout::embed_block());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(&x_[i * D], table + static_cast<int64_t>(tokens[i]) * D, sizeof(float) * D);
  }
  for (int l = 0; l < shape_.num_layers; ++l) Layer(l, n, row_slot, positions);
  const train::BlockSpec& head = weights_.layout().block(weights_.layout().head_block());
  const float* hp = weights_.block(weights_.layout().head_block());
  const int64_t first = last_only ? n - 1 : 0, rows = n - first;
  train::RmsNormForward(&x_[first * D], hp + head.tensors[train::kFinalNorm].offset, rows, D, shape_.norm_eps,
                        h_.data(), rinv_.data());
  Project(rows, h_.data(), D, hp + head.tensors[train::kOutput].offset, head_t_.data(), V, out);
}

void Engine::Layer(int layer, int64_t n, const int* row_slot, const int32_t* positions) {
  const int b = weights_.layout().layer_block(layer);
  const train::BlockSpec& spec = weights_.layout().block(b);
  const float* p = weights_.block(b);
  auto W = [&](train::LayerTensor t) { return p + spec.tensors[t].offset; };
  auto T = [&](train::LayerTensor t) { return transposed_.at({layer, t}).data(); };
  const int64_t D = shape_.emb_dim;
  float* x = x_.data();
  train::RmsNormForward(x, W(train::kAttnNorm), n, D, shape_.norm_eps, h_.data(), rinv_.data());
  Project(n, h_.data(), D, W(train::kWq), T(train::kWq), qw_, q_.data());
  Project(n, h_.data(), D, W(train::kWk), T(train::kWk), kvw_, k_.data());
  Project(n, h_.data(), D, W(train::kWv), T(train::kWv), kvw_, v_.data());
  train::RopeForwardAt(rope_, positions, n, heads_, q_.data());
  train::RopeForwardAt(rope_, positions, n, kv_heads_, k_.data());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(KCache(row_slot[i], layer) + positions[i] * kvw_, &k_[i * kvw_], sizeof(float) * kvw_);
    std::memcpy(VCache(row_slot[i], layer) + positions[i] * kvw_, &v_[i * kvw_], sizeof(float) * kvw_);
  }
  Attend(layer, n, row_slot, positions);
  Project(n, o_.data(), qw_, W(train::kWo), T(train::kWo), D, proj_.data());
  if (sum_) sum_->Sum(proj_.data(), n * D);
  for (int64_t i = 0; i < n * D; ++i) x[i] += proj_[i];
  train::RmsNormForward(x, W(train::kMlpNorm), n, D, shape_.norm_eps, h_.data(), rinv_.data());
  Project(n, h_.data(), D, W(train::kWGate), T(train::kWGate), mlp_, gate_.data());
  Project(n, h_.data(), D, W(train::kWUp), T(train::kWUp), mlp_, up_.data());
  train::SwigluForward(gate_.data(), up_.data(), n * mlp_, gate_.data());
  Project(n, gate_.data(), mlp_, W(train::kWDown), T(train::kWDown), D, proj_.data());
  if (sum_) sum_->Sum(proj_.data(), n * D);
  for (int64_t i = 0; i < n * D; ++i) x[i] += proj_[i];
}

// Each row attends to the positions 0..its own of its slot, as the training
// kernel's causal attention does (scaled scores, max-subtracted softmax).
void Engine::Attend(int layer, int64_t n, const int* row_slot, const int32_t* positions) {
  const int64_t hd = shape_.head_dim, group = heads_ / kv_heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t i = 0; i < n; ++i) {
    const float* kc = KCache(row_slot[i], layer);
    const float* vc = VCache(row_slot[i], layer);
    const int64_t len = positions[i] + 1;
    for (int64_t h = 0; h < heads_; ++h) {
      const int64_t g = h / group;
      const float* qh = &q_[i * qw_ + h * hd];
      float* p = scores_.data();
      Gemm(false, true, 1, len, hd, scale, qh, qw_, kc + g * hd, kvw_, 0.0f, p, len);
      float mx = p[0];
      for (int64_t j = 1; j < len; ++j) mx = std::max(mx, p[j]);
      float total = 0;
      for (int64_t j = 0; j < len; ++j) {
        p[j] = std::exp(p[j] - mx);
        total += p[j];
      }
      const float inv = 1.0f / total;
      for (int64_t j = 0; j < len; ++j) p[j] *= inv;
      Gemm(false, false, 1, hd, len, 1.0f, p, len, vc + g * hd, kvw_, 0.0f, &o_[i * qw_ + h * hd], qw_);
    }
  }
}

}  // namespace manta::serve
