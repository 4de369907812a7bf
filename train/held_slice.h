// A slice an elastic run holds: its placement group (one bundle per host)
// and one TrainWorker per host, reserved, started and released one slice at
// a time, so the run can grow and shrink in whole slices. Internal to
// train/; used by the controller's thread only.
//
//   auto slice = HeldSlice::Reserve(spec.scaling, absl::Seconds(2));   // DeadlineExceeded: none free
//   RETURN_IF_ERROR(slice->StartWorkers(attempt_id, spec.worker_env, absl::Seconds(60)));
//   ...
//   slice->Release();   // kills its workers, gives its hosts back
#pragma once

#include <memory>
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

class HeldSlice {
 public:
  struct Worker {
    ActorHandle<TrainWorker> actor;
    WorkerInfo info;      // from Setup
    ObjectRef<void> run;  // its Run call, once started
    bool running = false;
  };

  // Reserves one whole slice that is free now (every host alive, not
  // draining, nothing held on it), within `timeout`. DeadlineExceeded when
  // none could be had; nothing is kept then.
  static absl::StatusOr<std::unique_ptr<HeldSlice>> Reserve(const ScalingSpec& scaling, absl::Duration timeout);
  ~HeldSlice();

  // Creates one worker per host (in its bundle, holding `resources`, with
  // `env` under the host's TPU variables) and waits up to `timeout` for each
  // to answer Setup. Unavailable naming the host otherwise.
  absl::Status StartWorkers(const std::string& attempt_id, const std::map<std::string, double>& resources,
                            const std::map<std::string, std::string>& env, absl::Duration timeout);
  // Kills the workers and removes the group. Idempotent; never throws.
  void Release();

  const tpu::SliceInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  const std::vector<std::string>& host_ips() const { return host_ips_; }
  // Hex node ids by worker id.
  const std::vector<std::string>& node_ids() const { return node_ids_; }
  std::vector<Worker>& workers() { return workers_; }
  const std::vector<Worker>& workers() const { return workers_; }
  // Whether `node_id` (hex) is one of this slice's hosts.
  bool Holds(const std::string& node_id) const;

 private:
  HeldSlice() = default;

  tpu::SliceInfo info_;
  std::vector<std::string> host_ips_;
  std::vector<std::string> node_ids_;
  PlacementGroup group_;
  std::vector<Worker> workers_;
  bool released_ = false;
};

// The number of whole slices of `scaling`'s pod type free now (all hosts
// alive, not draining and matching its label selector, heads and chips
// available), or 0 when the cluster cannot be asked.
int FreeSlices(const ScalingSpec& scaling);

}  // namespace manta::train
