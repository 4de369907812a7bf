// bench_train: training throughput of the kernels on this machine.
//
//   build/bin/bench_train [--json FILE] [--steps 3] [--skip_gloo]
//
// (a) one process, one device: FLOP/s of a training step of manta-35m
//     (MaxText's count) over raw sgemm FLOP/s measured in the same run, at
//     1 and 2 OpenBLAS threads;
// (b) two processes, fsdp 2, one thread each: scaling efficiency against
//     the one-process, one-thread step, and the share of the step spent in
//     collectives;
// (c) gloo over loopback: the ring-chunked allreduce the kernels use
//     against gloo's newer allreduce(AllreduceOptions) API, the ring
//     allgather, and the broadcast of a returning slice's state transfer.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/common/report.h"
#include "bench/train/gloo_bench.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "train/kernels/blas.h"
#include "train/kernels/flops.h"
#include "train/kernels/train.h"

namespace manta::train::bench {
namespace {

const std::string kBaseYaml = std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml";

std::vector<std::string> ModelArgs(int steps) {
  return {"model_name=manta-35m", "per_device_batch_size=4", "max_target_length=256", "steps=" + std::to_string(steps),
          "learning_rate=1e-3"};
}

double SgemmGflops(int threads) {
  SetBlasThreads(threads);
  const int64_t n = 2048;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  Gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    Gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct StepTimes {
  double seconds = 0, collectives = 0, background = 0;
};

// Median over the steps after the first (which warms caches and buffers).
StepTimes SingleProcess(const Config& config, int threads) {
  RunOptions options;
  options.blas_threads = threads;
  auto result = RunTraining(config, DistributedEnv{}, options);
  if (!result.ok()) {
    std::cerr << "bench_train: " << result.status() << "\n";
    std::exit(1);
  }
  std::vector<double> secs;
  for (size_t i = 1; i < result->steps.size(); ++i) secs.push_back(result->steps[i].seconds);
  return {Median(secs), 0};
}

StepTimes TwoProcesses(const std::string& bin_dir, int steps) {
  const std::string metrics =
      (std::filesystem::temp_directory_path() / ("bench_train_" + std::to_string(::getpid()) + ".jsonl")).string();
  std::filesystem::remove(metrics);
  std::vector<std::string> args = {
      bin_dir + "/manta_train_local", "--num_processes=2", "--chips_per_host=1", "--blas_threads=1", "--", kBaseYaml};
  for (const auto& a : ModelArgs(steps)) args.push_back(a);
  args.push_back("metrics_file=" + metrics);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::vector<double> secs, comm, background;
  std::ifstream in(metrics);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (first) {
      first = false;
      continue;
    }
    secs.push_back(j.at("seconds").get<double>());
    comm.push_back(j.at("seconds_in_collectives").get<double>());
    background.push_back(j.at("seconds_in_background_collectives").get<double>());
  }
  std::filesystem::remove(metrics);
  if (secs.empty()) {
    std::cerr << "bench_train: the two-process run produced no steps (exit status " << status << ")\n";
    std::exit(1);
  }
  return {Median(secs), Median(comm), Median(background)};
}

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "bench_train";
}

}  // namespace
}  // namespace manta::train::bench

int main(int argc, char** argv) {
  using namespace manta::train;
  using namespace manta::train::bench;
  std::string json;
  int steps = 3, gloo_child = -1, port = 0;
  bool skip_gloo = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--json")
      json = next();
    else if (arg.rfind("--json=", 0) == 0)
      json = arg.substr(7);
    else if (arg == "--steps")
      steps = std::atoi(next().c_str());
    else if (arg.rfind("--steps=", 0) == 0)
      steps = std::atoi(arg.c_str() + 8);
    else if (arg == "--skip_gloo")
      skip_gloo = true;
    else if (arg.rfind("--gloo_child=", 0) == 0)
      gloo_child = std::atoi(arg.c_str() + 13);
    else if (arg.rfind("--port=", 0) == 0)
      port = std::atoi(arg.c_str() + 7);
    else {
      std::cerr << "usage: bench_train [--json FILE] [--steps N] [--skip_gloo]\n";
      return 2;
    }
  }
  if (gloo_child >= 0) return RunGlooChild(gloo_child, port);
  spdlog::set_level(spdlog::level::warn);
  const int total_steps = steps + 1;
  auto config = LoadConfig([&] {
    std::vector<std::string> args = {kBaseYaml};
    for (const auto& a : ModelArgs(total_steps)) args.push_back(a);
    return args;
  }());
  if (!config.ok()) {
    std::cerr << config.status() << "\n";
    return 1;
  }
  const double step_flops = TrainingFlopsPerDevice(*config).total();
  std::cout << "model manta-35m: " << config->model.ParamCount() / 1e6 << "M params, " << step_flops / 1e9
            << " GFLOP per step (batch 4 x 256)\n";
  manta::bench::Report report;
  double one_thread_step = 0;
  for (int threads : {1, 2}) {
    const double sgemm = SgemmGflops(threads);
    const StepTimes t = SingleProcess(*config, threads);
    if (threads == 1) one_thread_step = t.seconds;
    const double achieved = step_flops / t.seconds / 1e9;
    std::cout << threads << " thread(s): step " << t.seconds << " s, " << achieved << " GFLOP/s vs sgemm 2048^3 "
              << sgemm << " GFLOP/s\n";
    report.Add(absl::StrCat("train_step_gflops_vs_sgemm_", threads, "thread"), achieved, "GFLOP/s", sgemm);
  }
  const std::string bin_dir = std::filesystem::path(SelfPath()).parent_path().string();
  const StepTimes two = TwoProcesses(bin_dir, total_steps);
  std::cout << "2 processes fsdp 2: step " << two.seconds << " s (1 process: " << one_thread_step
            << " s), blocked in collectives " << two.collectives << " s, gradient reductions " << two.background
            << " s behind the backward pass\n";
  // Same per-device batch: perfect scaling doubles the tokens per second.
  const double tokens = 4.0 * 256;
  report.Add("fsdp2_scaling_efficiency", 2 * tokens / two.seconds, "tokens/s", 2 * tokens / one_thread_step);
  report.Add("fsdp2_seconds_blocked_in_collectives_per_step", two.collectives, "s", two.seconds);
  report.Add("fsdp2_seconds_of_overlapped_reductions_per_step", two.background, "s", two.seconds);
  if (!skip_gloo) {
    auto gloo = MeasureGloo(SelfPath());
    for (int mib : {1, 16}) {
      const std::string m = std::to_string(mib) + "MiB";
      report.Add("gloo_allreduce_ring_chunked_" + m, gloo["allreduce_ring_chunked_" + m], "GiB/s",
                 gloo["allreduce_options_api_" + m]);
      report.Add("gloo_allgather_ring_" + m, gloo["allgather_ring_" + m], "GiB/s");
      // A returning slice's state transfer: one broadcast per tensor.
      report.Add("gloo_broadcast_" + m, gloo["broadcast_fresh_" + m], "GiB/s");
    }
  }
  report.Print();
  if (!json.empty()) {
    absl::Status s = report.WriteJson(json);
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  return 0;
}
