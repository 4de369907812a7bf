// The GCS reads behind `manta list actors` and `manta list tasks`: blocking
// calls with a deadline, implemented in gcs_client.cc beside the other GCS
// reads. gRPC stays in the .cc.
//
//   ASSIGN_OR_RETURN(auto actors, FetchActors("127.0.0.1:6379", token, absl::Seconds(5), 100));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/list_actors.h"

namespace manta::gcs {
class SyncGcsClient;
}

namespace manta::cli {

// Up to `limit` actors (<= 0: all), in registration order. Errors:
// Unavailable when the GCS cannot be reached, Unauthenticated when it
// refuses the token; the message names the address.
absl::StatusOr<std::vector<ActorView>> FetchActors(const std::string& address, const std::string& token,
                                                   absl::Duration timeout, int limit);
// Through `gcs`; `total` (optional): how many there are, past the limit too.
absl::StatusOr<std::vector<ActorView>> FetchActors(gcs::SyncGcsClient& gcs, int limit, int64_t* total = nullptr);

struct TaskList {
  std::vector<TaskView> tasks;
  int64_t num_dropped = 0;
  int64_t total = 0;  // retained, past the limit too
};
// Up to `limit` task attempts (<= 0: all), oldest first. Errors as above.
absl::StatusOr<TaskList> FetchTasks(const std::string& address, const std::string& token, absl::Duration timeout,
                                    int limit);
absl::StatusOr<TaskList> FetchTasks(gcs::SyncGcsClient& gcs, int limit);

}  // namespace manta::cli
