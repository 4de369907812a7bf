#include "train/kernels/model.h"

#include <algorithm>
#include <cstring>

#include "train/kernels/blas.h"
#include "train/kernels/check.h"

namespace manta::train {
namespace {

void Zero(FloatBuffer& v) { std::fill(v.begin(), v.end(), 0.0f); }

}  // namespace

DecoderModel::DecoderModel(const ModelShape& shape, const ParamLayout& layout, int64_t batch, int64_t seq)
    : shape_(shape),
      layout_(layout),
      batch_(batch),
      seq_(seq),
      tokens_(batch * seq),
      heads_(shape.num_query_heads / layout.tensor()),
      kv_heads_(shape.num_kv_heads / layout.tensor()),
      mlp_(shape.mlp_dim / layout.tensor()),
      rope_(seq, shape.head_dim, shape.rope_max_timescale) {
  const int64_t N = tokens_, D = shape.emb_dim, hd = shape.head_dim;
  acts_.resize(shape.num_layers);
  for (LayerActs& a : acts_) {
    a.x_in.assign(N * D, 0.0f);
    a.h1.assign(N * D, 0.0f);
    a.r1.assign(N, 0.0f);
    a.q.assign(N * heads_ * hd, 0.0f);
    a.k.assign(N * kv_heads_ * hd, 0.0f);
    a.v.assign(N * kv_heads_ * hd, 0.0f);
    a.probs.assign(batch * heads_ * seq * seq, 0.0f);
    a.o.assign(N * heads_ * hd, 0.0f);
    a.x_mid.assign(N * D, 0.0f);
    a.h2.assign(N * D, 0.0f);
    a.r2.assign(N, 0.0f);
    a.gate.assign(N * mlp_, 0.0f);
    a.up.assign(N * mlp_, 0.0f);
    a.a.assign(N * mlp_, 0.0f);
  }
  x_.assign(N * D, 0.0f);
  xf_.assign(N * D, 0.0f);
  hf_.assign(N * D, 0.0f);
  rf_.assign(N, 0.0f);
  logits_.assign(N * shape.vocab_size, 0.0f);
  grad_.assign(layout.max_block_size(), 0.0f);
  dx_.assign(N * D, 0.0f);
  dh_.assign(N * D, 0.0f);
  dbig_.assign(N * std::max(mlp_ * 2, heads_ * hd), 0.0f);
  dq_.assign(N * heads_ * hd, 0.0f);
  dk_.assign(N * kv_heads_ * hd, 0.0f);
  dv_.assign(N * kv_heads_ * hd, 0.0f);
  scratch_.assign(2 * seq * seq, 0.0f);
  block_params_.resize(layout.num_blocks());
}

absl::int128 DecoderModel::BufferFloats(const ModelShape& shape, const ParamLayout& layout, int64_t batch,
                                        int64_t seq) {
  // In 128 bits: the memory preflight asks this of configs too large to run.
  using I = absl::int128;
  const I N = I(batch) * seq, D = shape.emb_dim, hd = shape.head_dim, S = seq;
  const I heads = shape.num_query_heads / layout.tensor(), kv_heads = shape.num_kv_heads / layout.tensor();
  const I mlp = shape.mlp_dim / layout.tensor();
  const I per_layer =
      4 * N * D + 2 * N + 2 * N * heads * hd + 2 * N * kv_heads * hd + I(batch) * heads * S * S + 3 * N * mlp;
  return I(shape.num_layers) * per_layer + 5 * N * D + N + N * I(shape.vocab_size) + I(layout.max_block_size()) +
         N * std::max(mlp * 2, heads * hd) + N * heads * hd + 2 * N * kv_heads * hd + 2 * S * S;
}

int64_t DecoderModel::allocated_floats() const {
  int64_t n = 0;
  for (const LayerActs& a : acts_) {
    for (const auto* v :
         {&a.x_in, &a.h1, &a.r1, &a.q, &a.k, &a.v, &a.probs, &a.o, &a.x_mid, &a.h2, &a.r2, &a.gate, &a.up, &a.a}) {
      n += static_cast<int64_t>(v->size());
    }
  }
  for (const auto* v : {&x_, &xf_, &hf_, &rf_, &logits_, &grad_, &dx_, &dh_, &dbig_, &dq_, &dk_, &dv_, &scratch_}) {
    n += static_cast<int64_t>(v->size());
  }
  return n;
}

void DecoderModel::LayerForward(int layer, const float* p, float* x) {
  const BlockSpec& spec = layout_.block(layout_.layer_block(layer));
  auto W = [&](LayerTensor t) { return p + spec.tensors[t].offset; };
  LayerActs& a = acts_[layer];
  const int64_t N = tokens_, D = shape_.emb_dim, hd = shape_.head_dim;
  const int64_t qw = heads_ * hd, kw = kv_heads_ * hd;
  std::memcpy(a.x_in.data(), x, sizeof(float) * N * D);
  RmsNormForward(x, W(kAttnNorm), N, D, shape_.norm_eps, a.h1.data(), a.r1.data());
  Gemm(false, false, N, qw, D, 1.0f, a.h1.data(), D, W(kWq), qw, 0.0f, a.q.data(), qw);
  Gemm(false, false, N, kw, D, 1.0f, a.h1.data(), D, W(kWk), kw, 0.0f, a.k.data(), kw);
  Gemm(false, false, N, kw, D, 1.0f, a.h1.data(), D, W(kWv), kw, 0.0f, a.v.data(), kw);
  RopeForward(rope_, N, heads_, a.q.data());
  RopeForward(rope_, N, kv_heads_, a.k.data());
  AttentionShape as{batch_, seq_, heads_, kv_heads_, hd};
  AttentionForward(as, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), a.o.data());
  // The partial output projection is summed over tensor ranks before the residual add.
  Gemm(false, false, N, D, qw, 1.0f, a.o.data(), qw, W(kWo), D, 0.0f, dh_.data(), D);
  ops_->TensorAllReduce(dh_.data(), N * D);
  for (int64_t i = 0; i < N * D; ++i) x[i] += dh_[i];
  std::memcpy(a.x_mid.data(), x, sizeof(float) * N * D);
  RmsNormForward(x, W(kMlpNorm), N, D, shape_.norm_eps, a.h2.data(), a.r2.data());
  Gemm(false, false, N, mlp_, D, 1.0f, a.h2.data(), D, W(kWGate), mlp_, 0.0f, a.gate.data(), mlp_);
  Gemm(false, false, N, mlp_, D, 1.0f, a.h2.data(), D, W(kWUp), mlp_, 0.0f, a.up.data(), mlp_);
  SwigluForward(a.gate.data(), a.up.data(), N * mlp_, a.a.data());
  Gemm(false, false, N, D, mlp_, 1.0f, a.a.data(), mlp_, W(kWDown), D, 0.0f, dh_.data(), D);
  ops_->TensorAllReduce(dh_.data(), N * D);
  for (int64_t i = 0; i < N * D; ++i) x[i] += dh_[i];
}

