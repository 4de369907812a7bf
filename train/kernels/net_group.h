// Collectives among the processes of one gloo context, on flat float
// buffers (sums also on double buffers, for exact gradient reductions).
// AllReduce and AllGather algorithms are built on first use for each size
// and reused; their staging buffers belong to this object. A build is
// followed by a barrier of the group, so no process sends an algorithm's
// data before every peer has registered its buffers. ReduceScatter runs a
// ring in place on the caller's buffer over unbound buffers (a send waits
// until its receiver has posted the receive), holding aside one part of
// the largest call: a gloo algorithm per block size would keep three
// copies of every size. Not thread-safe: one caller at a time
// (CollectiveGroup serializes), except Abort. A failed peer, or Abort here
// or on a peer, makes the pending and later calls throw
// (gloo::IoException), with one exception: a ring transfer whose bytes are
// already moving when its peer fails (a receive begun, a send queued)
// waits for the context's timeout, unless this process aborts (every
// caller in the runtime interrupts the survivors of a failed peer, and
// Abort ends the ring's waits).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gloo/algorithm.h"
#include "train/kernels/collective_error.h"
#include "train/kernels/buffer.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"

namespace manta::train {

class NetGroup {
 public:
  explicit NetGroup(std::shared_ptr<gloo::Context> context);

  int size() const { return context_->size; }
  int rank() const { return context_->rank; }

  // Sums buf (n floats) over the processes, in place.
  void AllReduce(float* buf, int64_t n);
  void AllReduce(double* buf, int64_t n);
  // out[r * n, (r + 1) * n) = `in` of rank r.
  void AllGather(const float* in, int64_t n, float* out);
  // Sums buf (n floats, n divisible by size()) over the processes into
  // this rank's part [rank * n / size, (rank + 1) * n / size); the other
  // parts are left holding partial sums.
  void ReduceScatter(float* buf, int64_t n);
  void ReduceScatter(double* buf, int64_t n);
  // Copies rank `root`'s buf to every rank.
  void Broadcast(float* buf, int64_t n, int root);
  void Barrier();
  // From any thread: fails every pending and later call here, and closes
  // the connections, so peers blocked on this process fail too.
  void Abort(const std::string& why);

 private:
  struct Cached {
    FloatBuffer in, out;
    std::unique_ptr<gloo::Algorithm> algorithm;
  };
  struct Cached64 {
    DoubleBuffer in;
    std::unique_ptr<gloo::Algorithm> algorithm;
  };
  // The algorithm for (op, n), built on first use (every process builds
  // the same ones in the same order); Built() follows each build.
  Cached& Get(char op, int64_t n);
  Cached64& Get64(int64_t n);  // the double allreduce
  void Built();
  template <typename T, typename C>
  void AllReduceImpl(C& c, T* buf, int64_t n);
  // The ring's part buffer, of the call's element type, at least `n` long.
  template <typename T>
  T* RingPart(int64_t n);
  template <typename T>
  void RingReduceScatter(T* buf, int64_t n);

  const std::shared_ptr<gloo::Context> context_;
  std::map<std::pair<char, int64_t>, Cached> cache_;
  std::map<int64_t, Cached64> cache64_;
  std::unique_ptr<gloo::Algorithm> barrier_;
  uint64_t ring_slot_ = 0;  // the ring's messages, taken at construction
  FloatBuffer ring_part_;
  DoubleBuffer ring_part64_;
  // The running ring's buffers, for Abort to end their waits.
  absl::Mutex ring_mu_;
  gloo::transport::UnboundBuffer* ring_in_ ABSL_GUARDED_BY(ring_mu_) = nullptr;
  gloo::transport::UnboundBuffer* ring_out_ ABSL_GUARDED_BY(ring_mu_) = nullptr;
  bool aborted_ ABSL_GUARDED_BY(ring_mu_) = false;
};

}  // namespace manta::train
