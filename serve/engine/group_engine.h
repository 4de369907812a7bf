// Tensor parallelism across processes (one per host of a slice): each
// process runs an engine per local chip, and the tensor group's first chip
// leads. The leader broadcasts every call of its StepRunner (prefill,
// decode, release) to all ranks through the kernels' Communicator; every
// rank runs it on its engine, whose partial outputs are summed over the
// tensor group the same way (all-reduce); the leader's rank returns the
// logits.
//
//   GroupEngine group(comm, env.first_device(), {&weights_of_my_chip0, ...}, options);
//   if (group.leader()) ServingLoop loop(group.leader(), ...);   // the leader's process only
//   absl::Status why = group.Wait();                             // until stopped or broken
//
// Disaggregated serving runs two such groups, one per slice of a mesh whose
// data axis (2) spans the slices: the prefill group (slice 0) takes prompts
// from EnqueuePrefill, prefills each, draws its first token and exports its
// K/V (its true length only); a transfer thread per chip sends them, with
// the first token, to
// the same tensor rank of the generate group (slice 1) over the data axis,
// at most `transfer_backlog` waiting on each side. The generate group's
// leader is a StepRunner whose remote() hands prompts off (send_prompt) and
// imports the arrived K/V into free slots, so decode steps never wait for a
// prefill.
//
// When no call comes for a while the leader broadcasts a no-op (and the
// transfer threads send one), so an idle group never reaches the
// collectives' timeout and a lost rank is seen within a second. A
// collective that fails (a rank's process died) breaks the group: every
// pending and later call returns Unavailable, and Wait returns why. The
// group is not rebuilt; its owner recreates it.
//
// Threads: one per local chip, and one more per chip for transfers. The
// leader's StepRunner is driven by one thread at a time; the rest from any.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "serve/engine/engine.h"
#include "train/kernels/communicator.h"

namespace manta::serve {

struct GroupRole {
  enum Kind { kInterleaved, kPrefill, kGenerate };
  Kind kind = kInterleaved;
  int transfer_backlog = 4;  // prefills waiting to move, on each side
  // kGenerate: hands a prompt to the prefill group's leader (EnqueuePrefill
  // there); from the generate leader's serving thread.
  std::function<absl::Status(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& sampling)>
      send_prompt;
};

// One prefilled prompt on its way: this rank's K/V and the first token.
struct KvTransfer {
  int64_t id = 0;
  int64_t len = 0;
  int32_t first_token = 0;
  std::vector<float> kv;
};

// A bounded queue of transfers; Close wakes every waiter for good.
class TransferQueue {
 public:
  explicit TransferQueue(size_t capacity) : capacity_(capacity) {}
  bool Push(KvTransfer t) ABSL_LOCKS_EXCLUDED(mu_);                          // false once closed
  bool Pop(KvTransfer* t, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);  // false: none in time, or closed
  bool WaitForSpace() ABSL_LOCKS_EXCLUDED(mu_);                              // false once closed
  // Up to `n` of the oldest, without taking them (only the consumer takes);
  // waits up to `timeout` for a first one.
  std::vector<const KvTransfer*> Peek(size_t n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<KvTransfer> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class GroupEngine {
 public:
  // `comm` spans the tensor group (and, for a disaggregated pair, the data
  // axis across the two slices); weights[i] is the shard of this process's
  // chip first_device + i (its tensor rank). `comm` outlives this; the
  // weights may go once it is built (each engine packs its own copy).
  GroupEngine(train::Communicator* comm, int first_device, std::vector<const ServingWeights*> weights,
              const EngineOptions& options, GroupRole role = {});
  // Stops (the leader tells every rank) and joins the threads.
  ~GroupEngine();

  // The group leader's StepRunner; null in other processes.
  StepRunner* leader();
  // Prefill group's leader: queues a prompt (any thread). Unavailable once
  // the group is broken or stopping.
  absl::Status EnqueuePrefill(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& sampling)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the group stops: OK when the leader stopped it, why
  // otherwise.
  absl::Status Wait() ABSL_LOCKS_EXCLUDED(mu_);
  // Leader: tells every rank to stop. Elsewhere: waits for it. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // K/V bytes this process's chips sent (prefill) or received (generate).
  int64_t kv_bytes_moved() const { return kv_bytes_.load(); }
  // Transfers waiting in this process (both sides' queues).
  size_t transfer_backlog() const;

 private:
  class Leader;
  class Remote;
  friend class Leader;
  friend class Remote;

  void RankLoop(int local) ABSL_LOCKS_EXCLUDED(mu_);
  void TransferLoop(int local);
  void SendTransfers(int local);
  void ReceiveTransfers(int local);
  // Leader: hands `cmd` to the leading chip's thread and waits for its result.
  absl::Status Call(std::vector<float> cmd, float* out) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `cmd` on local chip `local`'s engine; logits to `out` (may be null).
  absl::Status Execute(int local, const std::vector<float>& cmd, float* out);
  absl::Status ExecuteTransferOp(int local, const std::vector<float>& cmd);
  // Leading chip: waits for the next call or queued prefill (or a no-op
  // after a quiet second), copies it into `buf`, and returns where its
  // logits go.
  float* NextCommand(std::vector<float>* buf) ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void Break(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  bool broken() ABSL_LOCKS_EXCLUDED(mu_);

  train::Communicator* const comm_;
  const int first_device_;
  const int root_device_;  // the tensor group's first chip: it leads
  const GroupRole role_;
  const int64_t command_floats_;
  std::vector<std::unique_ptr<TensorSum>> sums_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<std::vector<float>> scratch_;             // logits of the ranks that do not return them
  std::vector<std::unique_ptr<TransferQueue>> queues_;  // per chip: outbox (prefill) or inbox (generate)
  std::unique_ptr<Leader> leader_;
  std::unique_ptr<Remote> remote_;
  std::atomic<int64_t> kv_bytes_{0};

  absl::Mutex mu_;
  // The leader's pending call: its encoding, where its logits go, its result.
  std::vector<float> pending_ ABSL_GUARDED_BY(mu_);
  float* pending_out_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool has_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_taken_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status pending_status_ ABSL_GUARDED_BY(mu_);
  std::deque<std::vector<float>> queued_ ABSL_GUARDED_BY(mu_);       // prefill leader: prompts to prefill
  std::map<int64_t, SamplingParams> sampling_ ABSL_GUARDED_BY(mu_);  // theirs, by id
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int transferring_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace manta::serve
