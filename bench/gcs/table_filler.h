// TableFiller: fills a GCS's tables as drivers do, over the real RPCs: one
// job (AddJob), detached named actors (RegisterActor) and detached
// placement groups (CreatePlacementGroup), with many calls in flight, then
// waits until the GCS lists every actor ALIVE and every group CREATED. The
// GCS schedules them itself on the nodes it knows (simulated ones accept).
//
//   TableFiller filler(head->address(), head->token());
//   RETURN_IF_ERROR(filler.AddJob());
//   RETURN_IF_ERROR(filler.CreateActors(10000, /*cpus=*/1, absl::Minutes(10)));
//   RETURN_IF_ERROR(filler.CreatePlacementGroups(1000, /*bundles=*/2, /*cpus=*/1, absl::Minutes(10)));
//
// Thread-compatible; blocking calls, for the benchmark's main thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace manta::bench {

class TableFiller {
 public:
  TableFiller(const std::string& address, std::string token);
  ~TableFiller();

  // Registers the job the actors and groups belong to.
  absl::Status AddJob();
  // Registers `count` actors asking {CPU: cpus} each, and returns once all
  // are ALIVE. Internal when one dies; DeadlineExceeded after `timeout`.
  absl::Status CreateActors(int count, double cpus, absl::Duration timeout);
  // Creates `count` SPREAD groups of `bundles` bundles of {CPU: cpus}, and
  // returns once all are CREATED. DeadlineExceeded after `timeout`.
  absl::Status CreatePlacementGroups(int count, int bundles, double cpus, absl::Duration timeout);

 private:
  struct Stubs;
  std::string token_;
  std::string job_id_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace manta::bench
