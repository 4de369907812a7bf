#include "common/process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status.h"

extern char** environ;

namespace manta {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Wait statuses of children reaped by this process, by pid.
ABSL_CONST_INIT absl::Mutex g_reaped_mu(absl::kConstInit);
std::map<pid_t, int>& Reaped() {  // guarded by g_reaped_mu
  static std::map<pid_t, int> reaped;
  return reaped;
}

void RecordReaped(pid_t pid, int status) {
  absl::MutexLock lock(&g_reaped_mu);
  Reaped()[pid] = status;
}

// Everything the child needs, prepared before fork: after fork only
// async-signal-safe calls are allowed (the parent may run gRPC threads).
struct ExecPlan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

ExecPlan MakePlan(const SpawnOptions& options) {
  ExecPlan plan;
  plan.argv_storage.push_back(options.executable);
  for (const auto& a : options.args) plan.argv_storage.push_back(a);
  auto dropped = [&](std::string_view entry) {
    std::string_view name = entry.substr(0, entry.find('='));
    for (const auto& u : options.unset_env) {
      if (name == u) return true;
    }
    for (const auto& [k, v] : options.env) {
      if (name == k) return true;
    }
    return false;
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!dropped(*e)) plan.env_storage.emplace_back(*e);
  }
  for (const auto& [k, v] : options.env) plan.env_storage.push_back(k + "=" + v);
  for (auto& s : plan.argv_storage) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  for (auto& s : plan.env_storage) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);
  return plan;
}

// Marks every descriptor from 3 up close-on-exec.
void CloseOtherFdsOnExec() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) == 0) return;
#endif
  long max_fd = sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  for (int fd = 3; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Forks and execs `options` with the given descriptors as stdin, stdout and
// stderr. Returns once exec succeeded or failed.
absl::StatusOr<pid_t> ForkExec(const SpawnOptions& options, int in_fd, int out_fd, int err_fd) {
  if (access(options.executable.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot execute ", options.executable, ": ", ErrnoText(errno)));
  }
  ExecPlan plan = MakePlan(options);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return absl::InternalError("pipe: " + ErrnoText(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(report[0]);
    close(report[1]);
    return absl::InternalError("fork: " + ErrnoText(err));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    if (options.kill_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    if (options.new_session) setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(sig, &dfl, nullptr);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
      int err = errno;
      (void)!write(report[1], &err, sizeof(err));
      _exit(127);
    }
    CloseOtherFdsOnExec();
    execve(plan.argv[0], plan.argv.data(), plan.envp.data());
    int err = errno;
    (void)!write(report[1], &err, sizeof(err));
    _exit(127);
  }
  close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::InternalError(absl::StrCat("cannot start ", options.executable, ": ", ErrnoText(child_errno)));
  }
  return pid;
}

}  // namespace

absl::StatusOr<pid_t> SpawnDaemon(const SpawnOptions& options) {
  int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) return absl::InternalError("cannot open /dev/null: " + ErrnoText(errno));
  int out_fd;
  if (options.log_file.empty()) {
    out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  } else {
    out_fd = open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  if (out_fd < 0) {
    int err = errno;
    close(in_fd);
    return absl::InternalError(absl::StrCat("cannot open log file ", options.log_file, ": ", ErrnoText(err)));
  }
  auto pid = ForkExec(options, in_fd, out_fd, out_fd);
  close(in_fd);
  close(out_fd);
  return pid;
}

absl::StatusOr<CommandResult> RunAndCapture(const SpawnOptions& options, absl::Duration timeout) {
  int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) return absl::InternalError("cannot open /dev/null: " + ErrnoText(errno));
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_fd);
    return absl::InternalError("pipe: " + ErrnoText(errno));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(in_fd);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe: " + ErrnoText(errno));
  }
  auto pid = ForkExec(options, in_fd, out_pipe[1], err_pipe[1]);
  close(in_fd);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (!pid.ok()) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return pid.status();
  }
  CommandResult result;
  absl::Time deadline = absl::Now() + timeout;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      result.timed_out = true;
      break;
    }
    int r = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (result.timed_out) {
    SignalProcessGroup(*pid, SIGKILL).IgnoreError();
    SendSignal(*pid, SIGKILL).IgnoreError();
  }
  int status = 0;
  // After EOF the child is exiting; give it a moment beyond the deadline.
  absl::Time reap_deadline = std::max(deadline, absl::Now()) + absl::Seconds(5);
  if (!WaitForExit(*pid, reap_deadline).ok()) {
    SendSignal(*pid, SIGKILL).IgnoreError();
    WaitForExit(*pid, absl::Now() + absl::Seconds(5)).IgnoreError();
    result.timed_out = true;
  }
  if (auto st = ExitStatusOf(*pid)) status = *st;
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  if (result.timed_out) result.exit_code = -1;
  return result;
}

