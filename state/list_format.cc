#include "state/list_format.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/resources.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"
#include "state/status_format.h"

namespace manta::state {
namespace {

std::vector<const NodeView*> Ordered(const std::vector<NodeView>& nodes) {
  std::vector<const NodeView*> out;
  for (const NodeView& n : nodes) out.push_back(&n);
  std::stable_sort(out.begin(), out.end(), [](const NodeView* a, const NodeView* b) {
    if (a->is_head != b->is_head) return a->is_head;
    return a->start_time_ms < b->start_time_ms;
  });
  return out;
}

// Ray's state API prints memory amounts in GiB with three decimals.
std::string ResourceValue(const std::string& name, double v) {
  if (name.find("memory") == std::string::npos) return FormatQuantity(v);
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}};
  char buf[64];
  for (const auto& [suffix, size] : kUnits) {
    if (v >= size) {
      std::snprintf(buf, sizeof(buf), "%.3f %s", v / size, suffix);
      return buf;
    }
  }
  std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(v));
  return buf;
}

std::string NodeName(const NodeView& n) { return n.node_name.empty() ? n.node_ip : n.node_name; }

// Why a node is not plainly alive: its death, or its drain.
std::string StateMessage(const NodeView& n, absl::TimeZone tz) {
  if (!n.alive) return n.death_reason;
  return n.draining ? FormatDrainMessage(n, tz) : "";
}

}  // namespace

std::string YamlScalar(const std::string& value) {
  if (value.empty()) return "''";
  std::string lower = absl::AsciiStrToLower(value);
  static const char* kSpecial[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
  bool quote = std::find(std::begin(kSpecial), std::end(kSpecial), lower) != std::end(kSpecial);
  double d;
  if (absl::SimpleAtod(value, &d)) quote = true;
  if (std::string("-?:,[]{}#&*!|>'\"%@`").find(value[0]) != std::string::npos && value != "-") quote = true;
  if (value.front() == ' ' || value.back() == ' ' || value.find(": ") != std::string::npos ||
      value.find(" #") != std::string::npos) {
    quote = true;
  }
  if (!quote) return value;
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string FormatListHeader(size_t total, int limit, absl::Time now, absl::TimeZone tz) {
  std::string out = absl::StrCat("======== List: ", FormatTimestamp(now, tz), " ========\n");
  absl::StrAppend(&out, "Stats:\n------------------------------\nTotal: ", total, "\n\n");
  if (limit > 0 && total >= static_cast<size_t>(limit)) {
    absl::StrAppend(&out, "Showing at most ", limit, " entries; use --limit to see more.\n\n");
  }
  absl::StrAppend(&out, "Table:\n------------------------------\n");
  return out;
}

std::string FormatTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::vector<std::string>>>& raw_rows) {
  // Names and messages come from users: escaped, no cell can move the
  // cursor or split its row.
  std::vector<std::vector<std::vector<std::string>>> rows = raw_rows;
  for (auto& row : rows) {
    for (auto& cell : row) {
      for (auto& line : cell) line = EscapeForTerminal(line);
    }
  }
  size_t index_width = std::max<size_t>(2, std::to_string(rows.empty() ? 0 : rows.size() - 1).size());
  std::vector<size_t> widths;
  for (const auto& h : headers) widths.push_back(h.size());
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      for (const auto& line : row[c]) widths[c] = std::max(widths[c], line.size());
    }
  }
  auto emit = [&](std::string* out, const std::string& index, const std::vector<std::string>& cells) {
    std::string line(index_width - index.size(), ' ');
    line += index;
    for (size_t c = 0; c < widths.size(); ++c) {
      line += "  ";
      std::string cell = c < cells.size() ? cells[c] : "";
      line += cell;
      line.append(widths[c] - cell.size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(out, line, "\n");
  };
  std::string out;
  emit(&out, "", headers);
  for (size_t r = 0; r < rows.size(); ++r) {
    size_t height = 1;
    for (const auto& cell : rows[r]) height = std::max(height, cell.size());
    for (size_t l = 0; l < height; ++l) {
      std::vector<std::string> cells;
      for (const auto& cell : rows[r]) cells.push_back(l < cell.size() ? cell[l] : "");
      emit(&out, l == 0 ? std::to_string(r) : "", cells);
    }
  }
  return out;
}

std::string FormatNodeList(const std::vector<NodeView>& nodes, absl::Time now, absl::TimeZone tz) {
  std::vector<std::string> headers = {"NODE_ID",       "NODE_IP",   "IS_HEAD_NODE",    "STATE",
                                      "STATE_MESSAGE", "NODE_NAME", "RESOURCES_TOTAL", "LABELS"};
  std::vector<std::vector<std::vector<std::string>>> rows;
  for (const NodeView* n : Ordered(nodes)) {
    std::vector<std::string> resources;
    for (const auto& [name, v] : n->resources_total) resources.push_back(name + ": " + ResourceValue(name, v));
    std::vector<std::string> labels;
    for (const auto& [k, v] : n->labels) labels.push_back(k + ": " + YamlScalar(v));
    rows.push_back({{n->node_id},
                    {n->node_ip},
                    {n->is_head ? "True" : "False"},
                    {n->alive ? "ALIVE" : "DEAD"},
                    {StateMessage(*n, tz)},
                    {NodeName(*n)},
                    resources,
                    labels});
  }
  return FormatListHeader(nodes.size(), /*limit=*/0, now, tz) + FormatTable(headers, rows);
}

nlohmann::json NodeListJson(const std::vector<NodeView>& nodes) {
  nlohmann::json out = nlohmann::json::array();
  for (const NodeView* n : Ordered(nodes)) {
    nlohmann::json j;
    j["node_id"] = n->node_id;
    j["node_ip"] = n->node_ip;
    j["is_head_node"] = n->is_head;
    j["state"] = n->alive ? "ALIVE" : "DEAD";
    j["state_message"] = StateMessage(*n, absl::LocalTimeZone());
    j["node_name"] = NodeName(*n);
    j["resources_total"] = n->resources_total;
    j["labels"] = n->labels;
    j["start_time_ms"] = n->start_time_ms;
    j["end_time_ms"] = n->end_time_ms;
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatNodeListJson(const std::vector<NodeView>& nodes) {
  return NodeListJson(nodes).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string FormatJobList(const nlohmann::json& jobs, absl::TimeZone tz) {
  std::vector<nlohmann::json> sorted(jobs.begin(), jobs.end());
  std::sort(sorted.begin(), sorted.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("start_time", int64_t{0}) < b.value("start_time", int64_t{0});
  });
  std::string out = absl::StrFormat("%-30s %-10s %-20s %s\n", "SUBMISSION_ID", "STATUS", "START_TIME", "ENTRYPOINT");
  for (const nlohmann::json& job : sorted) {
    std::string entry = job.value("entrypoint", "");
    if (entry.size() > 60) entry = std::string(Utf8Prefix(entry, 57)) + "...";
    const nlohmann::json& start = job.contains("start_time") ? job["start_time"] : nlohmann::json();
    const std::string when =
        start.is_number() ? absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(start.get<int64_t>()), tz) : "-";
    // What a user submitted is printed escaped: no escape sequence reaches
    // the terminal, no newline splits a row.
    absl::StrAppendFormat(&out, "%-30s %-10s %-20s %s\n", EscapeForTerminal(job.value("submission_id", "")),
                          EscapeForTerminal(job.value("status", "")), when, EscapeForTerminal(entry));
  }
  return out;
}

}  // namespace manta::state
