#include "runtime/core_worker/task_receiver.h"

#include <gtest/gtest.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/process.h"
#include "manta/internal/function_registry.h"
#include "runtime/core_worker/submit_test_util.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

using internal::ArgViews;
using internal::FunctionRegistry;
using internal::ReturnValues;

using testing::kWait;

// What the test functions saw; reset by each test.
absl::Mutex g_mu;
std::vector<std::string> g_ran ABSL_GUARDED_BY(g_mu);  // "echo:<arg>" in run order
int g_inside ABSL_GUARDED_BY(g_mu) = 0;                // Acc.meet calls running now
absl::Notification* g_release = nullptr;               // "block" waits on it

struct Acc {
  std::string log;
};

void RegisterTestFunctions() {
  static const bool once = [] {
    auto& r = FunctionRegistry::Instance();
    static const char keys[5] = {};
    r.RegisterFunction("echo", &keys[0], [](const ArgViews& args) -> absl::StatusOr<ReturnValues> {
      absl::MutexLock lock(&g_mu);
      g_ran.push_back("echo:" + std::string(args.empty() ? "" : args[0]));
      return ReturnValues{std::string(args.empty() ? "" : args[0])};
    });
    r.RegisterFunction("big", &keys[1], [](const ArgViews&) -> absl::StatusOr<ReturnValues> {
      return ReturnValues{std::string(kInlineLimit + 1, 'x')};
    });
    r.RegisterFunction("block", &keys[2], [](const ArgViews&) -> absl::StatusOr<ReturnValues> {
      {
        absl::MutexLock lock(&g_mu);
        g_ran.push_back("block");
      }
      g_release->WaitForNotificationWithTimeout(kWait);
      return ReturnValues{std::string("unblocked")};
    });
    r.RegisterActorFactory("Acc", &keys[3], [](const ArgViews&) -> absl::StatusOr<std::shared_ptr<void>> {
      return std::static_pointer_cast<void>(std::make_shared<Acc>());
    });
    r.RegisterActorMethod("Acc.add", "Acc.add", [](void* self, const ArgViews& args) -> absl::StatusOr<ReturnValues> {
      auto* acc = static_cast<Acc*>(self);
      acc->log += std::string(args[0]);
      return ReturnValues{acc->log};
    });
    // Returns "met" once two calls are inside at the same time.
    r.RegisterActorMethod("Acc.meet", "Acc.meet", [](void*, const ArgViews&) -> absl::StatusOr<ReturnValues> {
      absl::MutexLock lock(&g_mu);
      ++g_inside;
      auto two = [] { return g_inside >= 2; };
      const bool met = g_mu.AwaitWithTimeout(absl::Condition(&two), kWait);
      return ReturnValues{std::string(met ? "met" : "alone")};
    });
    return true;
  }();
  (void)once;
}

class FakePush final : public PushedTask {
 public:
  explicit FakePush(rpc::PushTaskRequest request) : request_(std::move(request)) {}
  const rpc::PushTaskRequest& request() const override { return request_; }
  rpc::PushTaskReply* reply() override { return &reply_; }
  void Finish(const grpc::Status& status) override {
    status_ = status;
    done_.Notify();
  }
  // The push's end: true when it was finished within the wait.
  bool Done(absl::Duration wait = kWait) { return done_.WaitForNotificationWithTimeout(wait); }
  bool HasFinished() const { return done_.HasBeenNotified(); }
  const grpc::Status& status() const { return status_; }
  const rpc::PushTaskReply& result() const { return reply_; }

 private:
  rpc::PushTaskRequest request_;
  rpc::PushTaskReply reply_;
  grpc::Status status_;
  absl::Notification done_;
};

class FakeTaskHost : public TaskHost {
 public:
  absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg) override {
    if (arg.object_id() == "lost") return absl::NotFoundError("the owner lost it");
    return std::make_shared<const std::string>("resolved:" + arg.object_id());
  }
  void HandOverRefs(const rpc::TaskSpec&, std::vector<ObjectRefInfo>, rpc::ReturnObject*) override {}
  void DropRef(const ObjectId&) override {}
  void AddRef(const ObjectId&) override {}
  void HoldForOwner(const ObjectId& id, Value value, rpc::Address* location) override {
    absl::MutexLock lock(&mu);
    held[id] = std::move(value);
    location->set_worker_id("this-worker");
  }
  void TaskRunning(const rpc::TaskSpec&, TaskEventBuffer::Ticket*) override { running.fetch_add(1); }
  void TaskEnded(const rpc::TaskSpec&, const TaskEventBuffer::Ticket&) override { ended.fetch_add(1); }

  absl::Mutex mu;
  std::map<ObjectId, Value> held ABSL_GUARDED_BY(mu);
  std::atomic<int> running{0};
  std::atomic<int> ended{0};
};

