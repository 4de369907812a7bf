// ThreadChecker: states that an object lives on one thread (its daemon's
// event loop) when the object is not handed the loop itself, as the GCS's
// managers are not: the first checked call binds the checker to the calling
// thread, and every later one checks that it comes from the same thread.
//
//   class NodeManager {
//     void HandleRegisterNode(...) { MANTA_CHECK_THREAD(thread_); ... }
//     ThreadChecker thread_;
//   };
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

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace manta

// Aborts, naming the caller's file and line, when `checker` was bound to
// another thread.
#define MANTA_CHECK_THREAD(checker) CHECK((checker).CalledOnValidThread()) << "called off the thread it lives on"
