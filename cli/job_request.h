// The body of POST /api/jobs/ for `manta job submit`, built from its flags.
// Everything the dashboard would refuse, or that JSON cannot carry (bytes
// that are not UTF-8, NaN, infinities), is refused here with an error that
// names the flag, before any request is sent.
//
//   ASSIGN_OR_RETURN(SubmitRequest request, BuildSubmitRequest(options));
//   request.body["runtime_env"] = request.runtime_env;
//   ASSIGN_OR_RETURN(std::string id, client.Submit(request.body));
#pragma once

#include "absl/status/statusor.h"
#include "cli/job.h"
#include "nlohmann/json.hpp"

namespace manta::cli {

struct SubmitRequest {
  // entrypoint, submission_id, metadata and the entrypoint_* fields as given.
  nlohmann::json body;
  // --runtime-env-json, or {} without it; the caller adds the working dir.
  nlohmann::json runtime_env = nlohmann::json::object();
};

// InvalidArgument, naming the flag, for: no entrypoint; an entrypoint word
// that is not UTF-8; an invalid --submission-id; a JSON flag that is not
// UTF-8, not JSON or not an object; --entrypoint-num-cpus, -num-gpus or
// -memory, or an --entrypoint-resources value, that is not a number or is
// NaN, infinite, negative, above the quantity maximum or below its
// resolution.
absl::StatusOr<SubmitRequest> BuildSubmitRequest(const JobSubmitOptions& options);

}  // namespace manta::cli
