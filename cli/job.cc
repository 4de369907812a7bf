#include "cli/job.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/job_client.h"
#include "cli/job_request.h"
#include "common/status.h"
#include "common/utf8.h"
#include "dashboard/tar_writer.h"
#include "state/list_format.h"

namespace manta::cli {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxWorkingDirBytes = 100ull << 20;

bool IsTerminalStatus(const std::string& s) { return s == "SUCCEEDED" || s == "FAILED" || s == "STOPPED"; }

absl::StatusOr<JobClient> Connect(const JobCommonOptions& o) {
  ASSIGN_OR_RETURN(std::string url, ResolveDashboardUrl(o.address, o.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveDashboardToken(url, o.temp_dir));
  return JobClient(url, token);
}

std::string Frame(const std::string& line) {
  std::string dashes(line.size(), '-');
  return absl::StrCat(dashes, "\n", line, "\n", dashes, "\n");
}

// Packs `dir` without what its ignore files exclude, but with `entrypoint`
// (a path inside `dir`, or empty), and uploads it unless the dashboard has it;
// the package URI.
absl::StatusOr<std::string> UploadWorkingDir(JobClient& client, const std::string& dir,
                                             const std::optional<std::string>& entrypoint, std::ostream& out) {
  dashboard::PackOptions options;
  if (entrypoint) options.always_include.push_back(*entrypoint);
  ASSIGN_OR_RETURN(dashboard::PackedDirectory packed,
                   dashboard::PackDirectoryWithReport(dir, kMaxWorkingDirBytes, options));
  for (const dashboard::PackedDirectory::Forced& f : packed.forced) {
    out << "Packing " << f.path << " although "
        << (f.ignored_by == ".git" ? std::string(".git/ is never packed") : f.ignored_by + " excludes it")
        << " (it is the entrypoint)\n";
  }
  std::string archive = std::move(packed.archive);
  std::string name = dashboard::PackageName(archive);
  ASSIGN_OR_RETURN(bool exists, client.PackageExists(name));
  if (!exists) {
    out << "Uploading working directory " << dir << " (" << archive.size() << " bytes) as gcs://" << name << "\n";
    RETURN_IF_ERROR(client.UploadPackage(name, archive));
  }
  return "gcs://" + name;
}

// Follows the logs to `out` until the job ends; survives a dropped stream by
// polling the status and printing the rest of the log.
absl::Status FollowLogs(JobClient& client, const std::string& id, std::ostream& out) {
  size_t printed = 0;
  absl::Status s = client.TailLogs(id, [&](std::string_view data) {
    out << data;
    out.flush();
    printed += data.size();
    return true;
  });
  if (s.ok()) return s;
  while (true) {
    ASSIGN_OR_RETURN(json job, client.GetJob(id));
    if (IsTerminalStatus(job.value("status", ""))) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSIGN_OR_RETURN(std::string logs, client.GetLogs(id));
  if (logs.size() > printed) out << logs.substr(printed);
  return absl::OkStatus();
}

// While the job is PENDING (waiting for its entrypoint resources or for the
// GCS), says so: whenever the reason changes, and every 10 s.
absl::Status ShowPending(JobClient& client, const std::string& id, std::ostream& out) {
  const absl::Time start = absl::Now();
  absl::Time shown_at = absl::InfinitePast();
  std::string shown = "\n";  // no reason looks like this
  while (true) {
    ASSIGN_OR_RETURN(json job, client.GetJob(id));
    if (job.value("status", "") != "PENDING") return absl::OkStatus();
    const std::string why = job["message"].is_string() ? job["message"].get<std::string>() : "";
    const absl::Time now = absl::Now();
    if (why != shown || now - shown_at >= absl::Seconds(10)) {
      out << "Job '" << id << "' is PENDING";
      if (now - start >= absl::Seconds(1)) out << " (" << absl::ToInt64Seconds(now - start) << " s)";
      out << (why.empty() ? "" : ": " + why) << "\n";
      out.flush();
      shown = why;
      shown_at = now;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
}

}  // namespace

std::string EntrypointProgram(const std::string& command) {
  size_t i = 0;
  const size_t n = command.size();
  while (true) {
    while (i < n && std::isspace(static_cast<unsigned char>(command[i]))) ++i;
    size_t start = i;
    std::string word;
    for (; i < n; ++i) {
      char c = command[i];
      if (std::isspace(static_cast<unsigned char>(c)) || std::string_view(";&|<>()").find(c) != std::string_view::npos)
        break;
      if (c == '\'') {
        size_t close = command.find('\'', i + 1);
        if (close == std::string::npos) return "";
        word.append(command, i + 1, close - i - 1);
        i = close;
      } else if (c == '"') {
        for (++i; i < n && command[i] != '"'; ++i) {
          if (command[i] == '$' || command[i] == '`') return "";
          if (command[i] == '\\' && i + 1 < n &&
              std::string_view("\\\"").find(command[i + 1]) != std::string_view::npos)
            ++i;
          word += command[i];
        }
        if (i == n) return "";
      } else if (c == '\\') {
        if (++i < n) word += command[i];
      } else if (std::string_view("$`*?[").find(c) != std::string_view::npos || (c == '~' && i == start)) {
        return "";
      } else {
        word += c;
      }
    }
    // NAME=value before the program is an assignment, not the program.
    size_t eq = command.find('=', start);
    bool assignment =
        eq != std::string::npos && eq < i && eq > start && !std::isdigit(static_cast<unsigned char>(command[start]));
    for (size_t k = start; assignment && k < eq; ++k) {
      assignment = std::isalnum(static_cast<unsigned char>(command[k])) || command[k] == '_';
    }
    if (!assignment) return word;
  }
}

std::optional<std::string> EntrypointFileInDir(const std::string& working_dir, const std::string& command) {
  std::string program = EntrypointProgram(command);
  if (program.empty() || program[0] == '/' || program.find('/') == std::string::npos) return std::nullopt;
  std::string relative;
  for (absl::string_view part : absl::StrSplit(program, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return std::nullopt;
    absl::StrAppend(&relative, relative.empty() ? "" : "/", part);
  }
  struct stat st;
  if (relative.empty() || lstat((working_dir + "/" + relative).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  return relative;
}

absl::StatusOr<int> RunJobSubmit(const JobSubmitOptions& o, std::ostream& out) {
  ASSIGN_OR_RETURN(SubmitRequest built, BuildSubmitRequest(o));
  json& request = built.body;
  json& runtime_env = built.runtime_env;

  ASSIGN_OR_RETURN(JobClient client, Connect(o.common));
  out << "Job submission server address: " << client.url() << "\n";
  std::string working_dir = o.working_dir;
  if (working_dir.empty() && runtime_env.contains("working_dir") && runtime_env["working_dir"].is_string()) {
    std::string given = runtime_env["working_dir"].get<std::string>();
    if (given.rfind("gcs://", 0) != 0) working_dir = given;
  }
  if (!working_dir.empty()) {
    std::optional<std::string> program = EntrypointFileInDir(working_dir, request["entrypoint"].get<std::string>());
    ASSIGN_OR_RETURN(runtime_env["working_dir"], UploadWorkingDir(client, working_dir, program, out));
  }
  request["runtime_env"] = runtime_env;
  ASSIGN_OR_RETURN(std::string id, client.Submit(request));

  out << "\n"
      << Frame("Job '" + id + "' submitted successfully") << "\n"
      << "Next steps\n"
      << "  Query the logs of the job:\n    manta job logs " << id << "\n"
      << "  Query the status of the job:\n    manta job status " << id << "\n"
      << "  Request the job to be stopped:\n    manta job stop " << id << "\n\n";
  if (o.no_wait) return 0;
  RETURN_IF_ERROR(ShowPending(client, id, out));
  out << "Tailing logs until the job exits (disable with --no-wait):\n";
  out.flush();
  RETURN_IF_ERROR(FollowLogs(client, id, out));
  ASSIGN_OR_RETURN(json job, client.GetJob(id));
  std::string status = job.value("status", "");
  out << "\n";
  if (status == "SUCCEEDED") {
    out << Frame("Job '" + id + "' succeeded");
    return 0;
  }
  if (status == "STOPPED") {
    out << Frame("Job '" + id + "' was stopped");
    return 1;
  }
  out << Frame("Job '" + id + "' failed");
  if (job["message"].is_string()) out << "Status message: " << job["message"].get<std::string>() << "\n";
  return 1;
}

absl::Status RunJobStatus(const JobCommonOptions& o, const std::string& id, std::ostream& out) {
  ASSIGN_OR_RETURN(JobClient client, Connect(o));
  ASSIGN_OR_RETURN(json job, client.GetJob(id));
  out << "Status for job '" << id << "': " << job.value("status", "?") << "\n";
  if (job["message"].is_string()) out << "Status message: " << job["message"].get<std::string>() << "\n";
  return absl::OkStatus();
}

absl::Status RunJobLogs(const JobCommonOptions& o, const std::string& id, bool follow, std::ostream& out) {
  ASSIGN_OR_RETURN(JobClient client, Connect(o));
  if (follow) return FollowLogs(client, id, out);
  ASSIGN_OR_RETURN(std::string logs, client.GetLogs(id));
  out << logs;
  return absl::OkStatus();
}

absl::Status RunJobStop(const JobCommonOptions& o, const std::string& id, bool no_wait, std::ostream& out) {
  ASSIGN_OR_RETURN(JobClient client, Connect(o));
  out << "Attempting to stop job '" << id << "'\n";
  ASSIGN_OR_RETURN(bool stopped, client.StopJob(id));
  if (!stopped) {
    ASSIGN_OR_RETURN(json job, client.GetJob(id));
    out << "Job '" << id << "' has already ended: " << job.value("status", "?") << "\n";
    return absl::OkStatus();
  }
  if (no_wait) return absl::OkStatus();
  out << "Waiting for job '" << id << "' to exit (disable with --no-wait):\n";
  out.flush();
  absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (absl::Now() < deadline) {
    ASSIGN_OR_RETURN(json job, client.GetJob(id));
    std::string status = job.value("status", "");
    if (IsTerminalStatus(status)) {
      out << "Job '" << id << "' " << (status == "STOPPED" ? "was stopped" : "ended: " + status) << "\n";
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(absl::StrCat("job ", id, " has not exited after 5 minutes"));
}

absl::Status RunJobList(const JobCommonOptions& o, std::ostream& out) {
  ASSIGN_OR_RETURN(JobClient client, Connect(o));
  ASSIGN_OR_RETURN(json jobs, client.ListJobs());
  out << state::FormatJobList(jobs, absl::LocalTimeZone());
  return absl::OkStatus();
}

absl::Status RunJobDelete(const JobCommonOptions& o, const std::string& id, std::ostream& out) {
  ASSIGN_OR_RETURN(JobClient client, Connect(o));
  RETURN_IF_ERROR(client.DeleteJob(id));
  out << "Job '" << id << "' deleted successfully\n";
  return absl::OkStatus();
}

}  // namespace manta::cli
