// Several returns and the front end's error bytes, through the typed API and
// the seam, on the FakeCoreWorker.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "manta/api.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta_task_features_test {

std::tuple<int, std::string, double> Three(int v) { return {v, std::to_string(v), v / 2.0}; }
std::pair<int, int> DivMod(int a, int b) { return {a / b, a % b}; }

class Splitter {
 public:
  static Splitter* Create() { return new Splitter(); }
  std::pair<int, std::string> Both(int v) { return {v * 2, "x" + std::to_string(v)}; }
};

int g_flaky_runs = 0;
// Throws std::runtime_error on its first `failures` runs.
int Flaky(int failures) {
  if (g_flaky_runs++ < failures) throw std::runtime_error("not yet");
  return g_flaky_runs;
}
int AlwaysThrows(int) { throw std::logic_error("never"); }
// What the worker told the running task.
int AttemptSeen() { return manta::core::CurrentTaskContext()->attempt; }

MANTA_REMOTE(Three, DivMod, Flaky, AlwaysThrows, AttemptSeen);
MANTA_REMOTE(Splitter::Create, &Splitter::Both);

using manta::core::ErrorType;
using manta::core::FakeCoreWorker;

// A front end's function that fails with its own bytes, and one that
// returns as many values as its task declares.
void RegisterRawFunctions() {
  static const bool once = [] {
    static const char keys[2] = {};
    auto& r = manta::internal::FunctionRegistry::Instance();
    r.RegisterFunction("raw:fail_with_data", &keys[0],
                       [](const manta::internal::ArgViews&) -> absl::StatusOr<manta::internal::ReturnValues> {
                         return manta::core::MakeApplicationError("ValueError: bad", std::string("pickled\0exc", 11));
                       });
    r.RegisterFunction("raw:two_values", &keys[1],
                       [](const manta::internal::ArgViews&) -> absl::StatusOr<manta::internal::ReturnValues> {
                         return manta::internal::ReturnValues{"a", "b"};
                       });
    return true;
  }();
  (void)once;
}

class TaskFeaturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterRawFunctions();
    core_ = FakeCoreWorker::Install();
  }
  void TearDown() override { FakeCoreWorker::Uninstall(); }
  FakeCoreWorker* core_ = nullptr;
};

TEST(ErrorDataTest, RidesOnTheStatusBesideItsType) {
  absl::Status s = manta::core::MakeApplicationError("boom", "bytes");
  EXPECT_EQ(manta::core::GetErrorType(s), ErrorType::kApplicationError);
  EXPECT_EQ(manta::core::ErrorData(s), "bytes");
  EXPECT_EQ(manta::core::ErrorData(manta::core::MakeError(ErrorType::kWorkerDied, "x")), std::nullopt);
  EXPECT_TRUE(manta::core::WithErrorData(absl::OkStatus(), "ignored").ok());
}

TEST_F(TaskFeaturesTest, ErrorBytesReachTheCallersGet) {
  auto refs = manta::core::CoreWorker::Current()->SubmitTask("raw:fail_with_data", {}, {});
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 1u);
  auto values = manta::core::CoreWorker::Current()->Get(*refs, absl::Seconds(1));
  ASSERT_FALSE(values[0].ok());
  EXPECT_EQ(manta::core::GetErrorType(values[0].status()), ErrorType::kApplicationError);
  EXPECT_EQ(manta::core::ErrorData(values[0].status()), std::string("pickled\0exc", 11));
}

TEST_F(TaskFeaturesTest, SeveralReturnsGiveOneRefEach) {
  auto [a, b, c] = manta::Task(Three).RemoteSplit(7);
  EXPECT_EQ(*manta::Get(a), 7);
  EXPECT_EQ(*manta::Get(b), "7");
  EXPECT_EQ(*manta::Get(c), 3.5);
  EXPECT_NE(a.ID(), b.ID());
  auto [q, r] = manta::Task(DivMod).RemoteSplit(17, 5);
  EXPECT_EQ(*manta::Get(q), 3);
  EXPECT_EQ(*manta::Get(r), 2);
  // One return: the tuple as one value.
  EXPECT_EQ(std::get<1>(*manta::Get(manta::Task(Three).Remote(4))), "4");
}

TEST_F(TaskFeaturesTest, ActorCallsSplitToo) {
  auto actor = manta::Actor(Splitter::Create).Remote();
  auto [n, s] = actor.Task(&Splitter::Both).RemoteSplit(21);
  EXPECT_EQ(*manta::Get(n), 42);
  EXPECT_EQ(*manta::Get(s), "x21");
}

TEST_F(TaskFeaturesTest, ACountThatDiffersIsAnApplicationErrorNamingBoth) {
  manta::core::TaskOptions options;
  options.num_returns = 3;
  auto refs = manta::core::CoreWorker::Current()->SubmitTask("raw:two_values", {}, options);
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 3u);
  for (const auto& v : manta::core::CoreWorker::Current()->Get(*refs, absl::Seconds(1))) {
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(manta::core::GetErrorType(v.status()), ErrorType::kApplicationError);
    EXPECT_NE(v.status().message().find("returned 2 values"), std::string::npos) << v.status();
    EXPECT_NE(v.status().message().find("num_returns=3"), std::string::npos) << v.status();
  }
}

