// manta_train: the per-host entry. Reads its distributed environment from
// flags or the environment (JAX/MEGASCALE-style) and the config from the
// arguments after the flags, then trains.
//
//   export JAX_COORDINATOR_ADDRESS=10.0.0.1:8476 JAX_PROCESS_ID=1 JAX_NUM_PROCESSES=4
//   export MEGASCALE_SLICE_ID=0 MEGASCALE_NUM_SLICES=2
//   manta_train --chips_per_host=4 -- base.yml model_name=llama3-8b steps=100
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "train/kernels/train.h"

namespace {

const char kUsage[] =
    "usage: manta_train [--coordinator_address=H:P] [--process_id=N] [--num_processes=N]\n"
    "                   [--slice_id=N] [--num_slices=N] [--chips_per_host=N] [--host_address=H]\n"
    "                   [--blas_threads=N] -- base.yml [key=value ...]\n"
    "Unset flags fall back to JAX_COORDINATOR_ADDRESS (else MEGASCALE_COORDINATOR_ADDRESS and\n"
    "MEGASCALE_PORT), JAX_PROCESS_ID, JAX_NUM_PROCESSES,\n"
    "MEGASCALE_SLICE_ID, MEGASCALE_NUM_SLICES, and the count of TPU_VISIBLE_CHIPS.\n";

std::string Lookup(const std::map<std::string, std::string>& flags, const std::string& flag, const char* env,
                   const std::string& fallback) {
  auto it = flags.find(flag);
  if (it != flags.end()) return it->second;
  const char* v = env ? std::getenv(env) : nullptr;
  return v && *v ? v : fallback;
}

bool ToInt(const std::string& name, const std::string& text, int* out) {
  if (absl::SimpleAtoi(text, out)) return true;
  std::cerr << "manta_train: " << name << " must be an integer, got '" << text << "'\n";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a peer process that died is an error of the collective, not
  // the end of this one.
  std::signal(SIGPIPE, SIG_IGN);
  std::map<std::string, std::string> flags;
  std::vector<std::string> config_args;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg.rfind("--", 0) != 0) break;
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::cerr << "manta_train: flag " << arg << " needs =value\n" << kUsage;
      return 2;
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  for (; i < argc; ++i) config_args.push_back(argv[i]);

  auto out = spdlog::stdout_logger_mt("train");
  out->set_pattern("%v");
  spdlog::set_default_logger(spdlog::stderr_logger_mt("manta_train"));

  manta::train::DistributedEnv env;
  const std::string visible = Lookup({}, "", "TPU_VISIBLE_CHIPS", "");
  const std::string chips_default =
      visible.empty() ? "1" : std::to_string(std::vector<std::string>(absl::StrSplit(visible, ',')).size());
  // Multi-slice hosts may only be told the MEGASCALE coordinator (and port).
  std::string megascale = Lookup({}, "", "MEGASCALE_COORDINATOR_ADDRESS", "");
  if (!megascale.empty() && megascale.find(':') == std::string::npos) {
    megascale += ":" + Lookup({}, "", "MEGASCALE_PORT", "8081");
  }
  env.coordinator_address =
      Lookup(flags, "coordinator_address", "JAX_COORDINATOR_ADDRESS", megascale.empty() ? "127.0.0.1:0" : megascale);
  env.host_address = Lookup(flags, "host_address", "MANTA_HOST_ADDRESS", "");
  int blas_threads = 0, fault_step = -1;
  if (!ToInt("process_id", Lookup(flags, "process_id", "JAX_PROCESS_ID", "0"), &env.process_id) ||
      !ToInt("num_processes", Lookup(flags, "num_processes", "JAX_NUM_PROCESSES", "1"), &env.num_processes) ||
      !ToInt("slice_id", Lookup(flags, "slice_id", "MEGASCALE_SLICE_ID", "0"), &env.slice_id) ||
      !ToInt("num_slices", Lookup(flags, "num_slices", "MEGASCALE_NUM_SLICES", "1"), &env.num_slices) ||
      !ToInt("chips_per_host", Lookup(flags, "chips_per_host", nullptr, chips_default), &env.chips_per_host) ||
      !ToInt("blas_threads", Lookup(flags, "blas_threads", nullptr, "0"), &blas_threads) ||
      !ToInt("fault_exit_during_save_step", Lookup(flags, "fault_exit_during_save_step", nullptr, "-1"), &fault_step)) {
    return 2;
  }
  for (const auto& [name, value] : flags) {
    static const char* known[] = {"coordinator_address", "host_address", "process_id",
                                  "num_processes",       "slice_id",     "num_slices",
                                  "chips_per_host",      "blas_threads", "fault_exit_during_save_step"};
    if (std::find(std::begin(known), std::end(known), name) == std::end(known)) {
      std::cerr << "manta_train: unknown flag --" << name << "\n" << kUsage;
      return 2;
    }
  }
  auto config = manta::train::LoadConfig(config_args);
  if (!config.ok()) {
    std::cerr << "manta_train: " << config.status().message() << "\n";
    return 2;
  }
  manta::train::RunOptions options;
  options.blas_threads = blas_threads;
  if (fault_step >= 0) {
    // Test hook: die between the shard rename and the manifest of one save.
    options.save_fault_hook = [fault_step](const std::string& stage, int64_t step) {
      if (stage == "renamed" && step == fault_step) {
        std::cerr << "manta_train: exiting during the save of checkpoint " << step << "\n";
        std::_Exit(3);
      }
    };
  }
  auto result = manta::train::RunTraining(*config, env, options);
  if (!result.ok()) {
    std::cerr << "manta_train: " << result.status().message() << "\n";
    return 1;
  }
  return 0;
}
