// The job runner: the process that runs one job's entrypoint. The dashboard
// starts `job_runner` in a new session (so its pid is the job's process
// group id) with its output appended to the job's log; the runner ignores
// SIGTERM/SIGINT/SIGHUP, runs `/bin/sh -c <entrypoint>` in the job's working
// directory with default signal handling, waits for it, writes the wait
// status to the exit file (atomically), and then SIGKILLs its own process
// group so no process of the job outlives it. Because the exit file survives
// the dashboard, a restarted dashboard still learns how a job ended.
//
// These helpers are what the supervisor uses to start and watch runners.
// Blocking but short (fork/exec, /proc reads); safe from any thread.
//
//   ASSIGN_OR_RETURN(Runner r, StartRunner(spec));
//   if (RunnerGone(r)) { auto status = ReadExitFile(spec.exit_file); ... }
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::dashboard {

struct RunnerSpec {
  std::string runner_path;  // the job_runner executable
  std::string entrypoint;   // given to /bin/sh -c
  std::string cwd;
  std::string log_file;   // stdout and stderr are appended here
  std::string exit_file;  // where the runner writes the wait status
  std::vector<std::pair<std::string, std::string>> env;
};

struct Runner {
  pid_t pid = 0;             // also the job's process group id
  uint64_t start_ticks = 0;  // /proc/<pid>/stat starttime
};

// Spawns the runner in a new session. Errors from SpawnDaemon.
absl::StatusOr<Runner> StartRunner(const RunnerSpec& spec);

// The start time of `pid` in clock ticks since boot; nullopt when it has
// exited (a zombie with no thread left, or no process at all).
std::optional<uint64_t> ProcessStartTicks(pid_t pid);

// True once the runner has exited: reaps it when it is this process's child,
// else checks that no live process has its pid and start time.
bool RunnerGone(const Runner& runner);

// Sends `sig` to the runner's process group while the runner (identified by
// pid and start time) is alive; NotFound otherwise.
absl::Status SignalRunnerGroup(const Runner& runner, int sig);

// Sends SIGKILL to what is left of the group of a runner just found gone.
// Its stragglers keep the group id reserved; once they have exited, the id
// may be another group's, so the caller sends this once, and not when the
// runner's pid already belongs to another process.
void KillLeftovers(const Runner& runner);

// The wait status the runner recorded; nullopt when it wrote none.
std::optional<int> ReadExitFile(const std::string& path);

// "exit code 3" / "signal 15 (SIGTERM)".
std::string DescribeExit(int wait_status);

// Entry point of the job_runner binary: job_runner EXIT_FILE CWD ENTRYPOINT.
int JobRunnerMain(int argc, char** argv);

}  // namespace manta::dashboard
