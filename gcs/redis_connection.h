// RedisConnection: one blocking connection to a Redis server (hiredis's
// synchronous API), authenticated when it is made.
//
//   ASSIGN_OR_RETURN(auto conn, RedisConnection::Connect(endpoint, absl::Seconds(5), absl::Seconds(10)));
//   ASSIGN_OR_RETURN(RedisReply pong, conn->Command({"PING"}));
//   conn->Append({"HSET", "manta@nodes", key, value});   // pipelined
//   conn->Append({"HDEL", "manta@nodes", other});
//   ASSIGN_OR_RETURN(RedisReply first, conn->GetReply());
//
// An error reply from the server ("WRONGTYPE ...") is a reply of type
// kError, not an error Status; a Status error means the connection itself
// failed (refused, reset, timed out) and is unusable from then on.
//
// Thread: not thread-safe; each connection belongs to one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct redisContext;

namespace manta::gcs {

// Where a Redis server is and how to log in to it.
struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // a Redis 6 ACL user; empty: the default user
  std::string password;  // empty: no AUTH

  // "host:port"; never the password.
  std::string ToString() const;
};

// One reply, copied out of hiredis.
struct RedisReply {
  enum Type { kString, kArray, kInteger, kNil, kStatus, kError };
  Type type = kNil;
  std::string str;  // kString, kStatus and kError
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == kError; }
};

class RedisConnection {
 public:
  // Connects within `connect_timeout`, bounds every later read and write by
  // `io_timeout`, and sends AUTH when the endpoint has a password, else PING.
  // Unavailable when the server cannot be reached; PermissionDenied when it
  // refuses the credentials or needs a password that was not given.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const RedisEndpoint& endpoint,
                                                                  absl::Duration connect_timeout,
                                                                  absl::Duration io_timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Queues a command (binary-safe arguments); sent by the next GetReply.
  void Append(const std::vector<std::string_view>& args);
  // The reply to the oldest command without one. Unavailable when the
  // connection failed.
  absl::StatusOr<RedisReply> GetReply();
  // Append and GetReply.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& args);

 private:
  RedisConnection(redisContext* context, std::string address);
  absl::Status IoError() const;

  redisContext* const context_;
  const std::string address_;  // for messages
};

// Whether an error reply is the server being unable to take writes for now
// (loading its data, out of memory, a read-only replica, not yet logged in
// after a restart): the write is worth retrying on a new connection.
bool IsTransientRedisError(std::string_view message);

}  // namespace manta::gcs
