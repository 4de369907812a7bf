// `manta list nodes`: the node table in the layout of `ray list nodes`.
//
//   std::cout << FormatNodeList(view.nodes, absl::Now(), absl::LocalTimeZone());
//
//   ======== List: 2026-04-21 10:20:20.945431 ========
//   Stats:
//   ------------------------------
//   Total: 2
//
//   Table:
//   ------------------------------
//       NODE_ID  NODE_IP    IS_HEAD_NODE  STATE  STATE_MESSAGE  NODE_NAME  RESOURCES_TOTAL  LABELS
//    0  6b1f...  127.0.0.1  True          ALIVE                 127.0.0.1  CPU: 2.0         manta.io/...
//                                                                          TPU: 4.0
//
// Columns are as wide as their widest line and two spaces apart; a cell of
// several lines (resources, labels) makes its row that tall. Nodes are listed
// head first, then by start time. STATE_MESSAGE holds a dead node's death
// reason, or for a draining node "draining: <reason> (deadline <time>)".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "state/cluster_view.h"

namespace manta::state {

std::string FormatNodeList(const std::vector<NodeView>& nodes, absl::Time now, absl::TimeZone tz);

// The same rows as a JSON array of objects with lower-case keys
// (node_id, node_ip, is_head_node, state, ...), pretty-printed.
std::string FormatNodeListJson(const std::vector<NodeView>& nodes);
// The same as a JSON array (the dashboard's State API serves it).
nlohmann::json NodeListJson(const std::vector<NodeView>& nodes);

// A label value as YAML prints it: quoted when it would otherwise read as a
// number, a boolean or null ('1', 'true'), or is empty.
std::string YamlScalar(const std::string& value);

// What every `manta list` table starts with: the "======== List: <time>
// ========" line, "Stats:" with the total, and the "Table:" rule. When
// `limit` > 0 and `total` reached it, a note says the list may be truncated,
// as Ray's does.
std::string FormatListHeader(size_t total, int limit, absl::Time now, absl::TimeZone tz);

// Lays out `rows` (each cell a list of lines) under `headers` with a leading
// right-aligned row-index column, as tabulate's "plain" format does.
// `manta job list`: the jobs of the Jobs API's list, oldest first, every
// field from a user escaped for the terminal.
std::string FormatJobList(const nlohmann::json& jobs, absl::TimeZone tz);

// Every cell is escaped for the terminal (EscapeForTerminal).
std::string FormatTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::vector<std::string>>>& rows);

}  // namespace manta::state
