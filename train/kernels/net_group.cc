#include "train/kernels/net_group.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

#include "gloo/allgather_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/reduce_scatter.h"
#include "gloo/transport/pair.h"

// The tcp pair's signalExceptionExternal fails every buffer waiting on the
// pair and closes its socket (close() alone leaves local waiters blocked).
// Debian's gloo lacks a header (gloo/common/memory.h) that
// gloo/transport/tcp/pair.h includes, so that class cannot be included here;
// libgloo exports the member, and this declares just it. tcp::Pair derives
// from transport::Pair first, so the two share an address.
namespace gloo::transport::tcp {
class Pair {
 public:
  std::exception_ptr signalExceptionExternal(const std::string& msg);
};
}  // namespace gloo::transport::tcp

namespace manta::train {

void NetGroup::Abort(const std::string& why) {
  for (int r = 0; r < context_->size; ++r) {
    if (r == context_->rank) continue;
    gloo::transport::Pair* pair = context_->getPair(r).get();
    // Every context of the kernels runs on a tcp device (Communicator).
    if (pair != nullptr) reinterpret_cast<gloo::transport::tcp::Pair*>(pair)->signalExceptionExternal(why);
  }
}

namespace {

// Whole chunks of at least 256 elements for each of the 2 * processes
// chunks AllreduceRingChunked cuts; the zero padding sums to zero.
int64_t RingPadded(int64_t n, int processes) {
  const int64_t chunks = 2 * processes;
  return (std::max<int64_t>(n, 256 * chunks) + chunks - 1) / chunks * chunks;
}

template <typename T, typename Buffer>
std::unique_ptr<gloo::Algorithm> MakeAlgorithm(const std::shared_ptr<gloo::Context>& context, char op, int64_t n,
                                               Buffer* in) {
  const int processes = context->size;
  if (op == 'r') {
    in->assign(RingPadded(n, processes), T(0));
    return std::make_unique<gloo::AllreduceRingChunked<T>>(context, std::vector<T*>{in->data()},
                                                           static_cast<int>(in->size()));
  }
  in->assign(n, T(0));
  return std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
      context, std::vector<T*>{in->data()}, static_cast<int>(n),
      std::vector<int>(processes, static_cast<int>(n / processes)));
}

}  // namespace

NetGroup::NetGroup(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {
  // Built with the group, so the barrier that guards every later build
  // has its own buffers registered on every process before it is used.
  if (size() > 1) barrier_ = std::make_unique<gloo::BarrierAllToOne>(context_);
}

void NetGroup::Built() {
  // gloo's tcp device thread busy-polls a connection whose data arrives
  // for a buffer its process has not registered yet. Peers build an
  // algorithm when they first reach it, and a fresh process reaches it
  // late (its first step is cold), so without this the warm processes'
  // data would make it spin, with every process of the group waiting on
  // the slowest. Once past the barrier, every process has registered this
  // algorithm's buffers.
  if (size() > 1) Barrier();
}

NetGroup::Cached& NetGroup::Get(char op, int64_t n) {
  Cached& c = cache_[{op, n}];
  if (c.algorithm) return c;
  if (op == 'g') {
    c.in.assign(n, 0.0f);
    c.out.assign(n * size(), 0.0f);
    c.algorithm = std::make_unique<gloo::AllgatherRing<float>>(context_, std::vector<const float*>{c.in.data()},
                                                               c.out.data(), static_cast<int>(n));
  } else {
    c.algorithm = MakeAlgorithm<float>(context_, op, n, &c.in);
  }
  Built();
  return c;
}

NetGroup::Cached64& NetGroup::Get64(char op, int64_t n) {
  Cached64& c = cache64_[{op, n}];
  if (c.algorithm) return c;
  c.algorithm = MakeAlgorithm<double>(context_, op, n, &c.in);
  Built();
  return c;
}

template <typename T, typename C>
void NetGroup::AllReduceImpl(C& c, T* buf, int64_t n) {
  std::memcpy(c.in.data(), buf, sizeof(T) * n);
  c.algorithm->run();
  std::memcpy(buf, c.in.data(), sizeof(T) * n);
}

void NetGroup::AllReduce(float* buf, int64_t n) { AllReduceImpl(Get('r', n), buf, n); }
void NetGroup::AllReduce(double* buf, int64_t n) { AllReduceImpl(Get64('r', n), buf, n); }

template <typename T>
void NetGroup::ReduceScatterImpl(T* buf, int64_t n) {
  const int processes = size();
  if ((processes & (processes - 1)) != 0) {
    // gloo's halving-doubling places results differently when the process
    // count is not a power of two; the allreduce moves twice the bytes but
    // leaves every part in place.
    AllReduce(buf, n);
    return;
  }
  auto& c = [&]() -> auto& {
    if constexpr (std::is_same_v<T, float>) {
      return Get('s', n);
    } else {
      return Get64('s', n);
    }
  }
  ();
  std::memcpy(c.in.data(), buf, sizeof(T) * n);
  c.algorithm->run();
  // gloo leaves this rank's reduced part at the start of the buffer (with
  // more than two processes the part at the rank's own offset is another
  // rank's, reordered by the recursive halving).
  const int64_t part = n / processes, mine = part * rank();
  std::memcpy(buf + mine, c.in.data(), sizeof(T) * part);
}

void NetGroup::ReduceScatter(float* buf, int64_t n) { ReduceScatterImpl(buf, n); }
void NetGroup::ReduceScatter(double* buf, int64_t n) { ReduceScatterImpl(buf, n); }

void NetGroup::AllGather(const float* in, int64_t n, float* out) {
  Cached& c = Get('g', n);
  std::memcpy(c.in.data(), in, sizeof(float) * n);
  c.algorithm->run();
  std::memcpy(out, c.out.data(), sizeof(float) * c.out.size());
  // AllgatherRing has no closing handshake: a fast peer's next run would
  // write into c.out while this process still copies out of it.
  Barrier();
}

void NetGroup::Broadcast(float* buf, int64_t n, int root) {
  gloo::BroadcastOneToAll<float> bcast(context_, std::vector<float*>{buf}, n, root);
  // As in Built(): a fresh process arrives late (it is still building its
  // devices), and the root's data for a buffer it has not registered would
  // make its device thread spin meanwhile, on the cores it builds with.
  Barrier();
  bcast.run();
}

void NetGroup::Barrier() {
  if (barrier_) barrier_->run();
}

}  // namespace manta::train
