#include "cli/node_flags.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/resources.h"
#include "common/tpu.h"
#include "nlohmann/json.hpp"

namespace manta::cli {
namespace {

bool IsLabelChar(char c, bool key) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || (key && c == '/');
}

std::string FormatNumber(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

}  // namespace

std::string ExplainBadQuantity(const std::string& json_text) {
  // Names in quotes ("banana", "infiniband") are not quantities.
  std::string text;
  bool quoted = false;
  for (size_t i = 0; i < json_text.size(); ++i) {
    char c = json_text[i];
    if (c == '"') {
      quoted = !quoted;
      text += ' ';
    } else if (quoted && c == '\\') {
      ++i;
    } else if (!quoted) {
      text += c;
    }
  }
  std::string lower = absl::AsciiStrToLower(text);
  if (lower.find("nan") != std::string::npos) return "NaN is not a quantity";
  if (lower.find("inf") != std::string::npos) return "infinite quantities are not allowed";
  for (size_t i = 0; i < text.size(); ++i) {
    bool starts_number = absl::ascii_isdigit(static_cast<unsigned char>(text[i])) &&
                         (i == 0 || !absl::ascii_isalnum(static_cast<unsigned char>(text[i - 1])));
    if (!starts_number) continue;
    char* end = nullptr;
    double v = std::strtod(text.c_str() + i, &end);
    if (std::isinf(v)) return absl::StrCat("quantity ", text.substr(i, end - (text.c_str() + i)), " is infinite");
    i = static_cast<size_t>(end - text.c_str());
  }
  return "";
}

absl::StatusOr<double> ParseCount(const std::string& flag, const std::string& text) {
  double v = 0;
  std::string trimmed(absl::StripAsciiWhitespace(text));
  if (!absl::SimpleAtod(trimmed, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be a number, got '", text, "'"));
  }
  auto q = Quantity::FromDouble(v);
  if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", q.status().message()));
  if (v != std::floor(v)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be a whole number, got '", text, "'"));
  }
  return v;
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> labels;
  if (absl::StripAsciiWhitespace(text).empty()) return labels;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: '", std::string(item), "' is not key=value"));
    }
    std::string key(absl::StripAsciiWhitespace(item.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(item.substr(eq + 1)));
    if (key.empty() || key.size() > 253) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: key '", key, "' must have 1 to 253 characters"));
    }
    for (char c : key) {
      if (!IsLabelChar(c, /*key=*/true)) {
        return absl::InvalidArgumentError(absl::StrCat("--labels: key '", key, "' has an invalid character"));
      }
    }
    if (key.rfind("manta.io/", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: key '", key, "' uses the reserved prefix manta.io/"));
    }
    if (value.size() > 63) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: value of '", key, "' is longer than 63 characters"));
    }
    for (char c : value) {
      if (!IsLabelChar(c, /*key=*/false)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--labels: value '", value, "' of '", key, "' has an invalid character"));
      }
    }
    if (!labels.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: key '", key, "' is given twice"));
    }
  }
  return labels;
}

absl::StatusOr<std::vector<std::string>> RayletResourceArgs(const NodeFlags& flags) {
  std::vector<std::string> args;
  if (!flags.num_cpus.empty()) {
    auto v = ParseCount("--num-cpus", flags.num_cpus);
    if (!v.ok()) return v.status();
    args.push_back("--num_cpus=" + FormatNumber(*v));
  }
  if (!flags.memory.empty()) {
    auto v = ParseCount("--memory", flags.memory);
    if (!v.ok()) return v.status();
    args.push_back("--memory=" + FormatNumber(*v));
  }
  if (!flags.resources.empty()) {
    auto set = ParseResourcesJson(flags.resources);
    if (!set.ok()) {
      std::string why = nlohmann::json::accept(flags.resources) ? "" : ExplainBadQuantity(flags.resources);
      if (why.empty()) why = std::string(set.status().message());
      return absl::InvalidArgumentError(absl::StrCat("--resources: ", why));
    }
    for (const char* builtin : {"CPU", "memory"}) {
      if (!set->Get(builtin).IsZero()) {
        return absl::InvalidArgumentError(absl::StrCat("--resources: set ", builtin, " with --",
                                                       std::string(builtin) == "CPU" ? "num-cpus" : "memory",
                                                       " instead"));
      }
    }
    for (const auto& [name, q] : set->entries()) {
      if (auto s = CheckCustomResourceName(name); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--resources: ", s.message()));
      }
    }
    nlohmann::json j = set->ToMap();
    args.push_back("--resources=" + j.dump());
  }
  if (!flags.labels.empty()) {
    auto labels = ParseLabels(flags.labels);
    if (!labels.ok()) return labels.status();
    std::vector<std::string> items;
    for (const auto& [k, v] : *labels) items.push_back(k + "=" + v);
    if (!items.empty()) args.push_back("--labels=" + absl::StrJoin(items, ","));
  }
  if (!flags.node_name.empty()) {
    for (char c : flags.node_name) {
      if (c <= ' ' || c >= 0x7f) {
        return absl::InvalidArgumentError("--node-name must be printable and without spaces");
      }
    }
    args.push_back("--node_name=" + flags.node_name);
  }
  if (!flags.drain_grace_s.empty()) {
    int seconds = 0;
    if (!absl::SimpleAtoi(flags.drain_grace_s, &seconds) || seconds < 0 || seconds > kMaxDrainGraceS) {
      return absl::InvalidArgumentError(absl::StrCat("--drain-grace-s must be a whole number of seconds from 0 to ",
                                                     kMaxDrainGraceS, ", got '", flags.drain_grace_s, "'"));
    }
    args.push_back(absl::StrCat("--drain_grace_s=", seconds));
  }
  return args;
}

absl::StatusOr<HostPort> ParseHostPort(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "' is not HOST:PORT"));
  }
  HostPort hp;
  hp.host = text.substr(0, colon);
  for (char c : hp.host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat("address '", text, "' has an invalid host"));
    }
  }
  if (!absl::SimpleAtoi(text.substr(colon + 1), &hp.port) || hp.port <= 0 || hp.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "' has an invalid port"));
  }
  return hp;
}

absl::Status CheckTpuEnvironment() {
  auto host = tpu::DetectTpuHost([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  });
  if (!host.ok()) return absl::InvalidArgumentError(absl::StrCat("TPU environment: ", host.status().message()));
  return absl::OkStatus();
}

}  // namespace manta::cli