bool IsAlive(pid_t pid) {
  if (pid <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) {
    RecordReaped(pid, status);
    return false;
  }
  if (r == 0) return true;  // our child, still running
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  return ReadLiveProcess(pid).has_value();
}

std::optional<LiveProcess> ReadLiveProcess(pid_t pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return std::nullopt;
  // [0] state, [1] the parent, [2] the process group, [11] and [12] user
  // and system time, [17] the number of threads, [19] the start time.
  std::vector<absl::string_view> f = ProcStatFields(*stat);
  LiveProcess out;
  int64_t threads = 0;
  if (f.size() < 20 || !absl::SimpleAtoi(f[1], &out.ppid) || !absl::SimpleAtoi(f[2], &out.pgrp) ||
      !absl::SimpleAtoi(f[11], &out.user_ticks) || !absl::SimpleAtoi(f[12], &out.system_ticks) ||
      !absl::SimpleAtoi(f[17], &threads) || !absl::SimpleAtoi(f[19], &out.start_ticks)) {
    return std::nullopt;
  }
  if (f[0] == "X" || (f[0] == "Z" && threads <= 1)) return std::nullopt;
  return out;
}

std::vector<absl::string_view> ProcStatFields(absl::string_view text) {
  const size_t paren = text.rfind(')');
  if (paren == absl::string_view::npos) return {};
  return absl::StrSplit(text.substr(paren + 1), ' ', absl::SkipWhitespace());
}

std::vector<pid_t> LiveProcesses(const std::function<bool(const LiveProcess&)>& match) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    auto live = ReadLiveProcess(pid);
    if (live && match(*live)) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

std::vector<pid_t> LiveGroupMembers(pid_t pgid) {
  return LiveProcesses([pgid](const LiveProcess& p) { return p.pgrp == pgid; });
}

std::optional<int> ExitStatusOf(pid_t pid) {
  absl::MutexLock lock(&g_reaped_mu);
  auto it = Reaped().find(pid);
  if (it == Reaped().end()) return std::nullopt;
  return it->second;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wait_status), " (", strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

absl::Status SendSignal(pid_t pid, int sig) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  if (kill(pid, sig) == 0) return absl::OkStatus();
  if (errno == ESRCH) return absl::NotFoundError(absl::StrCat("no process ", pid));
  return absl::InternalError(absl::StrCat("kill ", pid, ": ", ErrnoText(errno)));
}

absl::Status SignalProcessGroup(pid_t pgid, int sig) {
  if (pgid <= 1) return absl::InvalidArgumentError(absl::StrCat("invalid process group ", pgid));
  if (kill(-pgid, sig) == 0) return absl::OkStatus();
  if (errno == ESRCH) return absl::NotFoundError(absl::StrCat("no process group ", pgid));
  return absl::InternalError(absl::StrCat("kill -", pgid, ": ", ErrnoText(errno)));
}

bool PollUntil(const std::function<bool()>& done, absl::Time deadline) {
  absl::Duration interval = absl::Milliseconds(5);
  while (true) {
    if (done()) return true;
    absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(interval, deadline - now));
    interval = std::min(interval * 2, absl::Milliseconds(50));
  }
}

absl::Status WaitForExit(pid_t pid, absl::Time deadline) {
  if (PollUntil([pid] { return !IsAlive(pid); }, deadline)) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("process ", pid, " is still running"));
}

absl::Status TerminateProcess(pid_t pid, absl::Time deadline, int sig) {
  if (SendSignal(pid, sig).ok() && WaitForExit(pid, deadline).ok()) {
    // Leftover members of its group (workers it started) go too.
    SignalProcessGroup(pid, SIGKILL).IgnoreError();
    return absl::OkStatus();
  }
  SignalProcessGroup(pid, SIGKILL).IgnoreError();
  SendSignal(pid, SIGKILL).IgnoreError();
  return WaitForExit(pid, absl::Now() + absl::Seconds(5));
}

