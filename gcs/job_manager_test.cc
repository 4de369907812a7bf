#include "gcs/job_manager.h"

#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "common/package_name.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

class JobManagerTest : public ::testing::Test {
 protected:
  std::unique_ptr<JobManager> Make() {
    auto m = std::make_unique<JobManager>(
        &store_, &pub_, &raylets_, [this] { return nodes_; }, timers_.RunAfter());
    EXPECT_TRUE(m->Initialize().ok());
    return m;
  }
  absl::StatusOr<std::string> Add(JobManager& m, rpc::JobInfo job = {}) {
    rpc::AddJobRequest req;
    *req.mutable_job() = job;
    rpc::AddJobReply reply;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleAddJob(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    if (!result.ok()) return result;
    return reply.job_id();
  }
  absl::Status Finish(JobManager& m, const std::string& id) {
    rpc::MarkJobFinishedRequest req;
    req.set_job_id(id);
    rpc::MarkJobFinishedReply reply;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleMarkJobFinished(req, &reply, [&](const absl::Status& s) { result = s; });
    return result;
  }
  rpc::NodeInfo Node() {
    rpc::NodeInfo n;
    n.set_node_id(NodeId::FromRandom().Binary());
    n.set_node_ip("127.0.0.1");
    n.set_node_manager_port(7000 + static_cast<int>(nodes_.size()));
    return n;
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeRayletClientPool raylets_;
  FakeTimers timers_;
  std::vector<rpc::NodeInfo> nodes_;
};

TEST_F(JobManagerTest, IdsIncreaseBigEndianAndPersistAcrossRestart) {
  {
    auto m = Make();
    auto a = Add(*m);
    auto b = Add(*m);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, std::string("\0\0\0\1", 4));
    EXPECT_EQ(*b, std::string("\0\0\0\2", 4));
    EXPECT_EQ(pub_.last_sequence(), 2);
  }
  auto recovered = Make();
  auto c = Add(*recovered);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, std::string("\0\0\0\3", 4));
  rpc::GetAllJobInfoReply all;
  recovered->HandleGetAllJobInfo({}, &all, [](const absl::Status&) {});
  ASSERT_EQ(all.jobs_size(), 3);
  EXPECT_FALSE(all.jobs(0).is_dead());
}

TEST_F(JobManagerTest, CounterNeverReusesIdsEvenWhenItsRowIsLost) {
  {
    auto m = Make();
    ASSERT_TRUE(Add(*m).ok());
    ASSERT_TRUE(Add(*m).ok());
  }
  store_.Delete(JobManager::kCounterTable, "next_job_id", nullptr);
  Pump(loop_);
  auto m = Make();
  EXPECT_EQ(*Add(*m), std::string("\0\0\0\3", 4));
}

