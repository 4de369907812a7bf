// `manta drain-node`: argument parsing and messages (no gRPC here; the call
// itself is DrainNode in cli/gcs_client.h), and how a draining node reads in
// `manta list nodes` and `manta status`.
//
//   ASSIGN_OR_RETURN(absl::Duration deadline, ParseDrainDeadline("30s"));
//   ASSIGN_OR_RETURN(NodeView node, ResolveNodeId(view.nodes, "6b430bd4"));
//   std::cout << FormatDrainAccepted(node.node_id, "preemption", deadline) << "\n";
//   // Node 6b430bd4... is draining (reason: preemption, deadline in 30s)
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/cluster_view.h"

namespace manta::cli {

// The shortest node id prefix `manta drain-node` takes.
inline constexpr size_t kMinNodeIdPrefix = 8;
// The longest --deadline.
inline constexpr absl::Duration kMaxDrainDeadline = absl::Hours(24 * 7);

// A duration as Go and absl write it ("30s", "2m", "1h30m", "500ms"), or "0"
// for no deadline (ZeroDuration). InvalidArgument (naming --deadline) for
// anything else, a negative duration or one over a week.
absl::StatusOr<absl::Duration> ParseDrainDeadline(const std::string& text);

// OK when `id` can name a node: at least 8 hex digits (either case); else
// InvalidArgument saying why. Checked before the cluster is asked.
absl::Status CheckNodeIdArg(const std::string& id);

// The node whose hex id is `id`, or starts with it (at least 8 hex digits,
// either case). InvalidArgument for a malformed id or one that is too short,
// or when several nodes match (the message lists them with their states);
// NotFound when none does.
absl::StatusOr<NodeView> ResolveNodeId(const std::vector<NodeView>& nodes, const std::string& id);

// "Node 6b430bd4... is draining (reason: preemption, deadline in 30s)", or
// "(reason: idle, no deadline)" for a zero deadline.
std::string FormatDrainAccepted(const std::string& node_id_hex, const std::string& reason, absl::Duration deadline);

// A draining node's STATE_MESSAGE: "draining: <reason> (deadline <local
// time, to the second>)", or "draining: <reason>" without a deadline.
std::string FormatDrainMessage(const NodeView& node, absl::TimeZone tz);

}  // namespace manta::cli
