// The trainer on real clusters of simulated v6e-16 slices: a job through
// `manta job submit`, two slices with their MEGASCALE variables, a host
// killed mid-run, too many failures, a driver killed, runs that wait for
// resources, and configurations refused before anything is reserved.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/placement_group_resources.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_fixture.h"
#include "tests/train_config.h"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

// The tiny model over one slice's 16 devices, or both slices' 32.
std::vector<std::string> TinyArgs(const std::string& dir, const std::string& run, int steps,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {kBaseConfig,
                                   "model_name=tiny",
                                   "steps=" + std::to_string(steps),
                                   "per_device_batch_size=1",
                                   "ici_fsdp_parallelism=4",
                                   "ici_tensor_parallelism=4",
                                   "base_output_directory=" + dir,
                                   "run_name=" + run,
                                   "metrics_file=" + dir + "/" + run + ".jsonl"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Losses of a metrics file, by step (a restarted run writes a step again).
std::map<int64_t, double> Losses(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// The same config under the kernels' own launcher, without the runtime.
std::map<int64_t, double> LocalLosses(const std::string& dir, int processes, int slices,
                                      std::vector<std::string> args) {
  const std::string metrics = dir + "/local.jsonl";
  for (auto& a : args) {
    if (absl::StartsWith(a, "metrics_file=")) a = "metrics_file=" + metrics;
    if (absl::StartsWith(a, "run_name=")) a = "run_name=local";
  }
  SpawnOptions o;
  o.executable = Cluster::BinDir() + "/manta_train_local";
  o.args = {"--num_processes=" + std::to_string(processes), "--chips_per_host=4",
            "--num_slices=" + std::to_string(slices), "--"};
  o.args.insert(o.args.end(), args.begin(), args.end());
  auto r = RunAndCapture(o, absl::Seconds(300));
  EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->out + r->err : r.status().ToString());
  return Losses(metrics);
}

// `manta list train-runs --format json`, parsed.
nlohmann::json TrainRuns(Cluster& cluster) {
  CommandResult r = cluster.RunManta({"list", "train-runs", "--format", "json"}, cluster.MantaEnv());
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_array() ? j : nlohmann::json::array();
}

class TrainClusterTest : public ::testing::Test {
 protected:
  void StartSlices(int n) {
    MANTA_ASSERT_OK(cluster_.StartHead());
    for (int s = 0; s < n; ++s) {
      auto added = cluster_.AddTpuSlice("tpu-group-" + std::to_string(s), "v6e-16", "4x4");
      ASSERT_TRUE(added.ok()) << added.status();
      hosts_.push_back(*added);
    }
  }
  void TearDown() override {
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_.ResourcesFull(); }, absl::Seconds(20)))
        << "resources were not all returned";
    cluster_.Shutdown();
    std::filesystem::remove_all(dir_);
  }
  CommandResult Driver(std::vector<std::string> flags, const std::vector<std::string>& args,
                       absl::Duration timeout = absl::Seconds(240)) {
    flags.push_back("--storage_path=" + dir_ + "/results");
    flags.push_back("--");
    return cluster_.RunProgram("train_driver", Concat(flags, args), timeout);
  }

  Cluster cluster_;
  std::vector<std::vector<int>> hosts_;  // raylet indices, by slice then worker id
  std::string dir_ = cluster_.temp_dir() + "/train";
};

TEST(TrainJobTest, OneSliceTrainsThroughJobSubmit) {
  JobCluster cluster;
  MANTA_ASSERT_OK(cluster.Start());
  MANTA_ASSERT_OK(cluster.AddTpuSlice("tpu-group-0", "v6e-16", "4x4", 4));
  const std::string dir = cluster.temp_dir() + "/data";
  std::vector<std::string> submit = {"job",
                                     "submit",
                                     "--temp-dir",
                                     cluster.temp_dir(),
                                     "--",
                                     JobCluster::BinDir() + "/maxtext_trainer",
                                     "--scheduling_timeout_s=60"};
  CommandResult r = cluster.RunManta(Concat(submit, TinyArgs(dir, "tp4-4x4", 12)), {}, absl::Seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Every worker prints the step line; the driver collapses the repeats.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\(TrainWorker pid=\d+, ip=127\.0\.0\.1\) completed step: \d+, )"
                                                  R"(seconds: [0-9.]+, TFLOP/s/device: [0-9.]+, Tokens/s/device: )"
                                                  R"([0-9.]+, total_weights: 2048, loss: [0-9.]+ \[repeated \d+x )"
                                                  R"(across cluster\])")))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "[State Transition] SCHEDULING -> RUNNING.")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "Attempting to start training worker group of size 4 with the following "
                                "resources: [{'TPU': 4}] * 4"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "succeeded")) << r.out;
  CommandResult runs = cluster.RunManta({"list", "train-runs", "--temp-dir", cluster.temp_dir(), "--format", "json"});
  auto j = nlohmann::json::parse(runs.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 1) << runs.out << runs.err;
  EXPECT_EQ(j[0]["name"], "tp4-4x4");
  EXPECT_EQ(j[0]["status"], "FINISHED");
  ASSERT_EQ(j[0]["attempts"].size(), 1u);
  EXPECT_EQ(j[0]["attempts"][0]["workers"].size(), 4u);
  EXPECT_EQ(Losses(dir + "/tp4-4x4.jsonl").size(), 12u);
}

