// FetchPool: the threads that pull large values (task returns held by the
// workers that made them) into this process, off the io loop.
//
// Owns: a ThreadPool of at most `max_threads` threads and the canceller the
// fetches register their calls with.
//
// Invariants: no fetch runs after Stop() returns, and Stop() returns
// promptly: it cancels the calls in flight (they end with CANCELLED), runs
// what is still queued (each sees a cancelled canceller and fails at once),
// then joins every thread. A fetch submitted after Stop is not run.
//
// Threads: Submit from any thread (the io loop); Stop from the owner's
// thread; the fetches run on the pool's threads.
//
//   FetchPool pool(4);
//   pool.Submit([&](rpc::CallCanceller* cancel) { Store(FetchObject(..., cancel)); });
//   ...
//   pool.Stop();
#pragma once

#include <functional>

#include "common/rpc/call_canceller.h"
#include "common/thread_pool.h"

namespace manta::core {

class FetchPool {
 public:
  using Fetch = std::function<void(rpc::CallCanceller*)>;

  explicit FetchPool(int max_threads) : threads_(max_threads) {}
  ~FetchPool() { Stop(); }

  // Queues `fetch`; false (and `fetch` dropped unrun) once stopping.
  bool Submit(Fetch fetch) {
    return threads_.Submit([this, fetch = std::move(fetch)] { fetch(&canceller_); });
  }
  // Cancels, drains and joins (see above). Idempotent.
  void Stop() {
    threads_.Stop([this] { canceller_.CancelAll(); });
  }

  // Threads started and not yet joined (at most max_threads).
  int threads() const { return threads_.threads(); }

 private:
  rpc::CallCanceller canceller_;  // before threads_: outlives every fetch
  ThreadPool threads_;
};

}  // namespace manta::core
