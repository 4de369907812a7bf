#include "common/process.h"

#include <fcntl.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace manta {
namespace {

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_process_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (pid_t pid : started_) {
      SignalProcessGroup(pid, SIGKILL).IgnoreError();
      SendSignal(pid, SIGKILL).IgnoreError();
      WaitForExit(pid, absl::Now() + absl::Seconds(5)).IgnoreError();
    }
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  SpawnOptions Shell(const std::string& script) {
    SpawnOptions o;
    o.executable = "/bin/sh";
    o.args = {"-c", script};
    return o;
  }

  pid_t Spawn(const SpawnOptions& o) {
    auto pid = SpawnDaemon(o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return -1;
    started_.push_back(*pid);
    return *pid;
  }

  absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

  std::string dir_;
  std::vector<pid_t> started_;
};

TEST_F(ProcessTest, SpawnDaemonWritesLogAndPassesEnvironment) {
  setenv("MANTA_PROCESS_TEST_DROP", "x", 1);
  SpawnOptions o = Shell("echo hello; echo \"foo=$MANTA_FOO\"; echo \"drop=$MANTA_PROCESS_TEST_DROP\" >&2; exit 3");
  o.log_file = dir_ + "/out.log";
  o.env = {{"MANTA_FOO", "bar"}};
  o.unset_env = {"MANTA_PROCESS_TEST_DROP"};
  pid_t pid = Spawn(o);
  ASSERT_TRUE(WaitForExit(pid, Soon()).ok());
  ASSERT_TRUE(ExitStatusOf(pid).has_value());
  EXPECT_EQ(DescribeWaitStatus(*ExitStatusOf(pid)), "exited with code 3");
  auto log = ReadFile(o.log_file);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(*log, "hello\nfoo=bar\ndrop=\n");
  unsetenv("MANTA_PROCESS_TEST_DROP");
}

TEST_F(ProcessTest, SpawnDaemonRejectsMissingExecutable) {
  SpawnOptions o;
  o.executable = dir_ + "/no_such_binary";
  auto pid = SpawnDaemon(o);
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ProcessTest, DaemonRunsInItsOwnSessionAndGroupKillStopsIt) {
  pid_t pid = Spawn(Shell("sleep 30 & sleep 30"));
  EXPECT_EQ(getpgid(pid), pid);
  EXPECT_EQ(getsid(pid), pid);
  EXPECT_TRUE(IsAlive(pid));
  ASSERT_TRUE(SignalProcessGroup(pid, SIGKILL).ok());
  ASSERT_TRUE(WaitForExit(pid, Soon()).ok());
  EXPECT_FALSE(IsAlive(pid));
  // The whole group is gone, the background sleep included.
  EXPECT_TRUE(PollUntil([&] { return kill(-pid, 0) != 0; }, Soon()));
  EXPECT_EQ(SendSignal(pid, SIGTERM).code(), absl::StatusCode::kNotFound);
}

TEST_F(ProcessTest, DaemonDoesNotInheritDescriptors) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // deliberately without O_CLOEXEC
  SpawnOptions o = Shell(absl::StrCat("test -e /proc/self/fd/", fds[0], " && exit 1; exit 0"));
  pid_t pid = Spawn(o);
  ASSERT_TRUE(WaitForExit(pid, Soon()).ok());
  EXPECT_EQ(DescribeWaitStatus(*ExitStatusOf(pid)), "exited with code 0");
  close(fds[0]);
  close(fds[1]);
}

