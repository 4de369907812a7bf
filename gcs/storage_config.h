// StorageConfig: where the GCS keeps its tables, from gcs_server's flags and
// the environment (Ray's RAY_REDIS_ADDRESS and RAY_REDIS_PASSWORD).
//
//   StorageFlags flags;
//   flags.storage = "redis://:secret@10.0.0.5:6379";
//   flags.ns = "prod";
//   ASSIGN_OR_RETURN(StorageConfig config, ResolveStorage(flags, [](const char* v) { return std::getenv(v); }));
//   // config.kind == StorageKind::kRedis, config.redis.endpoint.password == "secret"
//
// --storage:
//   sqlite                 a durable file in the session directory
//   memory                 nothing survives a restart
//   redis://[[USER]:PASSWORD@]HOST[:PORT]
//                          an external Redis (port 6379 unless given)
//   redis                  the Redis at $MANTA_REDIS_ADDRESS, else $RAY_REDIS_ADDRESS
//   (empty)                as "redis" when one of those is set, else sqlite
// Those variables hold HOST:PORT or a redis:// URL. The password is the
// URL's, else the first line of --storage_password_file, else
// $MANTA_REDIS_PASSWORD, else $RAY_REDIS_PASSWORD. A password in a variable
// or a file stays out of the process list; one in the URL does not.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gcs/redis_store.h"

namespace manta::gcs {

enum class StorageKind { kSqlite, kMemory, kRedis };

struct StorageFlags {
  std::string storage;        // --storage
  std::string sqlite_path;    // --storage_path (required for sqlite)
  std::string password_file;  // --storage_password_file
  std::string ns = "manta";   // --storage_namespace
};

struct StorageConfig {
  StorageKind kind = StorageKind::kSqlite;
  std::string sqlite_path;
  RedisStoreOptions redis;

  // "sqlite at PATH", "memory", "redis at HOST:PORT namespace=NS"; never a
  // password.
  std::string Describe() const;
};

// Reads the environment through `getenv` (std::getenv, or a fake in tests;
// null for unset).
// InvalidArgument, naming the flag or variable, for an unknown storage, a
// malformed URL or an empty namespace; NotFound when the password file
// cannot be read.
using GetEnv = std::function<const char*(const char*)>;
absl::StatusOr<StorageConfig> ResolveStorage(const StorageFlags& flags, const GetEnv& getenv);

// Opens the store `config` names; its errors (e.g. Unavailable when Redis
// cannot be reached) name the store.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const StorageConfig& config, EventLoop* loop);

// redis://[[USER]:PASSWORD@]HOST[:PORT][/], or HOST[:PORT]; HOST may be an
// [IPv6] literal; USER and PASSWORD may be percent-encoded. InvalidArgument
// for anything else (rediss:// included: TLS is not supported).
absl::StatusOr<RedisEndpoint> ParseRedisAddress(const std::string& text);

}  // namespace manta::gcs