TEST_F(TrainClusterTest, TwoSlicesGetMegascaleAndTrainAsTheLocalLauncher) {
  StartSlices(2);
  for (const char* dcn : {"dcn_fsdp_parallelism=2", "dcn_data_parallelism=2"}) {
    SCOPED_TRACE(dcn);
    const std::string run = absl::StrContains(dcn, "fsdp") ? "dcnfsdp" : "dcndata";
    const std::string env_dir = dir_ + "/env-" + run;
    std::filesystem::create_directories(env_dir);
    std::vector<std::string> args = TinyArgs(
        dir_, run, 6, {dcn, absl::StrContains(dcn, "fsdp") ? "dcn_data_parallelism=1" : "dcn_fsdp_parallelism=1"});
    CommandResult r = Driver({"--num_workers=8", "--env_dir=" + env_dir}, args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int rank = 0; rank < 8; ++rank) {
      auto env = ReadEnvFile(env_dir + "/attempt1-rank" + std::to_string(rank) + ".env");
      EXPECT_EQ(env["JAX_PROCESS_ID"], std::to_string(rank));
      EXPECT_EQ(env["JAX_NUM_PROCESSES"], "8");
      EXPECT_EQ(env["MEGASCALE_NUM_SLICES"], "2");
      EXPECT_EQ(env["MEGASCALE_SLICE_ID"], std::to_string(rank / 4)) << "the run config's stale value is replaced";
      EXPECT_EQ(env["MEGASCALE_COORDINATOR_ADDRESS"], "127.0.0.1");
      EXPECT_EQ(env["MEGASCALE_PORT"], "8081");
      EXPECT_EQ(env["TPU_NAME"], "tpu-group-" + std::to_string(rank / 4));
      EXPECT_EQ(env["TPU_WORKER_ID"], std::to_string(rank % 4));
      EXPECT_EQ(env["slice_id"], std::to_string(rank / 4));
      EXPECT_EQ(env["TRAIN_TEST_MARK"], "from-run-config");
      EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], env["coordinator"]);
    }
    auto trained = Losses(dir_ + "/" + run + ".jsonl");
    auto local = LocalLosses(dir_, 8, 2, args);
    ASSERT_EQ(trained.size(), 6u);
    ASSERT_EQ(local.size(), 6u);
    for (const auto& [step, loss] : local) EXPECT_NEAR(trained[step], loss, 1e-6 * std::abs(loss)) << step;
  }
}

