// ThreadPool: a bounded set of owned threads for blocking work (file system
// calls, blocking RPCs) that must stay off an event loop.
//
// Owns: at most `max_threads` threads, started as work arrives and kept until
// Stop; the work waiting for one, in submission order.
//
// Invariants: with max_threads == 1 work runs in submission order. Nothing
// runs after Stop() returns: Stop refuses new work, lets the threads finish
// what is queued, and joins them. Work submitted after Stop is not run.
//
// Threads: Submit from any thread (an event loop); Stop from the owner's
// thread, never from the pool's own threads, and from one thread at a time.
// Work must not throw: an exception ends the process, as on any thread.
//
//   ThreadPool files(1);
//   files.Submit([=] { CreateLogFiles(dir); loop->Post(...); });
//   ...
//   files.Stop();
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace manta {

class ThreadPool {
 public:
  explicit ThreadPool(int max_threads);
  ~ThreadPool();  // Stop()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `work`; false (and `work` dropped unrun) once stopping.
  bool Submit(std::function<void()> work);
  // Refuses new work, runs `before_join` (e.g. to cancel blocking calls in
  // flight), drains the queue and joins every thread. Idempotent.
  void Stop(const std::function<void()>& before_join = nullptr);

  // Threads started and not yet joined (at most max_threads).
  int threads() const;

 private:
  void Run();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; }

  const int max_threads_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta
