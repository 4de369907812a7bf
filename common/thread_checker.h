// ThreadChecker: the project's one check that an object lives on one thread
// (its daemon's event loop), as a header's "loop thread only" promises.
// MANTA_CHECK_THREAD aborts, in every build, naming the caller's file and
// line, when the call comes from another thread.
//
// An object that is not handed its loop (the GCS's managers, the raylet's
// lease manager) owns a checker: the first checked call binds it to the
// calling thread, and every later one must come from the same thread.
//
//   class NodeManager {
//     void HandleRegisterNode(...) { MANTA_CHECK_THREAD(thread_); ... }
//     ThreadChecker thread_;
//   };
//
// An object handed its EventLoop checks the loop's checker, which the loop
// binds itself: to the thread that made it, then to the one that runs it.
//
//   void WorkerPool::PopWorker(...) { MANTA_CHECK_THREAD(loop_->thread_checker()); ... }
//
// Safe from any thread (that is its point): one atomic load per check once bound.
#pragma once

#include <atomic>
#include <thread>

#include "common/check.h"

namespace manta {

class ThreadChecker {
 public:
  // True when called on the bound thread, or on the first call (which binds).
  bool CalledOnValidThread() const {
    const std::thread::id self = std::this_thread::get_id();
    std::thread::id owner = owner_.load(std::memory_order_relaxed);
    if (owner == self) return true;
    if (owner != std::thread::id()) return false;
    return owner_.compare_exchange_strong(owner, self, std::memory_order_relaxed) || owner == self;
  }

  // Binds to the calling thread, whichever thread it was bound to before:
  // for an owner that knows its thread, or hands itself to another one (an
  // EventLoop when Run starts).
  void BindToCurrentThread() { owner_.store(std::this_thread::get_id()); }

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace manta

// Aborts, naming the caller's file and line, when `checker` was bound to
// another thread.
#define MANTA_CHECK_THREAD(checker) CHECK((checker).CalledOnValidThread()) << "called off the thread it lives on"
