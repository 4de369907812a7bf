#include "train/kernels/optimizer.h"

#include <cmath>

namespace manta::train {

double LearningRate(const Config& c, int64_t step) {
  const int64_t total = c.schedule_steps;
  const int64_t warmup = static_cast<int64_t>(c.warmup_steps_fraction * total);
  if (step < warmup) return c.learning_rate * static_cast<double>(step) / warmup;
  if (step >= total) return 0.0;
  const double pct = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  const double a = 0.5 * (std::cos(M_PI * pct) + 1.0);
  return c.learning_rate * (a + (1.0 - a) * c.cosine_final_fraction);
}

double ClipScale(const Config& c, double norm) {
  if (c.gradient_clipping_threshold <= 0 || norm <= c.gradient_clipping_threshold) return 1.0;
  return c.gradient_clipping_threshold / norm;
}

void AdamWUpdate(const Config& c, int64_t step, double lr, double grad_scale, const float* g, float* p, float* m,
                 float* v, int64_t n) {
  const float b1 = static_cast<float>(c.adam_b1), b2 = static_cast<float>(c.adam_b2);
  const float eps = static_cast<float>(c.adam_eps), wd = static_cast<float>(c.adam_weight_decay);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(c.adam_b1, step + 1)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(c.adam_b2, step + 1)));
  const float s = static_cast<float>(grad_scale), rate = static_cast<float>(lr);
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float update = (m[i] * c1) / (std::sqrt(v[i] * c2) + eps) + wd * p[i];
    p[i] -= rate * update;
  }
}

}  // namespace manta::train
