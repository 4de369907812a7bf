#include "cli/drain_node.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace manta::cli {

using state::NodeView;

absl::StatusOr<absl::Duration> ParseDrainDeadline(const std::string& text) {
  absl::Duration d;
  if (text.empty() || !absl::ParseDuration(text, &d) || d == absl::InfiniteDuration() ||
      d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline '", text, "' is not a duration (e.g. 30s, 2m, 1h; 0 for none)"));
  }
  if (d < absl::ZeroDuration()) return absl::InvalidArgumentError("--deadline may not be negative");
  if (d > kMaxDrainDeadline) {
    return absl::InvalidArgumentError(absl::StrCat("--deadline ", text, " is over a week"));
  }
  return d;
}

absl::Status CheckNodeIdArg(const std::string& id) {
  if (id.size() < kMinNodeIdPrefix) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id '", id, "' is too short: give at least ", kMinNodeIdPrefix, " hex digits"));
  }
  for (char c : id) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("node id '", id, "' is not hexadecimal"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeView> ResolveNodeId(const std::vector<NodeView>& nodes, const std::string& id) {
  if (auto s = CheckNodeIdArg(id); !s.ok()) return s;
  std::string prefix = absl::AsciiStrToLower(id);
  std::vector<const NodeView*> matches;
  for (const NodeView& n : nodes) {
    if (absl::StartsWith(absl::AsciiStrToLower(n.node_id), prefix)) matches.push_back(&n);
  }
  if (matches.empty()) return absl::NotFoundError(absl::StrCat("no node with id ", id, " in the cluster"));
  if (matches.size() > 1) {
    std::vector<std::string> names;
    for (const NodeView* n : matches) names.push_back(n->node_id + (n->alive ? " (ALIVE)" : " (DEAD)"));
    return absl::InvalidArgumentError(absl::StrCat("node id ", id, " is ambiguous; it matches ", matches.size(),
                                                   " nodes: ", absl::StrJoin(names, ", ")));
  }
  return *matches[0];
}

std::string FormatDrainAccepted(const std::string& node_id_hex, const std::string& reason, absl::Duration deadline) {
  std::string when = deadline == absl::ZeroDuration() ? "no deadline" : "deadline in " + absl::FormatDuration(deadline);
  return absl::StrCat("Node ", node_id_hex.substr(0, kMinNodeIdPrefix), "... is draining (reason: ", reason, ", ", when,
                      ")");
}

}  // namespace manta::cli
