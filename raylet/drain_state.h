// DrainState: whether this node drains, why, until when, and when the raylet
// may go. Pure bookkeeping: the raylet feeds it the time and what the node
// still holds, and acts on the answer.
//
//   DrainState drain;
//   drain.Start("preemption", now_ms + 30000);
//   switch (drain.Decide(now_ms, {.leased_workers = 0, .bundles = 0})) { ... }
//
// Invariants: once draining, it stays draining; the deadline only moves
// earlier (0 means none, i.e. the latest); the reason is the latest given.
// Thread: the raylet's loop thread; no locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/thread_checker.h"

namespace manta::raylet {

// What the node still holds that a drain waits for.
struct NodeLoad {
  size_t leased_workers = 0;  // leases granted or waiting for their worker
  size_t bundles = 0;         // placement-group bundles prepared or committed
};

class DrainState {
 public:
  enum class Action {
    kStay,      // not draining, or draining and still busy before the deadline
    kIdle,      // draining and nothing held: exit now
    kDeadline,  // the deadline has passed: stop the workers and exit
  };

  // Starts draining, or updates a drain: `deadline_ms` (unix epoch; 0: none)
  // replaces the deadline only when earlier. Returns whether this call
  // started the drain.
  bool Start(const std::string& reason, int64_t deadline_ms);

  // What the raylet should do at `now_ms` (unix epoch) holding `load`.
  Action Decide(int64_t now_ms, const NodeLoad& load) const;

  bool draining() const { return draining_; }
  const std::string& reason() const { return reason_; }
  int64_t deadline_ms() const { return deadline_ms_; }

 private:
  bool draining_ = false;
  std::string reason_;
  int64_t deadline_ms_ = 0;
  // The loop thread, which every call comes from.
  ThreadChecker thread_;
};

}  // namespace manta::raylet
