// The thread's running task (core::CurrentTaskContext) and the process's
// interrupt hook.
#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "manta/internal/core_worker.h"
#include "manta/internal/environment.h"

namespace manta::core {
namespace {

thread_local const TaskContext* current_task = nullptr;
std::atomic<uint64_t> environment_changes{0};

absl::Mutex hook_mu;
std::function<void(const TaskId&)>* hook ABSL_GUARDED_BY(hook_mu) = nullptr;

}  // namespace

bool TaskCancelRequested() {
  return current_task != nullptr && current_task->cancelled != nullptr &&
         current_task->cancelled->load(std::memory_order_acquire);
}

void SetTaskInterruptHook(std::function<void(const TaskId&)> fn) {
  absl::MutexLock lock(&hook_mu);
  delete hook;
  hook = fn ? new std::function<void(const TaskId&)>(std::move(fn)) : nullptr;
}

void InterruptTask(const TaskId& task) {
  std::function<void(const TaskId&)> fn;
  {
    absl::MutexLock lock(&hook_mu);
    if (hook != nullptr) fn = *hook;
  }
  if (fn) fn(task);  // without the lock: the hook may take the GIL
}

const TaskContext* CurrentTaskContext() { return current_task; }

uint64_t EnvironmentChanges() { return environment_changes.load(std::memory_order_acquire); }

void NoteEnvironmentChange() { environment_changes.fetch_add(1, std::memory_order_acq_rel); }

ScopedTaskContext::ScopedTaskContext(const TaskContext* context) : outer_(current_task) { current_task = context; }

ScopedTaskContext::~ScopedTaskContext() { current_task = outer_; }

}  // namespace manta::core

namespace manta::internal {

int DeclaredReturns() {
  const core::TaskContext* context = core::CurrentTaskContext();
  return context == nullptr ? 1 : context->num_returns;
}

}  // namespace manta::internal
