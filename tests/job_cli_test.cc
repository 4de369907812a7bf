// `manta job` end to end against a real head.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

class JobCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = cluster_.Start();
    ASSERT_TRUE(s.ok()) << s;
  }

  CommandResult Job(std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
    args.insert(args.begin(), "job");
    if (env.empty()) {
      args.insert(args.begin() + 2, {"--temp-dir", cluster_.temp_dir()});
    }
    return cluster_.RunManta(args, env);
  }

  // The id from "Job 'ID' submitted successfully".
  static std::string SubmittedId(const std::string& out) {
    size_t start = out.find("Job '");
    if (start == std::string::npos) return "";
    start += 5;
    return out.substr(start, out.find('\'', start) - start);
  }

  JobCluster cluster_;
};

TEST_F(JobCliTest, SubmitUploadsTheWorkingDirAndFollowsToSuccess) {
  std::string dir = cluster_.temp_dir() + "/project";
  ASSERT_TRUE(MakeDirs(dir + "/conf").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/conf/base.yml", "steps: 10\n").ok());
  CommandResult r = Job({"submit", "--working-dir", dir, "--runtime-env-json",
                         R"({"env_vars": {"GREETING": "hi there"}})", "--metadata-json", R"({"owner": "tests"})", "--",
                         "sh", "-c", "cat conf/base.yml; echo \"$GREETING\"; echo \"it's quoted\""});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string id = SubmittedId(r.out);
  EXPECT_TRUE(absl::StartsWith(id, "mantasubmit_")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Job '" + id + "' submitted successfully")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Next steps")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "manta job logs " + id)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "steps: 10\nhi there\nit's quoted\n")) << r.out;
  std::string done = "Job '" + id + "' succeeded";
  std::string dashes(done.size(), '-');
  EXPECT_TRUE(absl::StrContains(r.out, dashes + "\n" + done + "\n" + dashes + "\n")) << r.out;

  // The same directory again: the package is not uploaded twice.
  CommandResult again = Job({"submit", "--working-dir", dir, "--", "cat", "conf/base.yml"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_FALSE(absl::StrContains(again.out, "Uploading")) << again.out;

  CommandResult status = Job({"status", id});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, "Status for job '" + id + "': SUCCEEDED")) << status.out;
  CommandResult logs = Job({"logs", id});
  EXPECT_EQ(logs.out, "steps: 10\nhi there\nit's quoted\n");
  CommandResult list = Job({"list"});
  EXPECT_TRUE(absl::StrContains(list.out, id)) << list.out;
  CommandResult del = Job({"delete", id});
  EXPECT_EQ(del.exit_code, 0) << del.err;
  EXPECT_FALSE(absl::StrContains(Job({"list"}).out, id));
}

TEST_F(JobCliTest, FailuresStopsAndInfeasibleResourcesExitNonZero) {
  CommandResult failed = Job({"submit", "--", "sh", "-c", "echo oops; exit 3"});
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  std::string id = SubmittedId(failed.out);
  EXPECT_TRUE(absl::StrContains(failed.out, "Job '" + id + "' failed")) << failed.out;
  EXPECT_TRUE(absl::StrContains(failed.out, "exit code 3")) << failed.out;

  CommandResult big = Job({"submit", "--entrypoint-num-cpus", "64", "--", "true"});
  EXPECT_EQ(big.exit_code, 1) << big.out;
  EXPECT_TRUE(absl::StrContains(big.out, "do not fit on the head node")) << big.out;

  CommandResult bad = Job({"submit", "--entrypoint-resources", R"({"TPU": -1})", "--", "true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "TPU")) << bad.err;

  CommandResult bg = Job({"submit", "--no-wait", "--submission-id", "long-one", "--", "sleep", "300"});
  EXPECT_EQ(bg.exit_code, 0) << bg.out << bg.err;
  ASSERT_TRUE(JobCluster::WaitFor([&] { return absl::StrContains(Job({"status", "long-one"}).out, "RUNNING"); }));
  CommandResult stop = Job({"stop", "long-one"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_TRUE(absl::StrContains(stop.out, "Job 'long-one' was stopped")) << stop.out;
  EXPECT_EQ(Job({"logs", "missing-job"}).exit_code, 1);
}

TEST_F(JobCliTest, InputThatIsNotUtf8OrNotAQuantityIsRefusedAndSubmitsNothing) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"submit", "--submission-id", "job\xff", "--", "true"}, "--submission-id: invalid submission id 'job?'"},
           {{"submit", "--", "echo", "caf\xff"}, "the entrypoint is not valid UTF-8"},
           {{"submit", "--metadata-json", "{\"k\": \"\xff\"}", "--", "true"}, "--metadata-json is not valid UTF-8"},
           {{"submit", "--runtime-env-json", "{\"env_vars\": {\"A\": \"\xff\"}}", "--", "true"},
            "--runtime-env-json is not valid UTF-8"},
           {{"submit", "--entrypoint-num-cpus", "NaN", "--", "true"}, "--entrypoint-num-cpus: quantity is NaN"},
           {{"submit", "--entrypoint-num-gpus", "nan", "--", "true"}, "--entrypoint-num-gpus: quantity is NaN"},
           {{"submit", "--entrypoint-memory=-1", "--", "true"}, "--entrypoint-memory: quantity -1 is negative"},
           {{"submit", "--entrypoint-num-cpus", "1e15", "--", "true"},
            "--entrypoint-num-cpus: quantity 1e+15 is larger than the maximum 9e+14"},
           {{"submit", "--entrypoint-resources", R"({"TPU": NaN})", "--", "true"},
            "--entrypoint-resources: NaN is not a quantity"},
           {{"submit", "--entrypoint-resources", R"({"TPU": -4})", "--", "true"},
            "--entrypoint-resources: resource 'TPU': quantity -4 is negative"}}) {
    CommandResult r = Job(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.message << "\n" << r.out << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "manta: error: " + c.message)) << r.err;
  }
  auto jobs = cluster_.Client().ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->empty()) << jobs->dump();

  // The same through the REST API: 400, never a crash.
  CommandResult raw = cluster_.Curl({"-X", "POST", cluster_.url() + "/api/jobs/", "-H", cluster_.AuthHeader(), "-H",
                                     "Content-Type: application/json", "--data-binary",
                                     "{\"entrypoint\": \"echo caf\xff\"}", "-w", "\n%{http_code}"});
  EXPECT_EQ(raw.out, "the request body is not valid UTF-8\n\n400") << raw.out << raw.err;
  EXPECT_TRUE(cluster_.Client().ListJobs()->empty());
}

