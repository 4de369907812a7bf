// TrainWorker: the actor that runs the training loop in one worker process
// of an attempt. The controller creates one per worker (on its host's
// bundle, with the host's TPU environment), asks each for Setup, then calls
// Run on all; Run returns when the loop does. Internal to train/.
//
// Threads: Run runs on one of the actor's threads and calls the loop there;
// Setup on another. The session the in-loop calls (GetContext, Report,
// GetCheckpoint) read is set by Run before the loop starts.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "train/protocol.h"

namespace manta::train {

class TrainWorker {
 public:
  static TrainWorker* Create(std::string attempt_id);

  // Where this worker runs, and a port free on its host now.
  WorkerInfo Setup();
  // Sets the attempt's environment and session, then runs the loop with
  // its config. The loop's error, if any, is the call's.
  absl::Status Run(WorkerRunRequest request);
  // Makes the loop's collectives of group `epoch` fail soon (a peer died):
  // the loop then asks the controller how to go on. Ignored when the worker
  // is in another group by now.
  void Interrupt(int64_t epoch, std::string why);

 private:
  explicit TrainWorker(std::string attempt_id) : attempt_id_(std::move(attempt_id)) {}
  const std::string attempt_id_;
};

}  // namespace manta::train
