// A training driver for the trainer's integration tests: a JaxTrainer over
// the MaxText loop, with what the tests need to look inside.
//
//   train_driver [flags] -- base.yml key=value ...
//     --num_workers=N | --num_workers=MIN,MAX   default 4
//     --use_tpu=0                               plain CPU workers instead of slices
//     --resources=NAME:Q                        resources_per_worker (one)
//     --max_failures=N --scheduling_timeout_s=S --storage_path=DIR --name=NAME --num_to_keep=N
//     --env_dir=DIR      each worker writes DIR/attempt<A>-rank<R>.env: its context and JAX/TPU/MEGASCALE vars
//     --fail_rank=R --fail_attempts=K   rank R raises in the loop's first K attempts, before training
//     --bad=KIND         calls Fit with a bad configuration instead (see BadConfig)
//
// Prints "RESULT ok=<0|1> attempts=A failures=F loss=L checkpoint=PATH run_id=ID"
// and, on failure, "ERROR <code>: <message>".
#include <manta/api.h>
#include <manta/maxtext.h>
#include <manta/train.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace {

// One write of the whole line: the workers' log lines, forwarded to this
// process's stdout from another thread, land between writes, never inside
// a line the tests parse.
void PrintLine(const std::string& line) {
  const std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

struct TestLoopConfig {
  std::vector<std::string> argv;
  std::string env_dir;
  int fail_rank = -1;
  int fail_attempts = 0;
  MSGPACK_DEFINE(argv, env_dir, fail_rank, fail_attempts);
};

void WriteEnv(const std::string& dir) {
  const manta::train::TrainContext& c = manta::train::GetContext();
  std::ofstream out(dir + "/attempt" + std::to_string(c.attempt_number) + "-rank" + std::to_string(c.world_rank) +
                    ".env");
  out << "world_rank=" << c.world_rank << "\nworld_size=" << c.world_size << "\nlocal_rank=" << c.local_rank
      << "\nnode_rank=" << c.node_rank << "\nslice_id=" << c.slice_id << "\nnum_slices=" << c.num_slices
      << "\nworker_id=" << c.worker_id << "\nchips=" << c.chips << "\ncoordinator=" << c.coordinator_address
      << "\nrun_name=" << c.run_name << "\n";
  for (const char* name :
       {"JAX_COORDINATOR_ADDRESS", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", "JAX_PLATFORMS",
        "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_PORT",
        "TPU_WORKER_ID", "TPU_NAME", "TPU_WORKER_HOSTNAMES", "TPU_VISIBLE_CHIPS", "TRAIN_TEST_MARK"}) {
    const char* v = std::getenv(name);
    out << name << "=" << (v == nullptr ? "<unset>" : v) << "\n";
  }
}

absl::Status TestLoop(TestLoopConfig config) {
  const manta::train::TrainContext& c = manta::train::GetContext();
  if (!config.env_dir.empty()) WriteEnv(config.env_dir);
  if (c.world_rank == config.fail_rank && c.attempt_number <= config.fail_attempts) {
    throw std::runtime_error("injected failure in attempt " + std::to_string(c.attempt_number));
  }
  return manta::train::RunMaxText(config.argv);
}
MANTA_REMOTE(TestLoop);

// Configurations Fit must refuse before reserving anything.
void BadConfig(const std::string& kind, manta::train::ScalingConfig* s, std::vector<std::string>* argv) {
  if (kind == "mesh") argv->push_back("ici_fsdp_parallelism=3");
  if (kind == "topology") s->topology = "5x7";
  if (kind == "partial_slices") s->num_workers = 6;
  if (kind == "memory") argv->push_back("model_name=llama3-8b");
  if (kind == "nan") s->resources_per_worker["TPU"] = std::nan("");
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::stdout_logger_mt("train")->set_pattern("%v");
  manta::Init(argc, argv);
  std::map<std::string, std::string> flags = {{"num_workers", "4"},
                                              {"use_tpu", "1"},
                                              {"max_failures", "0"},
                                              {"scheduling_timeout_s", "60"},
                                              {"storage_path", "/tmp/manta_results"},
                                              {"name", ""},
                                              {"env_dir", ""},
                                              {"fail_rank", "-1"},
                                              {"fail_attempts", "0"},
                                              {"bad", ""},
                                              {"resources", ""},
                                              {"num_to_keep", "0"}};
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos || !flags.count(arg.substr(2, eq - 2))) {
      std::cerr << "train_driver: bad flag " << arg << "\n";
      return 2;
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  TestLoopConfig loop;
  loop.argv.assign(argv + std::min(i + 1, argc), argv + argc);
  loop.env_dir = flags["env_dir"];
  loop.fail_rank = std::stoi(flags["fail_rank"]);
  loop.fail_attempts = std::stoi(flags["fail_attempts"]);

  manta::train::ScalingConfig scaling;
  std::vector<std::string> counts = absl::StrSplit(flags["num_workers"], ',');
  scaling.num_workers = counts.size() == 2 ? manta::train::WorkerCount(std::stoi(counts[0]), std::stoi(counts[1]))
                                           : manta::train::WorkerCount(std::stoi(counts[0]));
  scaling.use_tpu = flags["use_tpu"] == "1";
  if (scaling.use_tpu) {
    scaling.topology = "4x4";
    scaling.accelerator_type = "TPU-V6E";
  }
  if (!flags["resources"].empty()) {
    std::vector<std::string> kv = absl::StrSplit(flags["resources"], ':');
    scaling.resources_per_worker[kv.at(0)] = std::stod(kv.at(1));
  }
  manta::train::RunConfig run;
  run.name = flags["name"];
  run.storage_path = flags["storage_path"];
  run.failure_config.max_failures = std::stoi(flags["max_failures"]);
  run.checkpoint_config.num_to_keep = std::stoi(flags["num_to_keep"]);
  run.scheduling_timeout = absl::Seconds(std::stoi(flags["scheduling_timeout_s"]));
  run.worker_env = {{"TRAIN_TEST_MARK", "from-run-config"}, {"MEGASCALE_SLICE_ID", "stale"}};
  BadConfig(flags["bad"], &scaling, &loop.argv);

  manta::train::JaxTrainer trainer(TestLoop, loop, scaling, run);
  trainer.SetPreflight(manta::train::MaxTextPreflight(loop.argv));
  PrintLine(absl::StrCat("FIT_START_MS=", absl::ToUnixMillis(absl::Now())));
  manta::train::Result r = trainer.Fit();
  auto loss = r.metrics.find("loss");
  std::ostringstream result;
  result.precision(9);
  result << "RESULT ok=" << r.ok() << " attempts=" << r.num_attempts << " failures=" << r.num_failures
         << " loss=" << (loss == r.metrics.end() ? std::nan("") : loss->second)
         << " checkpoint=" << (r.checkpoint ? r.checkpoint->path : "-") << " run_id=" << r.run_id;
  PrintLine(result.str());
  if (!r.ok()) PrintLine(absl::StrCat("ERROR ", absl::StatusCodeToString(r.error.code()), ": ", r.error.message()));
  manta::Shutdown();
  return r.ok() ? 0 : 1;
}
