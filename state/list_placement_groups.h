// `manta list placement-groups`: the GCS's placement-group table in the
// layout of `ray list placement-groups`, with the strategy, the bundles and,
// for a group that is not CREATED, why it waits.
//
//   ASSIGN_OR_RETURN(auto groups, FetchPlacementGroups(address, token, absl::Seconds(5), 100));
//   std::cout << FormatPlacementGroupList(groups, 100, /*detail=*/false, absl::Now(), absl::LocalTimeZone());
//
//   ======== List: 2026-04-21 10:20:20.945431 ========
//   Stats:
//   ------------------------------
//   Total: 2
//
//   Table:
//   ------------------------------
//       PLACEMENT_GROUP_ID  NAME   CREATOR_JOB_ID  STATE    STRATEGY       BUNDLES           STATE_MESSAGE
//    0  5e0c...             train  01000000        CREATED  STRICT_SPREAD  4 x {'TPU': 4.0}
//    1  77ab...                    01000000        PENDING  PACK           1 x {'CPU': 1.0}  waiting for ...
//                                                                          2 x {'TPU': 8.0}
//
// BUNDLES gives each distinct shape once with its count, in bundle order.
// With `detail`, the table adds RAY_NAMESPACE, IS_DETACHED and
// NUM_RESCHEDULES, and BUNDLES lists every bundle on a line of its own:
// "0: {'TPU': 4.0} labels={'manta.io/tpu-slice-name': 'tpu-group-0'} node=<hex>"
// (labels only when the bundle has a selector, node only once placed).
// Groups are listed in the order given (the GCS's: creation order).
//
// Plain types only (state/cluster_view.h), so formatting and its tests need
// neither gRPC nor protobuf; FetchPlacementGroups in state/gcs_reads.h
// fetches them.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "state/cluster_view.h"

namespace manta::state {

// `limit` is what was asked for: when the list reached it, a note says it
// may be truncated.
std::string FormatPlacementGroupList(const std::vector<PlacementGroupView>& groups, int limit, bool detail,
                                     absl::Time now, absl::TimeZone tz);

// Every field of every group, detail or not, as a pretty-printed JSON array
// of objects with lower-case keys (placement_group_id, name, creator_job_id,
// state, strategy, bundles: [{bundle_index, unit_resources, label_selector,
// node_id}], state_message, infeasible, ...).
std::string FormatPlacementGroupListJson(const std::vector<PlacementGroupView>& groups);
// The same as a JSON array (the dashboard's State API serves it).
nlohmann::json PlacementGroupListJson(const std::vector<PlacementGroupView>& groups);

}  // namespace manta::state