TEST_F(JobCliTest, OutputThatIsNotUtf8IsShownNotACrash) {
  CommandResult r = Job({"submit", "--", "printf", "caf\\377 ok\\n"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "caf\xff ok\n")) << r.out;
  std::string id = SubmittedId(r.out);
  CommandResult logs = Job({"logs", id});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "caf\xef\xbf\xbd ok\n");
  CommandResult follow = Job({"logs", "--follow", id});
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, "caf\xff ok\n");
  CommandResult list = Job({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(absl::StrContains(list.out, id)) << list.out;
}

TEST_F(JobCliTest, AddressAndTokenFromTheEnvironmentAndFollowingLogs) {
  std::vector<std::pair<std::string, std::string>> env = {{"MANTA_DASHBOARD_ADDRESS", cluster_.url()},
                                                          {"MANTA_TOKEN", cluster_.token()}};
  CommandResult r = Job({"submit", "--no-wait", "--", "sh", "-c", "echo first; sleep 1; echo second"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string id = SubmittedId(r.out);
  CommandResult follow = Job({"logs", "--follow", id}, env);
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, "first\nsecond\n");
  CommandResult no_token = Job({"list"}, {{"MANTA_DASHBOARD_ADDRESS", cluster_.url()}});
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(no_token.err, "MANTA_TOKEN")) << no_token.err;
}

TEST_F(JobCliTest, MantaStopStopsRunningJobs) {
  CommandResult r = Job({"submit", "--no-wait", "--", "sh", "-c", "sleep 300 & sleep 300"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string id = SubmittedId(r.out);
  cli::JobClient client = cluster_.Client();
  nlohmann::json job;
  ASSERT_TRUE(JobCluster::WaitFor([&] {
    auto j = client.GetJob(id);
    if (j.ok()) job = *j;
    return j.ok() && (*j)["status"] == "RUNNING";
  }));
  pid_t pgid = std::stoi(job["driver_info"]["pid"].get<std::string>());
  CommandResult stop = cluster_.RunManta({"stop", "--temp-dir", cluster_.temp_dir()});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_TRUE(JobCluster::WaitFor([&] { return LiveGroupMembers(pgid).empty(); }, absl::Seconds(10)));
}

TEST_F(JobCliTest, SubmitShowsThePendingStateUntilTheJobRuns) {
  // The head's 4 CPUs are held by a job for a few seconds.
  CommandResult holder =
      Job({"submit", "--no-wait", "--submission-id", "holder", "--entrypoint-num-cpus", "4", "--", "sleep", "3"});
  ASSERT_EQ(holder.exit_code, 0) << holder.out << holder.err;
  ASSERT_TRUE(JobCluster::WaitFor([&] { return absl::StrContains(Job({"status", "holder"}).out, "RUNNING"); }));

  CommandResult waiter = Job({"submit", "--entrypoint-num-cpus", "1", "--", "echo", "ran after the wait"});
  EXPECT_EQ(waiter.exit_code, 0) << waiter.out << waiter.err;
  const size_t pending = waiter.out.find("is PENDING: Job is waiting for entrypoint resources");
  const size_t ran = waiter.out.find("ran after the wait");
  ASSERT_NE(pending, std::string::npos) << waiter.out;
  ASSERT_NE(ran, std::string::npos) << waiter.out;
  EXPECT_LT(pending, ran) << waiter.out;
}

TEST_F(JobCliTest, StatusWatchShowsTheClusterAgainUntilInterrupted) {
  CommandResult watched =
      cluster_.RunManta({"status", "--temp-dir", cluster_.temp_dir(), "--watch=0.2"}, {}, absl::Seconds(2));
  EXPECT_TRUE(watched.timed_out);  // it runs until stopped
  int shown = 0;
  for (size_t at = watched.out.find("Cluster status"); at != std::string::npos;
       at = watched.out.find("Cluster status", at + 1)) {
    ++shown;
  }
  EXPECT_GE(shown, 3) << watched.out;
  EXPECT_NE(cluster_.RunManta({"status", "--temp-dir", cluster_.temp_dir(), "--watch=0"}).exit_code, 0);
}

}  // namespace
}  // namespace manta::testing
