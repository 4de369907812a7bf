// `manta status`: the cluster summary in the layout of `ray status`.
//
//   ClusterView view = ...;  // from FetchClusterView
//   std::cout << FormatStatus(view, absl::Now(), absl::LocalTimeZone());
//
// Layout (Ray's, with "Cluster status" in the header because Manta has no
// autoscaler):
//
//   ======== Cluster status: 2026-04-21 10:20:20.945431 ========
//   WARNING: this cluster runs without authentication ...   only then
//   Node status
//   ------------------------------------------------------------
//   Active:
//    1 node_<hex>                      one line per alive node, head first
//   Draining:                          only when some node drains (not Active)
//    1 node_<hex>: draining: preemption (deadline 2026-04-21 10:20:50)
//   Pending:
//    (no pending nodes)
//   Recent failures:
//    node_<hex>: NodeTerminated (ip: 127.0.0.1)   newest first, at most 20
//
//   Resources
//   ------------------------------------------------------------
//   Usage:
//    0.0/2.0 CPU                       used/total, sorted by name
//    4.0/32.0 TPU (4.0 used of 16.0 reserved in placement groups)
//    0B/16.00GiB memory
//
//   Demands:
//    {'CPU': 1.0}: 2+ pending tasks/actors
//    {'TPU': 64.0}: 1+ pending tasks/actors (infeasible)
//    {'TPU': 4.0} * 4 (STRICT_SPREAD): 1+ pending placement groups
//    {'CPU': 1.0} * 1, {'TPU': 4.0} * 2 (PACK): 2+ pending placement groups (infeasible)
//
// With no demand at all, Demands: holds the one line " (no resource demands)".
//
// Placement groups, as `ray status` shows them: the resources of committed
// bundles (CPU_group_<hex>, CPU_group_<i>_<hex>, bundle_group_<hex>, ...)
// get no lines of their own. A resource with bundles reserved on it says
// how much of the reservation tasks and actors use, summed over the
// wildcard names (X_group_<hex>) of every group and node; its used amount
// counts that, not the idle rest of the reservation. Pending groups
// (PENDING or RESCHEDULING) follow the task demands: a group's bundles of
// one shape as "shape * count", shapes in bundle order, and identical groups
// counted on one line.
//
// `ray status` counts infeasible requests with the pending ones and warns
// elsewhere; here they (tasks, actors and placement groups) get their own
// line, marked "(infeasible)", because a request no node can ever satisfy
// must be visible in the status.
// Unlike `ray status`, accelerator_type:* lines are shown: users of TPU
// slices look for them. node:* resources are hidden as Ray hides them.
// Only nodes that died unexpectedly count as failures; a node stopped with
// `manta stop` is not listed.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "state/cluster_view.h"

namespace manta::state {

// At most this many lines under "Recent failures".
inline constexpr int kMaxFailuresShown = 20;

// The line under the header when the view's auth_disabled is set.
inline constexpr char kStatusAuthDisabledLine[] =
    "WARNING: this cluster runs without authentication (--auth=none): anyone who can reach its ports can run "
    "commands on its hosts.";

std::string FormatStatus(const ClusterView& view, absl::Time now, absl::TimeZone tz);

// Python's str(datetime): "2025-01-14 22:45:21.485617".
std::string FormatTimestamp(absl::Time t, absl::TimeZone tz);

// A draining node's STATE_MESSAGE (`manta list nodes`) and its line under
// "Draining:": "draining: <reason> (deadline <time in `tz`, to the
// second>)", or "draining: <reason>" without a deadline.
std::string FormatDrainMessage(const NodeView& node, absl::TimeZone tz);

// Ray's memory amounts: "0B", "512B", "1.50KiB", "16.00GiB", "2.00TiB".
std::string FormatMemory(double bytes);

// Python's repr of a resource dict: "{'CPU': 1.0, 'TPU': 4.0}".
std::string FormatShape(const std::map<std::string, double>& shape);

// The distinct resource shapes of `bundles` with how many bundles have each,
// in order of first appearance.
std::vector<std::pair<std::map<std::string, double>, int>> CountBundleShapes(const std::vector<BundleView>& bundles);

// Python's repr of a string: single quotes unless the text holds one.
std::string PythonRepr(const std::string& s);

}  // namespace manta::state
