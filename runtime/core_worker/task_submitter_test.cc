#include "runtime/core_worker/task_submitter.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"

#include "common/clock.h"
#include "runtime/core_worker/submit_test_util.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

using testing::kWait;
using FakeHost = testing::FakeSubmitHost;

class TaskSubmitterTest : public ::testing::Test {
 protected:
  TaskSubmitterTest() {
    loop_thread_ = std::thread([this] { loop_.Run(); });
    self_.set_ip("10.0.0.1");
    self_.set_port(1000);
    self_.set_worker_id("driver");
    resolver_.set_self("driver");
    TaskSubmitter::Caller caller;
    caller.address = self_;
    caller.job_id = "job1";
    caller.worker_executable = "/bin/worker";
    caller.local_raylet = "10.0.0.1:7000";
    caller.is_driver = true;
    submitter_.set_caller(caller);
  }
  ~TaskSubmitterTest() override {
    submitter_.Stop();
    absl::Notification dropped;
    loop_.Post([&] {
      submitter_.DropTimers();
      dropped.Notify();
    });
    dropped.WaitForNotification();
    loop_.Stop();
    loop_thread_.join();
  }

  rpc::TaskSpec Spec(const std::string& arg, int max_retries = 3) {
    rpc::TaskSpec spec;
    spec.set_type(rpc::TaskSpec::NORMAL_TASK);
    spec.set_task_id(TaskId::FromRandom().Binary());
    spec.set_function_name("f");
    spec.set_max_retries(max_retries);
    spec.add_args()->set_data(arg);
    return spec;
  }
  ObjectId Submit(rpc::TaskSpec spec, const TaskOptions& options = {}) {
    ObjectId ret = ReturnObjectId(spec.task_id(), 1);
    submitter_.Submit(std::move(spec), options, {});
    return ret;
  }
  // Answers lease request `i` on the loop, as the raylet's reply would come.
  void Answer(size_t i, const absl::Status& s, rpc::RequestWorkerLeaseReply reply) {
    std::function<void(const absl::Status&, rpc::RequestWorkerLeaseReply&&)> done;
    {
      absl::MutexLock lock(&host_.mu);
      done = host_.leases.at(i).done;
    }
    loop_.Post([done, s, reply]() mutable { done(s, std::move(reply)); });
  }
  void Grant(size_t i, const std::string& worker, int port) {
    rpc::RequestWorkerLeaseReply reply;
    reply.set_outcome(rpc::RequestWorkerLeaseReply::GRANTED);
    reply.mutable_worker_address()->set_ip("10.0.0.2");
    reply.mutable_worker_address()->set_port(port);
    reply.mutable_worker_address()->set_worker_id(worker);
    reply.add_tpu_chip_ids(3);
    reply.set_tpu_chips_per_host(4);
    Answer(i, absl::OkStatus(), reply);
  }
  // Ends push `i` as the transport would: returns stored, then settled.
  void Finish(size_t i, const absl::Status& status, const std::string& value = "ok") {
    PushCall* call;
    {
      absl::MutexLock lock(&host_.mu);
      call = host_.pushes.at(i);
    }
    call->status = status;
    if (status.ok()) {
      store_.Put(ReturnObjectId(call->request.spec().task_id(), 1), std::make_shared<const std::string>(value));
      refs_.ReleaseHeld(call->request.spec().task_id());
    }
    std::vector<PushCall*> next;
    submitter_.OnPushDone(*call, &next);
    host_.StartPushes(next);
  }
  size_t NumLeaseRequests() {
    absl::MutexLock lock(&host_.mu);
    return host_.leases.size();
  }
  size_t NumPushes() {
    absl::MutexLock lock(&host_.mu);
    return host_.pushes.size();
  }
  const PushCall& PushAt(size_t i) {
    absl::MutexLock lock(&host_.mu);
    return *host_.pushes.at(i);
  }