rpc::PushTaskRequest Task(const std::string& function, const std::string& arg, const std::string& task_id = "",
                          int attempt = 0) {
  rpc::PushTaskRequest req;
  rpc::TaskSpec* spec = req.mutable_spec();
  spec->set_type(rpc::TaskSpec::NORMAL_TASK);
  spec->set_task_id(task_id.empty() ? TaskId::FromRandom().Binary() : task_id);
  spec->set_attempt(attempt);
  spec->set_function_name(function);
  spec->add_args()->set_data(arg);
  return req;
}

rpc::PushTaskRequest ActorCall(const std::string& method, const std::string& arg, int64_t seq,
                               const std::string& caller = "caller-1") {
  rpc::PushTaskRequest req = Task(method, arg);
  req.mutable_spec()->set_type(rpc::TaskSpec::ACTOR_TASK);
  req.mutable_spec()->set_sequence_number(seq);
  req.mutable_spec()->set_caller_worker_id(caller);
  return req;
}

class TaskReceiverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterTestFunctions();
    absl::MutexLock lock(&g_mu);
    g_ran.clear();
    g_inside = 0;
  }
  void TearDown() override {
    receiver_.Stop();
    if (main_.joinable()) main_.join();
  }
  void StartMainThread() {
    main_ = std::thread([this] { receiver_.RunMainLoop(); });
  }
  // Pushes and keeps the push (owned by the test).
  FakePush* Push(rpc::PushTaskRequest req) {
    pushes_.push_back(std::make_unique<FakePush>(std::move(req)));
    receiver_.Enqueue(pushes_.back().get());
    return pushes_.back().get();
  }
  std::vector<std::string> Ran() {
    absl::MutexLock lock(&g_mu);
    return g_ran;
  }
  // Creates the actor on the main thread.
  void CreateActor(int max_concurrency) {
    rpc::PushTaskRequest req = Task("Acc", "");
    req.mutable_spec()->set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    req.mutable_spec()->mutable_actor_creation()->set_max_concurrency(max_concurrency);
    FakePush* created = Push(std::move(req));
    ASSERT_TRUE(created->Done());
    ASSERT_TRUE(created->status().ok());
    ASSERT_FALSE(created->result().has_error()) << created->result().error().message();
    ASSERT_TRUE(receiver_.holds_actor());
  }

  FakeTaskHost host_;
  std::vector<std::unique_ptr<FakePush>> pushes_;  // outlive the receiver
  TaskReceiver receiver_{&host_};
  std::thread main_;
};

TEST_F(TaskReceiverTest, TasksRunInPushOrderAndReturnTheirValues) {
  FakePush* a = Push(Task("echo", "a"));
  FakePush* b = Push(Task("echo", "b"));
  StartMainThread();
  ASSERT_TRUE(a->Done());
  ASSERT_TRUE(b->Done());
  EXPECT_EQ(Ran(), (std::vector<std::string>{"echo:a", "echo:b"}));
  ASSERT_EQ(b->result().returns_size(), 1);
  EXPECT_EQ(b->result().returns(0).data(), "b");
  EXPECT_EQ(b->result().returns(0).object_id(), ReturnObjectId(b->request().spec().task_id(), 1).Binary());
  EXPECT_EQ(host_.running.load(), 2);
  EXPECT_EQ(host_.ended.load(), 2);
}

