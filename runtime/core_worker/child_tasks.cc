#include "runtime/core_worker/child_tasks.h"

#include <algorithm>

#include "manta/internal/core_worker.h"

namespace manta::core {

void ChildTasks::Begin(const TaskId& task) {
  absl::MutexLock lock(&mu_);
  running_.try_emplace(task);
}

void ChildTasks::End(const TaskId& task) {
  absl::MutexLock lock(&mu_);
  running_.erase(task);
}

std::optional<TaskId> ChildTasks::CurrentParent() {
  const TaskContext* context = CurrentTaskContext();
  absl::MutexLock lock(&mu_);
  if (context != nullptr) {
    if (running_.contains(context->task_id)) return context->task_id;
    return std::nullopt;
  }
  if (running_.size() == 1) return running_.begin()->first;
  return std::nullopt;
}

std::optional<ChildTasks::Added> ChildTasks::AddFromCurrent(const Child& child) {
  std::optional<TaskId> parent = CurrentParent();
  if (!parent) return std::nullopt;
  absl::MutexLock lock(&mu_);
  return AddLocked(*parent, child);  // nullopt if the parent ended meanwhile
}

std::optional<ChildTasks::Added> ChildTasks::Add(const TaskId& parent, const Child& child) {
  absl::MutexLock lock(&mu_);
  return AddLocked(parent, child);
}

std::optional<ChildTasks::Added> ChildTasks::AddLocked(const TaskId& parent, const Child& child) {
  auto it = running_.find(parent);
  if (it == running_.end()) return std::nullopt;
  Running& r = it->second;
  if (r.cancelled) return Added{parent, /*cancel=*/true, r.force};
  r.children.push_back(child);
  if (r.children.size() >= r.compact_at) {
    r.children.erase(
        std::remove_if(r.children.begin(), r.children.end(), [this](const Child& c) { return !still_pending_(c); }),
        r.children.end());
    r.compact_at = std::max(kFirstCompaction, 2 * r.children.size());
  }
  return Added{parent};
}

std::vector<ChildTasks::Child> ChildTasks::Take(const TaskId& parent, bool force) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(parent);
  if (it == running_.end()) return {};
  Running& r = it->second;
  r.cancelled = true;
  r.force = r.force || force;
  std::vector<Child> out;
  out.swap(r.children);
  return out;
}

size_t ChildTasks::NumChildren(const TaskId& parent) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(parent);
  return it == running_.end() ? 0 : it->second.children.size();
}

}  // namespace manta::core
