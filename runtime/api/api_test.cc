// The typed API end to end through the FakeCoreWorker.
#include "manta/api.h"

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core_worker/fake_core_worker.h"

namespace manta_api_test {

struct Sample {
  std::string name;
  std::vector<double> values;
  std::map<std::string, int> counts;
  MSGPACK_DEFINE(name, values, counts);
};

int Add(int a, int b) { return a + b; }
std::string Greet(const std::string& who) { return "hello " + who; }
Sample Summarize(Sample s) {
  s.name += "!";
  s.values.push_back(s.values.size());
  s.counts["calls"] += 1;
  return s;
}
double SumBlob(const std::vector<float>& blob) {
  double sum = 0;
  for (float f : blob) sum += f;
  return sum;
}
std::vector<float> MakeBlob(int n) { return std::vector<float>(n, 0.5f); }
int g_side_effect = 0;
void Touch(int v) { g_side_effect = v; }
int Divide(int a, int b) {
  if (b == 0) throw std::invalid_argument("division by zero");
  return a / b;
}
void Fails() { throw std::runtime_error("void task failed"); }
absl::StatusOr<int> CheckedDouble(int v) {
  if (v < 0) return absl::OutOfRangeError("v must be non-negative");
  return v * 2;
}
int Slow(int v) { return v; }
int NotRemote(int v) { return v; }
// Takes a ref itself (not its value): receives it as a ref.
int CountRef(manta::ObjectRef<int> ref) { return ref.IsNil() ? 0 : *manta::Get(ref); }

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  static Counter* CreateFailing(int start) { throw std::runtime_error("no counter for you"); }
  int Incr(int by) { return value_ += by; }
  int Value() const { return value_; }
  void Reset() { value_ = 0; }
  std::vector<int> History(int n) const { return std::vector<int>(n, value_); }

 private:
  int value_;
};

int UseCounter(manta::ActorHandle<Counter> counter) { return *manta::Get(counter.Task(&Counter::Incr).Remote(100)); }

MANTA_REMOTE(Add, Greet, Summarize, SumBlob, MakeBlob, Touch, Divide, Fails, CheckedDouble, Slow, CountRef);
MANTA_REMOTE(Counter::Create, Counter::CreateFailing, &Counter::Incr, &Counter::Value, &Counter::Reset,
             &Counter::History, UseCounter);

using manta::core::ErrorType;
using manta::core::FakeCoreWorker;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override { core_ = FakeCoreWorker::Install(); }
  void TearDown() override { FakeCoreWorker::Uninstall(); }
  FakeCoreWorker* core_ = nullptr;
};

TEST_F(ApiTest, TaskRemoteAndGet) {
  manta::ObjectRef<int> r = manta::Task(Add).Remote(1, 2);
  EXPECT_EQ(*manta::Get(r), 3);
  EXPECT_EQ(*manta::Get(manta::Task(Greet).Remote("manta")), "hello manta");
  EXPECT_EQ(core_->RunCount("Add"), 1);
}

TEST_F(ApiTest, StructArgumentsAndResults) {
  Sample s{"s", {1.5, 2.5}, {{"calls", 1}}};
  std::shared_ptr<Sample> out = manta::Get(manta::Task(Summarize).Remote(s));
  EXPECT_EQ(out->name, "s!");
  EXPECT_EQ(out->values, (std::vector<double>{1.5, 2.5, 2}));
  EXPECT_EQ(out->counts["calls"], 2);
}

TEST_F(ApiTest, BlobsRoundTrip) {
  std::vector<float> blob(1 << 20, 0.25f);
  EXPECT_EQ(*manta::Get(manta::Task(SumBlob).Remote(blob)), 0.25 * (1 << 20));
  auto made = manta::Get(manta::Task(MakeBlob).Remote(1000));
  EXPECT_EQ(made->size(), 1000u);
  EXPECT_EQ((*made)[999], 0.5f);
}

TEST_F(ApiTest, ObjectRefArgumentPassesItsValue) {
  manta::ObjectRef<int> three = manta::Task(Add).Remote(1, 2);
  manta::ObjectRef<int> put = manta::Put(10);
  EXPECT_EQ(*manta::Get(manta::Task(Add).Remote(three, put)), 13);
  // A function that takes a ref receives the ref.
  EXPECT_EQ(*manta::Get(manta::Task(CountRef).Remote(put)), 10);
}

