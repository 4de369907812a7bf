// The JSON of the server's /generate route, and the text pieces a stream
// sends.
//
//   POST /generate {"prompt": "Why is the sky blue", "max_tokens": 200}
//     -> 200 {"response": " Because ..."}
//   {"prompt": ..., "stream": true} -> 200 text/event-stream,
//     one `data: {"response": "<piece>"}` event per piece, then `data: [DONE]`
//   optional: "temperature" (0: greedy), "top_k" (0: all), "seed",
//   "ignore_eos" (true: go on past end-of-text, which adds no text, up to
//   max_tokens, as vLLM's benchmarks ask for outputs of one length)
//
// A bad request (not JSON, no prompt, an empty one, max_tokens not a
// positive integer, an unknown key's wrong type...) is a 400 whose body says
// why: {"error": "..."}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "serve/engine/sampler.h"

namespace manta::serve {

struct GenerateBody {
  std::string prompt;
  int64_t max_tokens = 0;
  bool stream = false;
  bool ignore_eos = false;
  SamplingParams sampling;
};

// Parses a /generate body; InvalidArgument names what is wrong.
absl::StatusOr<GenerateBody> ParseGenerateBody(std::string_view body, int64_t default_max_tokens);

// {"response": text}, with any broken UTF-8 replaced.
std::string ResponseJson(absl::string_view text);
// {"error": message}.
std::string ErrorJson(absl::string_view message);
// One server-sent event carrying ResponseJson(piece).
std::string StreamEvent(absl::string_view piece);
inline constexpr char kStreamDone[] = "data: [DONE]\n\n";

}  // namespace manta::serve
