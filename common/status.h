// Status helpers shared by every component.
//
//   absl::Status Load(const std::string& path) {
//     RETURN_IF_ERROR(CheckPath(path));
//     ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     ...
//   }
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MANTA_STATUS_CONCAT_INNER_(a, b) a##b
#define MANTA_STATUS_CONCAT_(a, b) MANTA_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status manta_status_ = (expr);         \
    if (!manta_status_.ok()) return manta_status_; \
  } while (0)

// `lhs` = value of the StatusOr `expr`, or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL_(MANTA_STATUS_CONCAT_(manta_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

namespace manta {

// Prefixes a status message with context, keeping its code.
inline absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), std::string(context) + ": " + std::string(s.message()));
}

}  // namespace manta