TEST_F(ApiTest, OptionsReachTheCoreWorker) {
  manta::Task(Add)
      .SetResources({{"TPU", 4}})
      .SetLabelSelector({{"zone", "a"}})
      .SetMaxRetries(7)
      .SetName("adder")
      .Remote(1, 1);
  manta::core::TaskOptions options = core_->last_task_options();
  EXPECT_EQ(options.resources.at("TPU"), 4);
  EXPECT_EQ(options.label_selector.at("zone"), "a");
  EXPECT_EQ(options.max_retries, 7);
  EXPECT_EQ(options.name, "adder");
}

TEST_F(ApiTest, VoidFunctions) {
  manta::ObjectRef<void> done = manta::Task(Touch).Remote(42);
  manta::Get(done);
  EXPECT_EQ(g_side_effect, 42);
  EXPECT_TRUE(manta::TryGet(done).ok());
  manta::ObjectRef<void> failed = manta::Task(Fails).Remote();
  EXPECT_THROW(manta::Get(failed), manta::ApplicationError);
  absl::Status status = manta::TryGet(failed);
  EXPECT_EQ(manta::ErrorTypeOf(status), ErrorType::kApplicationError);
  EXPECT_NE(status.message().find("void task failed"), std::string::npos);
}

TEST_F(ApiTest, PutGetAndGetMany) {
  auto a = manta::Put(std::string("alpha"));
  auto b = manta::Put(std::string("beta"));
  EXPECT_EQ(*manta::Get(a), "alpha");
  std::vector<std::shared_ptr<std::string>> both = manta::Get(std::vector<manta::ObjectRef<std::string>>{a, b});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(*both[1], "beta");
}

TEST_F(ApiTest, GetTimeoutAndWait) {
  core_->HoldTasks("Slow");
  manta::ObjectRef<int> slow = manta::Task(Slow).Remote(5);
  manta::ObjectRef<int> fast = manta::Put(1);
  EXPECT_THROW(manta::Get(slow, absl::Milliseconds(10)), manta::GetTimeoutError);
  EXPECT_EQ(manta::ErrorTypeOf(manta::TryGet(slow, absl::ZeroDuration()).status()), ErrorType::kTimeout);

  manta::WaitResult<int> result = manta::Wait(std::vector<manta::ObjectRef<int>>{slow, fast}, 1, absl::Seconds(5));
  ASSERT_EQ(result.ready.size(), 1u);
  EXPECT_EQ(result.ready[0], fast);
  ASSERT_EQ(result.not_ready.size(), 1u);
  EXPECT_EQ(result.not_ready[0], slow);

  result = manta::Wait(std::vector<manta::ObjectRef<int>>{slow, fast}, 2, absl::Milliseconds(10));
  EXPECT_EQ(result.ready.size(), 1u);  // the timeout passed first

  std::thread releaser([this] { core_->ReleaseHeldTasks(); });
  EXPECT_EQ(*manta::Get(slow, absl::Seconds(30)), 5);
  releaser.join();
  result = manta::Wait(std::vector<manta::ObjectRef<int>>{slow, fast}, 2);
  EXPECT_EQ(result.ready.size(), 2u);
  EXPECT_THROW(manta::Wait(std::vector<manta::ObjectRef<int>>{slow}, 2), manta::Error);
}

