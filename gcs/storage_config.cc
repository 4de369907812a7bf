#include "gcs/storage_config.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "gcs/in_memory_store.h"
#include "gcs/sqlite_store.h"

namespace manta::gcs {
namespace {

constexpr char kScheme[] = "redis://";

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size() || !absl::SimpleHexAtoi(in.substr(i + 1, 2), &value) || !absl::ascii_isxdigit(in[i + 1]) ||
        !absl::ascii_isxdigit(in[i + 2])) {
      return absl::InvalidArgumentError("a bad %-escape in the user or password");
    }
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

absl::Status ParseHostPort(absl::string_view text, RedisEndpoint* endpoint) {
  absl::string_view host = text;
  absl::string_view port;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("an unclosed [ in the host");
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return absl::InvalidArgumentError("text after the ] of the host");
    if (!rest.empty()) port = rest.substr(1);
    if (!rest.empty() && port.empty()) return absl::InvalidArgumentError("an empty port");
  } else if (size_t colon = text.rfind(':'); colon != absl::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return absl::InvalidArgumentError("an empty port");
  }
  if (host.empty()) return absl::InvalidArgumentError("no host");
  for (char c : host) {
    if (absl::ascii_isspace(c) || c == '/' || c == '@' || (c == ':' && !absl::StartsWith(text, "["))) {
      return absl::InvalidArgumentError(absl::StrCat("a bad host '", host, "'"));
    }
  }
  endpoint->host = std::string(host);
  if (!port.empty()) {
    int p = 0;
    bool digits = std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); });
    if (!digits || !absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("a bad port '", port, "' (1 to 65535)"));
    }
    endpoint->port = p;
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisEndpoint> ParseAddress(const std::string& text) {
  if (absl::StartsWith(text, "rediss://")) {
    return absl::InvalidArgumentError("rediss:// (TLS) is not supported; use redis://");
  }
  absl::string_view rest = text;
  bool url = absl::ConsumePrefix(&rest, kScheme);
  if (!url && absl::StrContains(rest, "://")) return absl::InvalidArgumentError("not a redis:// URL");
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    if (!url || rest.substr(slash) != "/") {
      return absl::InvalidArgumentError(
          "a path after the address (database numbers are not supported; use --storage_namespace)");
    }
    rest = rest.substr(0, slash);
  }
  RedisEndpoint endpoint;
  if (size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    if (!url) return absl::InvalidArgumentError("a password needs the URL form redis://:PASSWORD@HOST:PORT");
    absl::string_view userinfo = rest.substr(0, at);
    size_t colon = userinfo.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError("write the password as redis://:PASSWORD@HOST:PORT");
    }
    ASSIGN_OR_RETURN(endpoint.username, PercentDecode(userinfo.substr(0, colon)));
    ASSIGN_OR_RETURN(endpoint.password, PercentDecode(userinfo.substr(colon + 1)));
    rest = rest.substr(at + 1);
  }
  RETURN_IF_ERROR(ParseHostPort(rest, &endpoint));
  return endpoint;
}

std::string EnvOr(const GetEnv& getenv, const char* first, const char* second) {
  for (const char* name : {first, second}) {
    const char* v = getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

absl::StatusOr<RedisEndpoint> RedisFromFlagsAndEnv(const StorageFlags& flags, const GetEnv& getenv) {
  RedisEndpoint endpoint;
  if (flags.storage == "redis") {
    std::string address = EnvOr(getenv, "MANTA_REDIS_ADDRESS", "RAY_REDIS_ADDRESS");
    if (address.empty()) {
      return absl::InvalidArgumentError(
          "--storage=redis needs MANTA_REDIS_ADDRESS or RAY_REDIS_ADDRESS, or give --storage=redis://HOST:PORT");
    }
    auto parsed = ParseAddress(address);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad Redis address '", address, "' in the environment: ", parsed.status().message()));
    }
    endpoint = *parsed;
  } else {
    auto parsed = ParseAddress(flags.storage);
    // The message omits the URL: it may hold a password.
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("bad --storage URL: ", parsed.status().message()));
    endpoint = *parsed;
  }
  if (!endpoint.password.empty()) return endpoint;
  if (!flags.password_file.empty()) {
    auto text = ReadFile(flags.password_file);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat("cannot read --storage_password_file: ", text.status().message()));
    }
    absl::string_view line = *text;
    line = line.substr(0, line.find('\n'));
    endpoint.password = std::string(absl::StripAsciiWhitespace(line));
    if (endpoint.password.empty()) return absl::InvalidArgumentError("--storage_password_file is empty");
    return endpoint;
  }
  endpoint.password = EnvOr(getenv, "MANTA_REDIS_PASSWORD", "RAY_REDIS_PASSWORD");
  return endpoint;
}

}  // namespace

std::string StorageConfig::Describe() const {
  switch (kind) {
    case StorageKind::kSqlite:
      return "sqlite at " + sqlite_path;
    case StorageKind::kMemory:
      return "memory";
    case StorageKind::kRedis:
      return absl::StrCat("redis at ", redis.endpoint.ToString(), " namespace=", redis.ns);
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const StorageConfig& config, EventLoop* loop) {
  Logger("gcs")->info("GCS tables: {}", config.Describe());
  switch (config.kind) {
    case StorageKind::kSqlite: {
      ASSIGN_OR_RETURN(std::unique_ptr<Store> store, SqliteStore::Open(config.sqlite_path, loop));
      return store;
    }
    case StorageKind::kMemory:
      return std::make_unique<InMemoryStore>(loop);
    case StorageKind::kRedis: {
      auto store = RedisStore::Open(config.redis, loop);
      if (!store.ok()) return Annotate(store.status(), "cannot open the GCS tables (" + config.Describe() + ")");
      return std::unique_ptr<Store>(std::move(*store));
    }
  }
  return absl::InternalError("unknown storage kind");
}

absl::StatusOr<RedisEndpoint> ParseRedisAddress(const std::string& text) { return ParseAddress(text); }

absl::StatusOr<StorageConfig> ResolveStorage(const StorageFlags& flags, const GetEnv& getenv) {
  StorageFlags f = flags;
  if (f.storage.empty()) {
    f.storage = EnvOr(getenv, "MANTA_REDIS_ADDRESS", "RAY_REDIS_ADDRESS").empty() ? "sqlite" : "redis";
  }
  StorageConfig config;
  if (f.storage == "sqlite") {
    if (f.sqlite_path.empty()) return absl::InvalidArgumentError("sqlite storage needs --storage_path");
    config.sqlite_path = f.sqlite_path;
    return config;
  }
  if (f.storage == "memory") {
    config.kind = StorageKind::kMemory;
    return config;
  }
  if (f.storage != "redis" && !absl::StartsWith(f.storage, "redis://") && !absl::StartsWith(f.storage, "rediss://")) {
    std::string shown = absl::StrContains(f.storage, "@") ? "" : " '" + f.storage + "'";  // may hold a password
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --storage", shown, " (sqlite, memory, redis or redis://HOST:PORT)"));
  }
  config.kind = StorageKind::kRedis;
  ASSIGN_OR_RETURN(config.redis.endpoint, RedisFromFlagsAndEnv(f, getenv));
  if (f.ns.empty()) return absl::InvalidArgumentError("--storage_namespace must not be empty");
  config.redis.ns = f.ns;
  return config;
}

}  // namespace manta::gcs