  EventLoop loop_;
  std::thread loop_thread_;
  MemoryStore store_;
  testing::NoPeers peers_;
  ReferenceCounter refs_{&store_, &peers_};
  FakeHost host_;
  rpc::Address self_;
  DependencyResolver resolver_{&store_, &loop_};
  ManualClock clock_;
  TaskSubmitter submitter_{SubmitDeps{&store_, &refs_, &loop_, &host_, clock_.AsClock()}, &resolver_};
};

TEST_F(TaskSubmitterTest, ATaskRunsOnALeasedWorkerThatTheNextTaskReuses) {
  ObjectId first = Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  {
    absl::MutexLock lock(&host_.mu);
    const auto& req = host_.leases[0].req;
    EXPECT_EQ(host_.leases[0].raylet, "10.0.0.1:7000");
    EXPECT_EQ(req.spec().resources().at("CPU"), 1);  // the default demand
    EXPECT_EQ(req.spec().job_id(), "job1");
    EXPECT_EQ(req.spec().worker_executable(), "/bin/worker");
    EXPECT_EQ(req.spec().caller_address().worker_id(), "driver");
    EXPECT_TRUE(req.spec().caller_is_driver()) << "its leases end with its job, not its node";
  }
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  const PushCall& push = PushAt(0);
  EXPECT_EQ(push.address, "10.0.0.2:5001");
  EXPECT_EQ(push.request.intended_worker_id(), "w1");
  EXPECT_EQ(push.request.tpu_chip_ids_size(), 1);
  EXPECT_EQ(push.request.tpu_chips_per_host(), 4);
  EXPECT_EQ(push.request.spec().args(0).data(), "a");

  Finish(0, absl::OkStatus(), "A");
  EXPECT_EQ(**store_.TryGet(first).value(), "A");
  ObjectId second = Submit(Spec("b"));
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 2; }));
  EXPECT_EQ(PushAt(1).address, "10.0.0.2:5001");  // the same worker
  EXPECT_EQ(NumLeaseRequests(), 1u);
  Finish(1, absl::OkStatus(), "B");
  EXPECT_EQ(**store_.TryGet(second).value(), "B");
}

TEST_F(TaskSubmitterTest, TasksOfDifferentShapesLeaseSeparately) {
  TaskOptions tpu;
  tpu.resources = {{"TPU", 4}};
  Submit(Spec("cpu"));
  Submit(Spec("tpu"), tpu);
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  absl::MutexLock lock(&host_.mu);
  EXPECT_EQ(host_.leases[1].req.spec().resources().at("TPU"), 4);
  EXPECT_EQ(host_.leases[1].req.spec().resources().count("CPU"), 0u);
}

TEST_F(TaskSubmitterTest, ASpilledBackRequestGoesWhereTheRayletSaid) {
  Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  rpc::RequestWorkerLeaseReply spill;
  spill.set_outcome(rpc::RequestWorkerLeaseReply::SPILLBACK);
  spill.mutable_retry_at()->set_ip("10.0.0.3");
  spill.mutable_retry_at()->set_port(7003);
  Answer(0, absl::OkStatus(), spill);
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  absl::MutexLock lock(&host_.mu);
  EXPECT_EQ(host_.leases[1].raylet, "10.0.0.3:7003");
  EXPECT_TRUE(host_.leases[1].req.grant_or_reject());
  EXPECT_EQ(host_.leases[1].req.spillback_count(), 1);
}

TEST_F(TaskSubmitterTest, AnInfeasibleShapeFailsItsTasks) {
  ObjectId ret = Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  rpc::RequestWorkerLeaseReply reply;
  reply.set_outcome(rpc::RequestWorkerLeaseReply::INFEASIBLE);
  reply.set_message("no node has 64 TPU");
  Answer(0, absl::OkStatus(), reply);
  auto got = store_.Get({ret}, absl::Now() + kWait);
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kInfeasible);
  EXPECT_NE(got[0].status().message().find("no node has 64 TPU"), std::string::npos);
}

