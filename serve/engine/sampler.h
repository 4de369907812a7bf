// Picking the next token from logits: greedy (temperature 0), or sampling
// from softmax(logits / temperature) over the top_k most likely tokens (0:
// all), drawn from a generator seeded per request, so a seeded request
// reproduces its output.
#pragma once

#include <cstdint>
#include <random>

namespace manta::serve {

struct SamplingParams {
  float temperature = 0;  // 0: greedy
  int top_k = 0;          // 0: the whole vocabulary
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}
  int32_t Next(const float* logits, int64_t vocab);
  // Moves on as Next would without choosing (exactly one draw when it
  // samples): a request whose first token was drawn elsewhere, by a
  // sampler with the same parameters, goes on as if drawn here.
  void Skip();

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// The index of the largest logit (the lowest index among equals).
int32_t Argmax(const float* logits, int64_t vocab);

}  // namespace manta::serve
