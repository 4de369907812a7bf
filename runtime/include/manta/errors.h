// Errors of the public API.
//
// The API mirrors Ray's C++ API and throws; every call that throws has a
// non-throwing Try* form returning absl::Status(Or) whose ErrorType
// (manta::ErrorTypeOf) says the same as the exception's class.
//
//   try {
//     int v = *manta::Get(ref);
//   } catch (const manta::ActorDiedError& e) {
//     // the actor is gone; e.what() says why
//   } catch (const manta::TaskError& e) {
//     std::cerr << "task failed: " << e.what() << "\n";
//   }
//
// Hierarchy:
//   Error                      any failure of a Manta call (bad use, no cluster)
//   └─ TaskError               a value could not be produced or fetched
//      ├─ ApplicationError     user code threw or returned an error; what() has
//      │                       the function name and the remote message
//      ├─ WorkerDiedError      the worker running the task died (after retries)
//      ├─ NodeDiedError        the node running the task died (after retries)
//      ├─ ActorDiedError       the actor is dead (killed, crashed, out of restarts)
//      ├─ OwnerDiedError       the process that owned the value died
//      ├─ InfeasibleError      no node in the cluster could ever run the task
//      ├─ ObjectLostError      the value was lost and cannot be rebuilt
//      ├─ TaskCancelledError   the task was cancelled
//      └─ GetTimeoutError      Get's timeout passed before the value was ready
#pragma once

#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "manta/internal/core_worker.h"

namespace manta {

using core::ErrorType;

// The ErrorType a status from a Try* call carries; kNone when OK or when the
// failure is not about a task's value (e.g. Init not called).
inline ErrorType ErrorTypeOf(const absl::Status& status) { return core::GetErrorType(status); }

class Error : public std::runtime_error {
 public:
  explicit Error(absl::Status status) : std::runtime_error(std::string(status.message())), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class TaskError : public Error {
 public:
  using Error::Error;
  ErrorType type() const { return ErrorTypeOf(status()); }
};

#define MANTA_DECLARE_TASK_ERROR_(Name) \
  class Name : public TaskError {       \
   public:                              \
    using TaskError::TaskError;         \
  }
MANTA_DECLARE_TASK_ERROR_(ApplicationError);
MANTA_DECLARE_TASK_ERROR_(WorkerDiedError);
MANTA_DECLARE_TASK_ERROR_(NodeDiedError);
MANTA_DECLARE_TASK_ERROR_(ActorDiedError);
MANTA_DECLARE_TASK_ERROR_(OwnerDiedError);
MANTA_DECLARE_TASK_ERROR_(InfeasibleError);
MANTA_DECLARE_TASK_ERROR_(ObjectLostError);
MANTA_DECLARE_TASK_ERROR_(TaskCancelledError);
MANTA_DECLARE_TASK_ERROR_(GetTimeoutError);
#undef MANTA_DECLARE_TASK_ERROR_

namespace internal {

// Throws the exception matching `status`'s ErrorType (Error when it has
// none). `status` must not be OK.
[[noreturn]] void ThrowError(const absl::Status& status);

// Throws ThrowError(status) unless it is OK.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowError(status);
}

}  // namespace internal
}  // namespace manta
