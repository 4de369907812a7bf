// Forward and backward passes of the decoder's building blocks on one
// device. Activations are row-major [tokens, features]; tokens are
// sequence-major ([batch, seq]). Backward functions that take an output
// gradient accumulate (+=) into parameter gradients and write (=) input
// gradients unless a comment says otherwise.
#pragma once

#include <cstdint>
#include <vector>

namespace manta::train {

// y = x / rms(x) * g over rows of width d; rinv[n] keeps 1/rms per row.
void RmsNormForward(const float* x, const float* g, int64_t n, int64_t d, float eps, float* y, float* rinv);
// dx = (accumulated into) the input gradient; dg += weight gradient.
void RmsNormBackward(const float* x, const float* g, const float* rinv, const float* dy, int64_t n, int64_t d,
                     float* dx_accum, float* dg);

// Rotary tables for positions [0, seq_len): cos and sin of shape [seq_len, head_dim / 2].
struct RopeTable {
  RopeTable(int64_t seq_len, int64_t head_dim, float max_timescale);
  int64_t seq_len, half;
  std::vector<float> cos, sin;
};
// Rotates (in place) every head of x [tokens, heads * head_dim], the
// "rotate half" form. Token i sits at position i % seq_len.
void RopeForward(const RopeTable& table, int64_t tokens, int64_t heads, float* x);
// As RopeForward, token i at positions[i] (each below table.seq_len).
void RopeForwardAt(const RopeTable& table, const int32_t* positions, int64_t tokens, int64_t heads, float* x);
// The transpose rotation: maps a gradient at the output to the input.
void RopeBackward(const RopeTable& table, int64_t tokens, int64_t heads, float* dx);

// Causal attention with grouped KV heads: query head h reads kv head
// h / (heads / kv_heads). q is [B*T, heads*hd], k and v [B*T, kv_heads*hd],
// probs [B, heads, T, T] (saved for backward), o [B*T, heads*hd].
struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_dim;
};
void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* probs, float* o);
// Writes dq, dk, dv (overwritten). `scratch` holds 2 * T * T floats.
void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* probs,
                       const float* d_o, float* dq, float* dk, float* dv, float* scratch);

// a = silu(gate) * up, elementwise over n values.
void SwigluForward(const float* gate, const float* up, int64_t n, float* a);
void SwigluBackward(const float* gate, const float* up, const float* da, int64_t n, float* dgate, float* dup);

// Softmax cross-entropy over rows of `logits` [n, vocab]. Returns the sum of
// the n token losses and overwrites logits with d(scale * sum)/d(logits).
double SoftmaxCrossEntropy(float* logits, const int32_t* targets, int64_t n, int64_t vocab, float scale);

}  // namespace manta::train
