// JobManager against the in-memory store and the real job_runner binary.
#include "dashboard/job_manager.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/process.h"
#include "dashboard/tar_writer.h"
#include "dashboard/validation.h"
#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

std::string RunnerPath() {
  if (const char* dir = std::getenv("MANTA_BIN_DIR")) return std::string(dir) + "/job_runner";
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string self(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return self.substr(0, self.rfind('/')) + "/../bin/job_runner";
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_jobs_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    session_ = tmpl;
    packages_ = std::make_unique<PackageStore>(session_ + "/runtime_resources", TarLimits{});
    ASSERT_TRUE(packages_->Init().ok());
    loop_thread_ = std::thread([this] { loop_.Run(); });
    StartManager();
  }

  void TearDown() override {
    for (const JobRecord& job : jobs_->List()) {
      if (job.runner_pid > 0) killpg(job.runner_pid, SIGKILL);
    }
    DestroyManager();
    loop_.Stop();
    loop_thread_.join();
    RemoveTree(session_).IgnoreError();
  }

  void OnLoop(std::function<void()> fn) {
    std::promise<void> done;
    loop_.Post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  void StartManager(Clock clock = absl::Now) {
    JobManagerOptions o;
    o.clock = std::move(clock);
    o.session_dir = session_;
    o.gcs_address = "127.0.0.1:1";
    o.token = "t0k3n";
    o.runner_path = RunnerPath();
    o.stop_grace = absl::Milliseconds(500);
    o.poll_period = absl::Milliseconds(20);
    o.load_timeout = absl::Seconds(1);
    jobs_ = std::make_unique<JobManager>(o, &store_, packages_.get(), &loop_);
    absl::Status s;
    OnLoop([&] { s = jobs_->Start(); });
    ASSERT_TRUE(s.ok()) << s;
  }

  // As if the dashboard crashed: no Shutdown, the runners keep going.
  void DestroyManager() {
    OnLoop([&] { jobs_.reset(); });
  }

  std::string Submit(const std::string& body) {
    auto req = ParseSubmitRequest(body);
    EXPECT_TRUE(req.ok()) << req.status();
    auto id = jobs_->Submit(*req);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  JobRecord WaitFor(const std::string& id, JobStatus status, absl::Duration timeout = absl::Seconds(10)) {
    JobRecord last;
    PollUntil(
        [&] {
          auto job = jobs_->Get(id);
          if (job.ok()) last = *job;
          return job.ok() && job->status == status;
        },
        absl::Now() + timeout);
    EXPECT_EQ(JobStatusName(last.status), std::string(JobStatusName(status))) << last.message;
    return last;
  }

  std::string Log(const std::string& id) { return ReadFile(*jobs_->LogPath(id)).value_or(""); }

  std::string session_;
  FakeJobStore store_;
  std::unique_ptr<PackageStore> packages_;
  EventLoop loop_;
  std::thread loop_thread_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobManagerTest, RecordTimesComeFromTheInjectedClock) {
  ManualClock clock(absl::FromUnixMillis(1'800'000'000'123));
  DestroyManager();
  StartManager(clock.AsClock());
  std::string id = Submit(R"({"entrypoint": "sleep 30"})");
  JobRecord running = WaitFor(id, JobStatus::kRunning);
  EXPECT_EQ(running.start_time_ms, 1'800'000'000'123);
  clock.Advance(absl::Minutes(90));
  auto stopped = jobs_->Stop(id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  JobRecord job = WaitFor(id, JobStatus::kStopped);
  EXPECT_EQ(job.end_time_ms, 1'800'000'000'123 + 90 * 60 * 1000);
}

TEST_F(JobManagerTest, SuccessfulJobRecordsOutputInOrderAndEnvironment) {
  std::string id = Submit(R"({"entrypoint": "for i in 1 2 3 4 5; do echo line $i; done; echo err >&2; )"
                          R"(echo $FOO $MANTA_ADDRESS $MANTA_TOKEN $MANTA_SUBMISSION_ID; pwd",)"
                          R"( "runtime_env": {"env_vars": {"FOO": "bar"}}})");
  EXPECT_TRUE(absl::StartsWith(id, kSubmissionIdPrefix));
  JobRecord job = WaitFor(id, JobStatus::kSucceeded);
  EXPECT_EQ(job.driver_exit_code, 0);
  EXPECT_GT(job.end_time_ms, 0);
  EXPECT_EQ(job.message, "Job finished successfully.");
  std::string log = Log(id);
  EXPECT_NE(log.find("line 1\nline 2\nline 3\nline 4\nline 5\nerr\n"), std::string::npos) << log;
  EXPECT_NE(log.find("bar 127.0.0.1:1 t0k3n " + id), std::string::npos) << log;
  EXPECT_NE(log.find(session_ + "/runtime_resources/working_dir/" + id), std::string::npos) << log;
  // The store has the final state.
  PollUntil([&] { return store_.Stored(id) && store_.Stored(id)->status == JobStatus::kSucceeded; },
            absl::Now() + absl::Seconds(5));
  EXPECT_EQ(store_.Stored(id)->status, JobStatus::kSucceeded);
}

TEST_F(JobManagerTest, FailingJobRecordsExitCodeAndLogTail) {
  std::string id = Submit(R"({"entrypoint": "echo boom; exit 3"})");
  JobRecord job = WaitFor(id, JobStatus::kFailed);
  EXPECT_EQ(job.driver_exit_code, 3);
  EXPECT_EQ(job.error_type, "JOB_ENTRYPOINT_COMMAND_ERROR");
  EXPECT_NE(job.message.find("exit code 3"), std::string::npos) << job.message;
  EXPECT_NE(job.message.find("boom"), std::string::npos) << job.message;
}

TEST_F(JobManagerTest, StopKillsTheWholeProcessGroup) {
  std::string id = Submit(R"({"entrypoint": "sleep 300 & sleep 300"})");
  JobRecord running = WaitFor(id, JobStatus::kRunning);
  ASSERT_GT(running.runner_pid, 0);
  ASSERT_TRUE(
      PollUntil([&] { return LiveGroupMembers(running.runner_pid).size() >= 3; }, absl::Now() + absl::Seconds(5)));
  auto stopped = jobs_->Stop(id);
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(*stopped);
  JobRecord job = WaitFor(id, JobStatus::kStopped);
  EXPECT_EQ(job.message, "Job was intentionally stopped.");
  EXPECT_TRUE(LiveGroupMembers(running.runner_pid).empty());
  EXPECT_FALSE(*jobs_->Stop(id));  // already ended
}

TEST_F(JobManagerTest, AStoppedJobEndsOnlyOnceNoProcessOfItLives) {
  // tail holds 768 MiB, and a process that large takes tens of milliseconds
  // to exit after its signal: the job must not end while it still lives.
  constexpr int64_t kHeld = int64_t{768} << 20;
  std::string id = Submit(
      absl::StrCat(R"({"entrypoint": "{ head -c )", kHeld, R"( /dev/zero; sleep 300; } | tail -c )", kHeld, R"("})"));
  JobRecord running = WaitFor(id, JobStatus::kRunning);
  ASSERT_TRUE(PollUntil(
      [&] {
        for (pid_t p : LiveGroupMembers(running.runner_pid)) {
          if (ResidentBytes(p) >= kHeld) return true;
        }
        return false;
      },
      absl::Now() + absl::Seconds(60)));
  ASSERT_TRUE(jobs_->Stop(id).ok());
  WaitFor(id, JobStatus::kStopped);
  EXPECT_EQ(LiveGroupMembers(running.runner_pid), std::vector<pid_t>());
}

TEST_F(JobManagerTest, StopEscalatesToSigkillAfterGrace) {
  std::string id = Submit(R"({"entrypoint": "trap '' TERM; sleep 300 & sleep 300"})");
  JobRecord running = WaitFor(id, JobStatus::kRunning);
  // sh, the two sleeps and the runner: the trap is installed before the sleeps start.
  ASSERT_TRUE(
      PollUntil([&] { return LiveGroupMembers(running.runner_pid).size() >= 4; }, absl::Now() + absl::Seconds(5)));
  absl::Time start = absl::Now();
  ASSERT_TRUE(jobs_->Stop(id).ok());
  WaitFor(id, JobStatus::kStopped);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_TRUE(LiveGroupMembers(running.runner_pid).empty());
}

TEST_F(JobManagerTest, EntrypointResourcesMustFitTheHead) {
  store_.set_head({"127.0.0.1", {{"CPU", 4}, {"TPU", 4}}});
  std::string infeasible = Submit(R"({"entrypoint": "true", "entrypoint_num_cpus": 8})");
  JobRecord job = WaitFor(infeasible, JobStatus::kFailed);
  EXPECT_NE(job.message.find("do not fit on the head node"), std::string::npos) << job.message;
  EXPECT_EQ(job.runner_pid, 0);

  std::string a =
      Submit(R"({"entrypoint": "sleep 300", "entrypoint_num_cpus": 3, "entrypoint_resources": {"TPU": 4}})");
  WaitFor(a, JobStatus::kRunning);
  std::string b = Submit(R"({"entrypoint": "echo b ran", "entrypoint_num_cpus": 2})");
  PollUntil([&] { return jobs_->Get(b)->message.find("waiting") != std::string::npos; },
            absl::Now() + absl::Seconds(5));
  EXPECT_EQ(jobs_->Get(b)->status, JobStatus::kPending);
  EXPECT_NE(jobs_->Get(b)->message.find("waiting for entrypoint resources"), std::string::npos);
  EXPECT_EQ(store_.Held(), std::vector<std::string>{a});
  EXPECT_EQ(store_.NumReservations(), 2u);  // b waits in the store's queue
  ASSERT_TRUE(jobs_->Stop(a).ok());
  WaitFor(b, JobStatus::kSucceeded);
  PollUntil([&] { return store_.NumReservations() == 0; }, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(store_.NumReservations(), 0u) << "an ended job still holds its entrypoint resources";
}

TEST_F(JobManagerTest, AJobStoppedWhileWaitingGivesItsReservationBack) {
  store_.set_head({"127.0.0.1", {{"CPU", 4}}});
  std::string a = Submit(R"({"entrypoint": "sleep 300", "entrypoint_num_cpus": 4})");
  WaitFor(a, JobStatus::kRunning);
  std::string b = Submit(R"({"entrypoint": "echo b ran", "entrypoint_num_cpus": 1})");
  PollUntil([&] { return store_.NumReservations() == 2; }, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(jobs_->Stop(b).ok());
  WaitFor(b, JobStatus::kStopped);
  PollUntil([&] { return store_.NumReservations() == 1; }, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(store_.Held(), std::vector<std::string>{a});
  EXPECT_EQ(store_.NumReservations(), 1u);

  // A release the store refuses is retried until it lands.
  store_.set_available(false);
  ASSERT_TRUE(jobs_->Stop(a).ok());
  WaitFor(a, JobStatus::kStopped);
  EXPECT_EQ(store_.NumReservations(), 1u);
  store_.set_available(true);
  PollUntil([&] { return store_.NumReservations() == 0; }, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(store_.NumReservations(), 0u);
}

TEST_F(JobManagerTest, RejectionsChangeNothing) {
  std::string id = Submit(R"({"entrypoint": "true", "submission_id": "dup"})");
  auto again = jobs_->Submit(*ParseSubmitRequest(R"({"entrypoint": "false", "submission_id": "dup"})"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  WaitFor(id, JobStatus::kSucceeded);
  EXPECT_EQ(jobs_->Get("dup")->entrypoint, "true");

  store_.set_available(false);
  auto down = jobs_->Submit(*ParseSubmitRequest(R"({"entrypoint": "true"})"));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(jobs_->Delete("dup").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(jobs_->List().size(), 1u);
  store_.set_available(true);

  EXPECT_EQ(jobs_->Stop("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs_->Delete("nope").code(), absl::StatusCode::kNotFound);
  std::string running = Submit(R"({"entrypoint": "sleep 300"})");
  WaitFor(running, JobStatus::kRunning);
  EXPECT_EQ(jobs_->Delete(running).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(jobs_->Stop(running).ok());
  WaitFor(running, JobStatus::kStopped);
  std::string log = *jobs_->LogPath(running);
  ASSERT_TRUE(jobs_->Delete(running).ok());
  EXPECT_FALSE(PathExists(log));
  EXPECT_FALSE(store_.Stored(running).has_value());
  EXPECT_FALSE(jobs_->Get(running).ok());
}

TEST_F(JobManagerTest, WorkingDirIsUnpackedForTheJob) {
  std::string src = session_ + "/src";
  ASSERT_TRUE(MakeDirs(src).ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/hello.txt", "hello from the package\n").ok());
  auto archive = PackDirectory(src, 1 << 20);
  ASSERT_TRUE(archive.ok());
  std::string name = PackageName(*archive);
  ASSERT_TRUE(packages_->Put(name, *archive).ok());
  // The driver learns the job's runtime env, to register the job with it;
  // the package is where every node can fetch it.
  std::string id =
      Submit(absl::StrCat(R"({"entrypoint": "cat hello.txt; echo; echo $MANTA_RUNTIME_ENV", )",
                          R"("runtime_env": {"env_vars": {"V": "1"}, "working_dir": "gcs://)", name, R"("}})"));
  WaitFor(id, JobStatus::kSucceeded);
  EXPECT_EQ(Log(id), absl::StrCat("hello from the package\n\n{\"env_vars\":{\"V\":\"1\"},\"working_dir\":\"gcs://",
                                  name, "\"}\n"));
  EXPECT_EQ(store_.Published(name), *archive);

  std::string missing =
      Submit(R"({"entrypoint": "true", "runtime_env": {"working_dir": "gcs://_manta_pkg_no.tar.gz"}})");
  JobRecord job = WaitFor(missing, JobStatus::kFailed);
  EXPECT_EQ(job.error_type, "RUNTIME_ENV_SETUP_FAILURE");
}

TEST_F(JobManagerTest, RestartAdoptsLiveJobsAndSettlesTheRest) {
  std::string alive = Submit(R"({"entrypoint": "sleep 300 & sleep 300"})");
  std::string killed = Submit(R"({"entrypoint": "sleep 300"})");
  std::string finishes = Submit(R"({"entrypoint": "sleep 0.5; echo done; exit 4"})");
  std::string done_before = Submit(R"({"entrypoint": "true"})");
  WaitFor(done_before, JobStatus::kSucceeded);
  JobRecord alive_job = WaitFor(alive, JobStatus::kRunning);
  JobRecord killed_job = WaitFor(killed, JobStatus::kRunning);
  WaitFor(finishes, JobStatus::kRunning);
  PollUntil([&] { return store_.Stored(finishes)->status == JobStatus::kRunning; }, absl::Now() + absl::Seconds(5));

  DestroyManager();
  killpg(killed_job.runner_pid, SIGKILL);
  ASSERT_TRUE(
      PollUntil([&] { return PathExists(session_ + "/jobs/" + finishes + ".exit"); }, absl::Now() + absl::Seconds(5)));
  StartManager();

  EXPECT_EQ(jobs_->Get(done_before)->status, JobStatus::kSucceeded);
  EXPECT_EQ(jobs_->Get(alive)->status, JobStatus::kRunning);
  JobRecord lost = WaitFor(killed, JobStatus::kFailed);
  EXPECT_EQ(lost.error_type, "JOB_SUPERVISOR_LOST");
  JobRecord finished = WaitFor(finishes, JobStatus::kFailed);
  EXPECT_EQ(finished.driver_exit_code, 4);
  ASSERT_TRUE(jobs_->Stop(alive).ok());
  WaitFor(alive, JobStatus::kStopped);
  EXPECT_TRUE(LiveGroupMembers(alive_job.runner_pid).empty());
}

TEST_F(JobManagerTest, ShutdownStopsRunningJobs) {
  std::string id = Submit(R"({"entrypoint": "sleep 300"})");
  JobRecord running = WaitFor(id, JobStatus::kRunning);
  std::promise<void> done;
  loop_.Post([&] { jobs_->Shutdown([&] { done.set_value(); }); });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(jobs_->Get(id)->status, JobStatus::kStopped);
  EXPECT_EQ(store_.Stored(id)->status, JobStatus::kStopped);
  // The runner's end does not turn it into a user's stop.
  EXPECT_EQ(jobs_->Get(id)->message, "Job was stopped because the dashboard shut down.");
  EXPECT_TRUE(LiveGroupMembers(running.runner_pid).empty());
  EXPECT_EQ(jobs_->Submit(*ParseSubmitRequest(R"({"entrypoint": "true"})")).status().code(),
            absl::StatusCode::kUnavailable);
}

// The supervisor's work is loop-only: a call from another thread (here the
// test's, while the loop runs on its own) aborts instead of racing with it.
TEST_F(JobManagerTest, ALoopOnlyCallOffTheLoopThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        // The child runs SetUp again and dies before TearDown: its own
        // session folder goes first.
        RemoveTree(session_).IgnoreError();
        jobs_->Shutdown([] {});
      },
      "job_manager.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta::dashboard
