// The payloads of statuses returned by the core worker: the ErrorType
// (key "manta.error_type", value the decimal ErrorType) and the front end's
// bytes (kErrorDataPayloadUrl).
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

constexpr char kErrorTypePayload[] = "manta.error_type";
constexpr char kRetryablePayload[] = "manta.retryable";

absl::StatusCode CodeFor(ErrorType type) {
  switch (type) {
    case ErrorType::kNone:
    case ErrorType::kApplicationError:
      return absl::StatusCode::kUnknown;
    case ErrorType::kWorkerDied:
    case ErrorType::kActorDied:
    case ErrorType::kOwnerDied:
    case ErrorType::kNodeDied:
      return absl::StatusCode::kUnavailable;
    case ErrorType::kInfeasible:
      return absl::StatusCode::kResourceExhausted;
    case ErrorType::kObjectLost:
      return absl::StatusCode::kDataLoss;
    case ErrorType::kTaskCancelled:
      return absl::StatusCode::kCancelled;
    case ErrorType::kInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ErrorType::kTimeout:
      return absl::StatusCode::kDeadlineExceeded;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

ErrorType GetErrorType(const absl::Status& status) {
  if (status.ok()) return ErrorType::kNone;
  auto payload = status.GetPayload(kErrorTypePayload);
  if (!payload.has_value()) {
    return absl::IsDeadlineExceeded(status) ? ErrorType::kTimeout : ErrorType::kNone;
  }
  int value = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &value)) return ErrorType::kNone;
  return static_cast<ErrorType>(value);
}

absl::Status MakeError(ErrorType type, const std::string& message) {
  absl::Status status(CodeFor(type), message);
  status.SetPayload(kErrorTypePayload, absl::Cord(std::to_string(static_cast<int>(type))));
  return status;
}

absl::Status MakeApplicationError(const std::string& message, std::string data) {
  return WithErrorData(MakeError(ErrorType::kApplicationError, message), data);
}

absl::Status WithErrorData(absl::Status status, const std::string& data) {
  if (status.ok() || data.empty()) return status;
  status.SetPayload(kErrorDataPayloadUrl, absl::Cord(data));
  return status;
}

absl::Status MarkRetryable(absl::Status status) {
  if (!status.ok()) status.SetPayload(kRetryablePayload, absl::Cord("1"));
  return status;
}

bool IsMarkedRetryable(const absl::Status& status) { return status.GetPayload(kRetryablePayload).has_value(); }

std::optional<std::string> ErrorData(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorDataPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace manta::core
