#include "train/kernels/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "train/kernels/blas.h"
#include "train/kernels/check.h"

namespace manta::train {

void RmsNormForward(const float* x, const float* g, int64_t n, int64_t d, float eps, float* y, float* rinv) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * d;
    float* yr = y + i * d;
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    rinv[i] = r;
    for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * r * g[j];
  }
}

void RmsNormBackward(const float* x, const float* g, const float* rinv, const float* dy, int64_t n, int64_t d,
                     float* dx_accum, float* dg) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * d;
    const float* dyr = dy + i * d;
    float* dxr = dx_accum + i * d;
    const float r = rinv[i];
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) {
      dot += static_cast<double>(dyr[j]) * g[j] * xr[j];
      dg[j] += dyr[j] * xr[j] * r;
    }
    const float c = static_cast<float>(dot) * r * r * r / static_cast<float>(d);
    for (int64_t j = 0; j < d; ++j) dxr[j] += r * g[j] * dyr[j] - c * xr[j];
  }
}

RopeTable::RopeTable(int64_t seq_len_in, int64_t head_dim, float max_timescale)
    : seq_len(seq_len_in), half(head_dim / 2), cos(seq_len_in * half), sin(seq_len_in * half) {
  for (int64_t p = 0; p < seq_len; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(static_cast<double>(max_timescale), -2.0 * i / head_dim);
      const double angle = p * inv_freq;
      cos[p * half + i] = static_cast<float>(std::cos(angle));
      sin[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

namespace {

// sign = +1 rotates forward, -1 applies the transpose.
// Token i sits at positions[i], or at i % seq_len when positions is null.
void Rotate(const RopeTable& t, int64_t tokens, int64_t heads, float sign, float* x,
            const int32_t* positions = nullptr) {
  const int64_t hd = 2 * t.half;
  for (int64_t tok = 0; tok < tokens; ++tok) {
    const int64_t pos = positions ? positions[tok] : tok % t.seq_len;
    const float* c = t.cos.data() + pos * t.half;
    const float* s = t.sin.data() + pos * t.half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (tok * heads + h) * hd;
      for (int64_t i = 0; i < t.half; ++i) {
        const float a = v[i], b = v[i + t.half];
        const float si = sign * s[i];
        v[i] = a * c[i] - b * si;
        v[i + t.half] = b * c[i] + a * si;
      }
    }
  }
}

}  // namespace

void RopeForward(const RopeTable& table, int64_t tokens, int64_t heads, float* x) {
  Rotate(table, tokens, heads, 1.0f, x);
}

void RopeForwardAt(const RopeTable& table, const int32_t* positions, int64_t tokens, int64_t heads, float* x) {
  for (int64_t i = 0; i < tokens; ++i) TRAIN_CHECK(positions[i] >= 0 && positions[i] < table.seq_len);
  Rotate(table, tokens, heads, 1.0f, x, positions);
}

void RopeBackward(const RopeTable& table, int64_t tokens, int64_t heads, float* dx) {
  Rotate(table, tokens, heads, -1.0f, dx);
}

namespace {

// Query rows are processed in blocks; a block reads only the keys at or
// before its last row, so the masked upper triangle is mostly never computed.
constexpr int64_t kQueryBlock = 64;

}  // namespace

void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* probs, float* o) {
  const int64_t T = s.seq, hd = s.head_dim;
  const int64_t ldq = s.heads * hd, ldk = s.kv_heads * hd;
  const int64_t group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      const float* qh = q + b * T * ldq + h * hd;
      const float* kg = k + b * T * ldk + g * hd;
      const float* vg = v + b * T * ldk + g * hd;
      float* p = probs + (b * s.heads + h) * T * T;
      float* oh = o + b * T * ldq + h * hd;
      for (int64_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t r1 = std::min(T, r0 + kQueryBlock), m = r1 - r0;
        Gemm(false, true, m, r1, hd, scale, qh + r0 * ldq, ldq, kg, ldk, 0.0f, p + r0 * T, T);
        for (int64_t i = r0; i < r1; ++i) {
          float* row = p + i * T;
          float mx = row[0];
          for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
          float sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          const float inv = 1.0f / sum;
          for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
          std::fill(row + i + 1, row + T, 0.0f);
        }
        Gemm(false, false, m, hd, r1, 1.0f, p + r0 * T, T, vg, ldk, 0.0f, oh + r0 * ldq, ldq);
      }
    }
  }
}

void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* probs,
                       const float* d_o, float* dq, float* dk, float* dv, float* scratch) {
  const int64_t T = s.seq, hd = s.head_dim;
  const int64_t ldq = s.heads * hd, ldk = s.kv_heads * hd;
  const int64_t group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::memset(dk, 0, sizeof(float) * s.batch * T * ldk);
  std::memset(dv, 0, sizeof(float) * s.batch * T * ldk);
  float* dp = scratch;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      const float* qh = q + b * T * ldq + h * hd;
      const float* kg = k + b * T * ldk + g * hd;
      const float* vg = v + b * T * ldk + g * hd;
      const float* doh = d_o + b * T * ldq + h * hd;
      const float* p = probs + (b * s.heads + h) * T * T;
      float* dkg = dk + b * T * ldk + g * hd;
      float* dvg = dv + b * T * ldk + g * hd;
      for (int64_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t r1 = std::min(T, r0 + kQueryBlock), m = r1 - r0;
        const float* pb = p + r0 * T;
        float* db = dp + r0 * T;
        Gemm(false, true, m, r1, hd, 1.0f, doh + r0 * ldq, ldq, vg, ldk, 0.0f, db, T);
        Gemm(true, false, r1, hd, m, 1.0f, pb, T, doh + r0 * ldq, ldq, 1.0f, dvg, ldk);
        for (int64_t i = r0; i < r1; ++i) {
          const float* pr = p + i * T;
          float* dr = dp + i * T;
          float dot = 0;
          for (int64_t j = 0; j <= i; ++j) dot += pr[j] * dr[j];
          for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot);
          std::fill(dr + i + 1, dr + r1, 0.0f);
        }
        Gemm(false, false, m, hd, r1, scale, db, T, kg, ldk, 0.0f, dq + b * T * ldq + h * hd + r0 * ldq, ldq);
        Gemm(true, false, r1, hd, m, scale, db, T, qh + r0 * ldq, ldq, 1.0f, dkg, ldk);
      }
    }
  }
}

void SwigluForward(const float* gate, const float* up, int64_t n, float* a) {
  for (int64_t i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-gate[i]));
    a[i] = gate[i] * sig * up[i];
  }
}

void SwigluBackward(const float* gate, const float* up, const float* da, int64_t n, float* dgate, float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-x));
    const float silu = x * sig;
    dup[i] = da[i] * silu;
    dgate[i] = da[i] * up[i] * sig * (1.0f + x * (1.0f - sig));
  }
}

double SoftmaxCrossEntropy(float* logits, const int32_t* targets, int64_t n, int64_t vocab, float scale) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    float* row = logits + i * vocab;
    float mx = row[0];
    for (int64_t j = 1; j < vocab; ++j) mx = std::max(mx, row[j]);
    const int32_t t = targets[i];
    const double target_logit = static_cast<double>(row[t]) - mx;
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    total += std::log(sum) - target_logit;
    const float inv = static_cast<float>(scale / sum);
    for (int64_t j = 0; j < vocab; ++j) row[j] *= inv;
    row[t] -= scale;
  }
  return total;
}

}  // namespace manta::train
