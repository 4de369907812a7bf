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
#include "gloo/common/error.h"
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
  {
    // A wait ended (or not yet begun) returns false at once; so does every
    // later ring.
    absl::MutexLock lock(&ring_mu_);
    aborted_ = true;
    if (ring_in_ != nullptr) ring_in_->abortWaitRecv();
    if (ring_out_ != nullptr) ring_out_->abortWaitSend();
  }
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

// The allreduce of `n` elements over `context`, on `in` (padded).
template <typename T, typename Buffer>
std::unique_ptr<gloo::Algorithm> MakeAllReduce(const std::shared_ptr<gloo::Context>& context, int64_t n, Buffer* in) {
  in->assign(RingPadded(n, context->size), T(0));
  return std::make_unique<gloo::AllreduceRingChunked<T>>(context, std::vector<T*>{in->data()},
                                                         static_cast<int>(in->size()));
}

}  // namespace

NetGroup::NetGroup(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {
  // Built with the group, so the barrier that guards every later build
  // has its own buffers registered on every process before it is used.
  if (size() > 1) barrier_ = std::make_unique<gloo::BarrierAllToOne>(context_);
  ring_slot_ = context_->nextSlot();  // gloo's algorithms built later take the slots after it
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
    c.algorithm = MakeAllReduce<float>(context_, n, &c.in);
  }
  Built();
  return c;
}

NetGroup::Cached64& NetGroup::Get64(int64_t n) {
  Cached64& c = cache64_[n];
  if (c.algorithm) return c;
  c.algorithm = MakeAllReduce<double>(context_, n, &c.in);
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
void NetGroup::AllReduce(double* buf, int64_t n) { AllReduceImpl(Get64(n), buf, n); }

template <typename T>
T* NetGroup::RingPart(int64_t n) {
  auto& part = [this]() -> auto& {
    if constexpr (std::is_same_v<T, float>) {
      return ring_part_;
    } else {
      return ring_part64_;
    }
  }
  ();
  if (static_cast<int64_t>(part.size()) < n) part.resize(n);  // written whole by each receive
  return part.data();
}

template <typename T>
void NetGroup::RingReduceScatter(T* buf, int64_t n) {
  const int p = size(), r = rank();
  if (p == 1) return;
  // At step s this rank sends its running sum of part r - s - 1 to the
  // next rank and adds the previous rank's sum of part r - s - 2 into its
  // own; after p - 1 steps part r holds every rank's sum.
  const int64_t part = n / p;
  const size_t bytes = sizeof(T) * static_cast<size_t>(part);
  T* incoming = RingPart<T>(part);
  std::unique_ptr<gloo::transport::UnboundBuffer> out = context_->createUnboundBuffer(buf, sizeof(T) * n);
  std::unique_ptr<gloo::transport::UnboundBuffer> in = context_->createUnboundBuffer(incoming, bytes);
  // gloo ends a pending operation when its pair fails, but not one whose
  // bytes are already moving: Abort ends those waits through these.
  {
    absl::MutexLock lock(&ring_mu_);
    if (aborted_) throw gloo::IoException("the group was aborted");
    ring_in_ = in.get();
    ring_out_ = out.get();
  }
  struct Unregister {
    NetGroup* group;
    ~Unregister() {
      absl::MutexLock lock(&group->ring_mu_);
      group->ring_in_ = group->ring_out_ = nullptr;
    }
  } unregister{this};  // before `in` and `out` go
  const int next = (r + 1) % p, previous = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int64_t send = (r - s - 1 + 2 * p) % p, add = (r - s - 2 + 2 * p) % p;
    out->send(next, ring_slot_, sizeof(T) * send * part, bytes);
    in->recv(previous, ring_slot_, 0, bytes);
    // A failed pair throws from the waits; Abort makes them return false.
    if (!in->waitRecv()) throw gloo::IoException("the ring's receive was aborted");
    T* into = buf + add * part;
    for (int64_t i = 0; i < part; ++i) into[i] += incoming[i];
    if (!out->waitSend()) throw gloo::IoException("the ring's send was aborted");
  }
}

void NetGroup::ReduceScatter(float* buf, int64_t n) { RingReduceScatter(buf, n); }
void NetGroup::ReduceScatter(double* buf, int64_t n) { RingReduceScatter(buf, n); }

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
