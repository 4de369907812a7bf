#include "common/resources.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "nlohmann/json.hpp"

namespace manta {

absl::StatusOr<Quantity> Quantity::FromDouble(double v) {
  if (std::isnan(v)) return absl::InvalidArgumentError("quantity is NaN");
  if (std::isinf(v)) return absl::InvalidArgumentError("quantity is infinite");
  if (v < 0) return absl::InvalidArgumentError(absl::StrCat("quantity ", v, " is negative"));
  if (v > kMaxValue) {
    return absl::InvalidArgumentError(absl::StrCat("quantity ", v, " is larger than the maximum ", kMaxValue));
  }
  static_assert(kMaxValue * kScale < 9.2e18, "the largest quantity must fit in int64 units");
  auto units = static_cast<int64_t>(std::llround(v * kScale));
  if (units == 0 && v > 0) {
    return absl::InvalidArgumentError(absl::StrCat("quantity ", v, " is below the resolution 0.0001"));
  }
  return Quantity(units);
}

absl::Status ResourceSet::ValidateName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("resource name is empty");
  if (name.size() > 256) return absl::InvalidArgumentError("resource name is longer than 256 characters");
  for (unsigned char c : name) {
    if (c <= ' ' || c >= 0x7f) {
      return absl::InvalidArgumentError("resource name '" + name + "' has a space or control character");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceSet> ResourceSet::FromMap(const std::map<std::string, double>& m) {
  ResourceSet set;
  for (const auto& [name, value] : m) {
    if (auto s = ValidateName(name); !s.ok()) return s;
    auto q = Quantity::FromDouble(value);
    if (!q.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("resource '", name, "': ", q.status().message()));
    }
    set.Set(name, *q);
  }
  return set;
}

Quantity ResourceSet::Get(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? Quantity() : it->second;
}

void ResourceSet::Set(const std::string& name, Quantity q) {
  if (q.IsZero()) {
    entries_.erase(name);
  } else {
    entries_[name] = q;
  }
}

void ResourceSet::Add(const ResourceSet& other) {
  for (const auto& [name, q] : other.entries_) Set(name, Get(name) + q);
}

void ResourceSet::Subtract(const ResourceSet& other) {
  for (const auto& [name, q] : other.entries_) {
    Quantity have = Get(name);
    CHECK(q <= have) << "resource " << name << " would go negative";
    Set(name, have - q);
  }
}

bool ResourceSet::Contains(const ResourceSet& other) const {
  for (const auto& [name, q] : other.entries_) {
    if (Get(name) < q) return false;
  }
  return true;
}

std::map<std::string, double> ResourceSet::ToMap() const {
  std::map<std::string, double> m;
  for (const auto& [name, q] : entries_) m[name] = q.ToDouble();
  return m;
}

std::string ResourceSet::DebugString() const {
  std::string out = "{";
  for (const auto& [name, q] : entries_) {
    if (out.size() > 1) out += ", ";
    absl::StrAppend(&out, name, ": ", FormatQuantity(q.ToDouble()));
  }
  return out + "}";
}

absl::StatusOr<ResourceSet> ParseResourcesJson(const std::string& text) {
  using nlohmann::json;
  // The keys of each open object; the first key seen twice.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  json::parser_callback_t find_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty() && !duplicate &&
        !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j = json::parse(text, find_duplicates, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("resources are not valid JSON: " + text);
  if (!j.is_object()) return absl::InvalidArgumentError("resources must be a JSON object of name: number");
  if (duplicate) return absl::InvalidArgumentError("resource '" + *duplicate + "' is given twice");
  std::map<std::string, double> m;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number()) {
      return absl::InvalidArgumentError("resource '" + it.key() + "' must be a number, got " + it.value().dump());
    }
    m[it.key()] = it.value().get<double>();
  }
  return ResourceSet::FromMap(m);
}

absl::Status CheckCustomResourceName(const std::string& name) {
  if (name.rfind("node:", 0) == 0) {
    return absl::InvalidArgumentError("resource '" + name +
                                      "' is reserved: Manta sets node:<ip> and node:__internal_head__ itself");
  }
  bool tpu_head = name.size() > 9 && name.rfind("TPU-", 0) == 0 && name.compare(name.size() - 5, 5, "-head") == 0;
  if (name == "TPU" || tpu_head) {
    return absl::InvalidArgumentError("resource '" + name +
                                      "' is reserved: it comes from the TPU environment (TPU_ACCELERATOR_TYPE, "
                                      "TPU_TOPOLOGY, TPU_WORKER_ID, TPU_NAME), never from --resources");
  }
  return absl::OkStatus();
}

std::string FormatQuantity(double v) {
  // Python's repr of a float that came from a 1/10000 fixed point: the
  // shortest decimal, always with a fractional part.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  std::string s(buf);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

}  // namespace manta
