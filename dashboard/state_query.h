// The list queries of the State API (/api/v0/nodes, actors, placement_groups,
// tasks), as Ray's state API takes and answers them: `limit` (default 100,
// at most 10,000), `offset` (entries to skip first, for a page's next
// pages; default 0) and filters given as parallel repeated parameters
// filter_keys / filter_predicates ("=" or "!=") / filter_values, ANDed,
// each comparing one column of an entry as text (numbers and booleans as
// JSON writes them). Pure: no I/O, no gRPC.
//
//   ASSIGN_OR_RETURN(ListQuery q, ParseListQuery(params));   // params from the URL
//   nlohmann::json reply = AnswerListQuery(q, all_entries);
//   // {"total", "num_after_truncation", "num_filtered", "result", "partial_failure_warning", "warnings"}
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace manta::dashboard {

inline constexpr int kDefaultListLimit = 100;
inline constexpr int kMaxListLimit = 10000;

struct ListFilter {
  std::string key;
  bool equal = true;  // "=" (else "!=")
  std::string value;
};

inline constexpr int kMaxListOffset = 10000000;

struct ListQuery {
  int limit = kDefaultListLimit;
  int offset = 0;
  std::vector<ListFilter> filters;
};

// A URL's parameters, each with its values in order.
using QueryParams = std::multimap<std::string, std::string>;

// InvalidArgument, with the reason, for a limit that is not an integer in
// [1, 10000], an offset that is not one in [0, 10,000,000], filter lists
// of different lengths, an unknown predicate, or an empty key.
absl::StatusOr<ListQuery> ParseListQuery(const QueryParams& params);

// `entries` (a JSON array of objects read from the GCS) filtered, the
// `limit` that match after the first `offset` that do as the result, with
// Ray's counts: total (every
// entry there is: `total`, or when negative the entries given),
// num_after_truncation (the entries read) and num_filtered (those that
// match; more than the result holds when truncated). InvalidArgument when a
// filter names none of `columns`, the keys every entry of the list has
// (empty: whatever the first entry has), whether or not there are entries.
absl::StatusOr<nlohmann::json> AnswerListQuery(const ListQuery& query, const nlohmann::json& entries,
                                               int64_t total = -1, const std::set<std::string>& columns = {});

// InvalidArgument when a filter of `query` names none of `columns`.
absl::Status CheckFilterColumns(const ListQuery& query, const std::set<std::string>& columns);

// The keys of a list's entries, from an entry of its JSON (the first of
// `sample`, an array of one made from a default entry).
std::set<std::string> ColumnsOf(const nlohmann::json& sample);

}  // namespace manta::dashboard
