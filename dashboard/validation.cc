#include "dashboard/validation.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/resources.h"
#include "common/utf8.h"

namespace manta::dashboard {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

absl::Status ValidateFileName(const char* what, std::string_view name, size_t max_length) {
  if (name.empty() || name.size() > max_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " '", PrintableAscii(name, 80), "': must be 1 to ", max_length, " characters"));
  }
  char first = name[0];
  if (first == '.' || first == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " '", PrintableAscii(name, 80), "': must start with a letter, a digit or '_'"));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid ", what, " '", PrintableAscii(name, 80),
                                                     "': only letters, digits, '_', '-' and '.' are allowed"));
    }
  }
  return absl::OkStatus();
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string NewSubmissionId() {
  constexpr size_t kAlphabetSize = sizeof(kSubmissionIdAlphabet) - 1;
  // Rejection sampling keeps every character equally likely.
  constexpr unsigned kLimit = 256 - 256 % kAlphabetSize;
  std::string id = kSubmissionIdPrefix;
  while (id.size() < sizeof(kSubmissionIdPrefix) - 1 + kSubmissionIdRandomChars) {
    uint8_t bytes[32];
    FillRandom(bytes, sizeof(bytes));
    for (uint8_t b : bytes) {
      if (b >= kLimit) continue;
      id += kSubmissionIdAlphabet[b % kAlphabetSize];
      if (id.size() == sizeof(kSubmissionIdPrefix) - 1 + kSubmissionIdRandomChars) break;
    }
  }
  return id;
}

absl::Status ValidateSubmissionId(std::string_view id) {
  return ValidateFileName("submission id", id, kMaxSubmissionIdLength);
}

absl::Status ValidatePackageName(std::string_view name) {
  if (auto s = ValidateFileName("package name", name, 128); !s.ok()) return s;
  if (!EndsWith(name, ".tar") && !EndsWith(name, ".tar.gz")) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid package name '", PrintableAscii(name, 80), "': must end in .tar or .tar.gz"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PackageNameFromUri(std::string_view uri) {
  constexpr std::string_view kScheme = "gcs://";
  if (uri.substr(0, kScheme.size()) != kScheme) {
    return absl::InvalidArgumentError(absl::StrCat("runtime_env working_dir '", PrintableAscii(uri, 80),
                                                   "' must be a package URI gcs://<name> uploaded with "
                                                   "PUT /api/packages/gcs/<name>"));
  }
  std::string_view name = uri.substr(kScheme.size());
  if (auto s = ValidatePackageName(name); !s.ok()) return s;
  return std::string(name);
}

absl::Status ValidateEntrypointQuantity(std::string_view field, double value) {
  auto q = Quantity::FromDouble(value);
  if (q.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("'", std::string(field), "': ", q.status().message()));
}

std::string JobLogFileName(std::string_view submission_id) {
  return "job-driver-" + std::string(submission_id) + ".log";
}

}  // namespace manta::dashboard