void DecoderModel::LayerBackward(int layer, const float* p, float* g, float* dx, BlockOps* ops) {
  const BlockSpec& spec = layout_.block(layout_.layer_block(layer));
  auto W = [&](LayerTensor t) { return p + spec.tensors[t].offset; };
  auto G = [&](LayerTensor t) { return g + spec.tensors[t].offset; };
  LayerActs& a = acts_[layer];
  const int64_t N = tokens_, D = shape_.emb_dim, hd = shape_.head_dim;
  const int64_t qw = heads_ * hd, kw = kv_heads_ * hd;
  float* dgate = dbig_.data();
  float* dup = dbig_.data() + N * mlp_;
  // MLP: dx is the gradient at the block output (and at x_mid through the residual).
  Gemm(true, false, mlp_, D, N, 1.0f, a.a.data(), mlp_, dx, D, 1.0f, G(kWDown), D);
  Gemm(false, true, N, mlp_, D, 1.0f, dx, D, W(kWDown), D, 0.0f, dgate, mlp_);  // da
  SwigluBackward(a.gate.data(), a.up.data(), dgate, N * mlp_, dgate, dup);
  Gemm(true, false, D, mlp_, N, 1.0f, a.h2.data(), D, dgate, mlp_, 1.0f, G(kWGate), mlp_);
  Gemm(true, false, D, mlp_, N, 1.0f, a.h2.data(), D, dup, mlp_, 1.0f, G(kWUp), mlp_);
  Gemm(false, true, N, D, mlp_, 1.0f, dgate, mlp_, W(kWGate), mlp_, 0.0f, dh_.data(), D);
  Gemm(false, true, N, D, mlp_, 1.0f, dup, mlp_, W(kWUp), mlp_, 1.0f, dh_.data(), D);
  ops->TensorAllReduce(dh_.data(), N * D);
  RmsNormBackward(a.x_mid.data(), W(kMlpNorm), a.r2.data(), dh_.data(), N, D, dx, G(kMlpNorm));
  // Attention.
  float* d_o = dbig_.data();
  Gemm(true, false, qw, D, N, 1.0f, a.o.data(), qw, dx, D, 1.0f, G(kWo), D);
  Gemm(false, true, N, qw, D, 1.0f, dx, D, W(kWo), D, 0.0f, d_o, qw);
  AttentionShape as{batch_, seq_, heads_, kv_heads_, hd};
  AttentionBackward(as, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), d_o, dq_.data(), dk_.data(), dv_.data(),
                    scratch_.data());
  RopeBackward(rope_, N, heads_, dq_.data());
  RopeBackward(rope_, N, kv_heads_, dk_.data());
  Gemm(true, false, D, qw, N, 1.0f, a.h1.data(), D, dq_.data(), qw, 1.0f, G(kWq), qw);
  Gemm(true, false, D, kw, N, 1.0f, a.h1.data(), D, dk_.data(), kw, 1.0f, G(kWk), kw);
  Gemm(true, false, D, kw, N, 1.0f, a.h1.data(), D, dv_.data(), kw, 1.0f, G(kWv), kw);
  Gemm(false, true, N, D, qw, 1.0f, dq_.data(), qw, W(kWq), qw, 0.0f, dh_.data(), D);
  Gemm(false, true, N, D, kw, 1.0f, dk_.data(), kw, W(kWk), kw, 1.0f, dh_.data(), D);
  Gemm(false, true, N, D, kw, 1.0f, dv_.data(), kw, W(kWv), kw, 1.0f, dh_.data(), D);
  ops->TensorAllReduce(dh_.data(), N * D);
  RmsNormBackward(a.x_in.data(), W(kAttnNorm), a.r1.data(), dh_.data(), N, D, dx, G(kAttnNorm));
}

