#include "serve/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace manta::serve {

namespace {

// Lanes of partial sums: a multiple of the vector width, so each function
// below compiles to whole-vector arithmetic for its instruction set.
template <int kLanes>
__attribute__((always_inline)) inline float Dot(const float* a, const float* b, int64_t n) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) part[l] += a[i + l] * b[i + l];
  }
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += part[l];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// out[hd] = softmax(scale * q . k[j]) . v[j] over positions j < len; k and
// v rows are `stride` floats apart.
template <int kLanes>
__attribute__((always_inline)) inline void AttendHeadT(const float* q, const float* k, const float* v, int64_t stride,
                                                       int64_t len, int64_t hd, float scale, float* p, float* out) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < len; ++j) {
    p[j] = scale * Dot<kLanes>(q, k + j * stride, hd);
    mx = std::max(mx, p[j]);
  }
  float total = 0;
  for (int64_t j = 0; j < len; ++j) {
    p[j] = std::exp(p[j] - mx);
    total += p[j];
  }
  const float inv = 1.0f / total;
  for (int64_t d = 0; d < hd; ++d) out[d] = 0;
  for (int64_t j = 0; j < len; ++j) {
    const float pj = p[j] * inv;
    const float* vj = v + j * stride;
    for (int64_t d = 0; d < hd; ++d) out[d] += pj * vj[d];
  }
}

__attribute__((target("avx512f"))) void AttendHead512(const float* q, const float* k, const float* v, int64_t stride,
                                                      int64_t len, int64_t hd, float scale, float* p, float* out) {
  AttendHeadT<16>(q, k, v, stride, len, hd, scale, p, out);
}

__attribute__((target("avx2,fma"))) void AttendHead256(const float* q, const float* k, const float* v, int64_t stride,
                                                       int64_t len, int64_t hd, float scale, float* p, float* out) {
  AttendHeadT<8>(q, k, v, stride, len, hd, scale, p, out);
}

void AttendHead(const float* q, const float* k, const float* v, int64_t stride, int64_t len, int64_t hd, float scale,
                float* p, float* out) {
  switch (PackedMatrix::BestIsa()) {
    case PackedMatrix::Isa::kAvx512:
      return AttendHead512(q, k, v, stride, len, hd, scale, p, out);
    case PackedMatrix::Isa::kAvx2:
      return AttendHead256(q, k, v, stride, len, hd, scale, p, out);
    case PackedMatrix::Isa::kScalar:
      return AttendHeadT<4>(q, k, v, stride, len, hd, scale, p, out);
  }
}

}  // namespace

Engine::Engine(const ServingWeights& weights, const EngineOptions& options, TensorSum* sum)
    : shape_(weights.shape()),
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
  for (const auto& [buf, width] : std::initializer_list<std::pair<train::FloatBuffer*, int64_t>>{{&x_, D},
                                                                                                 {&h_, D},
                                                                                                 {&proj_, D},
                                                                                                 {&q_, qw_},
                                                                                                 {&o_, qw_},
                                                                                                 {&k_, kvw_},
                                                                                                 {&v_, kvw_},
                                                                                                 {&gate_, mlp_},
                                                                                                 {&up_, mlp_}}) {
    buf->assign(rows * width, 0.0f);
  }
  rinv_.assign(rows, 0.0f);
  scores_.assign(options.max_len, 0.0f);
  row_slot_.assign(rows, 0);
  positions_.assign(rows, 0);
  seen_.assign(options.slots, 0);
  PackWeights(weights);
}

void Engine::PackWeights(const ServingWeights& weights) {
  const int64_t D = shape_.emb_dim;
  const train::ParamLayout& layout = weights.layout();
  struct Item {
    PackedMatrix* matrix;
    const float* w;
    int64_t k, n;
  };
  std::vector<Item> items;
  layers_.resize(shape_.num_layers);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const int b = layout.layer_block(l);
    const train::BlockSpec& spec = layout.block(b);
    auto W = [&](train::LayerTensor t) { return weights.block(b) + spec.tensors[t].offset; };
    LayerWeights& lw = layers_[l];
    using Entry = std::tuple<PackedMatrix*, train::LayerTensor, int64_t, int64_t>;
    for (const auto& [m, t, k, n] : std::initializer_list<Entry>{{&lw.wq, train::kWq, D, qw_},
                                                                 {&lw.wk, train::kWk, D, kvw_},
                                                                 {&lw.wv, train::kWv, D, kvw_},
                                                                 {&lw.wo, train::kWo, qw_, D},
                                                                 {&lw.gate, train::kWGate, D, mlp_},
                                                                 {&lw.up, train::kWUp, D, mlp_},
                                                                 {&lw.down, train::kWDown, mlp_, D}}) {
      items.push_back({m, W(t), k, n});
    }
    lw.attn_norm.assign(W(train::kAttnNorm), W(train::kAttnNorm) + D);
    lw.mlp_norm.assign(W(train::kMlpNorm), W(train::kMlpNorm) + D);
  }
  const int hb = layout.head_block();
  const float* hp = weights.block(hb);
  items.push_back({&head_, hp + layout.block(hb).tensors[train::kOutput].offset, D, shape_.vocab_size});
  final_norm_.assign(hp + layout.block(hb).tensors[train::kFinalNorm].offset,
                     hp + layout.block(hb).tensors[train::kFinalNorm].offset + D);
  const float* table = weights.block(train::ParamLayout::embed_block());
  embed_.assign(table, table + shape_.vocab_size * D);
  for (const Item& item : items) weight_bytes_ += PackedMatrix::Layout(item.k, item.n, options_.weights).bytes;
  arena_.resize(weight_bytes_ + 64);
  uint8_t* at = arena_.data() + (64 - reinterpret_cast<uintptr_t>(arena_.data()) % 64) % 64;
  for (const Item& item : items) {
    *item.matrix = PackedMatrix(item.w, item.k, item.n, options_.weights, at);
    at += PackedMatrix::Layout(item.k, item.n, options_.weights).bytes;
  }
}

