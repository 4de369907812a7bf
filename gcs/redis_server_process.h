// RedisServerProcess: a real redis-server for tests, on a free port of
// 127.0.0.1 in its own temporary directory, without persistence (no RDB
// snapshots, no AOF) unless asked, killed with its directory removed when
// this goes, however the test ends; it also dies with the test process.
//
//   if (!RedisServerProcess::Installed()) GTEST_SKIP() << RedisServerProcess::kNotInstalled;
//   RedisServerProcess redis({.password = "secret"});
//   MANTA_ASSERT_OK(redis.Start());
//   RedisStoreOptions o;
//   o.endpoint = redis.endpoint();       // 127.0.0.1, its port and password
//   ...
//   MANTA_ASSERT_OK(redis.Kill());       // SIGKILL: its data is gone
//   MANTA_ASSERT_OK(redis.Start());      // the same port again
//
// Not thread-safe: use from the test thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gcs/redis_connection.h"

namespace manta::gcs {

struct RedisServerOptions {
  std::string password = {};  // empty: no requirepass
  // An append-only file synced before each reply, so that what Redis
  // acknowledged survives Kill(); otherwise nothing is kept.
  bool durable = false;
};

class RedisServerProcess {
 public:
  using Options = RedisServerOptions;
  static constexpr char kNotInstalled[] =
      "redis-server is not installed (scripts/install_deps.sh installs it); skipping the Redis tests";

  // Whether redis-server is on PATH or in /usr/bin or /usr/sbin.
  static bool Installed();

  explicit RedisServerProcess(Options options = {});
  ~RedisServerProcess();
  RedisServerProcess(const RedisServerProcess&) = delete;
  RedisServerProcess& operator=(const RedisServerProcess&) = delete;

  // Starts it (on the port of the previous start, if any) and waits until it
  // answers PING.
  absl::Status Start();
  // SIGKILL, and waits until it is gone.
  absl::Status Kill();
  bool running() const { return pid_ > 0; }

  // A command over a new connection (logged in when there is a password).
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& args);

  RedisEndpoint endpoint() const;
  // redis://[:PASSWORD@]127.0.0.1:PORT
  std::string url() const;
  int port() const { return port_; }
  const std::string& log_file() const { return log_file_; }

 private:
  const Options options_;
  std::string dir_;  // the server's working directory
  std::string log_file_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace manta::gcs