const float* DecoderModel::Forward(const int32_t* inputs, BlockOps* ops) {
  const int64_t N = tokens_, D = shape_.emb_dim, V = shape_.vocab_size;
  ops_ = ops;
  const int eb = ParamLayout::embed_block();
  block_params_[eb] = ops->AcquireBlock(eb);
  const float* table = block_params_[eb];
  for (int64_t i = 0; i < N; ++i) {
    TRAIN_CHECK(inputs[i] >= 0 && inputs[i] < V) << "token " << inputs[i];
    std::memcpy(&x_[i * D], table + static_cast<int64_t>(inputs[i]) * D, sizeof(float) * D);
  }
  for (int l = 0; l < shape_.num_layers; ++l) {
    const int b = layout_.layer_block(l);
    block_params_[b] = ops->AcquireBlock(b);
    LayerForward(l, block_params_[b], x_.data());
  }
  const int hb = layout_.head_block();
  const BlockSpec& head = layout_.block(hb);
  const float* hp = block_params_[hb] = ops->AcquireBlock(hb);
  const float* norm = hp + head.tensors[0].offset;
  const float* out = hp + head.tensors[1].offset;
  std::memcpy(xf_.data(), x_.data(), sizeof(float) * N * D);
  RmsNormForward(xf_.data(), norm, N, D, shape_.norm_eps, hf_.data(), rf_.data());
  Gemm(false, false, N, V, D, 1.0f, hf_.data(), D, out, V, 0.0f, logits_.data(), V);
  return logits_.data();
}

double DecoderModel::ForwardBackward(const int32_t* inputs, const int32_t* targets, float loss_scale, BlockOps* ops) {
  const int64_t N = tokens_, D = shape_.emb_dim, V = shape_.vocab_size;
  Forward(inputs, ops);
  const int eb = ParamLayout::embed_block();
  const int hb = layout_.head_block();
  const BlockSpec& head = layout_.block(hb);
  const float* hp = block_params_[hb];
  const float* norm = hp + head.tensors[0].offset;
  const float* out = hp + head.tensors[1].offset;
  const double loss = SoftmaxCrossEntropy(logits_.data(), targets, N, V, loss_scale);

  // Backward; logits_ now holds d(loss)/d(logits).
  float* g = grad_.data();
  std::fill(g, g + head.size, 0.0f);
  Gemm(true, false, D, V, N, 1.0f, hf_.data(), D, logits_.data(), V, 1.0f, g + head.tensors[1].offset, V);
  Gemm(false, true, N, D, V, 1.0f, logits_.data(), V, out, V, 0.0f, dh_.data(), D);
  Zero(dx_);
  RmsNormBackward(xf_.data(), norm, rf_.data(), dh_.data(), N, D, dx_.data(), g + head.tensors[0].offset);
  ops->BlockGradReady(hb, g);
  for (int l = static_cast<int>(shape_.num_layers) - 1; l >= 0; --l) {
    const int b = layout_.layer_block(l);
    std::fill(g, g + layout_.block(b).size, 0.0f);
    LayerBackward(l, block_params_[b], g, dx_.data(), ops);
    ops->BlockGradReady(b, g);
  }
  std::fill(g, g + layout_.block(eb).size, 0.0f);
  for (int64_t i = 0; i < N; ++i) {
    float* row = g + static_cast<int64_t>(inputs[i]) * D;
    const float* d = &dx_[i * D];
    for (int64_t j = 0; j < D; ++j) row[j] += d[j];
  }
  ops->BlockGradReady(eb, g);
  return loss;
}

}  // namespace manta::train