TEST_F(ApiTest, ApplicationErrorCarriesFunctionAndMessage) {
  manta::ObjectRef<int> r = manta::Task(Divide).Remote(1, 0);
  try {
    manta::Get(r);
    FAIL() << "no exception";
  } catch (const manta::ApplicationError& e) {
    EXPECT_EQ(e.type(), ErrorType::kApplicationError);
    EXPECT_STREQ(e.what(), "Divide raised std::invalid_argument: division by zero");
  }
  absl::StatusOr<std::shared_ptr<int>> tried = manta::TryGet(r);
  ASSERT_FALSE(tried.ok());
  EXPECT_EQ(manta::ErrorTypeOf(tried.status()), ErrorType::kApplicationError);
  // A returned error status is an application error too.
  EXPECT_EQ(*manta::Get(manta::Task(CheckedDouble).Remote(4)), 8);
  try {
    manta::Get(manta::Task(CheckedDouble).Remote(-1));
    FAIL() << "no exception";
  } catch (const manta::ApplicationError& e) {
    EXPECT_NE(std::string(e.what()).find("CheckedDouble returned OUT_OF_RANGE: v must be non-negative"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ApiTest, FailedDependencyFailsTheDependent) {
  manta::ObjectRef<int> bad = manta::Task(Divide).Remote(1, 0);
  EXPECT_THROW(manta::Get(manta::Task(Add).Remote(bad, 1)), manta::ApplicationError);
  EXPECT_EQ(core_->RunCount("Add"), 0);
}

TEST_F(ApiTest, WorkerDiedIsRetriedThenRaised) {
  core_->InjectFailure("Add", ErrorType::kWorkerDied, "worker 1234 died", /*times=*/2);
  EXPECT_EQ(*manta::Get(manta::Task(Add).SetMaxRetries(2).Remote(2, 3)), 5);
  EXPECT_EQ(core_->RunCount("Add"), 3);

  core_->InjectFailure("Add", ErrorType::kWorkerDied, "worker 1234 died");
  try {
    manta::Get(manta::Task(Add).SetMaxRetries(1).Remote(2, 3));
    FAIL() << "no exception";
  } catch (const manta::WorkerDiedError& e) {
    EXPECT_STREQ(e.what(), "worker 1234 died");
  }
}

TEST_F(ApiTest, OtherInjectedFailuresHaveTheirTypes) {
  core_->InjectFailure("Add", ErrorType::kInfeasible, "no node has TPU: 64");
  EXPECT_THROW(manta::Get(manta::Task(Add).Remote(1, 1)), manta::InfeasibleError);
  core_->InjectFailure("Add", ErrorType::kOwnerDied);
  EXPECT_THROW(manta::Get(manta::Task(Add).Remote(1, 1)), manta::OwnerDiedError);
  core_->InjectFailure("Add", ErrorType::kObjectLost);
  EXPECT_THROW(manta::Get(manta::Task(Add).Remote(1, 1)), manta::ObjectLostError);
  core_->InjectFailure("Add", ErrorType::kNodeDied, "node died", 1);
  EXPECT_THROW(manta::Get(manta::Task(Add).SetMaxRetries(0).Remote(1, 1)), manta::NodeDiedError);
}

TEST_F(ApiTest, WrongResultTypeIsApplicationError) {
  manta::ObjectRef<std::string> text = manta::Put(std::string("x"));
  // Reinterpret the same object as an int (as a mismatched GetActor might).
  manta::ObjectRef<int> as_int(text.Info());
  try {
    manta::Get(as_int);
    FAIL() << "no exception";
  } catch (const manta::ApplicationError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot deserialize a value of type int"), std::string::npos) << e.what();
  }
}

TEST_F(ApiTest, UnregisteredFunctionThrows) {
  try {
    manta::Task(NotRemote);
    FAIL() << "no exception";
  } catch (const manta::Error& e) {
    EXPECT_TRUE(absl::IsNotFound(e.status()));
    EXPECT_NE(std::string(e.what()).find("MANTA_REMOTE"), std::string::npos);
  }
  EXPECT_THROW(manta::Task(Counter::Create), manta::Error);  // a factory, not a function
}

TEST_F(ApiTest, CallsWithoutInitThrow) {
  FakeCoreWorker::Uninstall();
  EXPECT_FALSE(manta::IsInitialized());
  EXPECT_THROW(manta::Task(Add).Remote(1, 2), manta::Error);
  EXPECT_THROW(manta::Put(1), manta::Error);
  core_ = FakeCoreWorker::Install();
  EXPECT_TRUE(manta::IsInitialized());
}

TEST_F(ApiTest, ActorCallsRunInOrder) {
  manta::ActorHandle<Counter> counter = manta::Actor(Counter::Create).Remote(10);
  EXPECT_EQ(counter.ClassName(), "Counter");
  std::vector<manta::ObjectRef<int>> results;
  for (int i = 1; i <= 100; ++i) results.push_back(counter.Task(&Counter::Incr).Remote(1));
  std::vector<std::shared_ptr<int>> values = manta::Get(results);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(*values[i], 11 + i);
  EXPECT_EQ(*manta::Get(counter.Task(&Counter::Value).Remote()), 110);
  manta::Get(counter.Task(&Counter::Reset).Remote());
  EXPECT_EQ(*manta::Get(counter.Task(&Counter::History).Remote(3)), (std::vector<int>{0, 0, 0}));
}

TEST_F(ApiTest, ActorOptionsReachTheCoreWorker) {
  auto counter = manta::Actor(Counter::Create)
                     .SetResources({{"TPU", 4}})
                     .SetResource("CPU", 1)
                     .SetLabelSelector({{"manta.io/tpu-worker-id", "0"}})
                     .SetMaxRestarts(3)
                     .SetMaxTaskRetries(2)
                     .SetName("c")
                     .SetNamespace("ns")
                     .SetDetached()
                     .SetMaxConcurrency(4)
                     .SetPlacementGroup("pg", 1)
                     .Remote(0);
  manta::core::ActorOptions options = core_->actor_options(counter.ID());
  EXPECT_EQ(options.resources.at("TPU"), 4);
  EXPECT_EQ(options.resources.at("CPU"), 1);
  EXPECT_EQ(options.label_selector.at("manta.io/tpu-worker-id"), "0");
  EXPECT_EQ(options.max_restarts, 3);
  EXPECT_EQ(options.max_task_retries, 2);
  EXPECT_EQ(options.name, "c");
  EXPECT_EQ(options.ray_namespace, "ns");
  EXPECT_TRUE(options.detached);
  EXPECT_EQ(options.max_concurrency, 4);
  EXPECT_EQ(options.placement_group_id, "pg");
  EXPECT_EQ(options.bundle_index, 1);
  EXPECT_EQ(options.class_name, "Counter");
}

TEST_F(ApiTest, NamedActorsAndKill) {
  auto counter = manta::Actor(Counter::Create).SetName("shared").Remote(5);
  EXPECT_THROW(manta::Actor(Counter::Create).SetName("shared").Remote(0), manta::Error);
  std::optional<manta::ActorHandle<Counter>> found = manta::GetActor<Counter>("shared");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, counter);
  EXPECT_EQ(*manta::Get(found->Task(&Counter::Incr).Remote(1)), 6);
  EXPECT_FALSE(manta::GetActor<Counter>("shared", "other-namespace").has_value());
  EXPECT_FALSE(manta::GetActor<Counter>("missing").has_value());

  manta::Kill(counter);
  try {
    manta::Get(counter.Task(&Counter::Incr).Remote(1));
    FAIL() << "no exception";
  } catch (const manta::ActorDiedError& e) {
    EXPECT_NE(std::string(e.what()).find("killed"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(manta::GetActor<Counter>("shared").has_value());
}

TEST_F(ApiTest, ActorDiesAfterRestartsRunOut) {
  auto counter = manta::Actor(Counter::Create).SetMaxRestarts(1).Remote(7);
  EXPECT_EQ(*manta::Get(counter.Task(&Counter::Incr).Remote(1)), 8);
  core_->KillActorProcess(counter.ID());  // restarts: the factory runs again
  EXPECT_EQ(*manta::Get(counter.Task(&Counter::Incr).Remote(1)), 8);
  EXPECT_EQ(core_->RunCount("Counter::Create"), 2);
  core_->KillActorProcess(counter.ID());
  EXPECT_THROW(manta::Get(counter.Task(&Counter::Incr).Remote(1)), manta::ActorDiedError);
}

TEST_F(ApiTest, FailingFactoryMakesActorDead) {
  auto counter = manta::Actor(Counter::CreateFailing).Remote(0);
  try {
    manta::Get(counter.Task(&Counter::Value).Remote());
    FAIL() << "no exception";
  } catch (const manta::ActorDiedError& e) {
    EXPECT_NE(std::string(e.what()).find("no counter for you"), std::string::npos) << e.what();
  }
}

TEST_F(ApiTest, ActorHandlePassedToTask) {
  auto counter = manta::Actor(Counter::Create).Remote(1);
  EXPECT_EQ(*manta::Get(manta::Task(UseCounter).Remote(counter)), 101);
  EXPECT_EQ(*manta::Get(counter.Task(&Counter::Value).Remote()), 101);
}

TEST_F(ApiTest, ObjectRefCopiesBalanceReferences) {
  manta::ObjectId id;
  {
    manta::ObjectRef<int> r = manta::Put(5);
    id = r.ID();
    EXPECT_EQ(core_->LocalReferenceCount(id), 1);
    {
      manta::ObjectRef<int> copy = r;
      manta::ObjectRef<int> assigned;
      assigned = copy;
      manta::ObjectRef<int> moved = std::move(copy);
      std::vector<manta::ObjectRef<int>> many(3, r);
      EXPECT_EQ(core_->LocalReferenceCount(id), 6);
      // Serialized and deserialized (as when passed inside a value).
      auto bytes = manta::Serialize(std::vector<manta::ObjectRef<int>>{r});
      ASSERT_TRUE(bytes.ok());
      auto back = manta::Deserialize<std::vector<manta::ObjectRef<int>>>(*bytes);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ((*back)[0], r);
      EXPECT_EQ((*back)[0].Info().owner_address, core_->address());
    }
    EXPECT_EQ(core_->LocalReferenceCount(id), 1);
    EXPECT_EQ(*manta::Get(r), 5);
  }
  EXPECT_FALSE(core_->HasObject(id));  // the last ref freed it
  EXPECT_EQ(core_->add_reference_calls(), core_->remove_reference_calls());
  EXPECT_EQ(core_->unbalanced_removes(), 0);
}

TEST_F(ApiTest, InitAndShutdownThroughTheFactoryInTheOptions) {
  FakeCoreWorker::Uninstall();
  manta::InitOptions options;
  options.address = "127.0.0.1:1";
  options.core_worker_factory = FakeCoreWorker::Factory();
  manta::Init(options);  // the fake's InitDriver makes a FakeCoreWorker
  EXPECT_TRUE(manta::IsInitialized());
  manta::Init(options);  // again: nothing happens
  EXPECT_EQ(*manta::Get(manta::Task(Add).Remote(2, 2)), 4);
  manta::Shutdown();
  EXPECT_FALSE(manta::IsInitialized());
  manta::Shutdown();  // idempotent
  core_ = FakeCoreWorker::Install();
}

// This binary links no real core worker: without a factory in the options
// there is none to start, and Init says what to link.
TEST_F(ApiTest, InitWithoutAnyCoreWorkerSaysWhatToLink) {
  FakeCoreWorker::Uninstall();
  ASSERT_EQ(manta::core::DefaultCoreWorkerFactory(), nullptr);
  manta::InitOptions options;
  options.address = "127.0.0.1:1";
  absl::Status status = manta::TryInit(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(status.message()).find("manta_runtime"), std::string::npos) << status;
  EXPECT_FALSE(manta::IsInitialized());
  core_ = FakeCoreWorker::Install();
}

// A factory that fails to start leaves the process uninitialized.
TEST_F(ApiTest, AFactoryThatCannotStartLeavesNothingInitialized) {
  class Refusing final : public manta::core::CoreWorkerFactory {
   public:
    absl::StatusOr<manta::core::CoreWorker*> InitDriver(const manta::core::CoreWorkerOptions&) override {
      return absl::UnavailableError("no GCS here");
    }
    absl::Status RunWorker(const manta::core::CoreWorkerOptions&) override { return absl::OkStatus(); }
    void Shutdown(manta::core::CoreWorker*) override { ADD_FAILURE() << "nothing was started"; }
  } refusing;
  FakeCoreWorker::Uninstall();
  manta::InitOptions options;
  options.address = "127.0.0.1:1";
  options.core_worker_factory = &refusing;
  absl::Status status = manta::TryInit(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(status.message()).find("no GCS here"), std::string::npos) << status;
  EXPECT_FALSE(manta::IsInitialized());
  manta::Shutdown();  // nothing to end
  core_ = FakeCoreWorker::Install();
}

}  // namespace manta_api_test
