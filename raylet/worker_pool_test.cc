#include "raylet/worker_pool.h"

#include <uv.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace manta::raylet {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_worker_pool_test_XXXXXX";
    session_ = mkdtemp(tmpl);
    WorkerPoolOptions o;
    o.node_id = NodeId::FromRandom();
    o.raylet_address = "127.0.0.1:7000";
    o.gcs_address = "127.0.0.1:6379";
    o.token_file = session_ + "/token";
    o.session_dir = session_;
    o.max_workers = 4;
    o.idle_timeout = absl::Seconds(60);
    o.start_timeout = absl::Seconds(30);
    o.kill_grace = absl::Seconds(600);  // only the fake clock ends it
    o.now = [this] { return now_; };
    pool_ = std::make_unique<WorkerPool>(o, &loop_);
    pool_->SetExitListener([this](const WorkerExit& e) { exits_.push_back(e); });
    pool_->SetLogListener([this](const WorkerLogFiles& l) { logs_.push_back(l); });
  }
  void TearDown() override {
    pool_.reset();
    std::filesystem::remove_all(session_);
  }

  // Runs the loop until `cond` holds; false after `limit` (a failure, not a
  // timing assumption).
  bool RunUntil(const std::function<bool()>& cond, absl::Duration limit = absl::Seconds(20)) {
    absl::Time deadline = absl::Now() + limit;
    auto wake = loop_.RunEvery(absl::Milliseconds(10), [] {});
    while (!cond()) {
      if (absl::Now() > deadline) return false;
      uv_run(loop_.uv_loop(), UV_RUN_ONCE);
    }
    return true;
  }

  rpc::TaskSpec Spec(const std::string& script) {
    rpc::TaskSpec spec;
    spec.set_job_id(std::string("\0\0\0\2", 4));
    spec.set_worker_executable("/bin/sh");
    spec.add_worker_args("-c");
    spec.add_worker_args(script);
    return spec;
  }

  absl::Status Register(const WorkerId& id, int port) {
    rpc::RegisterWorkerRequest req;
    req.set_worker_id(id.Binary());
    req.set_port(port);
    return pool_->RegisterWorker(req);
  }

  EventLoop loop_;
  std::string session_;
  absl::Time now_ = absl::FromUnixSeconds(1000000);
  std::unique_ptr<WorkerPool> pool_;
  std::vector<WorkerExit> exits_;
  std::vector<WorkerLogFiles> logs_;
};

TEST_F(WorkerPoolTest, MissingProgramFailsThePop) {
  rpc::TaskSpec spec = Spec("");
  spec.set_worker_executable("/nonexistent/worker");
  absl::Status status;
  bool called = false;
  pool_->PopWorker(spec, [&](absl::StatusOr<LeasedWorker> w) {
    called = true;
    status = w.status();
  });
  ASSERT_TRUE(RunUntil([&] { return called; }));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "/nonexistent/worker")) << status;
  EXPECT_EQ(pool_->num_workers(), 0u);
}

TEST_F(WorkerPoolTest, ExitBeforeRegisteringFailsThePopAndKeepsLogs) {
  absl::Status status;
  bool called = false;
  pool_->PopWorker(Spec("echo out-$MANTA_JOB_ID-$MANTA_RAYLET_ADDRESS; echo err-$MANTA_TOKEN_FILE >&2; exit 3"),
                   [&](absl::StatusOr<LeasedWorker> w) {
                     called = true;
                     status = w.status();
                   });
  // The exit is reported once the log files carry their final names.
  ASSERT_TRUE(RunUntil([&] { return called && logs_.size() == 1 && exits_.size() == 1; }));
  EXPECT_TRUE(absl::StrContains(status.message(), "exited with code 3")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), logs_[0].err_path)) << status;
  ASSERT_EQ(exits_.size(), 1u);
  EXPECT_FALSE(exits_[0].intentional);
  EXPECT_FALSE(exits_[0].registered);
  EXPECT_EQ(exits_[0].detail, "exited with code 3");
  EXPECT_EQ(logs_[0].out_path,
            session_ + "/logs/worker-" + logs_[0].worker_id.Hex() + "-" + std::to_string(logs_[0].pid) + ".out");
  EXPECT_EQ(ReadAll(logs_[0].out_path), "out-00000002-127.0.0.1:7000\n");
  EXPECT_EQ(ReadAll(logs_[0].err_path), "err-" + session_ + "/token\n");
  EXPECT_EQ(pool_->num_workers(), 0u);
}

