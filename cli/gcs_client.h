// The CLI's reads of the GCS: blocking calls with a deadline (`timeout` per
// call). gRPC stays in the .cc so that the rest of the CLI compiles quickly.
//
//   ASSIGN_OR_RETURN(ClusterView view, FetchClusterView("127.0.0.1:6379", token, absl::Seconds(5)));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/cluster_view.h"
#include "cli/list_train_runs.h"

namespace manta::cli {

// The node table, the resource view and the pending placement groups.
// Errors: Unavailable when the GCS cannot be reached, Unauthenticated when it
// refuses the token; the message names the address.
absl::StatusOr<ClusterView> FetchClusterView(const std::string& address, const std::string& token,
                                             absl::Duration timeout);

// The cluster id as hex. A cheap check that the GCS is up and takes `token`.
absl::StatusOr<std::string> FetchClusterId(const std::string& address, const std::string& token,
                                           absl::Duration timeout);

// Up to `limit` placement groups (<= 0: all), of every job, in creation
// order. Errors as FetchClusterView's.
absl::StatusOr<std::vector<PlacementGroupView>> FetchPlacementGroups(const std::string& address,
                                                                     const std::string& token,
                                                                     absl::Duration timeout, int limit);

// The newest `limit` training runs (<= 0: all), of every job, oldest first,
// without their metrics series. Errors as FetchClusterView's.
absl::StatusOr<std::vector<TrainRunView>> FetchTrainRuns(const std::string& address, const std::string& token,
                                                         absl::Duration timeout, int limit);

}  // namespace manta::cli
