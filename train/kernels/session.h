// A training run in one process that outlives its collective group: the
// devices' parameters and optimizer state stay in memory while the group
// of processes around them breaks, shrinks or grows, so an elastic trainer
// re-forms the group and goes on without reading a checkpoint.
//
//   ASSIGN_OR_RETURN(auto session, TrainingSession::Create(config, global_batch));
//   JoinSpec join{.env = env, .source = StateSource::kInit};
//   RETURN_IF_ERROR(session->Join(join, options));
//   ASSIGN_OR_RETURN(SessionRun run, session->Run(options));
//   if (run.end == SessionRun::kBroken) {   // a peer died: state is at run.next_step
//     join.env = new_env; join.source = StateSource::kKeep; join.step = run.next_step;
//     RETURN_IF_ERROR(session->Join(join, options));   // the survivors re-form
//   }
//
// Every process of a group calls Join with the same spec (but its own
// process id) and then Run. A step changes the state only once its
// gradients are reduced everywhere and RunOptions::commit (or the stop
// agreement) says so, so every process of a group that breaks holds the
// state after the same step, given the commit answers were the same.
//
// Threads: one per local device inside Join and Run. Interrupt may be
// called from any thread; everything else from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "train/kernels/config.h"
#include "train/kernels/mesh.h"
#include "train/kernels/text_data.h"
#include "train/kernels/train.h"

namespace manta::train {

class Communicator;
class DeviceTrainer;
struct DeviceState;
class CheckpointStore;
struct DeviceStepResult;

// Where the devices' state comes from when a group is joined.
enum class StateSource {
  kInit,     // initial values
  kRestore,  // the checkpoint JoinSpec::restore_from (resharded as needed)
  kKeep,     // the state this session holds (it must match the new mesh)
  kPeers,    // a device of a source slice with the same shards (see JoinSpec)
};

struct JoinSpec {
  DistributedEnv env;
  // The mesh's axes; -1 fills as in the config.
  ParallelismConfig parallelism;
  StateSource source = StateSource::kInit;
  std::string restore_from;  // kRestore: a checkpoint's step directory
  int64_t step = 0;          // kKeep, kPeers: the next step to run
  // kPeers: slices whose devices hold the state; each device takes it from
  // the first member of its data group in one of them.
  std::vector<int> source_slices;
};

// How a Run ended.
struct SessionRun {
  enum End {
    kFinished,   // every step ran
    kStopped,    // should_stop, or a commit that applied then paused
    kDiscarded,  // a commit said kDiscard: the step was not applied
    kBroken,     // the group broke (a peer failed, or Interrupt)
  };
  End end = kFinished;
  int64_t next_step = 0;           // steps applied so far
  std::string error;               // kBroken: why
  std::vector<StepMetrics> steps;  // the steps this Run applied, in order
};

class TrainingSession {
 public:
  // `global_batch` rows per step at every size (0: per_device_batch_size x
  // the devices of the first Join).
  static absl::StatusOr<std::unique_ptr<TrainingSession>> Create(const Config& config, int64_t global_batch = 0);
  ~TrainingSession();

  // Leaves the current group (keeping the state) and joins the one `spec`
  // describes. Errors: InvalidArgument for a mesh that does not fit;
  // Unavailable/Cancelled when the processes cannot join (or Interrupt);
  // FailedPrecondition for kKeep without matching state; checkpoint errors
  // for kRestore. After an error the state held before is still held.
  absl::Status Join(const JoinSpec& spec, const RunOptions& options);
  // Runs steps from next_step() to the config's last. The processes agree
  // on every step's fate (commit or should_stop). Errors only for misuse
  // (no group joined); a broken group is SessionRun::kBroken.
  absl::StatusOr<SessionRun> Run(const RunOptions& options);
  // From any thread: the current Join or Run ends soon (Cancelled or
  // kBroken). Affects only the group joined when it is called.
  void Interrupt(const std::string& why);

  int64_t next_step() const { return next_step_; }
  int64_t restored_step() const { return restored_step_; }
  int64_t global_batch() const { return global_batch_; }
  const Mesh* mesh() const { return mesh_.get(); }

 private:
  TrainingSession(const Config& config, RunData data, int64_t global_batch);
  // Destroys the devices and the communicator, keeping the devices' states.
  void Leave();
  absl::Status Fill(const JoinSpec& spec);
  void DeviceLoop(int local, const RunOptions& options, std::ofstream* metrics, SessionRun* run);
  void SaveCheckpoint(DeviceTrainer& dev, int64_t step, const RunOptions& options);
  // Marks `run` broken (first cause wins) and interrupts the group.
  void Broke(SessionRun* run, const std::string& why);
  // Collective time counters when a step began.
  struct StepSnapshot {
    double comm = 0, busy = 0, drain = 0;
  };
  StepMetrics Measure(int64_t step, const DeviceStepResult& r, DeviceTrainer& dev,
                      std::chrono::steady_clock::time_point t0, const StepSnapshot& before) const;

  const Config config_;
  RunData data_;  // the dataset (and for text, the tokenizer), made by Create
  int64_t global_batch_;
  std::unique_ptr<Mesh> mesh_;
  DistributedEnv env_;
  std::vector<std::unique_ptr<DeviceTrainer>> devices_;
  std::vector<std::unique_ptr<DeviceState>> states_;  // held between groups, by local device
  std::unique_ptr<CheckpointStore> store_;
  int64_t next_step_ = 0;
  int64_t restored_step_ = -1;

  absl::Mutex run_mu_;   // guards a Run's SessionRun::end and error
  absl::Mutex comm_mu_;  // guards the pointer comm_ against Interrupt
  std::unique_ptr<Communicator> comm_;
  struct StepSync;
  std::unique_ptr<StepSync> sync_;  // the local devices' agreement on each step
};

}  // namespace manta::train