TEST_F(WorkerPoolTest, RegisteredWorkerIsLeasedReusedAndKilled) {
  absl::StatusOr<LeasedWorker> leased = absl::UnknownError("pending");
  pool_->PopWorker(Spec("exec sleep 300"), [&](absl::StatusOr<LeasedWorker> w) { leased = std::move(w); });
  ASSERT_TRUE(RunUntil([&] { return logs_.size() == 1; }));
  EXPECT_EQ(pool_->num_starting(), 1u);
  EXPECT_EQ(Register(WorkerId::FromRandom(), 5000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Register(logs_[0].worker_id, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Register(logs_[0].worker_id, 5000).ok());
  EXPECT_TRUE(Register(logs_[0].worker_id, 5000).ok()) << "idempotent";
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_EQ(leased->port, 5000);
  EXPECT_EQ(leased->pid, logs_[0].pid);

  pool_->PushWorker(leased->worker_id);
  EXPECT_EQ(pool_->num_idle(), 1u);
  absl::StatusOr<LeasedWorker> again = absl::UnknownError("pending");
  pool_->PopWorker(Spec("exec sleep 300"), [&](absl::StatusOr<LeasedWorker> w) { again = std::move(w); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->worker_id, leased->worker_id) << "an idle worker of the same job is reused";
  EXPECT_EQ(logs_.size(), 1u);

  pool_->DisconnectWorker(leased->worker_id, "test");
  ASSERT_TRUE(RunUntil([&] { return !exits_.empty(); }));
  EXPECT_TRUE(exits_[0].intentional);
  EXPECT_TRUE(exits_[0].registered);
  EXPECT_EQ(exits_[0].detail, "killed by signal 15 (Terminated)");
}

TEST_F(WorkerPoolTest, StartTimeoutFailsThePop) {
  absl::Status status;
  bool called = false;
  pool_->PopWorker(Spec("exec sleep 300"), [&](absl::StatusOr<LeasedWorker> w) {
    called = true;
    status = w.status();
  });
  ASSERT_TRUE(RunUntil([&] { return logs_.size() == 1; }));
  pool_->OnTimer();
  EXPECT_FALSE(called);
  now_ += absl::Seconds(31);
  pool_->OnTimer();
  ASSERT_TRUE(called);
  EXPECT_TRUE(absl::StrContains(status.message(), "did not register within 30s")) << status;
  ASSERT_TRUE(RunUntil([&] { return !exits_.empty(); }));
  EXPECT_TRUE(exits_[0].intentional);
}

TEST_F(WorkerPoolTest, SigtermIgnoredThenSigkillAfterGrace) {
  rpc::TaskSpec spec = Spec("trap '' TERM; echo ready; while :; do sleep 1; done");
  pool_->PopWorker(spec, [](absl::StatusOr<LeasedWorker>) {});
  ASSERT_TRUE(RunUntil([&] { return logs_.size() == 1 && ReadAll(logs_[0].out_path) == "ready\n"; }));
  ASSERT_TRUE(Register(logs_[0].worker_id, 5001).ok());
  pool_->DisconnectWorker(logs_[0].worker_id, "test");
  // The shell ignores SIGTERM: nothing exits until the grace has passed.
  now_ += absl::Seconds(601);
  pool_->OnTimer();
  ASSERT_TRUE(RunUntil([&] { return !exits_.empty(); }));
  EXPECT_EQ(exits_[0].detail, "killed by signal 9 (Killed)");
}

TEST_F(WorkerPoolTest, IdleWorkersBeyondTheMinimumTimeOut) {
  pool_->Prestart(Spec("exec sleep 300"), 2);
  pool_->Prestart(Spec("exec sleep 300"), 2);
  EXPECT_EQ(pool_->num_workers(), 2u) << "starting workers count toward the backlog";
  ASSERT_TRUE(RunUntil([&] { return logs_.size() == 2; }));
  ASSERT_TRUE(Register(logs_[0].worker_id, 5002).ok());
  now_ += absl::Seconds(10);
  ASSERT_TRUE(Register(logs_[1].worker_id, 5003).ok());
  EXPECT_EQ(pool_->num_idle(), 2u);
  now_ += absl::Seconds(55);
  pool_->OnTimer();
  ASSERT_TRUE(RunUntil([&] { return exits_.size() == 1; }));
  EXPECT_EQ(exits_[0].worker_id, logs_[0].worker_id) << "the least recently used goes first";
  now_ += absl::Seconds(3600);
  pool_->OnTimer();
  EXPECT_EQ(pool_->num_idle(), 1u) << "the minimum stays";
}

// The log files are made off the loop: a worker stopped before the loop
// spawns it is never started, its pop fails, and its files are removed.
TEST_F(WorkerPoolTest, AWorkerStoppedWhileItsFilesAreMadeNeverStarts) {
  absl::Status status;
  bool called = false;
  pool_->PopWorker(Spec("exec sleep 300"), [&](absl::StatusOr<LeasedWorker> w) {
    called = true;
    status = w.status();
  });
  EXPECT_EQ(pool_->num_starting(), 1u);
  bool all_gone = false;
  pool_->KillAll(absl::Seconds(1), [&] { all_gone = true; });
  ASSERT_TRUE(called);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "the raylet is stopping")) << status;
  ASSERT_TRUE(RunUntil([&] { return all_gone; }));
  EXPECT_EQ(pool_->num_workers(), 0u);
  EXPECT_TRUE(logs_.empty()) << "no process, no log files reported";
  EXPECT_TRUE(exits_.empty()) << "no process, no exit";
  // The files made for it are removed (by the file thread, in order).
  ASSERT_TRUE(RunUntil([&] {
    std::error_code ec;
    return std::filesystem::is_empty(session_ + "/logs", ec) || !std::filesystem::exists(session_ + "/logs");
  }));
}

TEST_F(WorkerPoolTest, PrestartIsCapped) {
  pool_->Prestart(Spec("exec sleep 300"), 10);
  EXPECT_EQ(pool_->num_workers(), 4u);
}

TEST_F(WorkerPoolTest, KillJobWorkersKeepsListedAndKillAllWaits) {
  pool_->Prestart(Spec("exec sleep 300"), 2);
  rpc::TaskSpec other = Spec("exec sleep 300");
  other.set_job_id(std::string("\0\0\0\3", 4));
  pool_->Prestart(other, 1);
  ASSERT_TRUE(RunUntil([&] { return logs_.size() == 3; }));
  pool_->KillJobWorkers(logs_[0].job_id, {logs_[1].worker_id});
  ASSERT_TRUE(RunUntil([&] { return exits_.size() == 1; }));
  EXPECT_EQ(exits_[0].worker_id, logs_[0].worker_id);
  bool all_gone = false;
  pool_->KillAll(absl::Seconds(1), [&] { all_gone = true; });
  ASSERT_TRUE(RunUntil([&] { return all_gone; }));
  EXPECT_EQ(exits_.size(), 3u);
}

// A job's environment: given by the source, answered later.
class FakeJobEnvs : public JobEnvSource {
 public:
  explicit FakeJobEnvs(EventLoop* loop) : loop_(loop) {}
  void Prepare(const JobId& job, Callback cb) override {
    ++calls;
    loop_->Post([this, cb = std::move(cb)] { cb(answer); });
  }
  void OnWorkerGone(const JobId&) override { ++gone; }
  absl::StatusOr<JobEnv> answer;
  int calls = 0;
  int gone = 0;

 private:
  EventLoop* loop_;
};

TEST_F(WorkerPoolTest, WorkersStartInTheirJobsDirectoryWithItsVariables) {
  FakeJobEnvs envs(&loop_);
  std::string cwd = session_ + "/job_dir";
  std::filesystem::create_directories(cwd);
  envs.answer = JobEnv{cwd, {{"JOB_VAR", "from-job"}, {"HOME", ""}, {"MANTA_JOB_ID", "forged"}}};
  WorkerPoolOptions o;
  o.node_id = NodeId::FromRandom();
  o.session_dir = session_;
  o.job_envs = &envs;
  pool_ = std::make_unique<WorkerPool>(o, &loop_);
  pool_->SetExitListener([this](const WorkerExit& e) { exits_.push_back(e); });
  pool_->SetLogListener([this](const WorkerLogFiles& l) { logs_.push_back(l); });
  setenv("HOME", "/raylet-home", 1);
  pool_->PopWorker(Spec("echo \"$(pwd) $JOB_VAR home=${HOME-unset} $MANTA_JOB_ID\""),
                   [](absl::StatusOr<LeasedWorker>) {});
  ASSERT_TRUE(RunUntil([&] { return exits_.size() == 1; }));
  EXPECT_EQ(ReadAll(logs_[0].out_path), cwd + " from-job home=unset 00000002\n");

  // A job whose environment cannot be made: the pop fails saying why, and
  // no process starts.
  envs.answer = absl::FailedPreconditionError("refused the working_dir package P of job 00000002: bad");
  absl::Status status;
  bool called = false;
  pool_->PopWorker(Spec("exit 0"), [&](absl::StatusOr<LeasedWorker> w) {
    called = true;
    status = w.status();
  });
  ASSERT_TRUE(RunUntil([&] { return called; }));
  EXPECT_TRUE(absl::StrContains(status.message(), "refused the working_dir package")) << status;
  EXPECT_EQ(pool_->num_workers(), 0u);
  EXPECT_FALSE(pool_->HasWorkersOf(*JobId::FromHex("00000002")));
  EXPECT_EQ(envs.calls, 2);
  EXPECT_EQ(envs.gone, 2) << "the one that exited and the one never started";
}

// The pool is loop-only: a call from another thread aborts at once, naming
// the caller, instead of racing with the loop.
TEST_F(WorkerPoolTest, ACallOffTheLoopThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        // The child runs SetUp again and dies before TearDown: its own
        // session folder goes first.
        std::filesystem::remove_all(session_);
        std::thread other([&] { pool_->Prestart(Spec("exec sleep 300"), 1); });
        other.join();
      },
      "worker_pool.cc:[0-9]+: CHECK.*called off the thread it lives on");
}

}  // namespace
}  // namespace manta::raylet
