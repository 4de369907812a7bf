// A job's runtime env reaches every worker of the job: a head started with
// `manta start --head` and a second node that alone has "other_node", where
// runtime_env_driver's tasks run (tests/programs/runtime_env_driver.cc).
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/package_name.h"
#include "dashboard/tar_writer.h"
#include "gcs_service.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/bad_input_table.h"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

constexpr char kKvPut[] = "/manta.rpc.InternalKvGcsService/Put";

// What the working directories hold: data/input.txt.
std::string MakeTree(const std::string& dir, const std::string& text) {
  EXPECT_TRUE(MakeDirs(dir + "/data").ok());
  EXPECT_TRUE(WriteFileAtomic(dir + "/data/input.txt", text).ok());
  return dir;
}

// The job directories raylets hold: <session>/runtime_resources/nodes/<node>/<job>.
int UnpackedJobDirs(const std::string& session) {
  std::error_code ec;
  int n = 0;
  for (const auto& node : std::filesystem::directory_iterator(session + "/runtime_resources/nodes", ec)) {
    for ([[maybe_unused]] const auto& job : std::filesystem::directory_iterator(node.path(), ec)) ++n;
  }
  return n;
}

CommandResult RunDriver(const JobCluster& cluster, const std::vector<std::string>& args) {
  SpawnOptions driver;
  driver.executable = JobCluster::BinDir() + "/runtime_env_driver";
  driver.args = args;
  driver.env = {{"MANTA_ADDRESS", cluster.gcs_address()}, {"MANTA_TOKEN", cluster.token()}};
  auto ran = RunAndCapture(driver, absl::Seconds(90));
  EXPECT_TRUE(ran.ok()) << ran.status();
  return ran.value_or(CommandResult{});
}

TEST(RuntimeEnvTest, EveryWorkerOfAJobRunsInItsDirectoryWithItsVariables) {
  if (!PathExists(JobCluster::BinDir() + "/runtime_env_driver")) GTEST_SKIP() << "runtime_env_driver was not built";
  JobCluster cluster;
  absl::Status started = cluster.Start();
  ASSERT_TRUE(started.ok()) << started;
  CommandResult joined = cluster.RunManta({"start", "--address=" + cluster.gcs_address(), "--temp-dir",
                                           cluster.temp_dir(), "--num-cpus=2", R"(--resources={"other_node": 2})"},
                                          {{"MANTA_TOKEN", cluster.token()}});
  ASSERT_EQ(joined.exit_code, 0) << joined.out << joined.err;

  // Through the Jobs API: the uploaded package and the job's variables reach
  // the workers on the other node; a task's own variable still wins.
  std::string src = MakeTree(cluster.temp_dir() + "/src", "from the package");
  auto archive = dashboard::PackDirectory(src, 1 << 20);
  ASSERT_TRUE(archive.ok()) << archive.status();
  const std::string name = PackageNameOf(*archive);
  cli::JobClient client = cluster.Client();
  ASSERT_TRUE(client.UploadPackage(name, *archive).ok());
  auto id =
      client.Submit({{"entrypoint", JobCluster::BinDir() + "/runtime_env_driver"},
                     {"runtime_env", {{"working_dir", "gcs://" + name}, {"env_vars", {{"JOB_VAR", "job-value"}}}}}});
  ASSERT_TRUE(id.ok()) << id.status();
  std::string status;
  ASSERT_TRUE(JobCluster::WaitFor(
      [&] {
        auto job = client.GetJob(*id);
        status = job.ok() ? job->value("status", "") : "";
        return status == "SUCCEEDED" || status == "FAILED";
      },
      absl::Seconds(90)));
  std::string logs = client.GetLogs(*id).value_or("");
  EXPECT_EQ(status, "SUCCEEDED") << logs;
  EXPECT_TRUE(absl::StrContains(logs, "|from the package|job-value\n")) << logs;
  EXPECT_TRUE(absl::StrContains(logs, "|from the package|task-wins\n")) << logs;
  // Once the job is done and its workers are gone, the nodes clean up.
  EXPECT_TRUE(JobCluster::WaitFor([&] { return UnpackedJobDirs(cluster.session_dir()) == 0; }))
      << UnpackedJobDirs(cluster.session_dir());

  // Bytes stored under another package's name are refused by the GCS.
  std::string hostile;
  dashboard::AppendTarEntry(&hostile, "data/input.txt", '0', "fine");
  dashboard::AppendTarEntry(&hostile, "../../escaped.txt", '0', "evil");
  dashboard::FinishTar(&hostile);
  rpc::KvPutRequest put;
  put.set_ns(kPackageKvNamespace);
  put.set_key(name);
  put.set_value(hostile);
  Outcome mismatch = CallGrpc(cluster.gcs_address(), kKvPut, put, cluster.token());
  EXPECT_EQ(mismatch.code, "INVALID_ARGUMENT") << mismatch.message;
  EXPECT_TRUE(absl::StrContains(mismatch.message, "does not match its content")) << mismatch.message;
  // An archive that escapes its directory is refused by the raylet, which
  // goes on serving.
  put.set_key(PackageNameOf(hostile));
  Outcome stored = CallGrpc(cluster.gcs_address(), kKvPut, put, cluster.token());
  ASSERT_EQ(stored.code, "OK") << stored.message;
  CommandResult refused = RunDriver(cluster, {"gcs://" + PackageNameOf(hostile)});
  EXPECT_EQ(refused.exit_code, 0) << refused.out << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.out, "ERROR ")) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out, "refused the working_dir package " + PackageNameOf(hostile)))
      << refused.out;
  EXPECT_FALSE(PathExists(cluster.session_dir() + "/runtime_resources/escaped.txt"));
  EXPECT_FALSE(PathExists(cluster.session_dir() + "/runtime_resources/nodes/escaped.txt"));

  // A driver started outside the Jobs API ships its own directory.
  std::string local = MakeTree(cluster.temp_dir() + "/local", "from a local dir");
  CommandResult ran = RunDriver(cluster, {local});
  EXPECT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_TRUE(absl::StrContains(ran.out, "|from a local dir|local-value\n")) << ran.out << ran.err;
  EXPECT_TRUE(absl::StrContains(ran.out, "|from a local dir|task-wins\n")) << ran.out << ran.err;
}

}  // namespace
}  // namespace manta::testing
