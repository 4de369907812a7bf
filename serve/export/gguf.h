// Exports a trainer's checkpoint to GGUF (version 3), the file llama.cpp
// and the tools around it load: architecture "llama", the tokenizer as a
// byte-level BPE ("gpt2": GPT-2's byte-to-character map, the merges in
// order, end-of-text as a control token). The projections and the output
// head are F32, BF16 or Q8_0 (ggml's blocks of 32 values along a row, each
// an fp16 scale, max |x| / 127, and the 32 values / scale rounded to int8);
// the embedding and the norms stay F32, as in Manta's engine.
//
// The decoder is Llama's, with two differences of layout handled here:
// Manta stores a linear layer as [in, out] (x W) where GGUF wants [out, in];
// and Manta's rotary embedding rotates the two halves of each head
// (x_j with x_{j+half}) where llama.cpp's "llama" rotates neighbours
// (x_2j with x_2j+1), so the rows of each query and key head are reordered
// (j -> 2j, j + half -> 2j + 1), which leaves every attention score the same.
//
//   RETURN_IF_ERROR(WriteGguf(weights, "model.gguf", "fortunes", 2048, GgufType::kQ8_0));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "serve/engine/weights.h"

namespace manta::serve {

// How the projections and the output head are stored.
enum class GgufType { kF32, kBf16, kQ8_0 };

// "F32", "BF16", "Q8_0" (llama.cpp's names); false for any other.
bool ParseGgufType(const std::string& name, GgufType* out);
const char* GgufTypeName(GgufType type);

// Writes `weights` (one tensor rank of one: the whole model) with its
// tokenizer to `path` atomically. `context_length` is the
// llama.context_length to declare. Q8_0 needs every projection's input
// width (emb_dim, heads x head_dim, mlp_dim) to be a multiple of 32.
absl::Status WriteGguf(const ServingWeights& weights, const std::string& path, const std::string& name,
                       int64_t context_length, GgufType type = GgufType::kF32);

// A float as IEEE half precision, rounded to nearest even (Q8_0's scales).
uint16_t RoundToFp16(float x);

// The token strings GGUF's "gpt2" tokenizer uses: each byte through GPT-2's
// byte-to-character map, as UTF-8.
std::string Gpt2TokenText(const std::string& bytes);

}  // namespace manta::serve
