// `manta drain-node`: argument parsing, messages and the call to the GCS
// (DrainNode; gRPC stays in drain_node_client.cc). How a draining node
// reads in `manta list nodes` and `manta status` is FormatDrainMessage in
// state/status_format.h.
//
//   ASSIGN_OR_RETURN(absl::Duration deadline, ParseDrainDeadline("30s"));
//   ASSIGN_OR_RETURN(state::NodeView node, ResolveNodeId(view.nodes, "6b430bd4"));
//   std::cout << FormatDrainAccepted(node.node_id, "preemption", deadline) << "\n";
//   // Node 6b430bd4... is draining (reason: preemption, deadline in 30s)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "state/cluster_view.h"

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
absl::StatusOr<state::NodeView> ResolveNodeId(const std::vector<state::NodeView>& nodes, const std::string& id);

// "Node 6b430bd4... is draining (reason: preemption, deadline in 30s)", or
// "(reason: idle, no deadline)" for a zero deadline.
std::string FormatDrainAccepted(const std::string& node_id_hex, const std::string& reason, absl::Duration deadline);

struct DrainNodeResult {
  bool accepted = false;
  std::string rejection_reason;  // when not accepted
};

// Asks the GCS at `address` to drain node `node_id_hex` (a full hex id) for
// `reason` until `deadline_ms` (unix epoch; 0: none), waiting at most
// `timeout`. A dead node is a result with accepted = false. Errors: the
// GCS's InvalidArgument (bad reason or deadline) and NotFound (unknown
// node) with its message; Unavailable when the GCS cannot be reached,
// Unauthenticated when it refuses the token (state::GcsCallError). Defined
// in drain_node_client.cc, so that this header and drain_node.cc need no
// gRPC.
absl::StatusOr<DrainNodeResult> DrainNode(const std::string& address, const std::string& token, absl::Duration timeout,
                                          const std::string& node_id_hex, const std::string& reason,
                                          int64_t deadline_ms);

}  // namespace manta::cli