absl::Status Engine::Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) {
  if (slot < 0 || slot >= options_.slots) return absl::InvalidArgumentError(absl::StrCat("no slot ", slot));
  if (busy_[slot]) return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is in use"));
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n == 0 || n > options_.max_len) {
    return absl::InvalidArgumentError(absl::StrCat("a prompt must have 1 to ", options_.max_len, " tokens, got ", n));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= shape_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token ", t, " out of range"));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    row_slot_[i] = slot;
    positions_[i] = static_cast<int32_t>(i);
  }
  busy_[slot] = true;
  Forward(n, prompt.data(), row_slot_.data(), positions_.data(), /*last_only=*/true, logits);
  lengths_[slot] = n;
  return absl::OkStatus();
}

absl::Status Engine::Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) {
  const int64_t n = static_cast<int64_t>(slots.size());
  if (n == 0 || tokens.size() != slots.size() || n > options_.slots) {
    return absl::InvalidArgumentError("decode needs one token for each of 1 to slots() slots");
  }
  std::fill(seen_.begin(), seen_.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int s = slots[i];
    if (s < 0 || s >= options_.slots || !busy_[s] || seen_[s]) {
      return absl::InvalidArgumentError(absl::StrCat("slot ", s, " is not a distinct slot in use"));
    }
    if (lengths_[s] >= options_.max_len) {
      return absl::OutOfRangeError(absl::StrCat("slot ", s, " is full (", options_.max_len, " tokens)"));
    }
    if (tokens[i] < 0 || tokens[i] >= shape_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token ", tokens[i], " out of range"));
    }
    seen_[s] = 1;
    positions_[i] = static_cast<int32_t>(lengths_[s]);
  }
  Forward(n, tokens.data(), slots.data(), positions_.data(), /*last_only=*/false, logits);
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

void Engine::Forward(int64_t n, const int32_t* tokens, const int* row_slot, const int32_t* positions, bool last_only,
                     float* out) {
  const int64_t D = shape_.emb_dim;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(&x_[i * D], embed_.data() + static_cast<int64_t>(tokens[i]) * D, sizeof(float) * D);
  }
  for (int l = 0; l < shape_.num_layers; ++l) Layer(l, n, row_slot, positions);
  const int64_t first = last_only ? n - 1 : 0, rows = n - first;
  train::RmsNormForward(&x_[first * D], final_norm_.data(), rows, D, shape_.norm_eps, h_.data(), rinv_.data());
  head_.Multiply(rows, h_.data(), D, out, shape_.vocab_size);
}

void Engine::Layer(int layer, int64_t n, const int* row_slot, const int32_t* positions) {
  const LayerWeights& w = layers_[layer];
  const int64_t D = shape_.emb_dim;
  float* x = x_.data();
  train::RmsNormForward(x, w.attn_norm.data(), n, D, shape_.norm_eps, h_.data(), rinv_.data());
  w.wq.Multiply(n, h_.data(), D, q_.data(), qw_);
  w.wk.Multiply(n, h_.data(), D, k_.data(), kvw_);
  w.wv.Multiply(n, h_.data(), D, v_.data(), kvw_);
  train::RopeForwardAt(rope_, positions, n, heads_, q_.data());
  train::RopeForwardAt(rope_, positions, n, kv_heads_, k_.data());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(KCache(row_slot[i], layer) + positions[i] * kvw_, &k_[i * kvw_], sizeof(float) * kvw_);
    std::memcpy(VCache(row_slot[i], layer) + positions[i] * kvw_, &v_[i * kvw_], sizeof(float) * kvw_);
  }
  Attend(layer, n, row_slot, positions);
  w.wo.Multiply(n, o_.data(), qw_, proj_.data(), D);
  if (sum_) sum_->Sum(proj_.data(), n * D);
  for (int64_t i = 0; i < n * D; ++i) x[i] += proj_[i];
  train::RmsNormForward(x, w.mlp_norm.data(), n, D, shape_.norm_eps, h_.data(), rinv_.data());
  w.gate.Multiply(n, h_.data(), D, gate_.data(), mlp_);
  w.up.Multiply(n, h_.data(), D, up_.data(), mlp_);
  train::SwigluForward(gate_.data(), up_.data(), n * mlp_, gate_.data());
  w.down.Multiply(n, gate_.data(), mlp_, proj_.data(), D);
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
      AttendHead(&q_[i * qw_ + h * hd], kc + g * hd, vc + g * hd, kvw_, len, hd, scale, scores_.data(),
                 &o_[i * qw_ + h * hd]);
    }
  }
}

}  // namespace manta::serve
