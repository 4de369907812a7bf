#include "raylet/runtime_env_manager.h"

#include <uv.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "common/package_name.h"
#include "dashboard/tar_writer.h"
#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

std::string ReadEnvFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string OneFileArchive(const std::string& path, const std::string& data) {
  std::string tar;
  dashboard::AppendTarEntry(&tar, path, '0', data);
  dashboard::FinishTar(&tar);
  return tar;
}

class RuntimeEnvManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_runtime_env_test_XXXXXX";
    temp_ = mkdtemp(tmpl);
    root_ = temp_ + "/runtime_resources/nodes/n1";
    Make();
  }
  void TearDown() override {
    envs_.reset();
    std::filesystem::remove_all(temp_);
  }

  void Make() {
    envs_ = std::make_unique<RuntimeEnvManager>(
        RuntimeEnvManagerOptions{.root = root_, .limits = {}}, &loop_,
        [this](const JobId& job, std::function<void(absl::StatusOr<rpc::RuntimeEnv>)> cb) {
          ++job_reads_;
          auto it = jobs_.find(job);
          if (it == jobs_.end()) return cb(absl::NotFoundError("no such job"));
          cb(it->second);
        },
        [this](const std::string& name, std::function<void(absl::StatusOr<std::string>)> cb) {
          ++package_reads_;
          auto it = kv_.find(name);
          if (it == kv_.end()) return cb(absl::NotFoundError("it was never uploaded"));
          // Answered later, as the GCS client does.
          loop_.Post([cb, data = it->second] { cb(data); });
        },
        [this](const JobId& job) { return in_use_.count(job) > 0; });
  }

  // Prepares `job` and runs the loop until it is answered.
  absl::StatusOr<JobEnv> Prepare(const JobId& job) {
    std::optional<absl::StatusOr<JobEnv>> out;
    envs_->Prepare(job, [&](absl::StatusOr<JobEnv> env) { out = std::move(env); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out.value_or(absl::DeadlineExceededError("no answer"));
  }

  bool RunUntil(const std::function<bool()>& cond, absl::Duration limit = absl::Seconds(20)) {
    absl::Time deadline = absl::Now() + limit;
    auto wake = loop_.RunEvery(absl::Milliseconds(5), [] {});
    while (!cond()) {
      if (absl::Now() > deadline) return false;
      uv_run(loop_.uv_loop(), UV_RUN_ONCE);
    }
    return true;
  }

  // Stores `archive` under `name` (its own name by default) and gives job 1
  // that package and one variable.
  JobId JobWithPackage(const std::string& archive, std::string name = "") {
    if (name.empty()) name = PackageNameOf(archive);
    kv_[name] = archive;
    JobId job = *JobId::FromHex("00000001");
    rpc::RuntimeEnv env;
    env.set_working_dir_package(name);
    (*env.mutable_env_vars())["JOB_VAR"] = "job-value";
    jobs_[job] = env;
    return job;
  }

  EventLoop loop_;
  std::string temp_;
  std::string root_;
  std::map<JobId, rpc::RuntimeEnv> jobs_;
  std::map<std::string, std::string> kv_;
  std::set<JobId> in_use_;
  int job_reads_ = 0;
  int package_reads_ = 0;
  std::unique_ptr<RuntimeEnvManager> envs_;
};

TEST_F(RuntimeEnvManagerTest, UnpacksOncePerJobAndRemovesWhenTheJobIsDone) {
  JobId job = JobWithPackage(OneFileArchive("data/input.txt", "hello from the package\n"));
  // Two workers start at once: one fetch, one unpack.
  std::vector<absl::StatusOr<JobEnv>> answers;
  envs_->Prepare(job, [&](absl::StatusOr<JobEnv> e) { answers.push_back(std::move(e)); });
  envs_->Prepare(job, [&](absl::StatusOr<JobEnv> e) { answers.push_back(std::move(e)); });
  ASSERT_TRUE(RunUntil([&] { return answers.size() == 2; }));
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->cwd, root_ + "/00000001");
    EXPECT_EQ(a->env_vars.at("JOB_VAR"), "job-value");
  }
  EXPECT_EQ(ReadEnvFile(root_ + "/00000001/data/input.txt"), "hello from the package\n");
  ASSERT_TRUE(Prepare(job).ok());
  EXPECT_EQ(job_reads_, 1);
  EXPECT_EQ(package_reads_, 1);

  // A worker still runs there: the directory stays after the job finished.
  in_use_.insert(job);
  envs_->OnJobFinished(job);
  EXPECT_TRUE(std::filesystem::exists(root_ + "/00000001"));
  in_use_.clear();
  envs_->OnWorkerGone(job);
  EXPECT_EQ(envs_->num_jobs(), 0u);
  ASSERT_TRUE(RunUntil([&] { return !std::filesystem::exists(root_ + "/00000001"); }));
}