TEST_F(TrainClusterTest, AHostKilledMidRunRestartsFromTheCheckpointOnAReplacement) {
  StartSlices(1);
  const std::vector<std::string> args =
      TinyArgs(dir_, "killed", 30, {"enable_checkpointing=true", "checkpoint_period=5"});
  const std::string env_dir = dir_ + "/env";
  std::filesystem::create_directories(env_dir);
  CommandResult result;
  std::thread driver([&] { result = Driver({"--max_failures=3", "--env_dir=" + env_dir}, args); });
  // Past the checkpoint of step 10, kill worker 2's host (its raylet takes
  // its workers with it), then bring up a replacement with the same TPU
  // environment, as a new pod would be.
  const bool reached =
      Cluster::WaitFor([&] { return Losses(dir_ + "/killed.jsonl").size() >= 12; }, absl::Seconds(120));
  EXPECT_TRUE(reached);
  MANTA_ASSERT_OK(cluster_.KillRaylet(hosts_[0][2], SIGKILL));
  RayletOptions replacement;
  replacement.env = {
      {"TPU_ACCELERATOR_TYPE", "v6e-16"}, {"TPU_TOPOLOGY", "4x4"}, {"TPU_WORKER_ID", "2"}, {"TPU_NAME", "tpu-group-0"}};
  auto added = cluster_.AddRaylet(replacement);
  driver.join();
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(absl::StrContains(result.out, "RESULT ok=1 attempts=2 failures=1")) << result.out;
  EXPECT_TRUE(absl::StrContains(result.out,
                                "Deciding to RESTART, since the total failure count (1) <= "
                                "FailureConfig(max_failures=3)."))
      << result.out;
  EXPECT_TRUE(std::regex_search(result.out, std::regex(R"(restored checkpoint \S+/killed/checkpoints/(10|15|20|25))")))
      << result.out;
  // The second attempt ran on the replacement host.
  auto second = ReadEnvFile(env_dir + "/attempt2-rank2.env");
  EXPECT_EQ(second["TPU_WORKER_ID"], "2");
  auto runs = TrainRuns(cluster_);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["num_failures"], 1);
  EXPECT_EQ(runs[0]["attempts"].size(), 2u);
  EXPECT_EQ(runs[0]["attempts"][0]["status"], "ERRORED");
  EXPECT_EQ(runs[0]["attempts"][1]["workers"][2]["node_id"], cluster_.raylet(*added).node_id);
  // Synthetic data is deterministic: the same final loss as an unbroken run.
  auto trained = Losses(dir_ + "/killed.jsonl");
  auto local = LocalLosses(dir_, 4, 1, args);
  ASSERT_EQ(trained.size(), 30u);
  EXPECT_NEAR(trained.at(29), local.at(29), 1e-6 * std::abs(local.at(29)));
}

TEST_F(TrainClusterTest, TooManyFailuresEndTheRunErroredWithTheCause) {
  StartSlices(1);
  CommandResult r = Driver({"--max_failures=1", "--fail_rank=2", "--fail_attempts=9"}, TinyArgs(dir_, "failing", 5));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "RESULT ok=0 attempts=2 failures=2")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "ERROR ABORTED: Training failed after 2 attempt(s)")) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\[rank 2 on 127\.0\.0\.1 \(node [0-9a-f]+, tpu-group-0 worker 2, )"
                                                  R"(pid \d+\)\] .*injected failure in attempt 2)")))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "Deciding to TERMINATE, since the total failure count (2) exceeded the "
                                "maximum allowed failures: FailureConfig(max_failures=1)."))
      << r.out;
  auto runs = TrainRuns(cluster_);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "ERRORED");
  EXPECT_TRUE(absl::StrContains(runs[0]["status_detail"].get<std::string>(), "injected failure")) << runs[0];
  CommandResult table = cluster_.RunManta({"list", "train-runs"}, cluster_.MantaEnv());
  EXPECT_TRUE(absl::StrContains(table.out, "ERRORED")) << table.out;
}

TEST_F(TrainClusterTest, AKilledDriverTakesTheRunWithIt) {
  StartSlices(1);
  SpawnOptions o;
  o.executable = Cluster::BinDir() + "/train_driver";
  o.args = Concat({"--storage_path=" + dir_ + "/results", "--"}, TinyArgs(dir_, "orphan", 100000));
  o.env = cluster_.MantaEnv();
  o.log_file = dir_ + "/driver.log";
  std::filesystem::create_directories(dir_);
  auto pid = SpawnDaemon(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return Losses(dir_ + "/orphan.jsonl").size() >= 3; }, absl::Seconds(120)));
  MANTA_ASSERT_OK(SendSignal(*pid, SIGKILL));
  MANTA_ASSERT_OK(WaitForExit(*pid, absl::Now() + absl::Seconds(10)));
  // Within seconds: no worker or controller process, no group, all
  // resources back, the run ABORTED.
  EXPECT_TRUE(Cluster::WaitFor([&] { return ProcessesMentioning("train_driver").empty(); }, absl::Seconds(20)))
      << ProcessesMentioning("train_driver").size() << " train_driver processes remain";
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster_.ResourcesFull(); }, absl::Seconds(20)));
  EXPECT_TRUE(Cluster::WaitFor(
      [&] {
        auto runs = TrainRuns(cluster_);
        return runs.size() == 1 && runs[0]["status"] == "ABORTED";
      },
      absl::Seconds(20)))
      << TrainRuns(cluster_).dump();
  CommandResult pgs = cluster_.RunManta({"list", "placement-groups", "--format", "json"}, cluster_.MantaEnv());
  EXPECT_FALSE(absl::StrContains(pgs.out, "\"CREATED\"")) << pgs.out;
}

