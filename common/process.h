// Process control for the CLI and the test harness: spawning daemons,
// signalling and waiting for processes (ours or not), pid files, readiness
// files and free ports. Everything here is blocking and meant for command-line
// tools and tests, never for a daemon's event loop.
//
//   SpawnOptions opts;
//   opts.executable = bin_dir + "/gcs_server";
//   opts.args = {"--port=6379", "--session_dir=" + session.dir};
//   opts.log_file = session.logs() + "/gcs_server.out";
//   ASSIGN_OR_RETURN(pid_t pid, SpawnDaemon(opts));
//   RETURN_IF_ERROR(WritePidFile(session.pids() + "/gcs_server.pid", pid));
//   auto ready = WaitForFile(ready_path, absl::Now() + absl::Seconds(10), pid, opts.log_file);
//   if (!ready.ok()) { KillProcessGroup(pid, SIGKILL); ... }
//
// Thread-safety: every function may be called from any thread. Children that
// exit are reaped by IsAlive/WaitForExit; their wait status is remembered so
// ExitStatusOf can still report it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace manta {

struct SpawnOptions {
  // Absolute or relative path of the program; PATH is not searched.
  std::string executable;
  // argv[1...]; argv[0] is the executable.
  std::vector<std::string> args;
  // stdout and stderr are appended here (created 0644). Empty: /dev/null.
  std::string log_file;
  // Set in the child on top of the inherited environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Removed from the child's environment before `env` is applied.
  std::vector<std::string> unset_env;
  // Start the child in a new session (setsid), so its process group id is its
  // pid and a terminal's signals do not reach it.
  bool new_session = true;
  // Deliver SIGKILL to the child when the spawning thread exits: for test
  // harnesses that must not leak daemons when they crash.
  bool kill_with_parent = false;
};

// Forks and execs a daemon: stdin from /dev/null, stdout and stderr appended
// to `log_file`, every other descriptor closed. Returns the child's pid once
// exec succeeded; InvalidArgument if the executable is missing or not
// executable, Internal if fork or exec fails (with errno's text).
absl::StatusOr<pid_t> SpawnDaemon(const SpawnOptions& options);

// The result of a process run to completion by RunAndCapture.
struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  int term_signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs `options` (log_file is ignored) with stdout and stderr captured, until
// it exits or `timeout` passes (then its process group is killed). Error only
// when the process cannot be started.
absl::StatusOr<CommandResult> RunAndCapture(const SpawnOptions& options, absl::Duration timeout);

// Whether `pid` has not exited (see ReadLiveProcess). Reaps it if it is an
// exited child.
bool IsAlive(pid_t pid);

// What /proc/PID/stat says of a process that has not exited; nullopt once it
// has (no such process, or a zombie with no thread but its exited main one)
// or when /proc cannot be read. A killed process whose main thread went
// first shows Z while its other threads still close its files (a listening
// socket) and free its memory.
struct LiveProcess {
  int64_t ppid = 0;
  int64_t pgrp = 0;
  uint64_t user_ticks = 0;    // CPU time so far, in clock ticks
  uint64_t system_ticks = 0;  // of it in the kernel
  uint64_t start_ticks = 0;   // clock ticks after boot
};
std::optional<LiveProcess> ReadLiveProcess(pid_t pid);

// The fields of a /proc/PID/stat line after the command name, which may hold
// spaces and parentheses: [0] is field 3 (state), [i] field i + 3. Views
// into `text`; empty when it is malformed.
std::vector<absl::string_view> ProcStatFields(absl::string_view text);

// The processes that have not exited and that `match` accepts, from /proc.
std::vector<pid_t> LiveProcesses(const std::function<bool(const LiveProcess&)>& match);
// The processes of process group `pgid` that have not exited.
std::vector<pid_t> LiveGroupMembers(pid_t pgid);

// The wait status ("exited with code 1", "killed by signal 9") of a child
// this process reaped, if any.
std::optional<int> ExitStatusOf(pid_t pid);
std::string DescribeWaitStatus(int wait_status);

// kill(2) with a Status: NotFound when the process is gone.
absl::Status SendSignal(pid_t pid, int sig);
// Signals every process of the group led by `pgid` (a daemon we started in
// its own session). NotFound when the group is empty.
absl::Status SignalProcessGroup(pid_t pgid, int sig);

// Waits until `pid` is gone (reaping it if it is our child). Works for
// processes that are not our children by polling /proc. DeadlineExceeded if
// it is still running at `deadline`.
absl::Status WaitForExit(pid_t pid, absl::Time deadline);

// `sig` (SIGTERM by default), wait until `deadline`, then SIGKILL to the
// whole group and wait a little more. Returns OK when the process is gone,
// whichever way.
absl::Status TerminateProcess(pid_t pid, absl::Time deadline, int sig = SIGTERM);

// The path /proc/<pid>/exe points to, without a " (deleted)" suffix.
absl::StatusOr<std::string> ExecutableOf(pid_t pid);

// Whether `pid` is alive and runs a program whose file name is
// `executable_name` ("raylet"): guards against signalling a reused pid.
bool RunsExecutable(pid_t pid, const std::string& executable_name);

// Pid files: the decimal pid and a newline, written atomically.
absl::Status WritePidFile(const std::string& path, pid_t pid);
// InvalidArgument when the file does not hold a positive pid.
absl::StatusOr<pid_t> ReadPidFile(const std::string& path);

// Waits until `path` exists and is non-empty and returns its contents. If
// `pid` > 0 and that process exits first, returns Unavailable with its exit
// status and the last lines of `log_file` (when given). DeadlineExceeded at
// `deadline`.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Time deadline, pid_t pid = 0,
                                        const std::string& log_file = "");

// The last `max_lines` non-empty lines of a file, joined with "\n"; empty
// when it cannot be read.
std::string TailFile(const std::string& path, int max_lines);

// A TCP port on 127.0.0.1 that nothing listens on right now, chosen at
// random below the kernel's ephemeral range so that no outgoing connection
// takes it before the caller binds it; never the same port twice in one
// process. Another listener may still take it first.
absl::StatusOr<int> PickFreePort();
// The resident set size (VmRSS) of `pid` in bytes; -1 when unreadable.
int64_t ResidentBytes(pid_t pid);

// FailedPrecondition when something already listens on `host`:`port` (an
// IPv4 address), i.e. a server could not bind it.
absl::Status CheckPortFree(const std::string& host, int port);

// Polls `done` until it returns true or `deadline` passes; returns its last
// value. The poll interval grows from 5 ms to 50 ms.
bool PollUntil(const std::function<bool()>& done, absl::Time deadline);

}  // namespace manta
