#include "gcs/train_run_manager.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/str_format.h"
#include "gcs/fake_raylet_client.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/sqlite_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

using rpc::TrainRunAttemptInfo;
using rpc::TrainRunInfo;
using rpc::TrainWorkerInfo;

std::string RunId(int n) { return absl::StrFormat("%032x", n); }

TrainRunInfo MakeRun(int n, const JobId& job, int64_t start_ms, TrainRunInfo::State state = TrainRunInfo::RUNNING,
                     int64_t version = 1) {
  TrainRunInfo r;
  r.set_run_id(RunId(n));
  r.set_name("run-" + std::to_string(n));
  r.set_job_id(job.Binary());
  r.set_state(state);
  r.set_start_time_ms(start_ms);
  r.set_max_failures(-1);
  r.set_version(version);
  return r;
}

TrainRunAttemptInfo Attempt(const std::string& id, TrainRunAttemptInfo::State state, int workers) {
  TrainRunAttemptInfo a;
  a.set_attempt_id(id);
  a.set_state(state);
  a.set_num_workers(workers);
  for (int i = 0; i < workers; ++i) {
    TrainWorkerInfo* w = a.add_workers();
    w->set_world_rank(i);
    w->set_node_ip("10.0.0." + std::to_string(i + 1));
    w->set_pid(1000 + i);
    w->set_status(TrainWorkerInfo::ACTIVE);
  }
  return a;
}

rpc::TrainMetricPoint Point(int64_t step, double loss) {
  rpc::TrainMetricPoint p;
  p.set_step(step);
  p.set_time_ms(step * 10);
  (*p.mutable_metrics())["loss"] = loss;
  return p;
}

class TrainRunManagerTest : public ::testing::Test {
 protected:
  TrainRunManagerTest() {
    jobs_ = std::make_unique<JobManager>(
        &store_, &pub_, &raylets_, [] { return std::vector<rpc::NodeInfo>(); }, timers_.RunAfter());
    EXPECT_TRUE(jobs_->Initialize().ok());
    job1_ = AddJob();
    job2_ = AddJob();
  }

  JobId AddJob() {
    rpc::AddJobRequest req;
    rpc::AddJobReply reply;
    jobs_->HandleAddJob(req, &reply, [](const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; });
    Pump(loop_);
    return *JobId::FromBinary(reply.job_id());
  }

  std::unique_ptr<TrainRunManager> Make(Store* store = nullptr) {
    auto m =
        std::make_unique<TrainRunManager>(store != nullptr ? store : &store_, jobs_.get(), [this] { return now_; });
    EXPECT_TRUE(m->Initialize().ok());
    return m;
  }

  absl::Status Report(TrainRunManager& m, const TrainRunInfo& run, std::vector<rpc::TrainMetricPoint> points = {}) {
    rpc::ReportTrainRunRequest req;
    *req.mutable_run() = run;
    for (auto& p : points) *req.add_new_metrics() = std::move(p);
    rpc::ReportTrainRunReply reply;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleReportTrainRun(req, &reply, [&](const absl::Status& s) { result = s; });
    Pump(loop_);
    return result;
  }

  absl::StatusOr<std::vector<TrainRunInfo>> List(TrainRunManager& m, const std::string& job = "", int limit = 0,
                                                 bool with_metrics = false) {
    rpc::ListTrainRunsRequest req;
    req.set_job_id(job);
    req.set_limit(limit);
    req.set_with_metrics(with_metrics);
    rpc::ListTrainRunsReply reply;
    absl::Status result = absl::UnknownError("no reply");
    m.HandleListTrainRuns(req, &reply, [&](const absl::Status& s) { result = s; });
    if (!result.ok()) return result;
    return std::vector<TrainRunInfo>(reply.runs().begin(), reply.runs().end());
  }

  std::vector<std::string> Ids(const std::vector<TrainRunInfo>& runs) {
    std::vector<std::string> out;
    for (const auto& r : runs) out.push_back(r.run_id());
    return out;
  }

