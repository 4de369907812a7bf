#include "gcs/storage_config.h"

#include <map>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using Vars = std::map<std::string, std::string>;

class FakeEnv {
 public:
  explicit FakeEnv(Vars vars) : vars_(std::move(vars)) {}
  GetEnv Get() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

StorageFlags Flags(const std::string& storage) {
  StorageFlags f;
  f.storage = storage;
  f.sqlite_path = "/session/gcs_store.sqlite";
  return f;
}

TEST(ParseRedisAddressTest, AcceptsUrlsAndHostPort) {
  auto plain = ParseRedisAddress("redis://10.0.0.5:7000");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->host, "10.0.0.5");
  EXPECT_EQ(plain->port, 7000);
  EXPECT_TRUE(plain->password.empty());

  auto with_password = ParseRedisAddress("redis://:p%40ss:word@redis.internal/");
  ASSERT_TRUE(with_password.ok()) << with_password.status();
  EXPECT_EQ(with_password->host, "redis.internal");
  EXPECT_EQ(with_password->port, 6379);
  EXPECT_EQ(with_password->password, "p@ss:word");
  EXPECT_TRUE(with_password->username.empty());

  auto user = ParseRedisAddress("redis://gcs:secret@h:1");
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(user->username, "gcs");
  EXPECT_EQ(user->password, "secret");

  auto v6 = ParseRedisAddress("redis://[::1]:6380");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:6380");

  auto bare = ParseRedisAddress("127.0.0.1:6390");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, 6390);
}

TEST(ParseRedisAddressTest, RefusesMalformedAddresses) {
  for (const char* bad : {"redis://h:0", "redis://h:65536", "redis://h:12ab", "redis://h:", "redis://", "redis://:pw@",
                          "rediss://h:1", "http://h:1", "redis://h:1/2", "redis://pw@h:1", "redis://h h:1",
                          "redis://[::1", "redis://:bad%zz@h:1", "h:1/0", ":6379"}) {
    auto parsed = ParseRedisAddress(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(absl::StrContains(ParseRedisAddress("rediss://h:1").status().message(), "TLS"));
}

TEST(ResolveStorageTest, SqliteUnlessRedisIsNamed) {
  FakeEnv env(Vars{});
  auto config = ResolveStorage(Flags(""), env.Get());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->kind, StorageKind::kSqlite);
  EXPECT_EQ(config->sqlite_path, "/session/gcs_store.sqlite");
  EXPECT_EQ(ResolveStorage(Flags("memory"), env.Get())->kind, StorageKind::kMemory);

  auto unknown = ResolveStorage(Flags("postgres"), env.Get());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "'postgres'")) << unknown.status();
  auto needs_env = ResolveStorage(Flags("redis"), env.Get());
  EXPECT_EQ(needs_env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(needs_env.status().message(), "RAY_REDIS_ADDRESS")) << needs_env.status();
}

TEST(ResolveStorageTest, RaysEnvironmentSelectsRedis) {
  FakeEnv ray(Vars{{"RAY_REDIS_ADDRESS", "10.0.0.5:7000"}, {"RAY_REDIS_PASSWORD", "from-ray"}});
  auto config = ResolveStorage(Flags(""), ray.Get());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kind, StorageKind::kRedis);
  EXPECT_EQ(config->redis.endpoint.ToString(), "10.0.0.5:7000");
  EXPECT_EQ(config->redis.endpoint.password, "from-ray");
  EXPECT_EQ(config->redis.ns, "manta");
  EXPECT_EQ(config->Describe(), "redis at 10.0.0.5:7000 namespace=manta");
  // An explicit --storage wins over the environment.
  EXPECT_EQ(ResolveStorage(Flags("sqlite"), ray.Get())->kind, StorageKind::kSqlite);

  FakeEnv both(Vars{{"RAY_REDIS_ADDRESS", "10.0.0.5:7000"},
                    {"MANTA_REDIS_ADDRESS", "redis://10.0.0.6:7001"},
                    {"RAY_REDIS_PASSWORD", "from-ray"},
                    {"MANTA_REDIS_PASSWORD", "from-manta"}});
  config = ResolveStorage(Flags("redis"), both.Get());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->redis.endpoint.ToString(), "10.0.0.6:7001");
  EXPECT_EQ(config->redis.endpoint.password, "from-manta");

  FakeEnv bad(Vars{{"RAY_REDIS_ADDRESS", "10.0.0.5:port"}});
  auto refused = ResolveStorage(Flags(""), bad.Get());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "environment")) << refused.status();
}

TEST(ResolveStorageTest, PasswordSourcesInOrder) {
  FakeEnv env(Vars{{"RAY_REDIS_PASSWORD", "from-env"}});
  auto url = ResolveStorage(Flags("redis://:from-url@h:1"), env.Get());
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->redis.endpoint.password, "from-url");
  EXPECT_EQ(url->Describe(), "redis at h:1 namespace=manta");  // never the password

  ScopedTempDir dir("manta_storage_config_test");
  StorageFlags flags = Flags("redis://h:1");
  flags.password_file = dir.path() + "/password";
  ASSERT_TRUE(WriteFileAtomic(flags.password_file, "from-file\n").ok());
  auto file = ResolveStorage(flags, env.Get());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->redis.endpoint.password, "from-file");
  flags.password_file = dir.path() + "/missing";
  EXPECT_EQ(ResolveStorage(flags, env.Get()).status().code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(ResolveStorage(Flags("redis://h:1"), env.Get())->redis.endpoint.password, "from-env");

  // A malformed URL is refused without echoing it: it may hold a password.
  auto bad = ResolveStorage(Flags("redis://:hunter2@h:99999"), env.Get());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(bad.status().message(), "hunter2")) << bad.status();
  auto typo = ResolveStorage(Flags("redsi://:hunter2@h:1"), env.Get());
  EXPECT_FALSE(absl::StrContains(typo.status().message(), "hunter2")) << typo.status();

  flags = Flags("redis://h:1");
  flags.ns = "";
  EXPECT_EQ(ResolveStorage(flags, env.Get()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::gcs
