// Exports a trainer's checkpoint to GGUF (version 3, F32), the file llama.cpp
// and the tools around it load: architecture "llama", the tokenizer as a
// byte-level BPE ("gpt2": GPT-2's byte-to-character map, the merges in
// order, end-of-text as a control token).
//
// The decoder is Llama's, with two differences of layout handled here:
// Manta stores a linear layer as [in, out] (x W) where GGUF wants [out, in];
// and Manta's rotary embedding rotates the two halves of each head
// (x_j with x_{j+half}) where llama.cpp's "llama" rotates neighbours
// (x_2j with x_2j+1), so the rows of each query and key head are reordered
// (j -> 2j, j + half -> 2j + 1), which leaves every attention score the same.
//
//   RETURN_IF_ERROR(ExportGguf(step_dir, "model.gguf", "fortunes"));
#pragma once

#include <string>

#include "absl/status/status.h"
#include "serve/engine/weights.h"

namespace manta::serve {

// Writes `weights` (one tensor rank of one: the whole model) with its
// tokenizer to `path` atomically. `context_length` is the
// llama.context_length to declare.
absl::Status WriteGguf(const ServingWeights& weights, const std::string& path, const std::string& name,
                       int64_t context_length);

// The token strings GGUF's "gpt2" tokenizer uses: each byte through GPT-2's
// byte-to-character map, as UTF-8.
std::string Gpt2TokenText(const std::string& bytes);

}  // namespace manta::serve