  // The stored row of a run, or "" when there is none.
  std::string Row(const std::string& run_id, Store* store = nullptr) {
    auto rows = (store != nullptr ? store : &store_)->ReadAll(TrainRunManager::kTable);
    EXPECT_TRUE(rows.ok());
    for (const auto& [k, v] : *rows) {
      if (k == run_id) return v;
    }
    return "";
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  FakeRayletClientPool raylets_;
  FakeTimers timers_;
  std::unique_ptr<JobManager> jobs_;
  JobId job1_, job2_;
  absl::Time now_ = absl::FromUnixMillis(777000);
};

TEST_F(TrainRunManagerTest, UpsertRepliesOnceDurableAndListsByStartTime) {
  auto m = Make();
  // Reply only once the store has the record.
  rpc::ReportTrainRunRequest req;
  *req.mutable_run() = MakeRun(2, job1_, 300);
  absl::Status result = absl::UnknownError("no reply");
  m->HandleReportTrainRun(req, nullptr, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kUnknown);
  Pump(loop_);
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_FALSE(Row(RunId(2)).empty());

  ASSERT_TRUE(Report(*m, MakeRun(3, job1_, 100)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(1, job2_, 100)).ok());  // same start as 3: by run_id
  auto all = List(*m);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Ids(*all), (std::vector<std::string>{RunId(1), RunId(3), RunId(2)}));
  EXPECT_EQ(Ids(*List(*m, "", 2)), (std::vector<std::string>{RunId(3), RunId(2)}));  // the newest two
  EXPECT_EQ(Ids(*List(*m, job1_.Binary())), (std::vector<std::string>{RunId(3), RunId(2)}));
  EXPECT_EQ(List(*m, "abc").status().code(), absl::StatusCode::kInvalidArgument);

  // A newer version replaces the record.
  TrainRunInfo update = MakeRun(3, job1_, 100, TrainRunInfo::RESTARTING, 2);
  update.set_status_detail("worker 1 died");
  *update.add_attempts() = Attempt("a0", TrainRunAttemptInfo::ERRORED, 2);
  ASSERT_TRUE(Report(*m, update).ok());
  const TrainRunInfo* got = m->Get(RunId(3));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->state(), TrainRunInfo::RESTARTING);
  EXPECT_EQ(got->status_detail(), "worker 1 died");
  EXPECT_EQ(got->attempts_size(), 1);
  EXPECT_EQ(m->num_runs(), 3u);
}

TEST_F(TrainRunManagerTest, StaleVersionIsIgnored) {
  auto m = Make();
  ASSERT_TRUE(Report(*m, MakeRun(1, job1_, 100, TrainRunInfo::RUNNING, 5), {Point(1, 2.0)}).ok());
  std::string row = Row(RunId(1));
  // Older and equal versions: OK, but nothing changes, not even the series.
  EXPECT_TRUE(Report(*m, MakeRun(1, job1_, 100, TrainRunInfo::ERRORED, 4), {Point(2, 1.0)}).ok());
  EXPECT_TRUE(Report(*m, MakeRun(1, job1_, 100, TrainRunInfo::SCHEDULING, 5), {Point(3, 1.0)}).ok());
  EXPECT_EQ(m->Get(RunId(1))->state(), TrainRunInfo::RUNNING);
  EXPECT_EQ(m->Get(RunId(1))->metrics_size(), 1);
  EXPECT_EQ(Row(RunId(1)), row);
  ASSERT_TRUE(Report(*m, MakeRun(1, job1_, 100, TrainRunInfo::RESIZING, 6)).ok());
  EXPECT_EQ(m->Get(RunId(1))->state(), TrainRunInfo::RESIZING);
}

TEST_F(TrainRunManagerTest, TerminalRunIsFrozen) {
  auto m = Make();
  for (auto state : {TrainRunInfo::FINISHED, TrainRunInfo::ERRORED, TrainRunInfo::ABORTED}) {
    int n = 10 + static_cast<int>(state);
    ASSERT_TRUE(Report(*m, MakeRun(n, job1_, 100, state, 1)).ok());
    std::string row = Row(RunId(n));
    EXPECT_TRUE(Report(*m, MakeRun(n, job1_, 100, TrainRunInfo::RUNNING, 2), {Point(1, 1.0)}).ok());
    EXPECT_EQ(m->Get(RunId(n))->state(), state);
    EXPECT_EQ(m->Get(RunId(n))->version(), 1);
    EXPECT_EQ(m->Get(RunId(n))->metrics_size(), 0);
    EXPECT_EQ(Row(RunId(n)), row);
  }
}

