// Helpers shared by the training and checkpoint tests.
#pragma once

#include <string>
#include <vector>

#include "train/kernels/config.h"
#include "train/kernels/mesh.h"
#include "train/kernels/train.h"

namespace manta::train {

// The tiny model with the test's overrides on top of configs/base.yml.
Config TinyConfig(const std::vector<std::string>& overrides);
DistributedEnv LocalEnv(int chips);
TrainingResult RunOrDie(const Config& config, const DistributedEnv& env, const RunOptions& options = {});
std::vector<double> Losses(const TrainingResult& result);
void ExpectLossesMatch(const std::vector<double>& expected, const std::vector<double>& actual,
                       size_t expected_offset = 0);
// Runs manta_train_local with launcher flags, then base.yml, model_name=tiny,
// the tiny defaults and `overrides`; returns its exit code.
int Launch(const std::vector<std::string>& launcher_flags, const std::vector<std::string>& overrides);
std::vector<double> ReadMetricsLosses(const std::string& path);

// A fresh directory removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace manta::train
