#include "runtime/core_worker/runtime_env.h"

#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/package_name.h"
#include "dashboard/tar_reader.h"
#include "gtest/gtest.h"

namespace manta::core {
namespace {

class RuntimeEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_driver_env_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    kv_.exists = [this](const std::string& name) -> absl::StatusOr<bool> { return store_.count(name) > 0; };
    kv_.put = [this](const std::string& name, const std::string& data) {
      ++puts_;
      if (auto s = CheckPackageContent(name, data); !s.ok()) return s;  // as the GCS does
      store_[name] = data;
      return absl::OkStatus();
    };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::map<std::string, std::string> store_;
  int puts_ = 0;
  PackageKv kv_;
};

TEST_F(RuntimeEnvTest, ALocalDirectoryIsPackedAndUploadedOnceByContent) {
  ASSERT_TRUE(MakeDirs(dir_ + "/src/data").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/src/data/input.txt", "input\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/src/.gitignore", "secret.txt\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/src/secret.txt", "not shipped\n").ok());
  auto env = MakeRuntimeEnv(dir_ + "/src", {{"A", "1"}}, kv_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->env_vars().at("A"), "1");
  const std::string& name = env->working_dir_package();
  ASSERT_EQ(store_.count(name), 1u);
  EXPECT_EQ(name, PackageNameOf(store_[name]));
  ASSERT_TRUE(dashboard::ExtractTar(store_[name], dir_ + "/out", {}).ok());
  EXPECT_EQ(*ReadFile(dir_ + "/out/data/input.txt"), "input\n");
  EXPECT_FALSE(PathExists(dir_ + "/out/secret.txt"));
  // The same tree again: the same name, not uploaded twice.
  auto again = MakeRuntimeEnv(dir_ + "/src", {}, kv_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->working_dir_package(), name);
  EXPECT_EQ(puts_, 1);
  // By reference, once uploaded.
  auto by_ref = MakeRuntimeEnv("gcs://" + name, {}, kv_);
  ASSERT_TRUE(by_ref.ok()) << by_ref.status();
  EXPECT_EQ(by_ref->working_dir_package(), name);
}

TEST_F(RuntimeEnvTest, WhatCannotBeShippedSafelyIsRefused) {
  // A symlink out of the tree.
  ASSERT_TRUE(MakeDirs(dir_ + "/src").ok());
  ASSERT_EQ(symlink("/etc/passwd", (dir_ + "/src/passwd").c_str()), 0);
  auto escaping = MakeRuntimeEnv(dir_ + "/src", {}, kv_);
  EXPECT_EQ(escaping.status().code(), absl::StatusCode::kInvalidArgument) << escaping.status();
  EXPECT_TRUE(absl::StrContains(escaping.status().message(), "runtime_env working_dir")) << escaping.status();
  EXPECT_EQ(MakeRuntimeEnv(dir_ + "/missing", {}, kv_).status().code(), absl::StatusCode::kNotFound);
  // A package name that is not one, or one never uploaded.
  EXPECT_EQ(MakeRuntimeEnv("gcs://../../etc", {}, kv_).status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = MakeRuntimeEnv("gcs://" + PackageNameOf("nothing"), {}, kv_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MakeRuntimeEnv("", {{"A=B", "1"}}, kv_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(puts_, 0);
  EXPECT_TRUE(store_.empty());
}

}  // namespace
}  // namespace manta::core