TEST_F(TrainClusterTest, ARunWaitsForMissingSlicesAsADemandAndGivesUpInTime) {
  StartSlices(1);
  CommandResult r;
  std::thread driver([&] { r = Driver({"--num_workers=8", "--scheduling_timeout_s=10"}, TinyArgs(dir_, "waits", 5)); });
  bool shown = Cluster::WaitFor(
      [&] {
        CommandResult status = cluster_.RunManta({"status"}, cluster_.MantaEnv());
        auto runs = TrainRuns(cluster_);
        const size_t demands = status.out.find("Demands:");
        return demands != std::string::npos && absl::StrContains(status.out.substr(demands), "TPU-v6e-16-head") &&
               runs.size() == 1 && runs[0]["status"] == "RESCHEDULING";
      },
      absl::Seconds(30));
  driver.join();
  EXPECT_TRUE(shown) << cluster_.RunManta({"status"}, cluster_.MantaEnv()).out;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "ERROR DEADLINE_EXCEEDED: the worker group of size 8 could not be scheduled "
                                "within 10s"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "[State Transition] SCHEDULING -> RESCHEDULING.")) << r.out;
}

TEST_F(TrainClusterTest, BadConfigurationsAreRefusedBeforeAnythingIsReserved) {
  StartSlices(1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mesh", "INVALID_ARGUMENT: at 4 worker(s) x 4 device(s): "},
      {"topology", "INVALID_ARGUMENT: ScalingConfig: "},
      {"partial_slices", "INVALID_ARGUMENT: num_workers 6 is not a whole number of v6e-16 slices"},
      {"memory", "RESOURCE_EXHAUSTED: model_name=llama3-8b ("},
      {"nan", "INVALID_ARGUMENT: resources_per_worker: 'TPU' must be a finite quantity"},
  };
  for (const auto& [kind, expected] : cases) {
    CommandResult r = Driver({"--bad=" + kind}, TinyArgs(dir_, "bad", 5), absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 1) << kind << ": " << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "ERROR " + expected)) << kind << ": " << r.out;
  }
  CommandResult memory = Driver({"--bad=memory"}, TinyArgs(dir_, "bad", 5), absl::Seconds(60));
  EXPECT_TRUE(std::regex_search(memory.out, std::regex(R"(needs [0-9.]+ GiB per host .* but a host has 1\.0 GiB)")))
      << memory.out;
  EXPECT_TRUE(TrainRuns(cluster_).empty()) << "no controller was started";
  CommandResult pgs = cluster_.RunManta({"list", "placement-groups", "--format", "json"}, cluster_.MantaEnv());
  EXPECT_EQ(nlohmann::json::parse(pgs.out, nullptr, false).size(), 0u) << pgs.out;
}

TEST_F(TrainClusterTest, PlainWorkersWithoutSlices) {
  MANTA_ASSERT_OK(cluster_.StartHead());
  RayletOptions two_cpus;
  two_cpus.num_cpus = 2;
  ASSERT_TRUE(cluster_.AddRaylets({two_cpus, two_cpus}).ok());
  const std::string env_dir = dir_ + "/env";
  std::filesystem::create_directories(env_dir);
  CommandResult r = Driver({"--use_tpu=0", "--num_workers=4", "--resources=CPU:1", "--env_dir=" + env_dir,
                            "--storage_path=" + dir_ + "/results", "--name=plain"},
                           {kBaseConfig, "model_name=tiny", "steps=4", "ici_fsdp_parallelism=4",
                            "base_output_directory=" + dir_, "run_name=plain"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Checkpointing is off: nothing was written, and no directory was made.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/results")) << "the run made its directory without writing to it";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/plain"));
  std::map<std::string, int> per_node;
  for (int rank = 0; rank < 4; ++rank) {
    auto env = ReadEnvFile(env_dir + "/attempt1-rank" + std::to_string(rank) + ".env");
    EXPECT_EQ(env["MEGASCALE_NUM_SLICES"], "<unset>") << "no slices, no MEGASCALE variables";
    EXPECT_EQ(env["num_slices"], "1");
    EXPECT_EQ(env["local_rank"], std::to_string(per_node[env["node_rank"]]++));
  }
}

}  // namespace
}  // namespace manta::testing
