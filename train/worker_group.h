// One attempt's workers: the reservation that holds them (whole TPU slices,
// or a placement group of resources_per_worker bundles), one TrainWorker
// actor per worker, and each worker's place in the group. Internal to
// train/; used by the controller's thread only (not thread-safe).
//
//   auto group = WorkerGroup::Reserve(spec, 8, absl::Seconds(5));   // DeadlineExceeded: try again
//   RETURN_IF_ERROR((*group)->Start(attempt_id, absl::Seconds(60)));
//   (*group)->Run(base_request);
//   WorkerGroup::Outcome out = (*group)->Wait(absl::InfiniteDuration());
//   (*group)->Shutdown();   // kills the workers, returns the reservation
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manta/actor.h"
#include "manta/object_ref.h"
#include "manta/placement_group.h"
#include "manta/tpu.h"
#include "train/protocol.h"

namespace manta::train {

class TrainWorker;

class WorkerGroup {
 public:
  // One worker, by world rank.
  struct Member {
    int slice_id = 0;   // slice index in the reservation (0 without TPU)
    int worker_id = 0;  // TPU_WORKER_ID in its slice
    std::string slice_name;
    PlacementGroup group;
    int bundle = 0;
    std::map<std::string, std::string> env;  // the host's TPU_* / MEGASCALE_* variables
    ActorHandle<TrainWorker> actor;
    WorkerInfo info;  // from Setup
    TrainContext context;
  };

  // How the loops ended (so far).
  struct Outcome {
    bool finished = false;  // every loop returned OK
    bool timed_out = false;
    std::vector<std::pair<int, absl::Status>> failures;  // (rank, error), the first first
  };

  // Reserves room for `num_workers` within `timeout`. DeadlineExceeded when
  // it could not be had in time (nothing is kept); the cluster's error
  // otherwise.
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Reserve(const ControllerSpec& spec, int num_workers,
                                                              absl::Duration timeout);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Creates the workers and waits up to `timeout` for each to answer Setup;
  // then ranks them and fills their contexts. Unavailable naming the
  // worker when one did not come up.
  absl::Status Start(const std::string& attempt_id, int attempt_number, absl::Duration timeout);
  // Starts the loop on every worker: `base` with each member's context and
  // distributed environment.
  void Run(const WorkerRunRequest& base);
  // Waits up to `timeout` until every loop returned or one failed.
  Outcome Wait(absl::Duration timeout);
  // Kills the workers and returns the reservation. Idempotent; never throws.
  void Shutdown();

  const std::vector<Member>& members() const { return members_; }
  int num_slices() const { return static_cast<int>(slices_.slices().size()); }
  // The slices held (empty without TPU).
  const tpu::SliceReservation& slices() const { return slices_; }
  // "rank 3 (127.0.0.1, tpu-group-0 worker 3, pid 1234)".
  std::string Describe(int rank) const;

 private:
  explicit WorkerGroup(const ControllerSpec& spec) : spec_(spec) {}
  // Orders members by rank and fills their contexts once Setup answered.
  void AssignRanks(const std::string& attempt_id, int attempt_number);

  const ControllerSpec& spec_;
  tpu::SliceReservation slices_;  // use_tpu
  PlacementGroup group_;          // otherwise
  std::vector<Member> members_;
  std::vector<ObjectRef<void>> runs_;  // by rank, once Run was called
  std::vector<bool> run_done_;
  bool shut_down_ = false;
};

}  // namespace manta::train