TEST_F(TaskSubmitterTest, AnUnreachableLocalRayletIsAskedAgainForTheSameLease) {
  Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Answer(0, absl::UnavailableError("connection refused"), {});
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  absl::MutexLock lock(&host_.mu);
  EXPECT_EQ(host_.leases[1].raylet, "10.0.0.1:7000");
  EXPECT_EQ(host_.leases[1].req.lease_id(), host_.leases[0].req.lease_id());
}

TEST_F(TaskSubmitterTest, ATaskWhoseWorkerDiedRunsAgainOnAnotherLease) {
  ObjectId ret = Submit(Spec("a", /*max_retries=*/1));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  Finish(0, absl::UnavailableError("the worker went away"));
  {
    // The dead worker's lease goes back, its worker to be disconnected.
    absl::MutexLock lock(&host_.mu);
    ASSERT_EQ(host_.returned.size(), 1u);
    EXPECT_EQ(host_.returned[0].worker_id(), "w1");
    EXPECT_TRUE(host_.returned[0].disconnect_worker());
  }
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  Grant(1, "w2", 5002);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 2; }));
  EXPECT_EQ(PushAt(1).request.spec().attempt(), 1);
  EXPECT_EQ(PushAt(1).request.intended_worker_id(), "w2");
  // Its last retry fails for good.
  Finish(1, absl::UnavailableError("this one too"));
  auto got = store_.Get({ret}, absl::Now() + kWait);
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kWorkerDied);
}

TEST_F(TaskSubmitterTest, AnOwnedArgumentIsWaitedForAndInlinedAndAFailedOneFailsTheTask) {
  ObjectId arg = ObjectId::FromRandom();
  store_.Expect(arg);
  rpc::TaskSpec spec = Spec("");
  spec.mutable_args(0)->set_object_id(arg.Binary());
  *spec.mutable_args(0)->mutable_owner() = self_;
  Submit(spec);
  ObjectId bad = ObjectId::FromRandom();
  store_.Expect(bad);
  rpc::TaskSpec doomed = Spec("");
  doomed.mutable_args(0)->set_object_id(bad.Binary());
  *doomed.mutable_args(0)->mutable_owner() = self_;
  ObjectId doomed_ret = Submit(doomed);

  EXPECT_EQ(NumLeaseRequests(), 0u);  // nothing to run yet
  store_.Put(arg, std::make_shared<const std::string>("value"));
  store_.Fail(bad, MakeError(ErrorType::kApplicationError, "the argument's task failed"));
  auto got = store_.Get({doomed_ret}, absl::Now() + kWait);
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kApplicationError);
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  EXPECT_EQ(PushAt(0).request.spec().args(0).data(), "value");
  EXPECT_TRUE(PushAt(0).request.spec().args(0).object_id().empty());
}

TEST_F(TaskSubmitterTest, AnIdleLeaseIsReturnedAndStopReturnsTheRest) {
  Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  Finish(0, absl::OkStatus());
  EXPECT_EQ(submitter_.counts().leases, 1);  // idle, not yet long enough
  // Idle for kLeaseIdle: back to its raylet, still connected.
  clock_.Advance(TaskSubmitter::kLeaseIdle);
  ASSERT_TRUE(host_.Await([&] { return host_.returned.size() == 1; }));
  {
    absl::MutexLock lock(&host_.mu);
    EXPECT_EQ(host_.returned[0].worker_id(), "w1");
    EXPECT_FALSE(host_.returned[0].disconnect_worker());
  }
  EXPECT_EQ(submitter_.counts().leases, 0);

  Submit(Spec("b"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  Grant(1, "w2", 5002);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 2; }));
  EXPECT_EQ(submitter_.counts().leases, 1);
  submitter_.ReturnAllLeases();
  absl::MutexLock lock(&host_.mu);
  ASSERT_EQ(host_.returned.size(), 2u);
  EXPECT_EQ(host_.returned[1].worker_id(), "w2");
}

