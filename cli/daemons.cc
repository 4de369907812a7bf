#include "cli/daemons.h"

#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/process.h"

namespace manta::cli {
namespace {

std::string StripLoggerPrefix(std::string line) {
  for (int i = 0; i < 5 && !line.empty() && line[0] == '['; ++i) {
    size_t end = line.find("] ");
    if (end == std::string::npos) break;
    line = line.substr(end + 2);
  }
  return line;
}

}  // namespace

absl::StatusOr<std::string> DaemonBinDir() {
  std::string dir;
  if (const char* env = std::getenv("MANTA_BIN_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return absl::InternalError("cannot find the manta executable's directory");
    std::string self(buf, static_cast<size_t>(n));
    dir = self.substr(0, self.rfind('/'));
  }
  for (const char* program : {kGcsServer, kRaylet}) {
    std::string path = dir + "/" + program;
    if (access(path.c_str(), X_OK) != 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot find ", path, " (set MANTA_BIN_DIR to the directory of ", "gcs_server and raylet)"));
    }
  }
  return dir;
}

Daemon DaemonFiles(const SessionPaths& session, const std::string& name, const std::string& program) {
  Daemon d;
  d.name = name;
  d.program = program;
  d.pid_file = absl::StrCat(session.pids(), "/", name, ".pid");
  d.ready_file = absl::StrCat(session.ready(), "/", name, ".json");
  d.out_file = absl::StrCat(session.logs(), "/", name, ".out");
  d.log_file = absl::StrCat(session.logs(), "/", name, ".log");
  return d;
}

std::string NewRayletName() {
  char bytes[4];
  FillRandom(bytes, sizeof(bytes));
  return absl::StrCat(kRaylet, "_", ToHex(std::string_view(bytes, sizeof(bytes))));
}

std::string LastDaemonLine(const Daemon& d) {
  std::string line = TailFile(d.out_file, 1);
  if (line.empty()) line = TailFile(d.log_file, 1);
  return StripLoggerPrefix(line);
}

absl::StatusOr<Daemon> LaunchDaemon(const std::string& bin_dir, Daemon d, const std::vector<std::string>& args,
                                    absl::Duration ready_timeout) {
  unlink(d.ready_file.c_str());
  SpawnOptions options;
  options.executable = bin_dir + "/" + d.program;
  options.args = args;
  options.args.push_back("--ready_file=" + d.ready_file);
  options.args.push_back("--log_file=" + d.log_file);
  options.log_file = d.out_file;
  auto pid = SpawnDaemon(options);
  if (!pid.ok()) {
    return absl::Status(pid.status().code(), absl::StrCat(d.program, " failed to start: ", pid.status().message()));
  }
  d.pid = *pid;
  auto failed = [&](const std::string& why) {
    TerminateProcess(d.pid, absl::Now() + absl::Seconds(2)).IgnoreError();
    unlink(d.pid_file.c_str());
    unlink(d.ready_file.c_str());
    return absl::UnavailableError(absl::StrCat(d.program, " failed to start: ", why));
  };
  if (auto s = WritePidFile(d.pid_file, d.pid); !s.ok()) return failed(std::string(s.message()));
  auto ready = WaitForFile(d.ready_file, absl::Now() + ready_timeout, d.pid);
  if (!ready.ok()) {
    std::string line = LastDaemonLine(d);
    if (ready.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return failed(absl::StrCat("not ready after ", absl::FormatDuration(ready_timeout),
                                 line.empty() ? "" : "; last output: ", line));
    }
    std::string how = "exited";
    if (auto st = ExitStatusOf(d.pid)) how = DescribeWaitStatus(*st);
    return failed(line.empty() ? absl::StrCat("it ", how, " (see ", d.out_file, ")") : line);
  }
  d.ready_json = *ready;
  return d;
}

absl::Status StopDaemon(const Daemon& d, absl::Duration grace) {
  absl::Status s = absl::OkStatus();
  // SIGINT stops a raylet at once, whatever its drain grace (SIGTERM drains).
  int sig = d.program == kRaylet ? SIGINT : SIGTERM;
  if (d.pid > 0) s = TerminateProcess(d.pid, absl::Now() + grace, sig);
  if (s.ok()) {
    unlink(d.pid_file.c_str());
    unlink(d.ready_file.c_str());
  }
  return s;
}

}  // namespace manta::cli
