// The serving group a process serves in now, for the calls that reach it
// from outside its group (the generate leader's prompts, on the prefill
// leader). A prompt may arrive while the group still forms: the processes of
// a disaggregated group join the same collectives, but each makes its group
// when its own join returns, some milliseconds apart.
//
//   CurrentGroup current;
//   current.Set(&group);   // ...serves...   current.Clear();
//   current.With(absl::Seconds(60), [&](GroupEngine* g) { return g->EnqueuePrefill(...); });
#pragma once

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace manta::serve {

class GroupEngine;

class CurrentGroup {
 public:
  void Set(GroupEngine* group) {
    absl::MutexLock lock(&mu_);
    group_ = group;
  }
  void Clear() { Set(nullptr); }

  // Calls waiting in With for a group to be set.
  int waiting() const {
    absl::MutexLock lock(&mu_);
    return waiting_;
  }

  // Runs fn on the group, waiting up to `wait` for one to be set; the group
  // is not cleared while fn runs. Unavailable if none is set in time.
  absl::Status With(absl::Duration wait, const std::function<absl::Status(GroupEngine*)>& fn) {
    absl::MutexLock lock(&mu_);
    auto serving = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return group_ != nullptr; };
    ++waiting_;
    mu_.AwaitWithTimeout(absl::Condition(&serving), wait);
    --waiting_;
    if (group_ == nullptr) return absl::UnavailableError("this process is not serving");
    return fn(group_);
  }

 private:
  mutable absl::Mutex mu_;
  GroupEngine* group_ ABSL_GUARDED_BY(mu_) = nullptr;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::serve
