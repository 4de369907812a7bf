// Reduces each block's gradient over the mesh on a thread of its own, so the
// backward pass moves on to the next block while the previous one travels:
// a reduce-scatter over fsdp, then an allreduce of the shard over data.
//
//   GradientReducer reducer(comm, mesh, device);
//   float* padded = reducer.Padded(b, size, shard_size);
//   ... write (or sum) block b's `size` gradient floats into padded ...
//   reducer.SubmitPadded(b, shard_size, shard_out);   // returns at once
//   ...
//   reducer.Drain();  // every shard_out is final
//
// Reductions run in submission order, which is the same on every device, so
// the fsdp and data groups see the same sequence everywhere. While work is
// pending, the owning device must not use the fsdp or data groups itself.
// A reduction that fails (CollectiveError) drops the rest of the queue;
// Drain then throws that error.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "train/kernels/buffer.h"
#include "train/kernels/communicator.h"

namespace manta::train {

class GradientReducer {
 public:
  GradientReducer(Communicator* comm, const Mesh& mesh, int device);
  ~GradientReducer();  // finishes pending work, then joins the thread

  // Block `block`'s padded copy (fsdp * shard floats, the tail past `size`
  // zero) for the caller to write the block's `size` gradient floats into,
  // summing micro-batches in place; then SubmitPadded schedules its
  // reduction into `shard_out` (`shard` floats; fsdp * shard >= size) and
  // returns at once. Null after a failed reduction. The copy may be written
  // again only after Drain.
  float* Padded(int block, int64_t size, int64_t shard);
  void SubmitPadded(int block, int64_t shard, float* shard_out);
  // The same in double: sums (and the model trained) that do not depend on
  // how the batch is split over devices and micro-batches.
  double* PaddedExact(int block, int64_t size, int64_t shard);
  void SubmitExact(int block, int64_t shard, float* shard_out);
  // Returns when every submitted reduction has finished; throws the
  // CollectiveError of a failed one.
  void Drain();

  // Bytes of the padded copies (and exact reduced shards) held. Safe from
  // any thread.
  int64_t BytesHeld() const;

  // Seconds the reducer thread has spent reducing, and seconds callers of
  // Drain have waited for it; both only grow. Safe from any thread.
  double busy_seconds() const { return busy_nanos_.load() * 1e-9; }
  double drain_seconds() const { return drain_nanos_.load() * 1e-9; }

 private:
  void Loop();

  Communicator* const comm_;
  const int device_;
  const int fsdp_, data_;
  std::thread thread_;
  std::atomic<int64_t> busy_nanos_{0}, drain_nanos_{0};

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string failure_ ABSL_GUARDED_BY(mu_);  // set once
  // Per-block padded copies of the gradients; a block's buffer is written
  // only after the previous step's reduction of it has drained.
  std::map<int, FloatBuffer> padded_ ABSL_GUARDED_BY(mu_);  // the map; the buffers are the tasks'
  // Exact reducers: padded copies and the reduced shards, in double.
  std::map<int, std::pair<DoubleBuffer, DoubleBuffer>> padded64_ ABSL_GUARDED_BY(mu_);  // the map
};

}  // namespace manta::train
