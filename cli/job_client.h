// JobClient: a client of the dashboard's Jobs REST API (dashboard/jobs_api.h)
// for `manta job` and the tests. Blocking calls over HTTP with timeouts; one
// client per thread.
//
//   JobClient client("http://127.0.0.1:8265", token);
//   ASSIGN_OR_RETURN(std::string id, client.Submit({{"entrypoint", "echo hi"}}));
//   ASSIGN_OR_RETURN(nlohmann::json job, client.GetJob(id));
//
// Errors carry the server's message: InvalidArgument (400), Unauthenticated
// (401), PermissionDenied (403), NotFound (404), ResourceExhausted (413),
// Unavailable (503, or the dashboard cannot be reached), Internal otherwise.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace manta::cli {

class JobClient {
 public:
  // `url`: "http://HOST:PORT". `token` empty: no Authorization header.
  JobClient(std::string url, std::string token);
  ~JobClient();

  const std::string& url() const { return url_; }

  absl::StatusOr<nlohmann::json> Version();
  // POST /api/jobs/ with `request` (a JobSubmitRequest); the submission id.
  // InvalidArgument, sending nothing, when `request` holds invalid UTF-8.
  absl::StatusOr<std::string> Submit(const nlohmann::json& request);
  absl::StatusOr<nlohmann::json> GetJob(const std::string& id);
  absl::StatusOr<nlohmann::json> ListJobs();
  absl::StatusOr<bool> StopJob(const std::string& id);
  absl::Status DeleteJob(const std::string& id);
  absl::StatusOr<std::string> GetLogs(const std::string& id);
  // Follows the log (GET .../logs/tail): `on_data` gets each new piece until
  // the job has ended and all its output was delivered (OK), or returns
  // false to stop early (Cancelled).
  absl::Status TailLogs(const std::string& id, const std::function<bool(std::string_view)>& on_data);
  absl::StatusOr<bool> PackageExists(const std::string& name);
  absl::Status UploadPackage(const std::string& name, const std::string& data);

 private:
  std::string url_;
  std::string token_;
};

// Where `manta job` finds the dashboard: `flag` when set, else
// $MANTA_DASHBOARD_ADDRESS, else $MANTA_ADDRESS when it is an http(s) URL,
// else the dashboard_address file of <temp_dir>/session_latest. NotFound with
// a hint otherwise. A bare HOST:PORT gets "http://".
absl::StatusOr<std::string> ResolveDashboardUrl(const std::string& flag, const std::string& temp_dir);

// $MANTA_TOKEN, else the token of the local session when `url` is its
// dashboard; empty when neither applies (the server will say 401).
absl::StatusOr<std::string> ResolveDashboardToken(const std::string& url, const std::string& temp_dir);

}  // namespace manta::cli
