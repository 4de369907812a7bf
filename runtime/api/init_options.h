// How manta::Init turns argv, the environment and the session directory into
// CoreWorkerOptions. Separate from init.cc so it can be tested without a
// cluster.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "manta/api.h"
#include "manta/internal/core_worker.h"

namespace manta::internal {

inline constexpr char kAddressEnv[] = "MANTA_ADDRESS";
inline constexpr char kTokenEnv[] = "MANTA_TOKEN";
inline constexpr char kNodeIpEnv[] = "MANTA_NODE_IP";

struct InitArgs {
  InitOptions options;                     // address and temp_dir from the flags
  std::vector<std::string> original_args;  // argv[1..] as given, flags included
};

// Reads --address and --temp-dir ("--flag=value" or "--flag value") and
// removes them from argv, keeping the order of the rest; argc is updated and
// argv[argc] set to null. InvalidArgument when a flag lacks its value.
absl::StatusOr<InitArgs> ParseInitArgs(int& argc, char** argv);

// `flag` when set, else $MANTA_ADDRESS, else the gcs_address file of
// <temp_dir>/session_latest. NotFound, saying what was tried, when none.
absl::StatusOr<std::string> ResolveGcsAddress(const std::string& flag, const std::string& temp_dir);

// The driver's options: the GCS address as above; the token from
// $MANTA_TOKEN, else the session's token file when session_latest belongs to
// that address (never another cluster's token); the session directory when
// it belongs to that address; worker_executable defaults to /proc/self/exe;
// the address the driver serves on and finds its local raylet by is
// $MANTA_NODE_IP when set (a host whose raylet is not on 127.0.0.1).
// The runtime env is the options', over the one in $MANTA_RUNTIME_ENV (set
// by the Jobs API, common/runtime_env_json.h) field by field and variable by
// variable.
// Errors: no cluster found (NotFound), a malformed token or
// $MANTA_RUNTIME_ENV (InvalidArgument), a token file readable by others
// (FailedPrecondition).
absl::StatusOr<core::CoreWorkerOptions> ResolveDriverOptions(const InitOptions& options);

}  // namespace manta::internal
