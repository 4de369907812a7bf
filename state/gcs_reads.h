// The reads of the GCS behind `manta status` and `manta list`, and the
// dashboard's State API: blocking calls through a SyncGcsClient (or, in the
// forms taking an address, a client of their own with `timeout` per call),
// each answer in the plain views that state/'s formatting takes. gRPC stays
// in the .cc, so that what includes this header compiles quickly.
//
//   ASSIGN_OR_RETURN(ClusterView view, FetchClusterView("127.0.0.1:6379", token, absl::Seconds(5)));
//   ASSIGN_OR_RETURN(auto actors, FetchActors("127.0.0.1:6379", token, absl::Seconds(5), 100));
//
// Every call blocks until the GCS answers or the deadline passes: call from
// a thread that may wait (the CLI's, the dashboard's HTTP handlers), never
// from a SyncGcsClient's loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "state/cluster_view.h"
#include "state/list_actors.h"
#include "state/list_train_runs.h"

namespace manta::gcs {
class SyncGcsClient;
}

namespace manta::state {

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

// Up to `limit` actors (<= 0: all), in registration order. Errors as
// FetchClusterView's.
absl::StatusOr<std::vector<ActorView>> FetchActors(const std::string& address, const std::string& token,
                                                   absl::Duration timeout, int limit);
// Through `gcs`; `total` (optional): how many there are, past the limit too.
absl::StatusOr<std::vector<ActorView>> FetchActors(gcs::SyncGcsClient& gcs, int limit, int64_t* total = nullptr);

struct TaskList {
  std::vector<TaskView> tasks;
  int64_t num_dropped = 0;
  int64_t total = 0;  // retained, past the limit too
};
// Up to `limit` task attempts (<= 0: all), oldest first. Errors as
// FetchClusterView's.
absl::StatusOr<TaskList> FetchTasks(const std::string& address, const std::string& token, absl::Duration timeout,
                                    int limit);
absl::StatusOr<TaskList> FetchTasks(gcs::SyncGcsClient& gcs, int limit);

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

// A failed call to the GCS at `address` in the words these reads answer
// with: Unavailable when the GCS cannot be reached (unavailable or past the
// deadline), Unauthenticated when it refuses the token (with how to give
// the right one), else the call's code; the message names the address.
absl::Status GcsCallError(const std::string& address, const absl::Status& s);

}  // namespace manta::state
