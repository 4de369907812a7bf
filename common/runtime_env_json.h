// The runtime env a job supervisor hands its driver: the Jobs API starts a
// job's entrypoint with kRuntimeEnvVar set to
//
//   {"working_dir": "gcs://_manta_pkg_<sha256>.tar.gz", "env_vars": {"NAME": "value"}}
//
// (both keys optional), as Ray hands its drivers the job's config, so the
// driver registers the job with that runtime env and every worker of the
// job gets it. Pure functions; safe from any thread.
//
//   setenv(kRuntimeEnvVar, RuntimeEnvJson({"gcs://" + name, vars}).c_str(), 1);
//   ASSIGN_OR_RETURN(RuntimeEnvSpec env, ParseRuntimeEnvJson(getenv(kRuntimeEnvVar)));
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace manta {

inline constexpr char kRuntimeEnvVar[] = "MANTA_RUNTIME_ENV";

struct RuntimeEnvSpec {
  std::string working_dir;  // a local directory or "gcs://<package name>"; empty: none
  std::map<std::string, std::string> env_vars;
};

std::string RuntimeEnvJson(const RuntimeEnvSpec& env);

// InvalidArgument for text that is not such an object (unknown keys are
// ignored, as later versions may add some).
absl::StatusOr<RuntimeEnvSpec> ParseRuntimeEnvJson(std::string_view text);

}  // namespace manta
