// AdamW with MaxText's learning-rate schedule, applied to flat shards.
#pragma once

#include <cstdint>

#include "train/kernels/config.h"

namespace manta::train {

// Learning rate for the update made at optimizer step `step` (0-based):
// linear warmup from 0 over warmup_steps_fraction * schedule steps, then
// cosine decay to cosine_learning_rate_final_fraction * learning_rate at
// the end of the schedule, then 0.
double LearningRate(const Config& config, int64_t step);

// Scale that clips a gradient of global norm `norm` to the threshold
// (1 when below it or when clipping is off).
double ClipScale(const Config& config, double norm);

// One AdamW update of n parameters with moments m and v; `step` is the
// 0-based optimizer step (bias correction uses step + 1). g is multiplied
// by `grad_scale` first.
void AdamWUpdate(const Config& config, int64_t step, double lr, double grad_scale, const float* g, float* p, float* m,
                 float* v, int64_t n);

}  // namespace manta::train
