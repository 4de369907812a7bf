// What a serving host reads from outside: the /generate body, the pieces a
// stream sends of any token bytes, and a tokenizer file (it travels with a
// checkpoint). Input: a selector byte, then the bytes.
//   0: a /generate body; an accepted one has a non-empty prompt and
//      positive max_tokens, and its JSON replies parse back.
//   1: token bytes cut in pieces: the pieces are valid UTF-8 and, when the
//      input was valid UTF-8, put together they are the input.
//   2: a tokenizer file; an accepted one round-trips any text.
#include <cstdint>
#include <string>

#include "common/utf8.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"
#include "serve/server/generate_api.h"
#include "train/kernels/tokenizer.h"

namespace {

void Body(const std::string& in) {
  absl::StatusOr<manta::serve::GenerateBody> b = manta::serve::ParseGenerateBody(in, 16);
  if (!b.ok()) {
    FUZZ_CHECK(b.status().code() == absl::StatusCode::kInvalidArgument);
    const nlohmann::json e = nlohmann::json::parse(manta::serve::ErrorJson(b.status().message()), nullptr, false);
    FUZZ_CHECK(!e.is_discarded());
    return;
  }
  FUZZ_CHECK(!b->prompt.empty() && b->max_tokens > 0);
  const nlohmann::json r = nlohmann::json::parse(manta::serve::ResponseJson(b->prompt), nullptr, false);
  FUZZ_CHECK(!r.is_discarded() && r["response"].is_string());
}

void Pieces(const std::string& in) {
  manta::Utf8Pieces pieces;
  std::string joined;
  for (size_t at = 0; at < in.size();) {
    const size_t n = 1 + static_cast<unsigned char>(in[at]) % 5;
    std::string piece = pieces.Add(in.substr(at, n));
    FUZZ_CHECK(manta::IsValidUtf8(piece));
    joined += piece;
    at += n;
  }
  std::string rest = pieces.Flush();
  FUZZ_CHECK(manta::IsValidUtf8(rest));
  joined += rest;
  if (manta::IsValidUtf8(in)) FUZZ_CHECK(joined == in);
}

void TokenizerFile(const std::string& in) {
  const size_t nul = in.find('\0');
  absl::StatusOr<manta::train::Tokenizer> tok = manta::train::Tokenizer::FromJson(in.substr(0, nul));
  if (!tok.ok()) return;
  const std::string text = nul == std::string::npos ? std::string("the cat") : in.substr(nul + 1);
  FUZZ_CHECK(tok->Decode(tok->Encode(text)) == text);
  FUZZ_CHECK(manta::train::Tokenizer::FromJson(tok->ToJson()).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 16)) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      Body(in);
      break;
    case 1:
      Pieces(in);
      break;
    default:
      TokenizerFile(in);
      break;
  }
  return 0;
}
