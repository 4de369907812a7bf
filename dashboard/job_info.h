// The Jobs API data model, wire-compatible with Ray's job submission REST
// API: the body of POST /api/jobs/ (JobSubmitRequest) and the job record
// (JobDetails) that GET /api/jobs/{id} returns and the GCS stores.
//
//   ASSIGN_OR_RETURN(JobSubmitRequest req, ParseSubmitRequest(http_body));
//   JobRecord job = NewJobRecord(req, submission_id, now_ms);
//   std::string stored = ToStoredJson(job);       // GCS internal KV value
//   nlohmann::json details = ToApiJson(job);      // what clients see
//
// Plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace manta::dashboard {

enum class JobStatus { kPending, kRunning, kStopped, kSucceeded, kFailed };

// "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED".
const char* JobStatusName(JobStatus status);
std::optional<JobStatus> ParseJobStatus(std::string_view name);
inline bool IsTerminal(JobStatus s) {
  return s == JobStatus::kStopped || s == JobStatus::kSucceeded || s == JobStatus::kFailed;
}

// A validated POST /api/jobs/ body.
struct JobSubmitRequest {
  std::string entrypoint;
  std::string submission_id;  // empty: the server picks one
  // As given (only working_dir and env_vars are accepted); echoed in JobDetails.
  nlohmann::json runtime_env = nlohmann::json::object();
  std::string working_dir_package;  // from runtime_env.working_dir "gcs://<name>"; empty if none
  std::map<std::string, std::string> env_vars;
  std::map<std::string, std::string> metadata;
  std::optional<double> entrypoint_num_cpus;
  std::optional<double> entrypoint_num_gpus;
  std::optional<double> entrypoint_memory;
  std::map<std::string, double> entrypoint_resources;
};

// Parses and validates a submit body. InvalidArgument with a message fit for
// the HTTP client: not JSON, not an object, unknown or mistyped fields, an
// empty entrypoint, an invalid submission id, unsupported runtime_env fields,
// env var names that are not identifiers, or quantities that are NaN,
// infinite, negative or too fine (ResourceSet rules).
absl::StatusOr<JobSubmitRequest> ParseSubmitRequest(std::string_view body);

// The resources the entrypoint asks for, as a ResourceSet map: CPU, GPU,
// memory and the custom entries.
std::map<std::string, double> EntrypointResourceMap(const JobSubmitRequest& req);

// One job as stored in the GCS (namespace "job", key = submission id).
struct JobRecord {
  std::string submission_id;
  std::string entrypoint;
  JobStatus status = JobStatus::kPending;
  std::string message;
  std::string error_type;  // empty: none
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;  // 0 until terminal
  std::map<std::string, std::string> metadata;
  nlohmann::json runtime_env = nlohmann::json::object();
  std::string working_dir_package;
  std::map<std::string, std::string> env_vars;
  std::optional<double> entrypoint_num_cpus;
  std::optional<double> entrypoint_num_gpus;
  std::optional<double> entrypoint_memory;
  std::map<std::string, double> entrypoint_resources;
  std::optional<int> driver_exit_code;
  std::string driver_node_ip;
  // The job runner: leader of the job's process group. 0 before it starts.
  int runner_pid = 0;
  // Its start time in clock ticks since boot (/proc/<pid>/stat field 22), so
  // a reused pid is never mistaken for it.
  uint64_t runner_start_ticks = 0;
  // Which dashboard process started the runner.
  int supervisor_pid = 0;
  bool stop_requested = false;
  // With stop_requested: the dashboard's shutdown stopped the job, not a
  // user, and the message says so.
  bool stopped_by_shutdown = false;
};

JobRecord NewJobRecord(const JobSubmitRequest& req, const std::string& submission_id, int64_t now_ms);

// Ray's JobDetails: type, job_id, submission_id, driver_info, status,
// entrypoint, message, error_type, start_time, end_time, metadata,
// runtime_env, driver_exit_code, entrypoint_* fields.
nlohmann::json ToApiJson(const JobRecord& job);

// The stored form: the API fields plus the supervisor's own. Errors only for
// data that is not a job record written by us.
std::string ToStoredJson(const JobRecord& job);
absl::StatusOr<JobRecord> FromStoredJson(std::string_view text);

// Serializes JSON for HTTP and storage: invalid UTF-8 (from a job's log, say)
// is replaced, never thrown.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

}  // namespace manta::dashboard
