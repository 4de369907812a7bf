// bench_trainer: what the trainer costs and how fast it starts and recovers,
// on a cluster of two simulated v6e-16 slices (8 TPU hosts) it starts.
//
//   bench_trainer [--json FILE] [--model=manta-35m] [--seq=64] [--steps=10] [--rounds=2] [--skip_recovery]
//
// 1. Overhead: the same config (one slice: 4 workers x 4 devices, fsdp 4 x
//    tensor 4) under the trainer and under manta_train_local, taking turns
//    `rounds` times; the median step time of each (steps 2 and later).
//    ratio = local / trainer (1.0: no overhead; the goal is >= 0.97).
// 2. Fit to the first completed step on two slices (8 workers), broken into
//    driver start + controller, reserve, workers up, join + restore, first
//    step.
// 3. A host killed mid-run (kill -9 of its raylet and workers) and a
//    replacement host started at once: kill to the first completed step of
//    the restarted attempt, broken into detect, tear down, reserve (waits for
//    the replacement), workers up, join + restore (checkpoint), first step.
#include <manta/api.h>
#include <manta/state.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/common/cluster.h"
#include "bench/common/report.h"
#include "common/file_util.h"
#include "common/process.h"
#include "nlohmann/json.hpp"

namespace {

using manta::CommandResult;

struct Options {
  std::string model = "manta-35m";
  int seq = 64;
  int steps = 10;
  int rounds = 2;
};

std::string Median(std::vector<double> v, double* out) {
  std::sort(v.begin(), v.end());
  *out = v.empty() ? 0 : v[v.size() / 2];
  return "";
}

// Step times of a metrics file, steps >= 2 (the first ones warm up).
std::vector<double> StepSeconds(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j["step"].get<int64_t>() >= 2) out.push_back(j["seconds"].get<double>());
  }
  return out;
}

