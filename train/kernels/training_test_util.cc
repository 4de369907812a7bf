#include "train/kernels/training_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace manta::train {
namespace {

// Step lines of in-process runs would drown the test output.
const bool kQuietLogs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

const std::string& BaseYaml() {
  static const std::string path = std::string(MANTA_TRAIN_SOURCE_DIR) + "/configs/base.yml";
  return path;
}

const std::vector<std::string>& TinyDefaults() {
  static const auto* d = new std::vector<std::string>{"model_name=tiny", "steps=20", "learning_rate=0.01",
                                                      "max_target_length=32", "learning_rate_schedule_steps=20"};
  return *d;
}

}  // namespace

Config TinyConfig(const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {BaseYaml()};
  args.insert(args.end(), TinyDefaults().begin(), TinyDefaults().end());
  args.insert(args.end(), overrides.begin(), overrides.end());
  auto config = LoadConfig(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : Config{};
}

DistributedEnv LocalEnv(int chips) {
  DistributedEnv env;
  env.chips_per_host = chips;
  return env;
}

TrainingResult RunOrDie(const Config& config, const DistributedEnv& env, const RunOptions& options) {
  auto result = RunTraining(config, env, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : TrainingResult{};
}

std::vector<double> Losses(const TrainingResult& result) {
  std::vector<double> losses;
  for (const StepMetrics& m : result.steps) losses.push_back(m.loss);
  return losses;
}

void ExpectLossesMatch(const std::vector<double>& expected, const std::vector<double>& actual, size_t offset) {
  ASSERT_EQ(actual.size() + offset, expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i + offset], 1e-4 * std::fabs(expected[i + offset])) << "step " << i + offset;
  }
}

int Launch(const std::vector<std::string>& launcher_flags, const std::vector<std::string>& overrides) {
  const char* bin_dir = std::getenv("MANTA_BIN_DIR");
  std::string launcher = std::string(bin_dir ? bin_dir : MANTA_TRAIN_BIN_DIR) + "/manta_train_local";
  std::vector<std::string> args = {launcher};
  args.insert(args.end(), launcher_flags.begin(), launcher_flags.end());
  args.push_back("--");
  args.push_back(BaseYaml());
  args.insert(args.end(), TinyDefaults().begin(), TinyDefaults().end());
  args.insert(args.end(), overrides.begin(), overrides.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(launcher.c_str(), cargs.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<double> ReadMetricsLosses(const std::string& path) {
  std::vector<double> losses;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) losses.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  return losses;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "manta_train_test_XXXXXX").string();
  path_ = ::mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace manta::train