TEST_F(JobManagerTest, RejectsBadInput) {
  auto m = Make();
  rpc::JobInfo bad;
  bad.set_job_id("xyz");
  EXPECT_EQ(Add(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.mutable_driver_address()->set_port(70000);
  EXPECT_EQ(Add(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.set_entrypoint(std::string(JobManager::kMaxEntrypointBytes + 1, 'x'));
  EXPECT_EQ(Add(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Finish(*m, "short").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Finish(*m, JobIdFromInt(9).Binary()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pub_.last_sequence(), 0);
}

// A job's runtime env is what its workers start with on every node: it is
// kept with the job, and one job's record can be read alone.
TEST_F(JobManagerTest, RuntimeEnvIsKeptAndCheckedAndAJobIsReadAlone) {
  auto m = Make();
  rpc::JobInfo job;
  job.mutable_runtime_env()->set_working_dir_package(PackageNameOf("archive"));
  (*job.mutable_runtime_env()->mutable_env_vars())["A"] = "1";
  auto id = Add(*m, job);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Add(*m).ok());
  rpc::GetAllJobInfoRequest req;
  req.set_job_id(*id);
  rpc::GetAllJobInfoReply reply;
  m->HandleGetAllJobInfo(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
  ASSERT_EQ(reply.jobs_size(), 1);
  EXPECT_EQ(reply.jobs(0).runtime_env().working_dir_package(), PackageNameOf("archive"));
  EXPECT_EQ(reply.jobs(0).runtime_env().env_vars().at("A"), "1");
  reply.Clear();
  req.set_job_id(JobIdFromInt(77).Binary());
  m->HandleGetAllJobInfo(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
  EXPECT_EQ(reply.jobs_size(), 0);

  for (const char* package : {"../../etc", "_manta_pkg_x.tar", "pkg.zip"}) {
    rpc::JobInfo bad;
    bad.mutable_runtime_env()->set_working_dir_package(package);
    EXPECT_EQ(Add(*m, bad).status().code(), absl::StatusCode::kInvalidArgument) << package;
  }
  rpc::JobInfo bad;
  (*bad.mutable_runtime_env()->mutable_env_vars())["A=B"] = "1";
  EXPECT_EQ(Add(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobManagerTest, FinishMarksDeadTellsListenersAndEveryRaylet) {
  nodes_.push_back(Node());
  nodes_.push_back(Node());
  auto m = Make();
  std::vector<std::string> finished;
  m->AddJobFinishedListener([&](const rpc::JobInfo& j) { finished.push_back(j.job_id()); });
  std::string id = *Add(*m);
  ASSERT_TRUE(Finish(*m, id).ok());
  ASSERT_TRUE(Finish(*m, id).ok());  // idempotent
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_TRUE(m->IsFinished(*JobId::FromBinary(id)));
  EXPECT_GT(m->Get(*JobId::FromBinary(id))->end_time_ms(), 0);
  ASSERT_EQ(raylets_.killed_jobs.size(), 2u);
  EXPECT_EQ(raylets_.killed_jobs[0].request.job_id(), id);
  EXPECT_EQ(raylets_.killed_jobs[1].address, "127.0.0.1:7001");
  // A finished job cannot be added again under its id.
  rpc::JobInfo again;
  again.set_job_id(id);
  EXPECT_EQ(Add(*m, again).status().code(), absl::StatusCode::kFailedPrecondition);
  Pump(loop_);
  auto recovered = Make();
  EXPECT_TRUE(recovered->IsFinished(*JobId::FromBinary(id)));
}

TEST_F(JobManagerTest, DriverWhoseConnectionDropsIsFinishedAfterGrace) {
  auto m = Make();
  JobId job = *JobId::FromBinary(*Add(*m));
  EXPECT_EQ(timers_.num_armed(), 0u);  // nothing watched before the first poll
  m->OnDriverPollStarted(job);
  EXPECT_EQ(timers_.num_armed(), 0u);  // a held poll needs no timer
  m->OnDriverPollEnded(job, /*connection_lost=*/true);
  ASSERT_EQ(timers_.num_armed(), 1u);
  EXPECT_EQ(timers_.last_delay(), absl::Seconds(2));
  timers_.FireAll();
  EXPECT_TRUE(m->IsFinished(job));
  EXPECT_EQ(m->num_watched_drivers(), 0u);
}

TEST_F(JobManagerTest, DriverThatPollsAgainStaysAlive) {
  auto m = Make();
  JobId job = *JobId::FromBinary(*Add(*m));
  m->OnDriverPollStarted(job);
  m->OnDriverPollEnded(job, /*connection_lost=*/true);
  m->OnDriverPollStarted(job);  // reconnected within the grace
  EXPECT_EQ(timers_.num_armed(), 0u);
  timers_.FireAll();
  EXPECT_FALSE(m->IsFinished(job));
  // A normal poll end waits longer for the next poll.
  m->OnDriverPollEnded(job, /*connection_lost=*/false);
  EXPECT_EQ(timers_.last_delay(), absl::Seconds(30));
  m->OnDriverPollStarted(job);
  timers_.FireAll();
  EXPECT_FALSE(m->IsFinished(job));
  // Polls of unknown jobs are ignored.
  m->OnDriverPollStarted(JobIdFromInt(77));
  m->OnDriverPollEnded(JobIdFromInt(77), true);
  EXPECT_EQ(timers_.num_armed(), 0u);
}

// A driver killed between two polls drops no held connection: after a
// normal end with no next poll, its process is probed, and a gone one
// finishes the job at once rather than after the whole poll gap.
TEST_F(JobManagerTest, ADriverGoneBetweenPollsIsFoundByAProbe) {
  auto m = Make();
  std::vector<std::function<void(bool)>> answers;
  std::vector<std::string> probed;
  m->SetDriverProbe([&](const rpc::Address& driver, std::function<void(bool)> answer) {
    probed.push_back(driver.worker_id());
    answers.push_back(std::move(answer));
  });
  rpc::JobInfo info;
  const std::string driver = WorkerId::FromRandom().Binary();
  info.mutable_driver_address()->set_worker_id(driver);
  JobId job = *JobId::FromBinary(*Add(*m, info));
  m->OnDriverPollStarted(job);
  m->OnDriverPollEnded(job, /*connection_lost=*/false);
  ASSERT_EQ(timers_.num_armed(), 1u);
  EXPECT_EQ(timers_.last_delay(), absl::Seconds(1));
  timers_.FireAll();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(probed[0], driver);
  EXPECT_FALSE(m->IsFinished(job));
  answers[0](/*gone=*/true);
  EXPECT_TRUE(m->IsFinished(job));
  EXPECT_EQ(m->num_watched_drivers(), 0u);
}

TEST_F(JobManagerTest, ALiveDriverBetweenPollsGetsTheRestOfThePollGap) {
  auto m = Make();
  std::vector<std::function<void(bool)>> answers;
  m->SetDriverProbe([&](const rpc::Address&, std::function<void(bool)> answer) { answers.push_back(answer); });
  JobId job = *JobId::FromBinary(*Add(*m));
  m->OnDriverPollStarted(job);
  m->OnDriverPollEnded(job, false);
  timers_.FireAll();
  ASSERT_EQ(answers.size(), 1u);
  answers[0](/*gone=*/false);  // alive (or unreachable: no verdict)
  EXPECT_FALSE(m->IsFinished(job));
  ASSERT_EQ(timers_.num_armed(), 1u);
  EXPECT_EQ(timers_.last_delay(), absl::Seconds(29));
  timers_.FireAll();  // and it never polled again
  EXPECT_TRUE(m->IsFinished(job));

  // An answer that comes after the driver polled again is stale: ignored,
  // even when it says gone.
  JobId other = *JobId::FromBinary(*Add(*m));
  m->OnDriverPollStarted(other);
  m->OnDriverPollEnded(other, false);
  timers_.FireAll();
  ASSERT_EQ(answers.size(), 2u);
  m->OnDriverPollStarted(other);
  m->OnDriverPollEnded(other, false);
  answers[1](/*gone=*/true);
  EXPECT_FALSE(m->IsFinished(other));
  EXPECT_EQ(timers_.num_armed(), 1u);  // the newer end's probe timer
}

}  // namespace
}  // namespace manta::gcs
