#include "examples/maxtext_main.h"

#include <manta/api.h>
#include <manta/maxtext.h>
#include <manta/tpu.h>
#include <manta/train.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace maxtext_example {
namespace {

absl::Status MaxTextLoop(std::vector<std::string> argv) { return manta::train::RunMaxText(argv); }
MANTA_REMOTE(MaxTextLoop);

// The value of MaxText argument `key=...`, or "".
std::string ArgValue(const std::vector<std::string>& argv, const std::string& key) {
  std::string value;
  for (const std::string& a : argv) {
    if (a.rfind(key + "=", 0) == 0) value = a.substr(key.size() + 1);
  }
  return value;
}

constexpr char kUsage[] =
    "usage: maxtext_[elastic_]trainer [--address=HOST:PORT] [--num_workers=N | --num_workers=MIN,MAX]\n"
    "           [--topology=4x4] [--accelerator_type=TPU-V6E] [--max_failures=N] [--num_to_keep=N]\n"
    "           [--storage_path=DIR] [--scheduling_timeout_s=S] base.yml [key=value ...]\n";

int Usage(const std::string& why) {
  std::cerr << "maxtext_trainer: " << why << "\n" << kUsage;
  return 2;
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace

int Main(int argc, char** argv, bool elastic) {
  // The step lines, as MaxText prints them (in every worker process too:
  // a worker runs main up to Init).
  spdlog::stdout_logger_mt("train")->set_pattern("%v");
  // Usage needs no cluster (a worker is never started with --help).
  if (AsksForHelp(argc, argv)) {
    std::cout << kUsage;
    return 0;
  }
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << "maxtext_trainer: " << s.message() << "\n";
    return 1;
  }

  std::map<std::string, std::string> flags = {{"topology", "4x4"},
                                              {"accelerator_type", "TPU-V6E"},
                                              {"max_failures", "3"},
                                              {"num_to_keep", "0"},
                                              {"num_workers", ""},
                                              {"storage_path", ""},
                                              {"scheduling_timeout_s", "600"}};
  int i = 1;
  for (; i < argc && std::string(argv[i]).rfind("--", 0) == 0; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (eq == std::string::npos || flags.count(arg.substr(2, eq - 2)) == 0) return Usage("unknown flag " + arg);
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  std::vector<std::string> maxtext_args(argv + i, argv + argc);
  if (maxtext_args.empty()) return Usage("the base config file is missing");
  if (absl::Status s = manta::train::CheckMaxTextConfig(maxtext_args); !s.ok()) {
    std::cerr << "maxtext_trainer: " << s.message() << "\n";
    return 1;
  }
  auto shape = manta::tpu::TrySliceShapeOf(flags["accelerator_type"], flags["topology"]);
  if (!shape.ok()) return Usage(std::string(shape.status().message()));
  int min_workers = 0, max_workers = 0, max_failures = 0, num_to_keep = 0, timeout_s = 0;
  try {
    const std::string& n = flags["num_workers"];
    if (!n.empty()) {
      const size_t comma = n.find(',');
      min_workers = std::stoi(n.substr(0, comma));
      max_workers = comma == std::string::npos ? min_workers : std::stoi(n.substr(comma + 1));
    }
    max_failures = std::stoi(flags["max_failures"]);
    num_to_keep = std::stoi(flags["num_to_keep"]);
    timeout_s = std::stoi(flags["scheduling_timeout_s"]);
  } catch (const std::exception&) {
    return Usage("--num_workers, --max_failures, --num_to_keep and --scheduling_timeout_s take integers");
  }
  if (max_workers == 0) {                    // every whole slice of that shape the cluster has
    auto slices = manta::tpu::ListSlices();  // kept: ranging over a temporary's member would read freed memory
    for (const auto& s : slices[shape->pod_type]) max_workers += s.num_hosts;
    if (max_workers == 0) {
      std::cerr << "maxtext_trainer: no whole " << shape->pod_type << " slice is in the cluster\n";
      return 1;
    }
    min_workers = elastic ? shape->hosts_per_slice : max_workers;
  }

  manta::train::ScalingConfig scaling;
  scaling.use_tpu = true;
  scaling.num_workers = manta::train::WorkerCount(min_workers, max_workers);
  scaling.topology = flags["topology"];
  scaling.accelerator_type = flags["accelerator_type"];
  scaling.resources_per_worker = {{"TPU", static_cast<double>(shape->chips_per_host)}};
  scaling.placement_strategy = "SPREAD";
  manta::train::RunConfig run;
  run.name = ArgValue(maxtext_args, "run_name");
  run.storage_path =
      flags["storage_path"].empty() ? ArgValue(maxtext_args, "base_output_directory") : flags["storage_path"];
  run.failure_config.max_failures = max_failures;
  run.checkpoint_config.num_to_keep = num_to_keep;
  run.scheduling_timeout = absl::Seconds(timeout_s);

  manta::train::JaxTrainer trainer(MaxTextLoop, maxtext_args, scaling, run);
  trainer.SetPreflight(manta::train::MaxTextPreflight(maxtext_args));
  manta::train::Result result = trainer.Fit();
  int status = 0;
  if (result.ok()) {
    auto loss = result.metrics.find("loss");
    std::ostringstream line;
    line << "Training finished: " << result.num_attempts << " attempt(s), " << result.num_failures
         << " failure(s), final loss " << (loss == result.metrics.end() ? 0.0 : loss->second)
         << (result.checkpoint ? ", checkpoint " + result.checkpoint->path : std::string()) << "\n";
    // One write: the workers' forwarded lines are printed from another
    // thread and would otherwise land in the middle of this one.
    std::cout << line.str() << std::flush;
  } else {
    std::cerr << "Training failed: " << result.error << std::endl;
    status = 1;
  }
  manta::Shutdown();
  return status;
}

}  // namespace maxtext_example
