// Validation of what reaches the dashboard from outside: the names that end
// up in file paths or GCS keys (submission ids and package names) and the
// entrypoint's resource quantities. Everything here is a pure function, safe
// from any thread.
//
//   std::string id = NewSubmissionId();            // "mantasubmit_7kDq2x..."
//   RETURN_IF_ERROR(ValidateSubmissionId(id));
//   ASSIGN_OR_RETURN(std::string name, PackageNameFromUri("gcs://_manta_pkg_ab12.tar"));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace manta::dashboard {

inline constexpr char kSubmissionIdPrefix[] = "mantasubmit_";
// The 16 random characters of a generated id come from this alphabet: letters
// and digits without the look-alikes I, l, o, O and 0.
inline constexpr char kSubmissionIdAlphabet[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz";
inline constexpr size_t kSubmissionIdRandomChars = 16;
inline constexpr size_t kMaxSubmissionIdLength = 128;

// "mantasubmit_" + 16 characters of kSubmissionIdAlphabet from the kernel's
// random source.
std::string NewSubmissionId();

// A submission id names a GCS key and a log file, so it is a file name: 1 to
// 128 characters of [A-Za-z0-9._-], starting with a letter, digit or '_'
// (never "." or ".."). InvalidArgument, naming the id, otherwise.
absl::Status ValidateSubmissionId(std::string_view id);

// Package names ("_manta_pkg_<hex>.tar") as uploaded with
// PUT /api/packages/gcs/<name>: 1 to 128 characters of [A-Za-z0-9._-],
// starting with a letter, digit or '_', ending in ".tar" or ".tar.gz".
absl::Status ValidatePackageName(std::string_view name);

// The package name of a runtime_env working_dir URI "gcs://<name>";
// InvalidArgument for any other scheme or an invalid name.
absl::StatusOr<std::string> PackageNameFromUri(std::string_view uri);

// Checks a quantity of entrypoint resources (entrypoint_num_cpus,
// entrypoint_num_gpus, entrypoint_memory, an entrypoint_resources value)
// named `field`: InvalidArgument, naming the field, for NaN, infinities,
// negatives, values above the quantity maximum and positive values below
// its resolution (ResourceSet rules).
absl::Status ValidateEntrypointQuantity(std::string_view field, double value);

// The file name of a job's log under <session>/logs/ for a valid id.
std::string JobLogFileName(std::string_view submission_id);

}  // namespace manta::dashboard
