// The thread's running task (core::CurrentTaskContext).
#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

thread_local const TaskContext* current_task = nullptr;

}  // namespace

const TaskContext* CurrentTaskContext() { return current_task; }

ScopedTaskContext::ScopedTaskContext(const TaskContext* context) : outer_(current_task) { current_task = context; }

ScopedTaskContext::~ScopedTaskContext() { current_task = outer_; }

}  // namespace manta::core

namespace manta::internal {

int DeclaredReturns() {
  const core::TaskContext* context = core::CurrentTaskContext();
  return context == nullptr ? 1 : context->num_returns;
}

}  // namespace manta::internal
