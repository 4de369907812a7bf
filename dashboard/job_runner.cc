#include "dashboard/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/process.h"

namespace manta::dashboard {

absl::StatusOr<Runner> StartRunner(const RunnerSpec& spec) {
  SpawnOptions options;
  options.executable = spec.runner_path;
  options.args = {spec.exit_file, spec.cwd, spec.entrypoint};
  options.log_file = spec.log_file;
  options.env = spec.env;
  options.new_session = true;
  auto pid = SpawnDaemon(options);
  if (!pid.ok()) return pid.status();
  Runner r;
  r.pid = *pid;
  r.start_ticks = ProcessStartTicks(*pid).value_or(0);
  return r;
}

std::optional<uint64_t> ProcessStartTicks(pid_t pid) {
  auto live = ReadLiveProcess(pid);
  if (!live) return std::nullopt;
  return live->start_ticks;
}

bool RunnerGone(const Runner& runner) {
  int status = 0;
  pid_t r = waitpid(runner.pid, &status, WNOHANG);
  if (r == runner.pid) return true;
  if (r == 0) return false;  // our child, still running
  auto ticks = ProcessStartTicks(runner.pid);
  return !ticks.has_value() || (runner.start_ticks != 0 && *ticks != runner.start_ticks);
}

absl::Status SignalRunnerGroup(const Runner& runner, int sig) {
  auto ticks = ProcessStartTicks(runner.pid);
  if (!ticks || (runner.start_ticks != 0 && *ticks != runner.start_ticks)) {
    return absl::NotFoundError(absl::StrCat("job runner ", runner.pid, " is gone"));
  }
  if (killpg(runner.pid, sig) != 0)
    return absl::NotFoundError(absl::StrCat("killpg ", runner.pid, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

void KillLeftovers(const Runner& runner) {
  if (runner.pid > 1) killpg(runner.pid, SIGKILL);
}

std::optional<int> ReadExitFile(const std::string& path) {
  auto text = ReadFile(path);
  int status = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &status)) return std::nullopt;
  return status;
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exit code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(sig);
    return absl::StrCat("signal ", sig, name ? absl::StrCat(" (SIG", name, ")") : "");
  }
  return absl::StrCat("wait status ", wait_status);
}

int JobRunnerMain(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: job_runner EXIT_FILE CWD ENTRYPOINT\n");
    return 2;
  }
  std::string exit_file = argv[1];
  std::string cwd = argv[2];
  const char* entrypoint = argv[3];
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_IGN);
  if (chdir(cwd.c_str()) != 0) {
    std::fprintf(stderr, "job_runner: cannot enter working directory %s: %s\n", cwd.c_str(), std::strerror(errno));
    (void)WriteFileAtomic(exit_file, absl::StrCat(127 << 8, "\n"));
    return 127;
  }
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "job_runner: fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
    execl("/bin/sh", "sh", "-c", entrypoint, static_cast<char*>(nullptr));
    std::fprintf(stderr, "job_runner: cannot run /bin/sh: %s\n", std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::fflush(stdout);
  if (auto s = WriteFileAtomic(exit_file, absl::StrCat(status, "\n")); !s.ok()) {
    std::fprintf(stderr, "job_runner: %s\n", std::string(s.message()).c_str());
  }
  // Nothing the entrypoint started in this group may outlive the job.
  signal(SIGTERM, SIG_DFL);
  kill(0, SIGKILL);
  return 0;
}

}  // namespace manta::dashboard
