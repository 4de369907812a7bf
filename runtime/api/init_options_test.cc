#include "runtime/api/init_options.h"

#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/session.h"
#include "common/token.h"
#include "common/runtime_env_json.h"
#include "gtest/gtest.h"

namespace manta::internal {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class InitOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_init_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    temp_dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(temp_dir_); }

  SessionPaths MakeSession(const std::string& address) {
    auto session = CreateSession(temp_dir_);
    EXPECT_TRUE(session.ok()) << session.status();
    EXPECT_TRUE(WriteFileAtomic(session->gcs_address(), address + "\n").ok());
    return *session;
  }

  std::string temp_dir_;
  ScopedEnv no_address_{kAddressEnv, nullptr};
  ScopedEnv no_token_{kTokenEnv, nullptr};
};

TEST_F(InitOptionsTest, ParseStripsMantaFlagsAndKeepsTheRest) {
  std::vector<std::string> storage{"prog",       "--steps=3", "--address=10.0.0.1:6379", "in.txt", "--temp-dir",
                                   "/var/manta", "-v"};
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(storage.size());
  auto parsed = ParseInitArgs(argc, argv.data());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.address, "10.0.0.1:6379");
  EXPECT_EQ(parsed->options.temp_dir, "/var/manta");
  ASSERT_EQ(argc, 4);
  EXPECT_STREQ(argv[0], "prog");
  EXPECT_STREQ(argv[1], "--steps=3");
  EXPECT_STREQ(argv[2], "in.txt");
  EXPECT_STREQ(argv[3], "-v");
  EXPECT_EQ(argv[4], nullptr);
  EXPECT_EQ(parsed->original_args, (std::vector<std::string>{"--steps=3", "--address=10.0.0.1:6379", "in.txt",
                                                             "--temp-dir", "/var/manta", "-v"}));
}

TEST_F(InitOptionsTest, ParseRejectsFlagWithoutValue) {
  std::vector<std::string> storage{"prog", "--address"};
  std::vector<char*> argv{storage[0].data(), storage[1].data(), nullptr};
  int argc = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(ParseInitArgs(argc, argv.data()).status()));
}

TEST_F(InitOptionsTest, AddressResolutionOrder) {
  // Nothing anywhere: NotFound that says how to fix it.
  auto none = ResolveGcsAddress("", temp_dir_);
  ASSERT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("--address"), std::string::npos);

  // The session file.
  MakeSession("127.0.0.1:7000");
  EXPECT_EQ(*ResolveGcsAddress("", temp_dir_), "127.0.0.1:7000");
  {
    // The environment beats the session.
    ScopedEnv env(kAddressEnv, "127.0.0.1:8000");
    EXPECT_EQ(*ResolveGcsAddress("", temp_dir_), "127.0.0.1:8000");
    // The flag beats both.
    EXPECT_EQ(*ResolveGcsAddress("127.0.0.1:9000", temp_dir_), "127.0.0.1:9000");
  }
}

TEST_F(InitOptionsTest, TokenFromSessionOnlyForItsCluster) {
  SessionPaths session = MakeSession("127.0.0.1:7000");
  const std::string token = GenerateToken();
  ASSERT_TRUE(WriteTokenFile(session.token(), token).ok());

  InitOptions options;
  options.temp_dir = temp_dir_;
  auto resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->gcs_address, "127.0.0.1:7000");
  EXPECT_EQ(resolved->token, token);
  EXPECT_EQ(resolved->session_dir, session.dir);
  EXPECT_EQ(resolved->worker_executable, "/proc/self/exe");

  options.address = "10.1.1.1:6379";  // another cluster: its token is not ours to send
  resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->token, "");
  EXPECT_EQ(resolved->session_dir, "");
}

TEST_F(InitOptionsTest, TokenFromEnvironmentWins) {
  SessionPaths session = MakeSession("127.0.0.1:7000");
  ASSERT_TRUE(WriteTokenFile(session.token(), GenerateToken()).ok());
  const std::string token = GenerateToken();
  ScopedEnv env(kTokenEnv, token.c_str());
  InitOptions options;
  options.temp_dir = temp_dir_;
  auto resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->token, token);

  ScopedEnv bad(kTokenEnv, "not a token");
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveDriverOptions(options).status()));
}

TEST_F(InitOptionsTest, NodeAddressFromEnvironment) {
  InitOptions options;
  options.address = "10.1.2.1:7000";
  options.temp_dir = temp_dir_;
  {
    ScopedEnv unset(kNodeIpEnv, nullptr);
    auto resolved = ResolveDriverOptions(options);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ(resolved->node_ip, "127.0.0.1");
  }
  ScopedEnv env(kNodeIpEnv, "10.1.2.1");
  auto resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->node_ip, "10.1.2.1");
}

// The Jobs API hands its driver the submitted runtime env; what the
// program sets itself wins, variable by variable.
TEST_F(InitOptionsTest, RuntimeEnvFromTheJobsApiUnderTheProgramsOwn) {
  InitOptions options;
  options.address = "10.1.2.1:7000";
  options.temp_dir = temp_dir_;
  {
    ScopedEnv unset(kRuntimeEnvVar, nullptr);
    auto resolved = ResolveDriverOptions(options);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_TRUE(resolved->runtime_env_working_dir.empty());
    EXPECT_TRUE(resolved->runtime_env_env_vars.empty());
  }
  ScopedEnv submitted(kRuntimeEnvVar, R"({"working_dir": "gcs://pkg", "env_vars": {"A": "job", "B": "job"}})");
  auto resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->runtime_env_working_dir, "gcs://pkg");
  EXPECT_EQ(resolved->runtime_env_env_vars, (std::map<std::string, std::string>{{"A", "job"}, {"B", "job"}}));
  options.runtime_env_working_dir = "./src";
  options.runtime_env_env_vars = {{"B", "mine"}};
  resolved = ResolveDriverOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->runtime_env_working_dir, "./src");
  EXPECT_EQ(resolved->runtime_env_env_vars, (std::map<std::string, std::string>{{"A", "job"}, {"B", "mine"}}));
  ScopedEnv bad(kRuntimeEnvVar, "{");
  EXPECT_EQ(ResolveDriverOptions(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manta::internal