TEST_F(TaskReceiverTest, AdmitRefusesAnotherWorkersPushAMalformedIdAndPlainTasksToAnActor) {
  const std::string self = WorkerId::FromRandom().Binary();
  rpc::PushTaskRequest req = Task("echo", "a");
  req.set_intended_worker_id(self);
  EXPECT_TRUE(receiver_.Admit(req, self).ok());
  EXPECT_EQ(receiver_.Admit(req, WorkerId::FromRandom().Binary()).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  rpc::PushTaskRequest bad_id = req;
  bad_id.mutable_spec()->set_task_id("short");
  EXPECT_EQ(receiver_.Admit(bad_id, self).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  StartMainThread();
  CreateActor(1);
  EXPECT_EQ(receiver_.Admit(req, self).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // a plain task
  rpc::PushTaskRequest call = ActorCall("Acc.add", "x", 0);
  call.set_intended_worker_id(self);
  EXPECT_TRUE(receiver_.Admit(call, self).ok());
}

TEST_F(TaskReceiverTest, CancelDropsQueuedTasksAndInterruptsTheRunningOne) {
  std::vector<TaskId> interrupted;
  SetTaskInterruptHook([&](const TaskId& id) { interrupted.push_back(id); });
  absl::Notification release;
  g_release = &release;
  FakePush* running = Push(Task("block", ""));
  StartMainThread();
  ASSERT_TRUE(PollUntil([&] { return Ran().size() == 1; }, absl::Now() + kWait));
  FakePush* queued = Push(Task("echo", "never"));
  EXPECT_TRUE(receiver_.Cancel(queued->request().spec().task_id()));
  ASSERT_TRUE(queued->Done());
  EXPECT_EQ(queued->result().error().type(), rpc::ErrorInfo::TASK_CANCELLED);
  ASSERT_EQ(queued->result().returns_size(), 1);
  // Cancelled before its push arrives: answered when it does.
  std::string early = TaskId::FromRandom().Binary();
  EXPECT_FALSE(receiver_.Cancel(early));
  EXPECT_TRUE(receiver_.Cancel(running->request().spec().task_id()));
  ASSERT_EQ(interrupted.size(), 1u);
  EXPECT_EQ(interrupted[0].Binary(), running->request().spec().task_id());
  release.Notify();
  ASSERT_TRUE(running->Done());
  EXPECT_EQ(running->result().error().type(), rpc::ErrorInfo::TASK_CANCELLED);
  FakePush* late = Push(Task("echo", "late", early));
  ASSERT_TRUE(late->Done());
  EXPECT_EQ(late->result().error().type(), rpc::ErrorInfo::TASK_CANCELLED);
  EXPECT_EQ(Ran(), std::vector<std::string>{"block"});
  g_release = nullptr;
  SetTaskInterruptHook(nullptr);
}

TEST_F(TaskReceiverTest, StopWithTasksInFlightEndsOnceTheRunningOneReturnsAndRunsNoMore) {
  absl::Notification release;
  g_release = &release;
  FakePush* running = Push(Task("block", ""));
  FakePush* queued = Push(Task("echo", "never"));
  StartMainThread();
  ASSERT_TRUE(PollUntil([&] { return Ran().size() == 1; }, absl::Now() + kWait));
  receiver_.Stop();
  EXPECT_FALSE(running->HasFinished());
  release.Notify();
  main_.join();  // RunMainLoop returned
  g_release = nullptr;
  EXPECT_TRUE(running->HasFinished()) << "the task that was running still answers";
  EXPECT_TRUE(running->status().ok());
  EXPECT_FALSE(queued->HasFinished()) << "what was queued stays unrun";
  EXPECT_EQ(Ran(), std::vector<std::string>{"block"});
}

TEST_F(TaskReceiverTest, AReferenceArgumentIsResolvedAndAFailedOneFailsTheTask) {
  rpc::PushTaskRequest by_ref = Task("echo", "");
  by_ref.mutable_spec()->mutable_args(0)->set_object_id("obj-7");
  rpc::PushTaskRequest lost = Task("echo", "");
  lost.mutable_spec()->mutable_args(0)->set_object_id("lost");
  FakePush* ok = Push(std::move(by_ref));
  FakePush* failed = Push(std::move(lost));
  StartMainThread();
  ASSERT_TRUE(ok->Done());
  ASSERT_TRUE(failed->Done());
  EXPECT_EQ(ok->result().returns(0).data(), "resolved:obj-7");
  ASSERT_TRUE(failed->result().has_error());
  EXPECT_NE(failed->result().error().message().find("the owner lost it"), std::string::npos);
  EXPECT_EQ(Ran(), (std::vector<std::string>{"echo:resolved:obj-7"}));  // the failed one never ran
}

TEST_F(TaskReceiverTest, AnUnknownFunctionIsAnApplicationErrorNotACrash) {
  FakePush* p = Push(Task("no-such-function", "x"));
  StartMainThread();
  ASSERT_TRUE(p->Done());
  ASSERT_TRUE(p->result().has_error());
  EXPECT_NE(p->result().error().message().find("no remote function 'no-such-function'"), std::string::npos);
}

TEST_F(TaskReceiverTest, ALargeReturnStaysHereForItsOwner) {
  FakePush* p = Push(Task("big", ""));
  StartMainThread();
  ASSERT_TRUE(p->Done());
  const rpc::ReturnObject& r = p->result().returns(0);
  EXPECT_TRUE(r.stored_remotely());
  EXPECT_TRUE(r.data().empty());
  EXPECT_EQ(r.size(), static_cast<int64_t>(kInlineLimit + 1));
  EXPECT_EQ(r.location().worker_id(), "this-worker");
  absl::MutexLock lock(&host_.mu);
  auto held = host_.held.find(*ObjectId::FromBinary(r.object_id()));
  ASSERT_NE(held, host_.held.end());
  EXPECT_EQ(held->second->size(), kInlineLimit + 1);
}

TEST_F(TaskReceiverTest, ARetriedPushOfATaskAttemptRunsItOnce) {
  absl::Notification release;
  g_release = &release;
  const std::string id = TaskId::FromRandom().Binary();
  FakePush* first = Push(Task("block", "", id, 0));
  StartMainThread();
  // A retry while the first runs waits for the first's reply.
  FakePush* during = Push(Task("block", "", id, 0));
  EXPECT_FALSE(during->Done(absl::Milliseconds(100)));
  release.Notify();
  ASSERT_TRUE(first->Done());
  ASSERT_TRUE(during->Done());
  // A retry after it ended gets the remembered reply at once.
  FakePush* after = Push(Task("block", "", id, 0));
  ASSERT_TRUE(after->HasFinished());
  // A new attempt of the same task runs again.
  FakePush* next_attempt = Push(Task("block", "", id, 1));
  ASSERT_TRUE(next_attempt->Done());
  for (FakePush* p : {first, during, after, next_attempt}) EXPECT_EQ(p->result().returns(0).data(), "unblocked");
  EXPECT_EQ(Ran(), (std::vector<std::string>{"block", "block"}));
  g_release = nullptr;
}

TEST_F(TaskReceiverTest, ActorCallsRunInTheCallersOrderWhateverOrderTheyArrive) {
  StartMainThread();
  CreateActor(1);
  FakePush* c2 = Push(ActorCall("Acc.add", "c", 2));
  FakePush* c1 = Push(ActorCall("Acc.add", "b", 1));
  EXPECT_FALSE(c2->Done(absl::Milliseconds(50)));  // waits for 0 and 1
  FakePush* c0 = Push(ActorCall("Acc.add", "a", 0));
  ASSERT_TRUE(c0->Done());
  ASSERT_TRUE(c1->Done());
  ASSERT_TRUE(c2->Done());
  EXPECT_EQ(c0->result().returns(0).data(), "a");
  EXPECT_EQ(c1->result().returns(0).data(), "ab");
  EXPECT_EQ(c2->result().returns(0).data(), "abc");
}

TEST_F(TaskReceiverTest, ASkippedCallOrAnAckedGapHoldsNothingBack) {
  StartMainThread();
  CreateActor(1);
  rpc::PushTaskRequest skip = ActorCall("Acc.add", "never", 0);
  skip.set_skip(true);
  FakePush* skipped = Push(std::move(skip));
  FakePush* c1 = Push(ActorCall("Acc.add", "x", 1));
  ASSERT_TRUE(skipped->Done());
  ASSERT_TRUE(c1->Done());
  EXPECT_EQ(skipped->result().returns_size(), 0);  // nothing ran
  EXPECT_EQ(c1->result().returns(0).data(), "x");
  // Another caller whose calls below 5 all have their replies starts at 5.
  rpc::PushTaskRequest late = ActorCall("Acc.add", "y", 5, "caller-2");
  late.set_caller_lowest_unacked(5);
  FakePush* c5 = Push(std::move(late));
  ASSERT_TRUE(c5->Done());
  EXPECT_EQ(c5->result().returns(0).data(), "xy");
}

TEST_F(TaskReceiverTest, APushAgainOfAWaitingCallSupersedesTheEarlierOne) {
  StartMainThread();
  CreateActor(1);
  FakePush* early = Push(ActorCall("Acc.add", "b", 1));
  FakePush* again = Push(ActorCall("Acc.add", "b", 1));
  ASSERT_TRUE(early->Done());
  EXPECT_EQ(early->status().error_code(), grpc::StatusCode::ABORTED);
  EXPECT_FALSE(again->HasFinished());
  FakePush* c0 = Push(ActorCall("Acc.add", "a", 0));
  ASSERT_TRUE(c0->Done());
  ASSERT_TRUE(again->Done());
  EXPECT_EQ(again->result().returns(0).data(), "ab");  // ran once
}

TEST_F(TaskReceiverTest, AConcurrentActorRunsCallsTogether) {
  StartMainThread();
  CreateActor(2);
  FakePush* a = Push(ActorCall("Acc.meet", "", 0));
  FakePush* b = Push(ActorCall("Acc.meet", "", 1));
  ASSERT_TRUE(a->Done());
  ASSERT_TRUE(b->Done());
  EXPECT_EQ(a->result().returns(0).data(), "met");
  EXPECT_EQ(b->result().returns(0).data(), "met");
}

TEST_F(TaskReceiverTest, ACallWithoutAnActorIsRefusedAsAnError) {
  FakePush* p = Push(ActorCall("Acc.add", "x", 0));
  StartMainThread();
  ASSERT_TRUE(p->Done());
  ASSERT_TRUE(p->result().has_error());
  EXPECT_NE(p->result().error().message().find("holds no actor"), std::string::npos);
}

}  // namespace
}  // namespace manta::core