absl::StatusOr<std::string> ExecutableOf(pid_t pid) {
  std::string link = absl::StrCat("/proc/", pid, "/exe");
  char buf[PATH_MAX];
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) {
    return absl::Status(errno == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal,
                        absl::StrCat("cannot read ", link, ": ", ErrnoText(errno)));
  }
  std::string path(buf, static_cast<size_t>(n));
  // A binary rebuilt while it runs shows as "<path> (deleted)".
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    path.resize(path.size() - kDeleted.size());
  }
  return path;
}

bool RunsExecutable(pid_t pid, const std::string& executable_name) {
  if (!IsAlive(pid)) return false;
  auto exe = ExecutableOf(pid);
  if (!exe.ok()) return false;
  size_t slash = exe->rfind('/');
  std::string base = slash == std::string::npos ? *exe : exe->substr(slash + 1);
  return base == executable_name;
}

absl::Status WritePidFile(const std::string& path, pid_t pid) {
  return WriteFileAtomic(path, absl::StrCat(pid, "\n"), 0644);
}

absl::StatusOr<pid_t> ReadPidFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("pid file ", path, " does not hold a pid"));
  }
  return static_cast<pid_t>(pid);
}

std::string TailFile(const std::string& path, int max_lines) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.emplace_back(line);
  }
  size_t start = lines.size() > static_cast<size_t>(max_lines) ? lines.size() - max_lines : 0;
  std::string out;
  for (size_t i = start; i < lines.size(); ++i) {
    if (!out.empty()) out += "\n";
    out += lines[i];
  }
  return out;
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Time deadline, pid_t pid,
                                        const std::string& log_file) {
  auto ready = [&] {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && st.st_size > 0;
  };
  bool died = false;
  PollUntil(
      [&] {
        if (ready()) return true;
        if (pid > 0 && !IsAlive(pid)) {
          // It may have written the file just before exiting.
          died = !ready();
          return true;
        }
        return false;
      },
      deadline);
  if (ready()) return ReadFile(path);
  if (died) {
    std::string how = "exited";
    if (auto st = ExitStatusOf(pid)) how = DescribeWaitStatus(*st);
    std::string tail = log_file.empty() ? "" : TailFile(log_file, 1);
    return absl::UnavailableError(absl::StrCat("process ", pid, " ", how, tail.empty() ? "" : ": ", tail));
  }
  return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", path));
}

namespace {

// The low end of the range the kernel draws outgoing connections' local
// ports from; 32768 when it cannot be read.
int EphemeralPortLow() {
  int low = 32768;
  absl::StatusOr<std::string> text = ReadFile("/proc/sys/net/ipv4/ip_local_port_range");
  if (text.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &low) && low > 1024) return low;
  }
  return 32768;
}

// Whether a listening socket could bind 127.0.0.1:`port` right now.
absl::StatusOr<bool> CanBindLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket: " + ErrnoText(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

int64_t ResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

absl::StatusOr<int> PickFreePort() {
  // Ports below the ephemeral range: an outgoing connection (a gRPC client
  // of the daemon about to listen) never takes one between the pick and the
  // bind. A port is not handed out twice by one process.
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static std::set<int> handed_out;  // guarded by mu
  const int low = 10000, high = std::max(low + 1000, EphemeralPortLow());
  thread_local std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  std::uniform_int_distribution<int> dist(low, high - 1);
  for (int attempt = 0; attempt < 200; ++attempt) {
    int port = dist(rng);
    {
      absl::MutexLock lock(&mu);
      if (handed_out.count(port)) continue;
    }
    ASSIGN_OR_RETURN(bool free, CanBindLoopback(port));
    if (!free) continue;
    absl::MutexLock lock(&mu);
    if (!handed_out.insert(port).second) continue;
    return port;
  }
  return absl::UnavailableError(absl::StrCat("no free port between ", low, " and ", high));
}

absl::Status CheckPortFree(const std::string& host, int port) {
  if (port <= 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("port ", port, " is out of range"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket: " + ErrnoText(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  absl::Status result = absl::OkStatus();
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    if (err == EADDRINUSE) {
      result = absl::FailedPreconditionError(absl::StrCat("port ", port, " on ", host, " is already in use"));
    } else if (err == EADDRNOTAVAIL) {
      result = absl::InvalidArgumentError(absl::StrCat(host, " is not an address of this host"));
    } else {
      result = absl::FailedPreconditionError(absl::StrCat("cannot bind ", host, ":", port, ": ", ErrnoText(err)));
    }
  } else if (listen(fd, 1) != 0 && errno == EADDRINUSE) {
    result = absl::FailedPreconditionError(absl::StrCat("port ", port, " on ", host, " is already in use"));
  }
  close(fd);
  return result;
}

}  // namespace manta
