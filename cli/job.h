// `manta job`: submit, status, logs, stop, list and delete jobs through the
// dashboard's Jobs REST API, like `ray job`.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/session.h"

namespace manta::cli {

struct JobCommonOptions {
  std::string address;  // the dashboard, http://HOST:PORT (see ResolveDashboardUrl)
  std::string temp_dir = kDefaultTempDir;
};

struct JobSubmitOptions {
  JobCommonOptions common;
  std::string submission_id;
  std::string working_dir;       // packed and uploaded
  std::string runtime_env_json;  // {"working_dir": ..., "env_vars": {...}}
  std::optional<double> entrypoint_num_cpus;
  std::optional<double> entrypoint_num_gpus;
  std::optional<double> entrypoint_memory;
  std::string entrypoint_resources;  // JSON object of quantities
  std::string metadata_json;         // JSON object of strings
  bool no_wait = false;
  std::vector<std::string> entrypoint;
};

// Submits; without no_wait follows the logs until the job ends. Returns the
// exit code: 0 when the job succeeded (or was submitted with no_wait), 1 when
// it failed or was stopped. Errors for bad flags and unreachable servers.
absl::StatusOr<int> RunJobSubmit(const JobSubmitOptions& options, std::ostream& out);

absl::Status RunJobStatus(const JobCommonOptions& options, const std::string& id, std::ostream& out);
absl::Status RunJobLogs(const JobCommonOptions& options, const std::string& id, bool follow, std::ostream& out);
absl::Status RunJobStop(const JobCommonOptions& options, const std::string& id, bool no_wait, std::ostream& out);
absl::Status RunJobList(const JobCommonOptions& options, std::ostream& out);
absl::Status RunJobDelete(const JobCommonOptions& options, const std::string& id, std::ostream& out);

// Joins argv words into one /bin/sh command line, quoting words that the
// shell would otherwise split or expand.
std::string ShellJoin(const std::vector<std::string>& words);

// The program that /bin/sh runs for the command line `command`: its first
// word after any NAME=value assignments, with quotes and backslashes removed.
// Empty when there is none or when the shell would expand it (an unquoted
// `$`, backquote, `*`, `?`, `[` or leading `~`, or `$` inside double quotes).
std::string EntrypointProgram(const std::string& command);

// The path relative to `working_dir` of the file the entrypoint `command`
// runs, when that program is a relative path holding a '/' (a bare name is
// looked up in PATH) that stays inside `working_dir` and names a regular
// file there; nullopt otherwise. `sh -c '...'` gives nullopt.
std::optional<std::string> EntrypointFileInDir(const std::string& working_dir, const std::string& command);

}  // namespace manta::cli
