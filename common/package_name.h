// Working-directory packages are stored by content: a package's name is
// "_manta_pkg_" + the SHA-256 of its bytes in hex + ".tar.gz" (".tar" when
// the bytes are not gzipped). The Jobs API keeps uploads under that name,
// and a job's package reaches every node through the GCS internal KV under
// kPackageKvNamespace, key = the name; the GCS refuses a value whose name
// is not its own, and a raylet checks again what it fetched.
//
//   std::string name = PackageNameOf(archive);          // "_manta_pkg_ab12....tar.gz"
//   RETURN_IF_ERROR(CheckPackageContent(name, archive));
//
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace manta {

inline constexpr char kPackageKvNamespace[] = "packages";
// The largest package that travels through the GCS KV: one value, well
// inside a gRPC message (64 MiB).
inline constexpr size_t kMaxKvPackageBytes = 60u << 20;

// The name `archive` is stored under.
std::string PackageNameOf(std::string_view archive);

// OK when `name` has the form PackageNameOf gives ("_manta_pkg_", 64
// lowercase hex digits, ".tar" or ".tar.gz"), so it is safe in a path or a
// key; InvalidArgument otherwise.
absl::Status ValidatePackageRef(std::string_view name);

// OK when `name` is PackageNameOf(data); InvalidArgument naming both
// otherwise.
absl::Status CheckPackageContent(std::string_view name, std::string_view data);

// A front end's exported functions and classes (Python's pickles) are
// stored by content too: in kFunctionKvNamespace under the SHA-256 of their
// bytes in lowercase hex, which the GCS checks on every put.
inline constexpr char kFunctionKvNamespace[] = "manta_fn";
// OK when `name` is the SHA-256 of `data` in lowercase hex; InvalidArgument
// saying so otherwise.
absl::Status CheckFunctionContent(std::string_view name, std::string_view data);

}  // namespace manta