TEST_F(ProcessTest, RunAndCaptureSeparatesStreams) {
  auto r = RunAndCapture(Shell("echo out; echo err >&2; exit 2"), absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_FALSE(r->timed_out);
}

TEST_F(ProcessTest, RunAndCaptureKillsOnTimeout) {
  absl::Time start = absl::Now();
  auto r = RunAndCapture(Shell("echo started; sleep 30"), absl::Milliseconds(300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(ProcessTest, WaitsForProcessesThatAreNotOurChildren) {
  // The shell prints the pid of a background sleep and exits; the sleep is
  // reparented, so only /proc tells whether it runs.
  auto r = RunAndCapture(Shell("sleep 30 >/dev/null 2>&1 & echo $!"), absl::Seconds(10));
  ASSERT_TRUE(r.ok());
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r->out), &pid)) << r->out;
  EXPECT_TRUE(IsAlive(pid));
  EXPECT_TRUE(RunsExecutable(pid, "sleep"));
  EXPECT_FALSE(RunsExecutable(pid, "raylet"));
  EXPECT_EQ(WaitForExit(pid, absl::Now() + absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(SendSignal(pid, SIGKILL).ok());
  EXPECT_TRUE(WaitForExit(pid, Soon()).ok());
  EXPECT_FALSE(RunsExecutable(pid, "sleep"));
}

TEST_F(ProcessTest, TerminateEscalatesToSigkill) {
  pid_t pid = Spawn(Shell("trap '' TERM; echo ready > " + dir_ + "/ready; sleep 30"));
  ASSERT_TRUE(WaitForFile(dir_ + "/ready", Soon(), pid).ok());
  absl::Time start = absl::Now();
  EXPECT_TRUE(TerminateProcess(pid, absl::Now() + absl::Milliseconds(200)).ok());
  EXPECT_FALSE(IsAlive(pid));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_TRUE(ExitStatusOf(pid).has_value());
  EXPECT_TRUE(WIFSIGNALED(*ExitStatusOf(pid)));
}

TEST_F(ProcessTest, TerminateIsGracefulWhenTheProcessHonoursSigterm) {
  pid_t pid = Spawn(Shell("trap 'exit 0' TERM; echo ready > " + dir_ + "/ready; while true; do sleep 0.05; done"));
  ASSERT_TRUE(WaitForFile(dir_ + "/ready", Soon(), pid).ok());
  EXPECT_TRUE(TerminateProcess(pid, Soon()).ok());
  EXPECT_EQ(DescribeWaitStatus(*ExitStatusOf(pid)), "exited with code 0");
}

TEST_F(ProcessTest, PidFilesRoundTrip) {
  std::string path = dir_ + "/x.pid";
  ASSERT_TRUE(WritePidFile(path, 4242).ok());
  auto pid = ReadPidFile(path);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*pid, 4242);
  ASSERT_TRUE(WriteFileAtomic(path, "not a pid").ok());
  EXPECT_EQ(ReadPidFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteFileAtomic(path, "-3\n").ok());
  EXPECT_EQ(ReadPidFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadPidFile(dir_ + "/missing.pid").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ProcessTest, WaitForFileReturnsContentsOnceWritten) {
  std::string path = dir_ + "/ready.json";
  pid_t pid =
      Spawn(Shell("sleep 0.2; echo '{\"port\": 1}' > " + path + ".tmp; mv " + path + ".tmp " + path + "; sleep 30"));
  auto contents = WaitForFile(path, Soon(), pid);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "{\"port\": 1}\n");
}

TEST_F(ProcessTest, WaitForFileReportsAnEarlyExitWithTheLogTail) {
  SpawnOptions o = Shell("echo starting; echo 'error: port 6379 is in use' >&2; exit 1");
  o.log_file = dir_ + "/daemon.log";
  pid_t pid = Spawn(o);
  auto contents = WaitForFile(dir_ + "/never.json", Soon(), pid, o.log_file);
  ASSERT_EQ(contents.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(contents.status().message(),
            absl::StrCat("process ", pid, " exited with code 1: error: port 6379 is in use"));
}

TEST_F(ProcessTest, WaitForFileTimesOut) {
  auto contents = WaitForFile(dir_ + "/never.json", absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ProcessTest, TailFileKeepsTheLastNonEmptyLines) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/log", "a\nb\n\nc\n\n").ok());
  EXPECT_EQ(TailFile(dir_ + "/log", 2), "b\nc");
  EXPECT_EQ(TailFile(dir_ + "/log", 10), "a\nb\nc");
  EXPECT_EQ(TailFile(dir_ + "/missing", 2), "");
}

TEST_F(ProcessTest, FreePortIsFreeUntilSomeoneListens) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(CheckPortFree("127.0.0.1", *port).ok());

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  EXPECT_EQ(CheckPortFree("127.0.0.1", *port).code(), absl::StatusCode::kFailedPrecondition);
  close(fd);

  EXPECT_EQ(CheckPortFree("not-an-ip", 80).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPortFree("127.0.0.1", 70000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPortFree("192.0.2.1", *port).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ProcessTest, FreePortsAreDistinctAndNeverEphemeral) {
  // Outgoing connections take local ports from the ephemeral range; a port
  // picked there could be taken between the pick and the bind.
  auto range = ReadFile("/proc/sys/net/ipv4/ip_local_port_range");
  ASSERT_TRUE(range.ok());
  int ephemeral_low = std::stoi(*range);
  std::set<int> seen;
  for (int i = 0; i < 300; ++i) {
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_LT(*port, ephemeral_low);
    EXPECT_GE(*port, 1024);
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " handed out twice";
  }
}

// A process whose main thread has ended while another still runs shows Z in
// /proc, yet holds its files (a listening socket) until its last thread goes.
// It is a grandchild here, as a daemon is to whoever waits for it: a child
// of ours would be answered by waitpid without /proc.
TEST(ProcessStateTest, AZombieLeaderWithLiveThreadsIsAlive) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // The worker's thread waits on `hold` until every write end is closed:
  // the test closes its own when it is done (or when it dies).
  static int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    pid_t worker = fork();
    if (worker == 0) {
      setpgid(0, 0);
      close(hold[1]);
      pthread_t t;
      if (pthread_create(
              &t, nullptr,
              [](void*) -> void* {
                char c;
                (void)!read(hold[0], &c, 1);
                _exit(0);
              },
              nullptr) != 0) {
        _exit(1);
      }
      syscall(SYS_exit, 0);  // ends the main thread only (no unwinding through the test)
    }
    (void)!write(fds[1], &worker, sizeof(worker));
    _exit(0);
  }
  pid_t pid = 0;
  ASSERT_EQ(read(fds[0], &pid, sizeof(pid)), static_cast<ssize_t>(sizeof(pid)));
  close(fds[0]);
  close(fds[1]);
  ASSERT_GT(pid, 0);
  auto cleanup = absl::MakeCleanup([pid] {
    kill(pid, SIGKILL);
    close(hold[1]);
    close(hold[0]);
    WaitForExit(pid, absl::Now() + absl::Seconds(10)).IgnoreError();
  });
  EXPECT_TRUE(WaitForExit(middle, absl::Now() + absl::Seconds(10)).ok());
  auto zombie_leader = [pid] {
    auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    return stat.ok() && stat->substr(stat->rfind(')') + 2, 1) == "Z";
  };
  ASSERT_TRUE(PollUntil(zombie_leader, absl::Now() + absl::Seconds(10)));
  EXPECT_TRUE(IsAlive(pid));
  auto live = ReadLiveProcess(pid);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->pgrp, pid);
  EXPECT_EQ(LiveGroupMembers(pid), std::vector<pid_t>{pid});
  kill(pid, SIGKILL);
  EXPECT_TRUE(WaitForExit(pid, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_FALSE(ReadLiveProcess(pid).has_value());
  EXPECT_TRUE(LiveGroupMembers(pid).empty());
}

TEST_F(ProcessTest, ALiveProcessShowsItsParentItsCpuTimeAndItsChildren) {
  auto self = ReadLiveProcess(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->ppid, getppid());
  const uint64_t ticks = self->user_ticks + self->system_ticks;
  auto spun = [ticks] {
    volatile uint64_t x = 0;
    for (int i = 0; i < 1000000; ++i) x = x + i;
    auto now = ReadLiveProcess(getpid());
    return now.has_value() && now->user_ticks + now->system_ticks > ticks;
  };
  EXPECT_TRUE(PollUntil(spun, absl::Now() + absl::Seconds(20)));
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  auto cleanup = absl::MakeCleanup([child] {
    kill(child, SIGKILL);
    WaitForExit(child, absl::Now() + absl::Seconds(10)).IgnoreError();
  });
  const pid_t me = getpid();
  std::vector<pid_t> children = LiveProcesses([me](const LiveProcess& p) { return p.ppid == me; });
  EXPECT_NE(std::find(children.begin(), children.end(), child), children.end());
  EXPECT_EQ(std::find(children.begin(), children.end(), me), children.end());
}

}  // namespace
}  // namespace manta
