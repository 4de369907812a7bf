#include "common/label_selector.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/tpu.h"

namespace manta {
namespace {

bool ValidKey(const std::string& k) {
  if (k.empty() || k.size() > 253) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' || c == '-';
  });
}

bool ValidValue(absl::string_view v) {
  if (v.empty() || v.size() > 63) return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

bool LabelSelector::Condition::Holds(const std::string* value) const {
  bool in = value != nullptr && std::find(values.begin(), values.end(), *value) != values.end();
  return negated ? !in : in;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(const std::map<std::string, std::string>& selector) {
  if (selector.size() > 64) return absl::InvalidArgumentError("label selector: more than 64 keys");
  LabelSelector out;
  for (const auto& entry : selector) {
    const std::string& key = entry.first;  // named: a lambda cannot capture a structured binding in C++17
    const std::string& raw = entry.second;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError("label selector '" + key.substr(0, 64) + "': " + why);
    };
    if (!ValidKey(key)) return bad("invalid key (1-253 of letters, digits, '.', '_', '/', '-')");
    Condition c;
    c.key = key;
    absl::string_view v = absl::StripAsciiWhitespace(raw);
    if (absl::ConsumePrefix(&v, "!")) c.negated = true;
    if (absl::ConsumePrefix(&v, "in(")) {
      if (!absl::ConsumeSuffix(&v, ")")) return bad("in( without a closing parenthesis");
      for (absl::string_view item : absl::StrSplit(v, ',')) {
        item = absl::StripAsciiWhitespace(item);
        if (!ValidValue(item)) return bad("invalid value '" + std::string(item.substr(0, 64)) + "' in in()");
        c.values.emplace_back(item);
      }
    } else {
      if (!ValidValue(v))
        return bad("invalid value '" + std::string(v.substr(0, 64)) +
                   "' (at most 63 of letters, digits, '.', '_', '-'; or !v, in(a,b), !in(a,b))");
      c.values.emplace_back(v);
    }
    for (const std::string& value : c.values) {
      if (absl::Status s = tpu::ValidateTpuLabel(key, value); !s.ok()) return bad(std::string(s.message()));
    }
    out.conditions_.push_back(std::move(c));
  }
  return out;
}

}  // namespace manta