TEST_F(TaskFeaturesTest, InvalidCountsAreRefused) {
  manta::core::TaskOptions options;
  options.num_returns = 0;
  EXPECT_TRUE(
      absl::IsInvalidArgument(manta::core::CoreWorker::Current()->SubmitTask("raw:two_values", {}, options).status()));
  EXPECT_THROW(manta::Task(Three).SetNumReturns(2).RemoteSplit(1), manta::Error);
  EXPECT_THROW(manta::Task(Three).SetNumReturns(3).Remote(1), manta::Error);
}

TEST_F(TaskFeaturesTest, ExceptionsAreNotRetriedByDefault) {
  g_flaky_runs = 0;
  EXPECT_THROW(manta::Get(manta::Task(Flaky).Remote(1)), manta::ApplicationError);
  EXPECT_EQ(g_flaky_runs, 1);
}

TEST_F(TaskFeaturesTest, RetryExceptionsRunsAgainWithinMaxRetries) {
  g_flaky_runs = 0;
  EXPECT_EQ(*manta::Get(manta::Task(Flaky).SetRetryExceptions().SetMaxRetries(3).Remote(2)), 3);
  EXPECT_EQ(g_flaky_runs, 3);
  // Out of retries: the last error.
  g_flaky_runs = 0;
  EXPECT_THROW(manta::Get(manta::Task(Flaky).SetRetryExceptions().SetMaxRetries(1).Remote(5)), manta::ApplicationError);
  EXPECT_EQ(g_flaky_runs, 2);
  EXPECT_EQ(*manta::Get(manta::Task(AttemptSeen).Remote()), 0);
}

TEST_F(TaskFeaturesTest, ANamedTypeIsRetriedAndOthersAreNot) {
  g_flaky_runs = 0;
  EXPECT_EQ(*manta::Get(manta::Task(Flaky).SetRetryExceptionTypes({"std::runtime_error"}).SetMaxRetries(3).Remote(1)),
            2);
  EXPECT_EQ(g_flaky_runs, 2);
  g_flaky_runs = 0;
  EXPECT_THROW(manta::Get(manta::Task(Flaky).SetRetryExceptionTypes({"std::logic_error"}).SetMaxRetries(3).Remote(1)),
               manta::ApplicationError);
  EXPECT_EQ(g_flaky_runs, 1);
  EXPECT_EQ(core_->RunCount("AlwaysThrows"), 0);
  EXPECT_THROW(
      manta::Get(manta::Task(AlwaysThrows).SetRetryExceptionTypes({"std::logic_error"}).SetMaxRetries(2).Remote(1)),
      manta::ApplicationError);
  EXPECT_EQ(core_->RunCount("AlwaysThrows"), 3);
}

TEST_F(TaskFeaturesTest, GetIfExistsGivesTheNamedActor) {
  auto first = manta::Actor(Splitter::Create).SetName("one").Remote();
  EXPECT_THROW(manta::Actor(Splitter::Create).SetName("one").Remote(), manta::Error);
  auto again = manta::Actor(Splitter::Create).SetName("one").SetGetIfExists().Remote();
  EXPECT_EQ(again.ID(), first.ID());
  auto fresh = manta::Actor(Splitter::Create).SetName("two").SetGetIfExists().Remote();
  EXPECT_NE(fresh.ID(), first.ID());
}

TEST_F(TaskFeaturesTest, HardAffinityToAnUnknownNodeIsInfeasible) {
  manta::NodeId known = core_->AddNode(manta::core::NodeData{});
  auto ok = manta::Task(Three).SetSchedulingStrategy(manta::NodeAffinity(known)).Remote(1);
  EXPECT_EQ(std::get<0>(*manta::Get(ok)), 1);
  EXPECT_EQ(core_->last_task_options().scheduling_strategy.node_id, known);
  auto bad = manta::Task(Three).SetSchedulingStrategy(manta::NodeAffinity(manta::NodeId::FromRandom())).Remote(1);
  EXPECT_THROW(manta::Get(bad), manta::InfeasibleError);
  auto soft =
      manta::Task(Three).SetSchedulingStrategy(manta::NodeAffinity(manta::NodeId::FromRandom(), true)).Remote(2);
  EXPECT_EQ(std::get<0>(*manta::Get(soft)), 2);
}

TEST_F(TaskFeaturesTest, CancelledHeldTaskRaisesTaskCancelled) {
  core_->HoldTasks("DivMod");
  auto held = manta::Task(DivMod).SetNumReturns(1).Remote(7, 2);
  manta::Cancel(held);
  EXPECT_THROW(manta::Get(held), manta::TaskCancelledError);
  core_->ReleaseHeldTasks();
  EXPECT_THROW(manta::Get(held), manta::TaskCancelledError);  // not overwritten by the run
  auto done = manta::Task(DivMod).Remote(7, 2);
  manta::Cancel(done);  // finished: left as it is
  EXPECT_EQ(manta::Get(done)->first, 3);
  EXPECT_FALSE(manta::TaskCancelled());
}

}  // namespace manta_task_features_test
