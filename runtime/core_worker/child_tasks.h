// ChildTasks: the tasks and actor calls each task running in this worker
// submitted (its children, which this process owns), so that a recursive
// cancel of the task cancels them too, as Ray's does.
//
// A task is tracked from Begin (it starts running here) to End. A child is
// the running task's when it is submitted from that task's thread (its
// TaskContext) or, from a thread that runs no task, when exactly one task
// runs here (a normal task's own threads); anything else submits no child.
// Children are listed until their parent ends or a recursive cancel takes
// them (Take). From then on the parent's new children are not listed but
// reported for cancelling at once: a child submitted while its parent's
// cancel runs is cancelled whichever comes first, and so is what a
// cancelled task goes on to submit. A long-lived parent's list sheds the
// children that ended (the `still_pending` filter) each time it doubles,
// so it stays about as long as the children still pending.
//
// Invariant: a list exists only for a task between its Begin and End.
//
// Threads: any. One lock, taken before the submitters' (`still_pending`
// runs under it) and never held across anything else.
//
//   ChildTasks children([&](const ChildTasks::Child& c) { return IsPending(c); });
//   children.Begin(task);                      // the task starts running here
//   auto added = children.AddFromCurrent({child, {}});  // it submitted one
//   if (added && added->cancel) Cancel(child);
//   for (auto& c : children.Take(task, force)) Cancel(c);
//   children.End(task);
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/id.h"

namespace manta::core {

class ChildTasks {
 public:
  struct Child {
    TaskId task;
    ActorId actor;  // nil for a normal task
  };
  // Lists start shedding ended children once they hold this many.
  static constexpr size_t kFirstCompaction = 256;
  // What became of a child submitted by `parent`: listed, or to be
  // cancelled now (`cancel`, with `force` as its parent's cancel was).
  struct Added {
    TaskId parent;
    bool cancel = false;
    bool force = false;
  };

  // `still_pending`: whether a child has not ended yet.
  explicit ChildTasks(std::function<bool(const Child&)> still_pending) : still_pending_(std::move(still_pending)) {}
  ChildTasks(const ChildTasks&) = delete;
  ChildTasks& operator=(const ChildTasks&) = delete;

  // `task` starts and stops running here.
  void Begin(const TaskId& task) ABSL_LOCKS_EXCLUDED(mu_);
  void End(const TaskId& task) ABSL_LOCKS_EXCLUDED(mu_);
  // The task a child submitted from the calling thread is a child of (see
  // above), if it is tracked.
  std::optional<TaskId> CurrentParent() ABSL_LOCKS_EXCLUDED(mu_);
  // Adds `child` (submitted, so pending) under the calling thread's parent
  // (CurrentParent); nullopt when there is none.
  std::optional<Added> AddFromCurrent(const Child& child) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds `child` under `parent`; nullopt when `parent` does not run here.
  std::optional<Added> Add(const TaskId& parent, const Child& child) ABSL_LOCKS_EXCLUDED(mu_);
  // `parent` is being cancelled recursively: its children, which are no
  // longer listed, nor are those it submits from now on (Added::cancel).
  // None when it does not run here.
  std::vector<Child> Take(const TaskId& parent, bool force) ABSL_LOCKS_EXCLUDED(mu_);

  // For tests: how many children `parent` lists.
  size_t NumChildren(const TaskId& parent) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Running {
    std::vector<Child> children;
    size_t compact_at = kFirstCompaction;
    // Taken by a recursive cancel (forced or not).
    bool cancelled = false;
    bool force = false;
  };
  std::optional<Added> AddLocked(const TaskId& parent, const Child& child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<bool(const Child&)> still_pending_;

  absl::Mutex mu_;
  absl::flat_hash_map<TaskId, Running> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