TEST_F(TaskSubmitterTest, StopWithTasksInFlightPushesNoMoreAndReturnsEveryWorker) {
  Submit(Spec("a"));
  Submit(Spec("b"));
  Submit(Spec("c"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 3; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));  // "a" is running
  submitter_.Stop();
  Grant(1, "w2", 5002);                                         // a grant that comes after the stop
  Answer(2, absl::UnavailableError("connection refused"), {});  // a failure: not retried
  ASSERT_TRUE(host_.Await([&] { return host_.returned.size() == 1; }));
  absl::Notification returned;
  loop_.Post([&] {
    submitter_.ReturnAllLeases();
    returned.Notify();
  });
  ASSERT_TRUE(returned.WaitForNotificationWithTimeout(kWait));
  absl::MutexLock lock(&host_.mu);
  EXPECT_EQ(host_.pushes.size(), 1u) << "nothing is pushed once stopping";
  EXPECT_EQ(host_.leases.size(), 3u) << "no lease is asked for again";
  ASSERT_EQ(host_.returned.size(), 2u);
  EXPECT_EQ(host_.returned[0].worker_id(), "w2") << "the late grant goes back at once";
  EXPECT_EQ(host_.returned[0].lease_id(), host_.leases[1].req.lease_id());
  EXPECT_EQ(host_.returned[1].worker_id(), "w1") << "the lease running a task goes back at the end";
}

TEST_F(TaskSubmitterTest, CpuTasksPipelineOnlyOntoAWorkerEndingTasksOnceLeasesAreSlow) {
  for (int i = 0; i < 3; ++i) Submit(Spec(std::to_string(i)));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 3; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  // The other requests were just made: the queued tasks wait for workers of
  // their own.
  Submit(Spec("3"));
  EXPECT_EQ(NumPushes(), 1u);
  clock_.Advance(TaskSubmitter::kPipelineAfter);
  Submit(Spec("4"));
  // Requests outstanding that long, but w1's task has run that long too:
  // nothing waits behind it (the task may be waiting for one of these).
  EXPECT_EQ(NumPushes(), 1u);
  Finish(0, absl::OkStatus());
  // w1 ends tasks: it takes the queue, pipelined.
  ASSERT_EQ(NumPushes(), 5u);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(PushAt(i).request.intended_worker_id(), "w1");
  // None of them ends within kPipelineAfter: the next task waits for a
  // worker that is ending tasks.
  clock_.Advance(TaskSubmitter::kPipelineAfter);
  Submit(Spec("5"));
  EXPECT_EQ(NumPushes(), 5u);
  Finish(1, absl::OkStatus());
  ASSERT_EQ(NumPushes(), 6u);
  EXPECT_EQ(PushAt(5).request.spec().args(0).data(), "5");
}

TEST_F(TaskSubmitterTest, ALocalRayletUnreachableBeyondItsPatienceFailsTheQueue) {
  ObjectId ret = Submit(Spec("a"));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Answer(0, absl::UnavailableError("connection refused"), {});
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  clock_.Advance(TaskSubmitter::kLocalRayletPatience);
  Answer(1, absl::UnavailableError("connection refused"), {});
  auto got = store_.Get({ret}, absl::Now() + kWait);
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kNodeDied);
  EXPECT_NE(got[0].status().message().find("the local raylet at 10.0.0.1:7000 is unreachable"), std::string::npos)
      << got[0].status();
}

TEST_F(TaskSubmitterTest, ABurstAsksForAtMostFourLeasesAtOnce) {
  for (int i = 0; i < 20; ++i) Submit(Spec(std::to_string(i)));
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == TaskSubmitter::kMaxLeaseRequests; }));
  EXPECT_EQ(submitter_.counts().queued, 20);
  EXPECT_EQ(submitter_.counts().lease_requests, TaskSubmitter::kMaxLeaseRequests);
}

