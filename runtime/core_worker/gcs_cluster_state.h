// GcsClusterState: the ClusterState (manta/internal/cluster_state.h) of a
// process that runs the real core worker. It is built on two things only:
// the core worker's GCS client (a SyncGcsClient over the core worker's io
// loop) and the core worker's seam (its job id, GetAllNodes); it knows
// nothing else of the core worker, which knows nothing of it. The real
// CoreWorkerFactory makes one beside each core worker it starts and
// destroys it before that core worker stops.
//
//   node_events.cc: a thread per watch long-polls the GCS's NODE_INFO
//     channel and hands each change to the watcher; after a gap or a GCS
//     restart, one event per node from GetAllNodes.
//   train_runs.cc: blocking calls to the GCS's TrainRunGcsService on the
//     caller's thread, made again while the GCS is unreachable for up to
//     `reconnect`.
//   kv.cc: the key-value calls, the same way (a put carries a request id, so
//     a retry is answered as the first attempt was).
//
// Thread-safety: any thread but the GCS client's loop. Destroying it stops
// every watch (waiting for a running callback unless destroyed from one).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gcs/client/sync_gcs_client.h"
#include "manta/internal/cluster_state.h"
#include "manta/internal/core_worker.h"

namespace manta::core {

class GcsClusterState final : public ClusterState {
 public:
  // `gcs` and `core` outlive this.
  GcsClusterState(gcs::SyncGcsClient* gcs, CoreWorker* core, absl::Duration reconnect)
      : gcs_(gcs), core_(core), reconnect_(reconnect) {}
  ~GcsClusterState() override;
  GcsClusterState(const GcsClusterState&) = delete;
  GcsClusterState& operator=(const GcsClusterState&) = delete;

  absl::StatusOr<int64_t> WatchNodes(std::function<void(const NodeEvent&)> on_event) override
      ABSL_LOCKS_EXCLUDED(watch_mu_);
  void UnwatchNodes(int64_t id) override ABSL_LOCKS_EXCLUDED(watch_mu_);
  absl::Status ReportTrainRun(const TrainRunData& run, const std::vector<TrainMetricPointData>& new_metrics) override;
  absl::StatusOr<std::vector<TrainRunData>> ListTrainRuns(bool with_metrics, int limit) override;
  absl::StatusOr<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                             bool overwrite) override;
  absl::StatusOr<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key) override;

 private:
  struct NodeWatch;
  // The poll loop of watch `w`, on its own thread, until it is unwatched.
  void PollNodes(NodeWatch* w);

  // Constant after construction.
  gcs::SyncGcsClient* const gcs_;
  CoreWorker* const core_;
  const absl::Duration reconnect_;

  absl::Mutex watch_mu_;
  std::map<int64_t, std::shared_ptr<NodeWatch>> node_watches_ ABSL_GUARDED_BY(watch_mu_);
  int64_t next_watch_ ABSL_GUARDED_BY(watch_mu_) = 1;
};

}  // namespace manta::core
