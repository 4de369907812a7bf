// Collectives among the processes of one gloo context, on flat float
// buffers (sums also on double buffers, for exact gradient reductions).
// Algorithms are built on first use for each (operation, size) and
// reused; their staging buffers belong to this object. A build is
// followed by a barrier of the group, so no process sends an algorithm's
// data before every peer has registered its buffers. Not
// thread-safe: one caller at a time (CollectiveGroup serializes), except
// Abort. A failed peer, or Abort here or on a peer, makes the pending and
// later calls throw (gloo::IoException).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gloo/algorithm.h"
#include "train/kernels/collective_error.h"
#include "train/kernels/buffer.h"
#include "gloo/context.h"

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
  // Sums buf (n floats, n divisible by size()) over the processes; only
  // this rank's part [rank * n / size, (rank + 1) * n / size) is written.
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
  Cached64& Get64(char op, int64_t n);
  void Built();
  template <typename T, typename C>
  void AllReduceImpl(C& c, T* buf, int64_t n);
  template <typename T>
  void ReduceScatterImpl(T* buf, int64_t n);

  const std::shared_ptr<gloo::Context> context_;
  std::map<std::pair<char, int64_t>, Cached> cache_;
  std::map<std::pair<char, int64_t>, Cached64> cache64_;
  std::unique_ptr<gloo::Algorithm> barrier_;
};

}  // namespace manta::train
