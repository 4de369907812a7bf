#include "serve/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace manta::serve {

int32_t Argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

void Sampler::Skip() {
  if (params_.temperature > 0 && params_.top_k != 1) rng_();
}

int32_t Sampler::Next(const float* logits, int64_t vocab) {
  if (!(params_.temperature > 0) || params_.top_k == 1) return Argmax(logits, vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  int64_t k = params_.top_k > 0 ? std::min<int64_t>(params_.top_k, vocab) : vocab;
  // The k most likely, in a fixed order (by logit, then id), so a seed
  // reproduces the draw.
  auto higher = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), higher);
  std::vector<double> weights(k);
  const double top = logits[ids[0]];
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += weights[i] = std::exp((logits[ids[i]] - top) / params_.temperature);
  // One draw per token (Skip relies on it): u in [0, total).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double below = 0;
  for (int64_t i = 0; i < k; ++i) {
    below += weights[i];
    if (u < below) return ids[i];
  }
  return ids[k - 1];
}

}  // namespace manta::serve
