#include "gcs/redis_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace manta::gcs {
namespace {

// At least a millisecond: hiredis takes zero as "no timeout".
timeval Timeout(absl::Duration d) { return absl::ToTimeval(std::max(d, absl::Milliseconds(1))); }

RedisReply Copy(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::kString;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::kArray;
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::kInteger;
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::kStatus;
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::kError;
      break;
    default:
      out.type = RedisReply::kNil;
      break;
  }
  if (r.str != nullptr) out.str.assign(r.str, r.len);
  out.integer = r.integer;
  out.elements.reserve(r.elements);
  for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Copy(*r.element[i]));
  return out;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const RedisEndpoint& endpoint,
                                                                          absl::Duration connect_timeout,
                                                                          absl::Duration io_timeout) {
  const std::string address = endpoint.ToString();
  redisContext* c = redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, Timeout(connect_timeout));
  if (c == nullptr) return absl::ResourceExhaustedError("cannot allocate a Redis connection");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return absl::UnavailableError(absl::StrCat("cannot connect to Redis at ", address, ": ", why));
  }
  redisSetTimeout(c, Timeout(io_timeout));
  redisEnableKeepAlive(c);
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c, address));
  std::vector<std::string_view> hello = {"PING"};
  if (!endpoint.password.empty()) {
    hello = {"AUTH", endpoint.password};
    if (!endpoint.username.empty()) hello = {"AUTH", endpoint.username, endpoint.password};
  }
  auto reply = conn->Command(hello);
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) {
    if (absl::StartsWith(reply->str, "NOAUTH")) {
      return absl::PermissionDeniedError(absl::StrCat("Redis at ", address, " requires a password"));
    }
    if (!endpoint.password.empty()) {
      return absl::PermissionDeniedError(absl::StrCat("Redis at ", address, " refused the login: ", reply->str));
    }
    // A server still loading its data answers PING with an error too.
    return absl::UnavailableError(absl::StrCat("Redis at ", address, " is not ready: ", reply->str));
  }
  return conn;
}

RedisConnection::RedisConnection(redisContext* context, std::string address)
    : context_(context), address_(std::move(address)) {}

RedisConnection::~RedisConnection() { redisFree(context_); }

void RedisConnection::Append(const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  // Only fails when out of memory; GetReply then reports the broken context.
  redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lens.data());
}

absl::StatusOr<RedisReply> RedisConnection::GetReply() {
  if (context_->err != 0) return IoError();
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return IoError();
  auto* reply = static_cast<redisReply*>(raw);
  RedisReply out = Copy(*reply);
  freeReplyObject(reply);
  return out;
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string_view>& args) {
  Append(args);
  return GetReply();
}

absl::Status RedisConnection::IoError() const {
  std::string why = context_->err != 0 ? context_->errstr : "no reply";
  if (context_->err == REDIS_ERR_EOF && why.empty()) why = "connection closed";
  return absl::UnavailableError(absl::StrCat("lost the connection to Redis at ", address_, ": ", why));
}

bool IsTransientRedisError(std::string_view message) {
  static constexpr std::array<std::string_view, 10> kTransient = {
      "LOADING", "BUSY", "READONLY", "OOM", "NOAUTH", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "MISCONF"};
  for (std::string_view prefix : kTransient) {
    if (message.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace manta::gcs