TEST_F(TaskSubmitterTest, ARecursiveCancelAsksTheWorkerAndAForcedOneKillsItOnlyOnceAnswered) {
  rpc::TaskSpec polite = Spec("polite");
  rpc::TaskSpec forced = Spec("forced");
  Submit(polite);
  ObjectId forced_ret = Submit(forced);
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 2; }));
  Grant(0, "w1", 5001);
  Grant(1, "w2", 5002);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 2; }));
  const bool polite_first = PushAt(0).request.spec().task_id() == polite.task_id();
  const size_t forced_push = polite_first ? 1 : 0;
  const std::string forced_worker = PushAt(forced_push).address;

  bool polite_done = false;
  ASSERT_TRUE(
      submitter_.Cancel(polite.task_id(), /*force=*/false, /*recursive=*/true, [&] { polite_done = true; }).ok());
  EXPECT_TRUE(polite_done);  // nothing to wait for
  bool forced_done = false;
  ASSERT_TRUE(
      submitter_.Cancel(forced.task_id(), /*force=*/true, /*recursive=*/true, [&] { forced_done = true; }).ok());
  std::function<void()> answer;
  {
    absl::MutexLock lock(&host_.mu);
    ASSERT_EQ(host_.cancels.size(), 2u);
    EXPECT_EQ(host_.cancels[0].task_id, polite.task_id());
    EXPECT_TRUE(host_.cancels[0].recursive);
    EXPECT_FALSE(host_.cancels[0].force);
    EXPECT_EQ(host_.cancels[1].worker, forced_worker);
    EXPECT_TRUE(host_.cancels[1].recursive);
    EXPECT_TRUE(host_.cancels[1].force);
    // The worker is left alive to cancel what the task submitted.
    EXPECT_TRUE(host_.returned.empty());
    answer = host_.cancels[1].done;
  }
  EXPECT_FALSE(forced_done);
  answer();  // the worker answered: now it is killed
  EXPECT_TRUE(forced_done);
  {
    absl::MutexLock lock(&host_.mu);
    ASSERT_EQ(host_.returned.size(), 1u);
    EXPECT_TRUE(host_.returned[0].disconnect_worker());
  }
  Finish(forced_push, absl::UnavailableError("killed"));
  auto got = store_.Get({forced_ret}, absl::Now() + kWait);
  EXPECT_EQ(GetErrorType(got[0].status()), ErrorType::kTaskCancelled);
  EXPECT_FALSE(submitter_.IsPending(forced.task_id()));
  EXPECT_TRUE(submitter_.IsPending(polite.task_id()));
}

TEST_F(TaskSubmitterTest, AForcedCancelWithoutRecursionKillsAtOnceAndAnEndedTaskIsNotFound) {
  rpc::TaskSpec spec = Spec("a");
  ObjectId ret = Submit(spec);
  ASSERT_TRUE(host_.Await([&] { return host_.leases.size() == 1; }));
  Grant(0, "w1", 5001);
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 1; }));
  bool done = false;
  ASSERT_TRUE(submitter_.Cancel(spec.task_id(), /*force=*/true, /*recursive=*/false, [&] { done = true; }).ok());
  EXPECT_TRUE(done);
  {
    absl::MutexLock lock(&host_.mu);
    EXPECT_TRUE(host_.cancels.empty());
    ASSERT_EQ(host_.returned.size(), 1u);
    EXPECT_TRUE(host_.returned[0].disconnect_worker());
  }
  Finish(0, absl::UnavailableError("killed"));
  EXPECT_EQ(GetErrorType(store_.Get({ret}, absl::Now() + kWait)[0].status()), ErrorType::kTaskCancelled);
  done = false;
  EXPECT_TRUE(absl::IsNotFound(submitter_.Cancel(spec.task_id(), true, true, [&] { done = true; })));
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace manta::core