TEST_F(RuntimeEnvManagerTest, AJobWithoutPackageGetsItsVariablesOnly) {
  JobId job = *JobId::FromHex("00000002");
  (*jobs_[job].mutable_env_vars())["A"] = "1";
  auto env = Prepare(job);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->cwd, "");
  EXPECT_EQ(env->env_vars.at("A"), "1");
  // A job the GCS does not know (a hand-made lease) has an empty env.
  auto unknown = Prepare(*JobId::FromHex("00000009"));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_TRUE(unknown->cwd.empty() && unknown->env_vars.empty());
}

TEST_F(RuntimeEnvManagerTest, BytesThatAreNotTheNamedPackageAreRefused) {
  std::string real = OneFileArchive("a.txt", "real");
  JobId job = JobWithPackage(OneFileArchive("a.txt", "tampered"), PackageNameOf(real));
  auto env = Prepare(job);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(), "does not match its content")) << env.status();
  EXPECT_TRUE(absl::StrContains(env.status().message(), "job 00000001")) << env.status();
  EXPECT_FALSE(std::filesystem::exists(root_ + "/00000001"));
  // Not kept: the next worker asks again (the KV may have been fixed).
  kv_[PackageNameOf(real)] = real;
  ASSERT_TRUE(Prepare(job).ok());
  EXPECT_EQ(package_reads_, 2);
}

TEST_F(RuntimeEnvManagerTest, AnArchiveThatEscapesIsRefusedAndWritesNothing) {
  std::string tar;
  dashboard::AppendTarEntry(&tar, "ok.txt", '0', "fine");
  dashboard::AppendTarEntry(&tar, "../../escaped.txt", '0', "evil");
  dashboard::FinishTar(&tar);
  JobId job = JobWithPackage(tar);
  auto env = Prepare(job);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(), "refused the working_dir package")) << env.status();
  EXPECT_FALSE(std::filesystem::exists(root_ + "/escaped.txt"));
  EXPECT_FALSE(std::filesystem::exists(temp_ + "/runtime_resources/escaped.txt"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/00000001"));
}

TEST_F(RuntimeEnvManagerTest, MissingPackageAndUnreachableGcsFailTheStart) {
  JobId job = JobWithPackage(OneFileArchive("a", "b"));
  kv_.clear();
  auto env = Prepare(job);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(), "never uploaded")) << env.status();
  // A GCS that does not answer is asked again, a few times.
  int asked = 0;
  envs_ = std::make_unique<RuntimeEnvManager>(
      RuntimeEnvManagerOptions{.root = root_, .limits = {}, .retry_period = absl::Milliseconds(1), .max_attempts = 3},
      &loop_,
      [&](const JobId&, std::function<void(absl::StatusOr<rpc::RuntimeEnv>)> cb) {
        ++asked;
        cb(absl::UnavailableError("GCS down"));
      },
      [](const std::string&, std::function<void(absl::StatusOr<std::string>)>) { FAIL(); },
      [](const JobId&) { return false; });
  env = Prepare(job);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(), "GCS down")) << env.status();
  EXPECT_EQ(asked, 3);
}

TEST_F(RuntimeEnvManagerTest, AGcsThatComesBackIsAskedAgain) {
  JobId job = JobWithPackage(OneFileArchive("data/input.txt", "back"));
  int job_calls = 0;
  int package_calls = 0;
  envs_ = std::make_unique<RuntimeEnvManager>(
      RuntimeEnvManagerOptions{.root = root_, .limits = {}, .retry_period = absl::Milliseconds(1), .max_attempts = 5},
      &loop_,
      [&](const JobId& j, std::function<void(absl::StatusOr<rpc::RuntimeEnv>)> cb) {
        if (++job_calls < 3) return cb(absl::DeadlineExceededError("slow GCS"));
        cb(jobs_.at(j));
      },
      [&](const std::string& name, std::function<void(absl::StatusOr<std::string>)> cb) {
        if (++package_calls < 2) return cb(absl::UnavailableError("GCS restarting"));
        cb(kv_.at(name));
      },
      [](const JobId&) { return false; });
  auto env = Prepare(job);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(ReadEnvFile(env->cwd + "/data/input.txt"), "back");
  EXPECT_EQ(job_calls, 3);
  EXPECT_EQ(package_calls, 2);
}

TEST_F(RuntimeEnvManagerTest, DestructionRemovesEveryJobsDirectory) {
  JobId job = JobWithPackage(OneFileArchive("x", "y"));
  ASSERT_TRUE(Prepare(job).ok());
  ASSERT_TRUE(std::filesystem::exists(root_ + "/00000001/x"));
  envs_.reset();
  EXPECT_FALSE(std::filesystem::exists(root_));
}

}  // namespace
}  // namespace manta::raylet
