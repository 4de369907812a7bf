// Gradients of every layer against central finite differences.
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "train/kernels/layers.h"
#include "train/kernels/model.h"
#include "train/kernels/params.h"

namespace manta::train {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Checks analytic[i] against (f(x + h e_i) - f(x - h e_i)) / 2h for `samples` indices.
void ExpectGradient(const std::string& what, std::vector<float>& x, const std::vector<float>& analytic,
                    const std::function<double()>& f, int samples = 24, float h = 1e-2f) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  std::mt19937 rng(7);
  double max_abs = 1e-3;
  for (float g : analytic) max_abs = std::max(max_abs, static_cast<double>(std::fabs(g)));
  for (int s = 0; s < samples; ++s) {
    const size_t i = rng() % x.size();
    const float saved = x[i];
    x[i] = saved + h;
    const double plus = f();
    x[i] = saved - h;
    const double minus = f();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * h);
    EXPECT_NEAR(analytic[i], numeric, 2e-2 * max_abs + 1e-2 * std::fabs(numeric)) << what << " index " << i;
  }
}

TEST(TrainLayersGradTest, RmsNorm) {
  const int64_t n = 5, d = 16;
  auto x = Random(n * d, 1), g = Random(d, 2), r = Random(n * d, 3);
  std::vector<float> y(n * d), rinv(n);
  auto f = [&] {
    RmsNormForward(x.data(), g.data(), n, d, 1e-5f, y.data(), rinv.data());
    return Dot(y, r);
  };
  f();
  std::vector<float> dx(n * d, 0.0f), dg(d, 0.0f);
  RmsNormBackward(x.data(), g.data(), rinv.data(), r.data(), n, d, dx.data(), dg.data());
  ExpectGradient("rmsnorm dx", x, dx, f);
  ExpectGradient("rmsnorm dg", g, dg, f);
}

TEST(TrainLayersGradTest, Rope) {
  const int64_t seq = 6, tokens = 12, heads = 3, hd = 8;
  RopeTable table(seq, hd, 10000.0f);
  auto x = Random(tokens * heads * hd, 4), r = Random(tokens * heads * hd, 5);
  auto f = [&] {
    std::vector<float> y = x;
    RopeForward(table, tokens, heads, y.data());
    return Dot(y, r);
  };
  std::vector<float> dx = r;
  RopeBackward(table, tokens, heads, dx.data());
  ExpectGradient("rope dx", x, dx, f);
  // Position 0 is the identity rotation.
  std::vector<float> y = x;
  RopeForward(table, tokens, heads, y.data());
  for (int64_t i = 0; i < heads * hd; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
}

TEST(TrainLayersGradTest, GroupedCausalAttention) {
  AttentionShape s{2, 5, 4, 2, 4};
  const int64_t N = s.batch * s.seq;
  auto q = Random(N * s.heads * s.head_dim, 6), k = Random(N * s.kv_heads * s.head_dim, 7),
       v = Random(N * s.kv_heads * s.head_dim, 8), r = Random(N * s.heads * s.head_dim, 9);
  std::vector<float> probs(s.batch * s.heads * s.seq * s.seq), o(q.size());
  auto f = [&] {
    AttentionForward(s, q.data(), k.data(), v.data(), probs.data(), o.data());
    return Dot(o, r);
  };
  f();
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), scratch(2 * s.seq * s.seq);
  AttentionBackward(s, q.data(), k.data(), v.data(), probs.data(), r.data(), dq.data(), dk.data(), dv.data(),
                    scratch.data());
  ExpectGradient("attention dq", q, dq, f);
  ExpectGradient("attention dk", k, dk, f);
  ExpectGradient("attention dv", v, dv, f);
  // Causality: the first token's output depends only on the first key/value.
  std::vector<float> o_before = o;
  k[(s.seq - 1) * s.kv_heads * s.head_dim] += 5.0f;
  f();
  for (int64_t i = 0; i < s.heads * s.head_dim; ++i) EXPECT_FLOAT_EQ(o[i], o_before[i]);
}

// Longer than one query block, so the blocked causal products are covered.
TEST(TrainLayersGradTest, AttentionOverSeveralQueryBlocks) {
  AttentionShape s{1, 150, 2, 1, 4};
  const int64_t N = s.batch * s.seq;
  auto q = Random(N * s.heads * s.head_dim, 16), k = Random(N * s.kv_heads * s.head_dim, 17),
       v = Random(N * s.kv_heads * s.head_dim, 18), r = Random(N * s.heads * s.head_dim, 19);
  std::vector<float> probs(s.batch * s.heads * s.seq * s.seq), o(q.size());
  auto f = [&] {
    AttentionForward(s, q.data(), k.data(), v.data(), probs.data(), o.data());
    return Dot(o, r);
  };
  f();
  for (int64_t i = 0; i < s.seq; ++i) {
    double row = 0;
    for (int64_t j = 0; j < s.seq; ++j) row += probs[i * s.seq + j];
    EXPECT_NEAR(row, 1.0, 1e-4) << "row " << i;
    EXPECT_EQ(probs[i * s.seq + s.seq - 1], i == s.seq - 1 ? probs[i * s.seq + s.seq - 1] : 0.0f);
  }
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), scratch(2 * s.seq * s.seq);
  AttentionBackward(s, q.data(), k.data(), v.data(), probs.data(), r.data(), dq.data(), dk.data(), dv.data(),
                    scratch.data());
  ExpectGradient("blocked attention dq", q, dq, f, 40);
  ExpectGradient("blocked attention dk", k, dk, f, 40);
  ExpectGradient("blocked attention dv", v, dv, f, 40);
}

