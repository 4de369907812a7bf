// The job's runtime env as a driver registers it: the working directory
// becomes a package in the GCS KV (packed here from a local directory, or
// named by "gcs://<package name>" when already uploaded), and the variables
// are checked. The KV sits behind two small functions so a test hands in a
// map. Blocking (packing reads the directory; the KV calls wait); called
// once, from the driver's Init.
//
//   PackageKv kv{.exists = ..., .put = ...};
//   ASSIGN_OR_RETURN(rpc::RuntimeEnv env, MakeRuntimeEnv(options.runtime_env_working_dir,
//                                                        options.runtime_env_env_vars, kv));
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "proto/common.pb.h"

namespace manta::core {

struct PackageKv {
  // Whether the GCS KV holds a package of this name.
  std::function<absl::StatusOr<bool>(const std::string& name)> exists;
  // Stores a package under its name (the GCS refuses another name).
  std::function<absl::Status(const std::string& name, const std::string& data)> put;
};

// The largest directory a driver packs (the Jobs API's unpacked limit).
inline constexpr uint64_t kMaxWorkingDirBytes = 100ull << 20;

// Errors: InvalidArgument for a bad variable, a bad "gcs://" name, or a
// directory that cannot be packed safely (a symlink leaving it, say);
// NotFound for a missing directory or a "gcs://" package not in the KV;
// ResourceExhausted for a directory or package over the limits; the KV's
// errors as they come.
absl::StatusOr<rpc::RuntimeEnv> MakeRuntimeEnv(const std::string& working_dir,
                                               const std::map<std::string, std::string>& env_vars, const PackageKv& kv);

}  // namespace manta::core
