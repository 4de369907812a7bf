// The run's record in the GCS (`manta list train-runs`). The controller
// changes it; a thread of the recorder's own sends it: a change of state at
// once, metric points at most once a second. Internal to train/.
//
//   RunRecorder recorder(initial_run);
//   recorder.Update([](state::TrainRun& r) { r.state = state::TrainRunState::kRunning; });
//   recorder.AddMetrics(step, {{"loss", 2.3}});
//   recorder.Flush();   // before the controller returns
//
// Thread-safe. A failed send is logged and retried with the next change;
// points not yet sent are kept (the newest 10,000).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "manta/state.h"

namespace manta::train {

class RunRecorder {
 public:
  explicit RunRecorder(state::TrainRun initial);
  ~RunRecorder();  // sends what is pending, then stops its thread
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  // Applies `change` to the record and bumps its version; sent at once.
  void Update(const std::function<void(state::TrainRun&)>& change) ABSL_LOCKS_EXCLUDED(mu_);
  // The same, for a change that may wait: sent within a second.
  void UpdateLater(const std::function<void(state::TrainRun&)>& change) ABSL_LOCKS_EXCLUDED(mu_);
  // Appends a point of rank 0's metrics; sent within a second.
  void AddMetrics(int64_t step, const std::map<std::string, double>& metrics) ABSL_LOCKS_EXCLUDED(mu_);
  state::TrainRun Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Returns once every change made before the call was sent (or its send failed).
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();
  bool SendOnce();  // false when nothing was pending

  mutable absl::Mutex mu_;
  state::TrainRun run_ ABSL_GUARDED_BY(mu_);
  std::vector<state::TrainMetricPoint> pending_points_ ABSL_GUARDED_BY(mu_);
  int64_t sent_version_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t sending_version_ ABSL_GUARDED_BY(mu_) = -1;  // -1: no send in flight
  bool urgent_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // constant after construction
};

}  // namespace manta::train