TEST(TrainLayersGradTest, Swiglu) {
  const int64_t n = 40;
  auto gate = Random(n, 10), up = Random(n, 11), r = Random(n, 12);
  std::vector<float> a(n);
  auto f = [&] {
    SwigluForward(gate.data(), up.data(), n, a.data());
    return Dot(a, r);
  };
  std::vector<float> dgate(n), dup(n);
  SwigluBackward(gate.data(), up.data(), r.data(), n, dgate.data(), dup.data());
  ExpectGradient("swiglu dgate", gate, dgate, f);
  ExpectGradient("swiglu dup", up, dup, f);
}

TEST(TrainLayersGradTest, CrossEntropy) {
  const int64_t n = 6, vocab = 11;
  auto logits = Random(n * vocab, 13, 2.0f);
  std::vector<int32_t> targets = {0, 3, 10, 5, 5, 1};
  auto f = [&] {
    std::vector<float> l = logits;
    return 0.5 * SoftmaxCrossEntropy(l.data(), targets.data(), n, vocab, 0.5f);
  };
  std::vector<float> d = logits;
  SoftmaxCrossEntropy(d.data(), targets.data(), n, vocab, 0.5f);
  ExpectGradient("cross-entropy dlogits", logits, d, f);
  // Uniform logits give log(vocab) per token.
  std::vector<float> zeros(n * vocab, 0.0f);
  EXPECT_NEAR(SoftmaxCrossEntropy(zeros.data(), targets.data(), n, vocab, 1.0f),
              n * std::log(static_cast<double>(vocab)), 1e-4);
}

// Keeps every block in memory on one device and records gradients.
class FullOps : public BlockOps {
 public:
  explicit FullOps(const ParamLayout& layout) : params(layout.num_blocks()), grads(layout.num_blocks()) {
    for (int b = 0; b < layout.num_blocks(); ++b) {
      params[b].resize(layout.block(b).size);
      layout.InitBlock(b, 3, params[b].data());
    }
  }
  const float* AcquireBlock(int b) override { return params[b].data(); }
  void BlockGradReady(int b, float* g) override { grads[b].assign(g, g + params[b].size()); }
  void TensorAllReduce(float*, int64_t) override {}
  std::vector<std::vector<float>> params, grads;
};

// Every tensor of every block of the whole decoder, through the model.
TEST(TrainLayersGradTest, DecoderEveryParameter) {
  ModelShape shape;
  shape.emb_dim = 16;
  shape.num_query_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 4;
  shape.mlp_dim = 24;
  shape.num_layers = 2;
  shape.vocab_size = 13;
  const int64_t batch = 2, seq = 5;
  ParamLayout layout(shape, 1, 0);
  DecoderModel model(shape, layout, batch, seq);
  FullOps ops(layout);
  std::vector<int32_t> inputs, targets;
  for (int i = 0; i < batch * seq; ++i) {
    inputs.push_back((i * 7 + 3) % shape.vocab_size);
    targets.push_back((i * 5 + 1) % shape.vocab_size);
  }
  const float scale = 1.0f / (batch * seq);
  model.ForwardBackward(inputs.data(), targets.data(), scale, &ops);
  auto grads = ops.grads;
  auto f = [&] { return scale * model.ForwardBackward(inputs.data(), targets.data(), scale, &ops); };
  for (int b = 0; b < layout.num_blocks(); ++b) {
    for (const TensorSpec& t : layout.block(b).tensors) {
      std::vector<float> x(ops.params[b].begin() + t.offset, ops.params[b].begin() + t.offset + t.local_size());
      std::vector<float> g(grads[b].begin() + t.offset, grads[b].begin() + t.offset + t.local_size());
      auto fx = [&] {
        std::copy(x.begin(), x.end(), ops.params[b].begin() + t.offset);
        return f();
      };
      ExpectGradient(layout.block(b).name + "/" + t.name, x, g, fx, 12);
      std::copy(x.begin(), x.end(), ops.params[b].begin() + t.offset);
    }
  }
}

}  // namespace
}  // namespace manta::train
