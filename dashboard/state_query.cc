#include "dashboard/state_query.h"

#include "common/status.h"
#include "common/utf8.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace manta::dashboard {
namespace {

std::vector<std::string> Values(const QueryParams& params, const std::string& key) {
  std::vector<std::string> out;
  auto [begin, end] = params.equal_range(key);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

// The last value of integer parameter `key`, within [min, max].
absl::StatusOr<int> ParseInt(const QueryParams& params, const std::string& key, int fallback, int min, int max) {
  std::vector<std::string> values = Values(params, key);
  if (values.empty()) return fallback;
  const std::string& text = values.back();
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || n < min || n > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be an integer from ", min, " to ", max, ", not '", text.substr(0, 64), "'"));
  }
  return static_cast<int>(n);
}

// A scalar column as text; objects and arrays do not compare.
bool AsText(const nlohmann::json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_number() || v.is_boolean() || v.is_null()) {
    *out = v.dump();
    return true;
  }
  return false;
}

bool Matches(const nlohmann::json& entry, const std::vector<ListFilter>& filters) {
  for (const ListFilter& f : filters) {
    std::string text;
    auto it = entry.find(f.key);
    const bool equal = it != entry.end() && AsText(*it, &text) && text == f.value;
    if (equal != f.equal) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ListQuery> ParseListQuery(const QueryParams& params) {
  ListQuery query;
  absl::StatusOr<int> limit = ParseInt(params, "limit", kDefaultListLimit, 1, kMaxListLimit);
  if (!limit.ok()) return limit.status();
  query.limit = *limit;
  absl::StatusOr<int> offset = ParseInt(params, "offset", 0, 0, kMaxListOffset);
  if (!offset.ok()) return offset.status();
  query.offset = *offset;
  std::vector<std::string> keys = Values(params, "filter_keys");
  std::vector<std::string> predicates = Values(params, "filter_predicates");
  std::vector<std::string> values = Values(params, "filter_values");
  if (keys.size() != predicates.size() || keys.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("filter_keys, filter_predicates and filter_values must come in ",
                                                   "threes (got ", keys.size(), ", ", predicates.size(), " and ",
                                                   values.size(), ")"));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) return absl::InvalidArgumentError("a filter key is empty");
    if (predicates[i] != "=" && predicates[i] != "!=") {
      return absl::InvalidArgumentError(
          absl::StrCat("filter predicate '", predicates[i].substr(0, 16), "' is not one of = and !="));
    }
    query.filters.push_back({keys[i], predicates[i] == "=", values[i]});
  }
  return query;
}

std::set<std::string> ColumnsOf(const nlohmann::json& sample) {
  std::set<std::string> columns;
  if (sample.is_array() && !sample.empty() && sample.front().is_object()) {
    for (const auto& [key, value] : sample.front().items()) columns.insert(key);
  }
  return columns;
}

absl::Status CheckFilterColumns(const ListQuery& query, const std::set<std::string>& columns) {
  for (const ListFilter& f : query.filters) {
    if (columns.count(f.key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot filter on '", PrintableAscii(f.key, 64), "': the entries have no such column"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> AnswerListQuery(const ListQuery& query, const nlohmann::json& entries, int64_t total,
                                               const std::set<std::string>& columns) {
  RETURN_IF_ERROR(CheckFilterColumns(query, columns.empty() ? ColumnsOf(entries) : columns));
  nlohmann::json result = nlohmann::json::array();
  size_t filtered = 0;
  for (const nlohmann::json& entry : entries) {
    if (!Matches(entry, query.filters)) continue;
    ++filtered;
    if (filtered > static_cast<size_t>(query.offset) && result.size() < static_cast<size_t>(query.limit)) {
      result.push_back(entry);
    }
  }
  nlohmann::json out;
  out["total"] = total >= 0 ? total : static_cast<int64_t>(entries.size());
  out["num_after_truncation"] = entries.size();
  out["num_filtered"] = filtered;
  out["result"] = std::move(result);
  out["partial_failure_warning"] = "";
  out["warnings"] = nullptr;
  return out;
}

}  // namespace manta::dashboard