TEST_F(TrainRunManagerTest, MetricsAreAppendedAndCapped) {
  auto m = Make();
  std::vector<rpc::TrainMetricPoint> first, second;
  for (int i = 0; i < 1500; ++i) first.push_back(Point(i, 1.0 / (i + 1)));
  for (int i = 1500; i < 2500; ++i) second.push_back(Point(i, 1.0 / (i + 1)));
  TrainRunInfo run = MakeRun(1, job1_, 100, TrainRunInfo::RUNNING, 1);
  *run.add_metrics() = Point(-1, 0);  // a record's own series is ignored
  ASSERT_TRUE(Report(*m, run, first).ok());
  EXPECT_EQ(m->Get(RunId(1))->metrics_size(), 1500);
  EXPECT_EQ(m->Get(RunId(1))->metrics(0).step(), 0);
  run.set_version(2);
  ASSERT_TRUE(Report(*m, run, second).ok());
  const TrainRunInfo* got = m->Get(RunId(1));
  ASSERT_EQ(got->metrics_size(), static_cast<int>(TrainRunManager::kMaxMetricPoints));
  EXPECT_EQ(got->metrics(0).step(), 500);  // the oldest 500 dropped
  EXPECT_EQ(got->metrics(1999).step(), 2499);
  // A report without points keeps the series.
  run.set_version(3);
  ASSERT_TRUE(Report(*m, run).ok());
  EXPECT_EQ(m->Get(RunId(1))->metrics_size(), 2000);
  // Listed only when asked for.
  EXPECT_EQ((*List(*m))[0].metrics_size(), 0);
  EXPECT_EQ((*List(*m, "", 0, true))[0].metrics_size(), 2000);
  EXPECT_EQ(m->Get(RunId(1))->metrics_size(), 2000);  // listing without does not clear the table
}

