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
      // The bound is checked on the number as sent (an unsigned 2^64 - 1
      // must not read as -1).
      if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > (uint64_t{1} << 31)) ||
          (!value.is_number_unsigned() && (value.get<int64_t>() <= 0 || value.get<int64_t>() > (int64_t{1} << 31)))) {
        return Bad(absl::StrCat("\"max_tokens\" must be an integer from 1 to 2147483648, got ", Dump(value)));
      }
      out.max_tokens = value.is_number_unsigned() ? static_cast<int64_t>(value.get<uint64_t>()) : value.get<int64_t>();
    } else if (key == "stream") {
      if (!value.is_boolean()) return Bad("\"stream\" must be true or false");
      out.stream = value.get<bool>();
    } else if (key == "ignore_eos") {
      if (!value.is_boolean()) return Bad("\"ignore_eos\" must be true or false");
      out.ignore_eos = value.get<bool>();
    } else if (key == "temperature") {
      if (!value.is_number()) return Bad("\"temperature\" must be a number");
      const double t = value.get<double>();
      if (!std::isfinite(t) || t < 0 || t > 100) return Bad("\"temperature\" must be in [0, 100]");
      out.sampling.temperature = static_cast<float>(t);
    } else if (key == "top_k") {
      if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > (1u << 20)) ||
          (!value.is_number_unsigned() && (value.get<int64_t>() < 0 || value.get<int64_t>() > (1 << 20)))) {
        return Bad(absl::StrCat("\"top_k\" must be an integer from 0 (all tokens) to 1048576, got ", Dump(value)));
      }
      out.sampling.top_k = value.get<int>();
    } else if (key == "seed") {
      if (!value.is_number_integer()) return Bad("\"seed\" must be an integer");
      out.sampling.seed =
          value.is_number_unsigned() ? value.get<uint64_t>() : static_cast<uint64_t>(value.get<int64_t>());
    } else {
      return Bad(absl::StrCat("unknown key \"", ValidUtf8(key), "\" (known: prompt, max_tokens, stream, ",
                              "temperature, top_k, seed, ignore_eos)"));
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

}  // namespace manta::serve