std::vector<std::string> MaxTextArgs(const Options& o, const std::string& dir, const std::string& run, int steps,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {std::string(MANTA_TRAIN_CONFIG_DIR) + "/base.yml",
                                "model_name=" + o.model,
                                "max_target_length=" + std::to_string(o.seq),
                                "per_device_batch_size=1",
                                "steps=" + std::to_string(steps),
                                "ici_fsdp_parallelism=4",
                                "ici_tensor_parallelism=4",
                                "base_output_directory=" + dir,
                                "run_name=" + run,
                                "metrics_file=" + dir + "/" + run + ".jsonl"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

CommandResult Run(const std::string& exe, std::vector<std::string> args, absl::Duration timeout) {
  manta::SpawnOptions o;
  o.executable = exe;
  o.args = std::move(args);
  auto r = manta::RunAndCapture(o, timeout);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = std::string(r.status().message());
    return failed;
  }
  return *r;
}

CommandResult Driver(const manta::bench::LocalCluster& cluster, const std::string& dir, std::vector<std::string> flags,
                     const std::vector<std::string>& args) {
  flags.insert(flags.begin(), "--temp-dir=" + cluster.temp_dir());
  flags.push_back("--storage_path=" + dir + "/results");
  flags.push_back("--");
  flags.insert(flags.end(), args.begin(), args.end());
  return Run(cluster.bin_dir() + "/train_driver", flags, absl::Minutes(20));
}

// The first number the regex's group 1 captures in `text` after `from`, or -1.
double Find(const std::string& text, const std::string& pattern, size_t from = 0) {
  std::smatch m;
  std::string rest = text.substr(std::min(from, text.size()));
  if (!std::regex_search(rest, m, std::regex(pattern))) return -1;
  return std::stod(m[1].str());
}

// The run of `run_id` with its metric series.
std::optional<manta::state::TrainRun> FindRun(const std::string& run_id) {
  for (auto& r : manta::state::ListTrainRuns(/*with_metrics=*/true)) {
    if (r.run_id == run_id) return r;
  }
  return std::nullopt;
}

std::string RunIdOf(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(run_id=([0-9a-f]{32}))")) ? m[1].str() : "";
}

// The first metric point at or after `after_ms`.
const manta::state::TrainMetricPoint* FirstPointAfter(const manta::state::TrainRun& run, int64_t after_ms) {
  for (const auto& p : run.metrics) {
    if (p.time_ms >= after_ms) return &p;
  }
  return nullptr;
}

bool Overhead(const manta::bench::LocalCluster& cluster, const Options& o, const std::string& dir,
              manta::bench::Report* report) {
  std::vector<double> local, trainer;
  for (int round = 0; round < o.rounds; ++round) {
    const std::string lrun = "local" + std::to_string(round), trun = "trainer" + std::to_string(round);
    std::vector<std::string> largs = {"--num_processes=4", "--chips_per_host=4", "--"};
    for (const auto& a : MaxTextArgs(o, dir, lrun, o.steps)) largs.push_back(a);
    CommandResult l = Run(cluster.bin_dir() + "/manta_train_local", largs, absl::Minutes(20));
    CommandResult t = Driver(cluster, dir, {"--num_workers=4"}, MaxTextArgs(o, dir, trun, o.steps));
    if (l.exit_code != 0 || t.exit_code != 0) {
      std::cerr << "overhead round failed:\n" << l.err << t.out << t.err << "\n";
      return false;
    }
    for (double s : StepSeconds(dir + "/" + lrun + ".jsonl")) local.push_back(s);
    for (double s : StepSeconds(dir + "/" + trun + ".jsonl")) trainer.push_back(s);
  }
  double lm = 0, tm = 0;
  Median(local, &lm);
  Median(trainer, &tm);
  report->Add("step_seconds_local", lm, "s");
  report->Add("step_seconds_trainer", tm, "s");
  report->Add("trainer_step_throughput_vs_local", lm / tm, "ratio", 1.0);
  return true;
}

bool FitToFirstStep(const manta::bench::LocalCluster& cluster, const Options& o, const std::string& dir,
                    manta::bench::Report* report) {
  CommandResult r = Driver(cluster, dir, {"--num_workers=8"},
                           MaxTextArgs(o, dir, "fit", 3, {"dcn_data_parallelism=2", "dcn_fsdp_parallelism=1"}));
  auto run = FindRun(RunIdOf(r.out));
  const double fit_start = Find(r.out, R"(FIT_START_MS=(\d+))");
  if (r.exit_code != 0 || !run || run->metrics.empty() || run->attempts.empty() || fit_start < 0) {
    std::cerr << "the two-slice run failed:\n" << r.out << r.err << "\n";
    return false;
  }
  const auto& first = run->metrics.front();
  const double total = (first.time_ms - fit_start) / 1e3;
  const double reserve = Find(r.out, R"(reserved in ([0-9.]+) s)");
  const double up = Find(r.out, R"(workers up in ([0-9.]+) s)");
  const double startup = first.metrics.count("startup_seconds") ? first.metrics.at("startup_seconds") : -1;
  const double step = first.metrics.count("seconds") ? first.metrics.at("seconds") : -1;
  report->Add("fit_to_first_step_2_slices", total, "s");
  report->Add("fit_driver_and_controller", total - reserve - up - startup - step, "s");
  report->Add("fit_reserve_2_slices", reserve, "s");
  report->Add("fit_workers_up", up, "s");
  report->Add("fit_join", startup, "s");
  report->Add("fit_first_step", step, "s");
  return true;
}

bool Recovery(const manta::bench::LocalCluster& cluster, const Options& o, const std::string& dir,
              manta::bench::Report* report) {
  const std::string metrics = dir + "/recover.jsonl";
  CommandResult r;
  std::thread driver([&] {
    r = Driver(cluster, dir, {"--num_workers=8", "--max_failures=3"},
               MaxTextArgs(o, dir, "recover", 16,
                           {"dcn_data_parallelism=2", "dcn_fsdp_parallelism=1", "enable_checkpointing=true",
                            "checkpoint_period=4"}));
  });
  int64_t kill_ms = -1;
  for (int i = 0; i < 2400 && kill_ms < 0; ++i) {
    std::ifstream in(metrics);
    int lines = static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    if (lines >= 6) {
      pid_t victim = cluster.TpuHostRaylet("tpu-group-1", 2);
      if (victim > 0 && kill(victim, SIGKILL) == 0) kill_ms = absl::ToUnixMillis(absl::Now());
      // A replacement host with the same TPU environment, at once.
      (void)cluster.StartTpuHost(manta::bench::V6e16(1), 2);
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  driver.join();
  auto run = FindRun(RunIdOf(r.out));
  if (kill_ms < 0 || r.exit_code != 0 || !run || run->attempts.size() < 2) {
    std::cerr << "the recovery run failed:\n" << r.out << r.err << "\n";
    return false;
  }
  const auto* first = FirstPointAfter(*run, run->attempts[1].start_time_ms);
  if (first == nullptr) return false;
  const size_t second = r.out.find("[State Transition] RESTARTING -> SCHEDULING.");
  const double detect = (run->attempts[0].end_time_ms - kill_ms) / 1e3;
  report->Add("recover_kill_to_first_step", (first->time_ms - kill_ms) / 1e3, "s");
  report->Add("recover_detect", detect, "s");
  report->Add("recover_tear_down", Find(r.out, R"(Shut down the worker group in ([0-9.]+) s)"), "s");
  report->Add("recover_reserve", Find(r.out, R"(reserved in ([0-9.]+) s)", second), "s");
  report->Add("recover_workers_up", Find(r.out, R"(workers up in ([0-9.]+) s)", second), "s");
  report->Add("recover_join_and_restore", first->metrics.at("startup_seconds"), "s");
  report->Add("recover_first_step", first->metrics.at("seconds"), "s");
  report->Add("recover_steps_redone", first->step < 6 ? 6 - first->step : 0, "steps");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The trainer's overhead, start and recovery on two simulated v6e-16 slices."};
  Options o;
  std::string json_path;
  bool skip_recovery = false;
  app.add_option("--json", json_path, "Write the figures here as JSON.");
  app.add_option("--model", o.model, "model_name of the config.");
  app.add_option("--seq", o.seq, "max_target_length.");
  app.add_option("--steps", o.steps, "Steps per overhead run.");
  app.add_option("--rounds", o.rounds, "Overhead rounds (local and trainer in turn).");
  app.add_flag("--skip_recovery", skip_recovery, "Only the overhead and the start.");
  CLI11_PARSE(app, argc, argv);

  manta::bench::LocalCluster cluster;
  if (auto s = cluster.Start("", manta::bench::TwoV6e16Slices()); !s.ok()) {
    std::cerr << "cannot start a cluster: " << s.message() << "\n";
    return 1;
  }
  manta::InitOptions init;
  init.address = cluster.address();
  init.temp_dir = cluster.temp_dir();
  if (auto s = manta::TryInit(init); !s.ok()) {
    std::cerr << "cannot join the cluster: " << s.message() << "\n";
    return 1;
  }
  const std::string dir = cluster.temp_dir() + "/bench_trainer";
  std::filesystem::create_directories(dir);
  manta::bench::Report report;
  bool ok = Overhead(cluster, o, dir, &report) && FitToFirstStep(cluster, o, dir, &report) &&
            (skip_recovery || Recovery(cluster, o, dir, &report));
  manta::Shutdown();
  cluster.Stop();
  report.Print();
  if (!json_path.empty()) {
    if (auto s = report.WriteJson(json_path); !s.ok()) std::cerr << s.message() << "\n";
  }
  return ok ? 0 : 1;
}
