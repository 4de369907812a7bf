// Tensor parallelism across processes (one per host of a slice): each
// process runs an engine per local chip, and process 0's chip 0 leads. The
// leader broadcasts every call of its StepRunner (prefill, decode, release)
// to all ranks through the kernels' Communicator; every rank runs it on its
// engine, whose partial outputs are summed over the tensor group the same
// way (all-reduce); the leader's rank returns the logits.
//
//   GroupEngine group(comm, env.first_device(), {&weights_of_my_chip0, ...}, options);
//   if (leader) ServingLoop loop(group.leader(), ...);   // process 0 only
//   absl::Status why = group.Wait();                      // until stopped or broken
//
// When no call comes for a while the leader broadcasts a no-op, so an idle
// group never reaches the collectives' timeout and a lost rank is seen
// within a second. A collective that fails (a rank's process died) breaks
// the group: every pending and later call returns Unavailable, and Wait
// returns why. The group is not rebuilt; its owner recreates it.
//
// Threads: one per local chip. The leader's StepRunner is driven by one
// thread at a time; Wait and Stop from any thread.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "serve/engine/engine.h"
#include "train/kernels/communicator.h"

namespace manta::serve {

class GroupEngine {
 public:
  // `comm` spans the tensor group (its mesh has only the tensor axis);
  // weights[i] is the shard of this process's chip first_device + i (the
  // tensor rank of that device). Both outlive this.
  GroupEngine(train::Communicator* comm, int first_device, std::vector<const ServingWeights*> weights,
              const EngineOptions& options);
  // Stops (the leader tells every rank) and joins the threads.
  ~GroupEngine();

  // Process 0's StepRunner for the whole group; null in other processes.
  StepRunner* leader();
  // Blocks until the group stops: OK when the leader stopped it, why
  // otherwise.
  absl::Status Wait() ABSL_LOCKS_EXCLUDED(mu_);
  // Leader: tells every rank to stop. Elsewhere: waits for it. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Leader;
  struct Command;
  friend class Leader;

  void RankLoop(int local) ABSL_LOCKS_EXCLUDED(mu_);
  // Leader: hands `cmd` to chip 0's thread and waits for its result.
  absl::Status Call(std::vector<float> cmd, float* out) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `cmd` on local chip `local`'s engine; logits to `out` (may be null).
  absl::Status Execute(int local, const std::vector<float>& cmd, float* out);
  // Leader's chip: waits for the next call (or a no-op after a quiet
  // second), copies it into `buf`, and returns where its logits go.
  float* NextCommand(std::vector<float>* buf) ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void Break(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  train::Communicator* const comm_;
  const int first_device_;
  const int64_t command_floats_;
  std::vector<std::unique_ptr<TensorSum>> sums_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<std::vector<float>> scratch_;  // logits of the ranks that do not return them
  std::unique_ptr<Leader> leader_;

  absl::Mutex mu_;
  // The leader's pending call: its encoding, where its logits go, its result.
  std::vector<float> pending_ ABSL_GUARDED_BY(mu_);
  float* pending_out_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool has_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_taken_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status pending_status_ ABSL_GUARDED_BY(mu_);
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace manta::serve