TEST_F(TrainRunManagerTest, BadReportsChangeNothing) {
  auto m = Make();
  ASSERT_TRUE(Report(*m, MakeRun(1, job1_, 100, TrainRunInfo::RUNNING, 1), {Point(1, 1.0)}).ok());
  const std::string row = Row(RunId(1));
  auto expect_unchanged = [&] {
    EXPECT_EQ(m->num_runs(), 1u);
    EXPECT_EQ(m->Get(RunId(1))->version(), 1);
    EXPECT_EQ(m->Get(RunId(1))->metrics_size(), 1);
    EXPECT_EQ(Row(RunId(1)), row);
    EXPECT_EQ(store_.ReadAll(TrainRunManager::kTable)->size(), 1u);
  };
  auto next = [&] { return MakeRun(1, job1_, 100, TrainRunInfo::FINISHED, 2); };
  struct Case {
    const char* field;
    std::function<void(TrainRunInfo&, std::vector<rpc::TrainMetricPoint>&)> mutate;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases = {
      {"run.run_id", [](TrainRunInfo& r, auto&) { r.set_run_id(std::string(32, 'A')); }},
      {"run.run_id", [](TrainRunInfo& r, auto&) { r.set_run_id(std::string(31, 'a')); }},
      {"run.run_id", [](TrainRunInfo& r, auto&) { r.set_run_id(std::string(31, 'a') + "g"); }},
      {"run.name", [](TrainRunInfo& r, auto&) { r.clear_name(); }},
      {"run.name", [](TrainRunInfo& r, auto&) { r.set_name(std::string(257, 'n')); }},
      {"run.name", [](TrainRunInfo& r, auto&) { r.set_name("bad\xC3"); }},
      {"run.job_id", [](TrainRunInfo& r, auto&) { r.set_job_id("abc"); }},
      {"run.state", [](TrainRunInfo& r, auto&) { r.set_state(static_cast<TrainRunInfo::State>(42)); }},
      {"run.status_detail", [](TrainRunInfo& r, auto&) { r.set_status_detail(std::string(65537, 'x')); }},
      {"run.attempts[0].state",
       [](TrainRunInfo& r, auto&) { r.add_attempts()->set_state(static_cast<TrainRunAttemptInfo::State>(9)); }},
      {"run.attempts[0].status_detail",
       [](TrainRunInfo& r, auto&) { r.add_attempts()->set_status_detail(std::string(65537, 'x')); }},
      {"run.attempts[0].workers[0].status",
       [](TrainRunInfo& r, auto&) {
         r.add_attempts()->add_workers()->set_status(static_cast<TrainWorkerInfo::Status>(5));
       }},
      {"run.attempts[0].workers[0].report_total_blocked_time_s",
       [](TrainRunInfo& r, auto&) { r.add_attempts()->add_workers()->set_report_total_blocked_time_s(-1); }},
      {"run.worker_group_start_total_time_s",
       [nan](TrainRunInfo& r, auto&) { r.set_worker_group_start_total_time_s(nan); }},
      {"run.worker_group_shutdown_total_time_s",
       [inf](TrainRunInfo& r, auto&) { r.set_worker_group_shutdown_total_time_s(inf); }},
      {"run.attempts",
       [](TrainRunInfo& r, auto&) {
         for (int i = 0; i <= TrainRunManager::kMaxAttempts; ++i) r.add_attempts();
       }},
      {"run.attempts[0].workers",
       [](TrainRunInfo& r, auto&) {
         auto* a = r.add_attempts();
         for (int i = 0; i <= TrainRunManager::kMaxWorkersPerAttempt; ++i) a->add_workers();
       }},
      {"new_metrics[1].metrics[loss]",
       [nan](TrainRunInfo&, auto& p) {
         p = {Point(2, 1.0), Point(3, nan)};
       }},
      {"new_metrics[0].metrics[loss]", [inf](TrainRunInfo&, auto& p) { p = {Point(2, -inf)}; }},
      {"new_metrics[0].metrics",
       [](TrainRunInfo&, auto& p) {
         p = {Point(2, 1.0)};
         for (int i = 0; i < TrainRunManager::kMaxMetricsPerPoint; ++i) {
           (*p[0].mutable_metrics())["m" + std::to_string(i)] = i;
         }
       }},
      {"new_metrics",
       [](TrainRunInfo&, auto& p) { p.assign(TrainRunManager::kMaxNewMetricPoints + 1, Point(2, 1.0)); }},
  };
  for (const Case& c : cases) {
    TrainRunInfo run = next();
    std::vector<rpc::TrainMetricPoint> points;
    c.mutate(run, points);
    absl::Status s = Report(*m, run, points);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field << ": " << s;
    EXPECT_NE(s.message().find(c.field), std::string_view::npos) << s;
    expect_unchanged();
  }
  TrainRunInfo moved_job = next();
  moved_job.set_job_id(job2_.Binary());  // a run never changes job
  EXPECT_EQ(Report(*m, moved_job).code(), absl::StatusCode::kInvalidArgument);
  expect_unchanged();

  // Unknown job: the record is well formed, the job is not there.
  TrainRunInfo unknown = next();
  unknown.set_job_id(JobIdFromInt(99).Binary());
  EXPECT_EQ(Report(*m, unknown).code(), absl::StatusCode::kFailedPrecondition);
  unknown.set_run_id(RunId(2));
  EXPECT_EQ(Report(*m, unknown).code(), absl::StatusCode::kFailedPrecondition);
  expect_unchanged();

  // Finished job: nothing new for it, not even a new run.
  jobs_->FinishJob(job1_, "test");
  Pump(loop_);
  EXPECT_EQ(Report(*m, next()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Report(*m, MakeRun(3, job1_, 100)).code(), absl::StatusCode::kFailedPrecondition);
  expect_unchanged();
  // The other job is fine, and the bounds themselves are allowed.
  std::vector<rpc::TrainMetricPoint> at_bound(1, Point(2, 1.0));
  for (int i = 1; i < TrainRunManager::kMaxMetricsPerPoint; ++i) {
    (*at_bound[0].mutable_metrics())["m" + std::to_string(i)] = i;
  }
  TrainRunInfo other = MakeRun(3, job2_, 100);
  other.set_name(std::string(TrainRunManager::kMaxNameBytes, 'n'));
  EXPECT_TRUE(Report(*m, other, at_bound).ok());
}

TEST_F(TrainRunManagerTest, JobEndAbortsOnlyItsLiveRunsAndTheirLiveAttempts) {
  auto m = Make();
  jobs_->AddJobFinishedListener([&](const rpc::JobInfo& j) { m->OnJobFinished(*JobId::FromBinary(j.job_id())); });
  TrainRunInfo live = MakeRun(1, job1_, 100, TrainRunInfo::RUNNING, 4);
  live.set_status_detail("resized to 2 workers");
  *live.add_attempts() = Attempt("a0", TrainRunAttemptInfo::ERRORED, 2);
  live.mutable_attempts(0)->set_end_time_ms(500);
  *live.add_attempts() = Attempt("a1", TrainRunAttemptInfo::RUNNING, 2);
  ASSERT_TRUE(Report(*m, live).ok());
  ASSERT_TRUE(Report(*m, MakeRun(2, job1_, 100, TrainRunInfo::SCHEDULING, 1)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(3, job1_, 100, TrainRunInfo::FINISHED, 1)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(4, job2_, 100, TrainRunInfo::RUNNING, 1)).ok());
  const std::string finished_row = Row(RunId(3)), other_job_row = Row(RunId(4));

  jobs_->FinishJob(job1_, "the driver exited");
  Pump(loop_);

  const TrainRunInfo* r = m->Get(RunId(1));
  EXPECT_EQ(r->state(), TrainRunInfo::ABORTED);
  EXPECT_EQ(r->status_detail(), std::string(TrainRunManager::kAbortedByJobEnd) + ": resized to 2 workers");
  EXPECT_EQ(r->end_time_ms(), 777000);
  EXPECT_EQ(r->version(), 5);
  // The ended attempt stays as it was; the live one ends now, its workers dead.
  EXPECT_EQ(r->attempts(0).state(), TrainRunAttemptInfo::ERRORED);
  EXPECT_EQ(r->attempts(0).end_time_ms(), 500);
  EXPECT_EQ(r->attempts(0).workers(0).status(), TrainWorkerInfo::ACTIVE);
  EXPECT_EQ(r->attempts(1).state(), TrainRunAttemptInfo::ABORTED);
  EXPECT_EQ(r->attempts(1).end_time_ms(), 777000);
  for (const auto& w : r->attempts(1).workers()) EXPECT_EQ(w.status(), TrainWorkerInfo::DEAD);
  EXPECT_EQ(m->Get(RunId(2))->state(), TrainRunInfo::ABORTED);
  EXPECT_EQ(m->Get(RunId(2))->status_detail(), TrainRunManager::kAbortedByJobEnd);
  EXPECT_EQ(Row(RunId(3)), finished_row);
  EXPECT_EQ(Row(RunId(4)), other_job_row);
  EXPECT_EQ(m->Get(RunId(4))->state(), TrainRunInfo::RUNNING);

  // Persisted: a fresh manager reads the aborted records.
  auto recovered = Make();
  EXPECT_EQ(recovered->Get(RunId(1))->state(), TrainRunInfo::ABORTED);
  EXPECT_EQ(recovered->Get(RunId(1))->attempts(1).workers(1).status(), TrainWorkerInfo::DEAD);
}

TEST_F(TrainRunManagerTest, StartUpAbortsRunsOfJobsThatEndedMeanwhile) {
  {
    auto m = Make();
    ASSERT_TRUE(Report(*m, MakeRun(1, job1_, 100)).ok());
    ASSERT_TRUE(Report(*m, MakeRun(2, job2_, 100)).ok());
  }
  jobs_->FinishJob(job1_, "ended while no run manager listened");
  Pump(loop_);
  auto m = Make();
  EXPECT_EQ(m->Get(RunId(1))->state(), TrainRunInfo::RUNNING);
  m->AbortRunsOfFinishedJobs();
  Pump(loop_);
  EXPECT_EQ(m->Get(RunId(1))->state(), TrainRunInfo::ABORTED);
  EXPECT_EQ(m->Get(RunId(1))->end_time_ms(), 777000);
  EXPECT_EQ(m->Get(RunId(2))->state(), TrainRunInfo::RUNNING);
  EXPECT_EQ(Make()->Get(RunId(1))->state(), TrainRunInfo::ABORTED);
}

TEST_F(TrainRunManagerTest, RunsAndSeriesSurviveASqliteReopen) {
  ScopedTempDir dir("manta_train_run_test");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/store.sqlite";
  int durable = 0;
  {
    auto store = SqliteStore::Open(path, &loop_);
    ASSERT_TRUE(store.ok()) << store.status();
    auto m = Make(store->get());
    rpc::ReportTrainRunRequest first, second;
    *first.mutable_run() = MakeRun(1, job1_, 100);
    first.mutable_run()->set_latest_checkpoint("/ckpt/step_10");
    *first.mutable_run()->add_attempts() = Attempt("a0", TrainRunAttemptInfo::RUNNING, 3);
    *first.add_new_metrics() = Point(1, 3.0);
    *first.add_new_metrics() = Point(2, 2.5);
    *second.mutable_run() = MakeRun(2, job2_, 50, TrainRunInfo::FINISHED);
    // The writer thread commits when it may; closing the store waits for it.
    m->HandleReportTrainRun(first, nullptr, [&](const absl::Status& s) { durable += s.ok(); });
    m->HandleReportTrainRun(second, nullptr, [&](const absl::Status& s) { durable += s.ok(); });
  }
  Pump(loop_);
  ASSERT_EQ(durable, 2);
  auto store = SqliteStore::Open(path, &loop_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto m = Make(store->get());
  auto runs = List(*m, "", 0, true);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(Ids(*runs), (std::vector<std::string>{RunId(2), RunId(1)}));
  EXPECT_EQ((*runs)[1].latest_checkpoint(), "/ckpt/step_10");
  EXPECT_EQ((*runs)[1].attempts(0).workers_size(), 3);
  ASSERT_EQ((*runs)[1].metrics_size(), 2);
  EXPECT_EQ((*runs)[1].metrics(1).metrics().at("loss"), 2.5);
  EXPECT_EQ((*runs)[0].state(), TrainRunInfo::FINISHED);
}

TEST_F(TrainRunManagerTest, CapEvictsTheOldestTerminalRuns) {
  auto m = Make();
  const int cap = static_cast<int>(TrainRunManager::kMaxRuns);
  // Three terminal runs (started at 30, 10, 20), the rest live.
  ASSERT_TRUE(Report(*m, MakeRun(0, job1_, 30, TrainRunInfo::FINISHED)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(1, job1_, 10, TrainRunInfo::ERRORED)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(2, job1_, 20, TrainRunInfo::ABORTED)).ok());
  for (int i = 3; i < cap; ++i) ASSERT_TRUE(Report(*m, MakeRun(i, job1_, i)).ok());
  ASSERT_EQ(m->num_runs(), TrainRunManager::kMaxRuns);
  EXPECT_EQ(m->Get(RunId(3))->start_time_ms(), 3);  // live runs older than the terminal ones stay

  ASSERT_TRUE(Report(*m, MakeRun(cap, job1_, 5000)).ok());
  EXPECT_EQ(m->num_runs(), TrainRunManager::kMaxRuns);
  EXPECT_EQ(m->Get(RunId(1)), nullptr);  // the oldest terminal run
  EXPECT_EQ(Row(RunId(1)), "");
  EXPECT_NE(m->Get(RunId(2)), nullptr);
  EXPECT_NE(m->Get(RunId(3)), nullptr);
  // An update of a held run evicts nothing.
  ASSERT_TRUE(Report(*m, MakeRun(cap, job1_, 5000, TrainRunInfo::RUNNING, 2)).ok());
  EXPECT_NE(m->Get(RunId(2)), nullptr);

  ASSERT_TRUE(Report(*m, MakeRun(cap + 1, job1_, 5001)).ok());
  ASSERT_TRUE(Report(*m, MakeRun(cap + 2, job1_, 5002)).ok());
  EXPECT_EQ(m->Get(RunId(2)), nullptr);
  EXPECT_EQ(m->Get(RunId(0)), nullptr);
  EXPECT_EQ(m->num_runs(), TrainRunManager::kMaxRuns);
  // No terminal run left: a new run is accepted past the cap.
  ASSERT_TRUE(Report(*m, MakeRun(cap + 3, job1_, 5003)).ok());
  EXPECT_EQ(m->num_runs(), TrainRunManager::kMaxRuns + 1);
  EXPECT_EQ(store_.ReadAll(TrainRunManager::kTable)->size(), TrainRunManager::kMaxRuns + 1);
}

}  // namespace
}  // namespace manta::gcs
