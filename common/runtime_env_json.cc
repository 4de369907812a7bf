#include "common/runtime_env_json.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace manta {

std::string RuntimeEnvJson(const RuntimeEnvSpec& env) {
  nlohmann::json j = nlohmann::json::object();
  if (!env.working_dir.empty()) j["working_dir"] = env.working_dir;
  if (!env.env_vars.empty()) j["env_vars"] = env.env_vars;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<RuntimeEnvSpec> ParseRuntimeEnvJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("$", kRuntimeEnvVar, ": ", why));
  };
  if (!j.is_object()) return bad("not a JSON object");
  RuntimeEnvSpec out;
  if (auto it = j.find("working_dir"); it != j.end()) {
    if (!it->is_string()) return bad("working_dir is not a string");
    out.working_dir = it->get<std::string>();
  }
  if (auto it = j.find("env_vars"); it != j.end()) {
    if (!it->is_object()) return bad("env_vars is not an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return bad(absl::StrCat("env_vars[", k, "] is not a string"));
      out.env_vars[k] = v.get<std::string>();
    }
  }
  return out;
}

}  // namespace manta
