// Helpers of the engine tests.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "serve/engine/engine.h"
#include "serve/engine/weights.h"
#include "train/kernels/training_test_util.h"

namespace manta::serve {

// The training tests' tiny model (model_name=tiny: 256 ids) with initial
// weights (seed 7), rank `rank` of `tensor`.
ServingWeights TinyWeights(int tensor, int rank);

// The tiny model (300 ids) trained `steps` steps in `dir` on short lines of
// English ("the cat sat on the mat 123"), with its tokenizer.
absl::StatusOr<ServingWeights> TrainedTinyWeights(const train::TempDir& dir, int steps);

// Prefills `prompt` into `slot` and decodes greedily: n tokens, and the
// logits each was picked from.
std::vector<int32_t> GreedyRun(Engine& engine, int slot, const std::vector<int32_t>& prompt, int n,
                               std::vector<std::vector<float>>* logits);

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tolerance);

}  // namespace manta::serve
