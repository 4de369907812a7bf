#include "gcs/redis_server_process.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/process.h"

namespace manta::gcs {
namespace {

std::string FindRedisServer() {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/sbin");
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

bool RedisServerProcess::Installed() { return !FindRedisServer().empty(); }

RedisServerProcess::RedisServerProcess(Options options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/manta_redis_XXXXXX";
  if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  log_file_ = dir_ + "/redis.log";
}

RedisServerProcess::~RedisServerProcess() {
  Kill().IgnoreError();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

absl::Status RedisServerProcess::Start() {
  if (running()) return absl::FailedPreconditionError("redis-server already runs");
  if (dir_.empty()) return absl::InternalError("mkdtemp failed");
  std::string binary = FindRedisServer();
  if (binary.empty()) return absl::NotFoundError(kNotInstalled);
  if (port_ == 0) {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    port_ = *port;
  }
  SpawnOptions o;
  o.executable = binary;
  o.args = {"--port", std::to_string(port_), "--bind", "127.0.0.1",        "--dir", dir_, "--save",
            "",       "--daemonize",         "no",     "--protected-mode", "no"};
  if (options_.durable) {
    o.args.insert(o.args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    o.args.insert(o.args.end(), {"--appendonly", "no"});
  }
  if (!options_.password.empty()) {
    o.args.push_back("--requirepass");
    o.args.push_back(options_.password);
  }
  o.log_file = log_file_;
  o.kill_with_parent = true;
  auto pid = SpawnDaemon(o);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  absl::Status last = absl::DeadlineExceededError("no answer");
  bool up = PollUntil(
      [&] {
        if (!IsAlive(pid_)) return true;
        last = Command({"PING"}).status();
        return last.ok();
      },
      absl::Now() + absl::Seconds(15));
  if (up && last.ok()) return absl::OkStatus();
  std::string why = IsAlive(pid_) ? std::string(last.message()) : "it exited";
  Kill().IgnoreError();
  return absl::UnavailableError(
      absl::StrCat("redis-server on port ", port_, " did not start: ", why, "\n", TailFile(log_file_, 20)));
}

absl::Status RedisServerProcess::Kill() {
  if (pid_ <= 0) return absl::OkStatus();
  // The group too: a background save or AOF rewrite runs in a forked child.
  SignalProcessGroup(pid_, SIGKILL).IgnoreError();
  SendSignal(pid_, SIGKILL).IgnoreError();
  absl::Status s = WaitForExit(pid_, absl::Now() + absl::Seconds(10));
  if (s.ok()) pid_ = 0;
  return s;
}

absl::StatusOr<RedisReply> RedisServerProcess::Command(const std::vector<std::string_view>& args) {
  auto conn = RedisConnection::Connect(endpoint(), absl::Seconds(2), absl::Seconds(10));
  if (!conn.ok()) return conn.status();
  return (*conn)->Command(args);
}

RedisEndpoint RedisServerProcess::endpoint() const {
  RedisEndpoint e;
  e.host = "127.0.0.1";
  e.port = port_;
  e.password = options_.password;
  return e;
}

std::string RedisServerProcess::url() const {
  std::string auth = options_.password.empty() ? "" : ":" + options_.password + "@";
  return absl::StrCat("redis://", auth, "127.0.0.1:", port_);
}

}  // namespace manta::gcs
