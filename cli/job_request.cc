#include "cli/job_request.h"

#include <cctype>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "cli/node_flags.h"
#include "common/resources.h"
#include "common/status.h"
#include "common/utf8.h"
#include "dashboard/validation.h"

namespace manta::cli {
namespace {

using nlohmann::json;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<json> ParseObject(const std::string& text, const char* flag) {
  if (!IsValidUtf8(text)) return Invalid(absl::StrCat(flag, " is not valid UTF-8"));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::string why = ExplainBadQuantity(text);
    if (!why.empty()) return Invalid(absl::StrCat(flag, ": ", why));
  }
  if (j.is_discarded() || !j.is_object()) {
    return Invalid(absl::StrCat(flag, " must be a JSON object, got '", text, "'"));
  }
  return j;
}

absl::Status CheckQuantity(const std::string& flag, double value) {
  return Annotate(Quantity::FromDouble(value).status(), flag);
}

absl::Status CheckEntrypointResources(const json& resources) {
  for (const auto& [name, value] : resources.items()) {
    std::string what = absl::StrCat("--entrypoint-resources: resource '", name, "'");
    if (!value.is_number()) return Invalid(absl::StrCat(what, " must be a number, got ", value.dump()));
    RETURN_IF_ERROR(CheckQuantity(what, value.get<double>()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    bool plain = !w.empty();
    for (char c : w) {
      if (!(isalnum(static_cast<unsigned char>(c)) ||
            std::string_view("_@%+=:,./-").find(c) != std::string_view::npos)) {
        plain = false;
      }
    }
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

absl::StatusOr<SubmitRequest> BuildSubmitRequest(const JobSubmitOptions& o) {
  if (o.entrypoint.empty()) return Invalid("give the entrypoint after --, e.g. -- python run.py");
  for (size_t i = 0; i < o.entrypoint.size(); ++i) {
    if (!IsValidUtf8(o.entrypoint[i])) {
      return Invalid(absl::StrCat("the entrypoint is not valid UTF-8 (word ", i + 1, " after --)"));
    }
  }
  SubmitRequest request;
  request.body["entrypoint"] = ShellJoin(o.entrypoint);
  if (!o.submission_id.empty()) {
    RETURN_IF_ERROR(Annotate(dashboard::ValidateSubmissionId(o.submission_id), "--submission-id"));
    request.body["submission_id"] = o.submission_id;
  }
  if (!o.runtime_env_json.empty()) {
    ASSIGN_OR_RETURN(request.runtime_env, ParseObject(o.runtime_env_json, "--runtime-env-json"));
  }
  if (!o.metadata_json.empty()) {
    ASSIGN_OR_RETURN(request.body["metadata"], ParseObject(o.metadata_json, "--metadata-json"));
  }
  if (!o.entrypoint_resources.empty()) {
    ASSIGN_OR_RETURN(json resources, ParseObject(o.entrypoint_resources, "--entrypoint-resources"));
    RETURN_IF_ERROR(CheckEntrypointResources(resources));
    request.body["entrypoint_resources"] = std::move(resources);
  }
  const std::pair<const char*, const std::optional<double>*> quantities[] = {
      {"entrypoint_num_cpus", &o.entrypoint_num_cpus},
      {"entrypoint_num_gpus", &o.entrypoint_num_gpus},
      {"entrypoint_memory", &o.entrypoint_memory}};
  for (const auto& [field, value] : quantities) {
    if (!value->has_value()) continue;
    std::string flag = "--" + std::string(field);
    for (char& c : flag) c = c == '_' ? '-' : c;
    RETURN_IF_ERROR(CheckQuantity(flag, **value));
    request.body[field] = **value;
  }
  return request;
}

}  // namespace manta::cli
