// The reads of the GCS behind `manta status` and `manta list`, and the
// dashboard's State API: blocking calls through a SyncGcsClient (or, in the
// forms taking an address, a client of their own with `timeout` per call).
// gRPC stays in the .cc so that the rest of the CLI compiles quickly.
//
//   ASSIGN_OR_RETURN(ClusterView view, FetchClusterView("127.0.0.1:6379", token, absl::Seconds(5)));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/cluster_view.h"
#include "cli/list_train_runs.h"

namespace manta::gcs {
class SyncGcsClient;
}

namespace manta::cli {

struct ClusterViewOptions {
  bool summary = false;  // as FetchClusterView's below
  absl::Duration wait = absl::Seconds(10);
};

// The node table, the resource view and the pending placement groups.
// With `summary` (what `manta status` prints): nodes without labels and
// resources, one usage entry with the cluster's sums (node_id empty), and
// whether the GCS checks no token (auth_disabled: the token is empty, or a
// call without it is answered). The calls run together. Errors: Unavailable
// when the GCS cannot be reached, Unauthenticated when it refuses the token;
// the message names the address.
absl::StatusOr<ClusterView> FetchClusterView(const std::string& address, const std::string& token,
                                             absl::Duration timeout, bool summary = false);
// The same through `gcs`; auth_disabled is whether `tokenless` (a client
// without the token; optional) is answered.
absl::StatusOr<ClusterView> FetchClusterView(gcs::SyncGcsClient& gcs, const ClusterViewOptions& options,
                                             gcs::SyncGcsClient* tokenless = nullptr);

// The cluster id as hex. A cheap check that the GCS is up and takes `token`.
absl::StatusOr<std::string> FetchClusterId(const std::string& address, const std::string& token,
                                           absl::Duration timeout);

struct DrainNodeResult {
  bool accepted = false;
  std::string rejection_reason;  // when not accepted
};

// Asks the GCS to drain node `node_id_hex` (a full hex id) for `reason`
// until `deadline_ms` (unix epoch; 0: none). A dead node is a result with
// accepted = false. Errors: the GCS's InvalidArgument (bad reason or
// deadline) and NotFound (unknown node) with its message; the rest as
// FetchClusterView's.
absl::StatusOr<DrainNodeResult> DrainNode(const std::string& address, const std::string& token, absl::Duration timeout,
                                          const std::string& node_id_hex, const std::string& reason,
                                          int64_t deadline_ms);

// Up to `limit` placement groups (<= 0: all), of every job, in creation
// order. Errors as FetchClusterView's.
absl::StatusOr<std::vector<PlacementGroupView>> FetchPlacementGroups(const std::string& address,
                                                                     const std::string& token, absl::Duration timeout,
                                                                     int limit);
// Through `gcs`; `total` (optional): how many there are, past the limit too.
absl::StatusOr<std::vector<PlacementGroupView>> FetchPlacementGroups(gcs::SyncGcsClient& gcs, int limit,
                                                                     int64_t* total = nullptr);

// The newest `limit` training runs (<= 0: all), of every job, oldest first,
// without their metrics series. Errors as FetchClusterView's.
absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(const std::string& address, const std::string& token,
                                                         absl::Duration timeout, int limit);
// With `with_metrics`, each run's metrics series too.
absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(gcs::SyncGcsClient& gcs, int limit, bool with_metrics = false);

}  // namespace manta::cli
