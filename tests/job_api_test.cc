// The Jobs REST API against a real head (manta start --head), through the
// C++ HTTP client and through curl.
#include <signal.h>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/http_attacks.h"
#include "tests/job_cluster.h"

namespace manta::testing {
namespace {

using nlohmann::json;

class JobApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = cluster_.Start();
    ASSERT_TRUE(s.ok()) << s;
  }

  json WaitForStatus(const std::string& id, const std::string& status, absl::Duration timeout = absl::Seconds(20)) {
    cli::JobClient client = cluster_.Client();
    json last;
    JobCluster::WaitFor(
        [&] {
          auto job = client.GetJob(id);
          if (job.ok()) last = *job;
          return job.ok() && (*job)["status"] == status;
        },
        timeout);
    EXPECT_EQ(last.value("status", ""), status) << last.dump();
    return last;
  }

  JobCluster cluster_;
};

TEST_F(JobApiTest, JobsSucceedFailAndAreListed) {
  cli::JobClient client = cluster_.Client();
  auto version = client.Version();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_TRUE((*version)["version"].is_string());

  auto ok_id = client.Submit({{"entrypoint", "echo hello; echo to-stderr >&2"}, {"metadata", {{"team", "tpu"}}}});
  ASSERT_TRUE(ok_id.ok()) << ok_id.status();
  EXPECT_TRUE(absl::StartsWith(*ok_id, "mantasubmit_"));
  auto fail_id = client.Submit({{"entrypoint", "echo about to fail; exit 7"}, {"submission_id", "failing-job"}});
  ASSERT_TRUE(fail_id.ok()) << fail_id.status();
  EXPECT_EQ(*fail_id, "failing-job");

  json ok = WaitForStatus(*ok_id, "SUCCEEDED");
  EXPECT_EQ(ok["type"], "SUBMISSION");
  EXPECT_EQ(ok["entrypoint"], "echo hello; echo to-stderr >&2");
  EXPECT_EQ(ok["metadata"]["team"], "tpu");
  EXPECT_TRUE(ok["start_time"].is_number());
  EXPECT_TRUE(ok["end_time"].is_number());
  EXPECT_EQ(ok["driver_info"]["node_ip_address"], "127.0.0.1");
  EXPECT_EQ(*client.GetLogs(*ok_id), "hello\nto-stderr\n");

  json failed = WaitForStatus(*fail_id, "FAILED");
  EXPECT_EQ(failed["driver_exit_code"], 7);
  EXPECT_EQ(failed["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR");
  EXPECT_TRUE(absl::StrContains(failed["message"].get<std::string>(), "exit code 7"));

  auto list = client.ListJobs();
  ASSERT_TRUE(list.ok());
  std::set<std::string> ids;
  for (const json& j : *list) ids.insert(j["submission_id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{*ok_id, "failing-job"}));

  EXPECT_EQ(client.Submit({{"entrypoint", "true"}, {"submission_id", "failing-job"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(client.DeleteJob("failing-job").ok());
  EXPECT_EQ(client.GetJob("failing-job").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.ListJobs()->size(), 1u);
}

// Entrypoint resources are held by the head raylet, not only counted by the
// dashboard: `manta status` shows them reserved, so tasks cannot take them.
TEST_F(JobApiTest, EntrypointResourcesAreReservedOnTheHeadWhileTheJobRuns) {
  cli::JobClient client = cluster_.Client();
  auto status = [&] {
    CommandResult r =
        cluster_.RunManta({"status", "--address=" + cluster_.gcs_address(), "--temp-dir", cluster_.temp_dir()});
    return r.out + r.err;
  };
  const std::string held = "(0.0 used of 3.0 reserved in placement groups)";
  auto a = client.Submit({{"entrypoint", "sleep 300"}, {"entrypoint_num_cpus", 3}});
  ASSERT_TRUE(a.ok()) << a.status();
  WaitForStatus(*a, "RUNNING");
  std::string out;
  EXPECT_TRUE(JobCluster::WaitFor([&] { return absl::StrContains(out = status(), held); })) << out;
  EXPECT_TRUE(absl::StrContains(out, " 0.0/4.0 CPU")) << out;

  // A second job that needs two more CPUs waits for the first.
  auto b = client.Submit({{"entrypoint", "echo b ran"}, {"entrypoint_num_cpus", 2}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(JobCluster::WaitFor([&] {
    auto job = client.GetJob(*b);
    return job.ok() && absl::StrContains((*job)["message"].get<std::string>(), "waiting for entrypoint resources");
  }));
  EXPECT_EQ((*client.GetJob(*b))["status"], "PENDING");

  ASSERT_TRUE(client.StopJob(*a).ok());
  WaitForStatus(*a, "STOPPED");
  WaitForStatus(*b, "SUCCEEDED");
  // Everything is given back once both have ended.
  EXPECT_TRUE(JobCluster::WaitFor([&] { return !absl::StrContains(out = status(), "reserved in placement groups"); }))
      << out;
  EXPECT_TRUE(absl::StrContains(out, " 0.0/4.0 CPU")) << out;
}

TEST_F(JobApiTest, StopMidRunLeavesNoProcessOfTheJob) {
  cli::JobClient client = cluster_.Client();
  auto id = client.Submit({{"entrypoint", "sleep 300 & sleep 300"}});
  ASSERT_TRUE(id.ok()) << id.status();
  json running = WaitForStatus(*id, "RUNNING");
  pid_t pgid = std::stoi(running["driver_info"]["pid"].get<std::string>());
  ASSERT_TRUE(JobCluster::WaitFor([&] { return LiveGroupMembers(pgid).size() >= 3; }, absl::Seconds(5)));
  EXPECT_EQ(client.DeleteJob(*id).code(), absl::StatusCode::kInvalidArgument);  // still running

  auto stopped = client.StopJob(*id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(*stopped);
  WaitForStatus(*id, "STOPPED");
  EXPECT_TRUE(LiveGroupMembers(pgid).empty());
  EXPECT_FALSE(*client.StopJob(*id));
}

TEST_F(JobApiTest, LogsAreCompleteAndInOrderWhenFollowedLive) {
  cli::JobClient client = cluster_.Client();
  // Output in two bursts with a pause, so the follower sees the job running.
  auto id = client.Submit({{"entrypoint",
                            "i=1; while [ $i -le 2000 ]; do echo line $i; i=$((i+1)); done; sleep 1; "
                            "while [ $i -le 4000 ]; do echo line $i >&2; i=$((i+1)); done"}});
  ASSERT_TRUE(id.ok()) << id.status();
  std::string followed;
  int pieces = 0;
  absl::Status s = client.TailLogs(*id, [&](std::string_view data) {
    followed.append(data.data(), data.size());
    ++pieces;
    return true;
  });
  ASSERT_TRUE(s.ok()) << s;
  std::string expected;
  for (int i = 1; i <= 4000; ++i) absl::StrAppend(&expected, "line ", i, "\n");
  EXPECT_EQ(followed, expected);
  EXPECT_GE(pieces, 2);
  EXPECT_EQ(*client.GetLogs(*id), expected);
  json job = *client.GetJob(*id);
  EXPECT_EQ(job["status"], "SUCCEEDED");
}

// The example from Ray's Jobs REST API documentation, with curl and the
// token header.
TEST_F(JobApiTest, RayCurlScriptWorksWithTheTokenHeader) {
  std::string auth = cluster_.AuthHeader();
  CommandResult submit = cluster_.Curl({"-X", "POST", cluster_.url() + "/api/jobs/", "-H", auth, "-H",
                                        "Content-Type: application/json", "-d",
                                        R"({"entrypoint": "echo hello", "runtime_env": {}, "job_id": null, )"
                                        R"("metadata": {"job_submission_id": "123"}})"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  json reply = json::parse(submit.out, nullptr, false);
  ASSERT_TRUE(reply.is_object()) << submit.out;
  std::string job_id = reply["job_id"];
  EXPECT_EQ(reply["submission_id"], job_id);

  ASSERT_TRUE(JobCluster::WaitFor([&] {
    CommandResult r = cluster_.Curl({cluster_.url() + "/api/jobs/" + job_id, "-H", auth});
    json j = json::parse(r.out, nullptr, false);
    return j.is_object() && j["status"] == "SUCCEEDED";
  }));
  CommandResult logs = cluster_.Curl({cluster_.url() + "/api/jobs/" + job_id + "/logs", "-H", auth});
  EXPECT_EQ(json::parse(logs.out, nullptr, false)["logs"], "hello\n") << logs.out;
  CommandResult list = cluster_.Curl({cluster_.url() + "/api/jobs/", "-H", auth});
  EXPECT_EQ(json::parse(list.out, nullptr, false).size(), 1u) << list.out;
  CommandResult tail = cluster_.Curl({"-N", cluster_.url() + "/api/jobs/" + job_id + "/logs/tail", "-H", auth});
  EXPECT_EQ(tail.out, "hello\n");
  CommandResult stop = cluster_.Curl({"-X", "POST", cluster_.url() + "/api/jobs/" + job_id + "/stop", "-H", auth});
  EXPECT_EQ(json::parse(stop.out, nullptr, false)["stopped"], false) << stop.out;
  CommandResult del = cluster_.Curl({"-X", "DELETE", cluster_.url() + "/api/jobs/" + job_id, "-H", auth});
  EXPECT_EQ(json::parse(del.out, nullptr, false)["deleted"], true) << del.out;
  CommandResult gone =
      cluster_.Curl({"-o", "/dev/null", "-w", "%{http_code}", cluster_.url() + "/api/jobs/" + job_id, "-H", auth});
  EXPECT_EQ(gone.out, "404");
}

TEST_F(JobApiTest, DashboardRestartKeepsRecordsAndRunningJobs) {
  cli::JobClient client = cluster_.Client();
  auto done = client.Submit({{"entrypoint", "echo finished"}});
  auto running = client.Submit({{"entrypoint", "sleep 300 & sleep 300"}});
  auto lost = client.Submit({{"entrypoint", "sleep 300"}});
  ASSERT_TRUE(done.ok() && running.ok() && lost.ok());
  WaitForStatus(*done, "SUCCEEDED");
  json running_job = WaitForStatus(*running, "RUNNING");
  json lost_job = WaitForStatus(*lost, "RUNNING");

  ASSERT_TRUE(cluster_.KillDashboard().ok());
  pid_t lost_pgid = std::stoi(lost_job["driver_info"]["pid"].get<std::string>());
  ASSERT_TRUE(SignalProcessGroup(lost_pgid, SIGKILL).ok());
  // The status carries the restarted dashboard's log when it did not start.
  absl::Status restarted = cluster_.RestartDashboard();
  ASSERT_TRUE(restarted.ok()) << restarted;

  EXPECT_EQ((*client.GetJob(*done))["status"], "SUCCEEDED");
  EXPECT_EQ(*client.GetLogs(*done), "finished\n");
  EXPECT_EQ((*client.GetJob(*running))["status"], "RUNNING");
  json failed = WaitForStatus(*lost, "FAILED");
  EXPECT_EQ(failed["error_type"], "JOB_SUPERVISOR_LOST");
  ASSERT_TRUE(client.StopJob(*running).ok());
  WaitForStatus(*running, "STOPPED");
  pid_t pgid = std::stoi(running_job["driver_info"]["pid"].get<std::string>());
  EXPECT_TRUE(LiveGroupMembers(pgid).empty());
  EXPECT_EQ(client.ListJobs()->size(), 3u);
}

TEST_F(JobApiTest, ALargeLogIsReadInPiecesNotHeldWhole) {
  // 16 MB of output, read by eight clients at once: each is answered with
  // the whole log, and the dashboard holds a piece of it at a time (whole
  // logs would be 128 MB, twice the bound below).
  cli::JobClient client = cluster_.Client();
  auto id = client.Submit({{"entrypoint", "head -c 16000000 /dev/zero | tr '\\0' a | fold -w 99"}});
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForStatus(*id, "SUCCEEDED", absl::Seconds(60));
  auto pid = cluster_.DashboardPid();
  ASSERT_TRUE(pid.ok());
  const int port = std::stoi(cluster_.url().substr(cluster_.url().rfind(':') + 1));
  const std::string request =
      absl::StrCat("GET /api/jobs/", *id, "/logs HTTP/1.1\r\nHost: x\r\n", cluster_.AuthHeader(), "\r\n\r\n");
  std::vector<HttpAnswer> answers(8);
  const int64_t before = RssOf(*pid);
  const int64_t peak = PeakRssWhile(*pid, [&] {
    std::vector<std::thread> readers;
    for (int i = 0; i < 8; ++i)
      readers.emplace_back([&, i] { answers[i] = RawRequest(port, request, absl::Seconds(60)); });
    for (auto& t : readers) t.join();
  });
  for (const HttpAnswer& a : answers) {
    ASSERT_EQ(a.status, 200) << a.status_line;
    // Chunked transfer: join the chunks' data.
    std::string body;
    size_t at = 0;
    while (at < a.body.size()) {
      size_t eol = a.body.find("\r\n", at);
      ASSERT_NE(eol, std::string::npos);
      const size_t n = std::stoul(a.body.substr(at, eol - at), nullptr, 16);
      if (n == 0) break;
      body.append(a.body, eol + 2, n);
      at = eol + 2 + n + 2;
    }
    json logs = json::parse(body, nullptr, false);
    ASSERT_TRUE(logs.is_object()) << body.substr(0, 200);
    EXPECT_EQ(logs["logs"].get<std::string>().size(),
              std::filesystem::file_size(cluster_.session_dir() + "/logs/job-driver-" + *id + ".log"));
    EXPECT_GT(logs["logs"].get<std::string>().size(), 16000000u);
  }
  EXPECT_LT(peak - before, 64 << 20) << "the dashboard grew from " << before << " to " << peak << " bytes";
  // The page asks for the end only.
  HttpAnswer tail_only = RawRequest(port, absl::StrCat("GET /api/jobs/", *id, "/logs?max_bytes=1000 HTTP/1.1\r\n",
                                                       cluster_.AuthHeader(), "\r\n\r\n"));
  EXPECT_NE(tail_only.body.find("bytes of the log are omitted"), std::string::npos);
  EXPECT_LT(tail_only.body.size(), 2000u);
}

}  // namespace
}  // namespace manta::testing
