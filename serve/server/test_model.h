// Helpers of the serving server tests: a tiny text model trained by the
// kernels, and what the engine answers for a prompt in the test process.
#pragma once

#include <string>

#include "serve/engine/packed_matrix.h"

namespace manta::serve {

// Short English lines and made-up words: a corpus a 300-id tokenizer learns.
std::string Corpus();

// Trains the tiny model on Corpus() for 10 steps under `dir` (run "srv")
// and returns the checkpoint's step directory.
std::string TrainTinyTextModel(const std::string& dir);

// The greedy answer of one engine holding the whole model, as the server
// sends it (text up to EOS or max_tokens, valid UTF-8).
std::string LocalGreedy(const std::string& prompt, int max_tokens, const std::string& step_dir,
                        WeightFormat weights = WeightFormat::kF32);

}  // namespace manta::serve
