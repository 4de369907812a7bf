// Statuses and exceptions of the public API.
#include "manta/errors.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "manta/api.h"
#include "manta/internal/invoke.h"
#include "manta/serialization.h"

namespace manta::internal {

void ThrowError(const absl::Status& status) {
  switch (core::GetErrorType(status)) {
    case ErrorType::kNone:
      throw Error(status);
    case ErrorType::kApplicationError:
      throw ApplicationError(status);
    case ErrorType::kWorkerDied:
      throw WorkerDiedError(status);
    case ErrorType::kNodeDied:
      throw NodeDiedError(status);
    case ErrorType::kActorDied:
      throw ActorDiedError(status);
    case ErrorType::kOwnerDied:
      throw OwnerDiedError(status);
    case ErrorType::kInfeasible:
      throw InfeasibleError(status);
    case ErrorType::kObjectLost:
      throw ObjectLostError(status);
    case ErrorType::kTaskCancelled:
      throw TaskCancelledError(status);
    case ErrorType::kTimeout:
      throw GetTimeoutError(status);
    case ErrorType::kInvalidArgument:
      throw TaskError(status);
  }
  throw TaskError(status);
}

namespace {

// Whether the running task retries exceptions of type `type` (its filter
// lists type names, one per line).
bool RetriesType(const std::string& type) {
  const core::TaskContext* context = core::CurrentTaskContext();
  if (context == nullptr || !context->retry_exceptions) return false;
  for (absl::string_view name : absl::StrSplit(context->retry_exception_filter, '\n', absl::SkipEmpty())) {
    if (name == type) return true;
  }
  return false;
}

}  // namespace

absl::Status UserError(const std::string& function, const std::exception& e) {
  const std::string type = TypeName(typeid(e));
  absl::Status error =
      core::MakeError(ErrorType::kApplicationError, absl::StrCat(function, " raised ", type, ": ", e.what()));
  return RetriesType(type) ? core::MarkRetryable(std::move(error)) : error;
}

absl::Status UnknownUserError(const std::string& function) {
  return core::MakeError(ErrorType::kApplicationError,
                         absl::StrCat(function, " raised an exception not derived from std::exception"));
}

absl::Status ReturnedError(const std::string& function, const absl::Status& status) {
  // A status a front end's invoker made (a Python loop's error, returned by
  // the C++ code that called it) keeps the front end's bytes.
  absl::Status error = core::MakeError(
      ErrorType::kApplicationError,
      absl::StrCat(function, " returned ", absl::StatusCodeToString(status.code()), ": ", status.message()));
  std::optional<std::string> data = core::ErrorData(status);
  return data ? core::WithErrorData(std::move(error), *data) : error;
}

absl::Status ArgumentError(const std::string& function, const std::string& detail) {
  return core::MakeError(ErrorType::kApplicationError, absl::StrCat(function, ": bad arguments: ", detail));
}

absl::Status TypedGetError(const absl::Status& status) {
  if (status.ok() || core::GetErrorType(status) != ErrorType::kNone) return status;
  return core::MakeError(ErrorType::kObjectLost, std::string(status.message()));
}

absl::Status ValueDeserializeError(const ObjectId& id, const absl::Status& status) {
  return core::MakeError(ErrorType::kApplicationError, absl::StrCat("object ", id.Hex(), ": ", status.message()));
}

}  // namespace manta::internal
