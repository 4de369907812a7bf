#include "serve/server/generate_api.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace manta::serve {
namespace {

using Json = nlohmann::json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

// The count of bytes at the end of `s` that begin a character not yet complete.
size_t IncompleteTail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

absl::StatusOr<GenerateBody> ParseGenerateBody(std::string_view body, int64_t default_max_tokens) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("the body is not JSON");
  if (!j.is_object()) return Bad("the body must be a JSON object");
  GenerateBody out;
  out.max_tokens = default_max_tokens;
  for (const auto& [key, value] : j.items()) {
    if (key == "prompt") {
      if (!value.is_string()) return Bad("\"prompt\" must be a string");
      out.prompt = value.get<std::string>();
    } else if (key == "max_tokens") {
      if (!value.is_number_integer()) return Bad("\"max_tokens\" must be an integer");
      out.max_tokens = value.get<int64_t>();
    } else if (key == "stream") {
      if (!value.is_boolean()) return Bad("\"stream\" must be true or false");
      out.stream = value.get<bool>();
    } else if (key == "temperature") {
      if (!value.is_number()) return Bad("\"temperature\" must be a number");
      const double t = value.get<double>();
      if (!std::isfinite(t) || t < 0 || t > 100) return Bad("\"temperature\" must be in [0, 100]");
      out.sampling.temperature = static_cast<float>(t);
    } else if (key == "top_k") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > (1 << 20)) {
        return Bad("\"top_k\" must be an integer from 0 (all tokens)");
      }
      out.sampling.top_k = value.get<int>();
    } else if (key == "seed") {
      if (!value.is_number_integer()) return Bad("\"seed\" must be an integer");
      out.sampling.seed = value.is_number_unsigned() ? value.get<uint64_t>()
                                                     : static_cast<uint64_t>(value.get<int64_t>());
    } else {
      return Bad(absl::StrCat("unknown key \"", ValidUtf8(key), "\" (known: prompt, max_tokens, stream, ",
                              "temperature, top_k, seed)"));
    }
  }
  if (!j.contains("prompt")) return Bad("\"prompt\" is missing");
  if (out.prompt.empty()) return Bad("\"prompt\" is empty");
  if (out.max_tokens <= 0) return Bad(absl::StrCat("\"max_tokens\" must be positive, got ", out.max_tokens));
  return out;
}

std::string ResponseJson(absl::string_view text) { return Dump(Json{{"response", std::string(text)}}); }

std::string ErrorJson(absl::string_view message) { return Dump(Json{{"error", std::string(message)}}); }

std::string StreamEvent(absl::string_view piece) { return absl::StrCat("data: ", ResponseJson(piece), "\n\n"); }

std::string Utf8Pieces::Add(std::string_view bytes) {
  pending_.append(bytes);
  const size_t keep = IncompleteTail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ValidUtf8(ready);
}

std::string Utf8Pieces::Flush() {
  std::string rest = ValidUtf8(pending_);
  pending_.clear();
  return rest;
}

}  // namespace manta::serve
