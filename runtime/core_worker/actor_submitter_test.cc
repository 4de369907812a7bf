#include "runtime/core_worker/actor_submitter.h"

#include <gtest/gtest.h>

#include <thread>

#include "runtime/core_worker/submit_test_util.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

using testing::FakeSubmitHost;
using testing::kWait;

// The GCS's actor table as records the test answers (on the loop, as gRPC
// replies would come).
class FakeDirectory : public ActorDirectory {
 public:
  template <typename Req, typename Reply>
  struct Call {
    Req req;
    std::function<void(const absl::Status&, Reply&&)> done;
  };
  void RegisterActor(rpc::RegisterActorRequest req,
                     std::function<void(const absl::Status&, rpc::RegisterActorReply&&)> done) override {
    absl::MutexLock lock(&mu);
    registers.push_back({std::move(req), std::move(done)});
  }
  void GetActorInfo(const ActorId& id,
                    std::function<void(const absl::Status&, rpc::GetActorInfoReply&&)> done) override {
    absl::MutexLock lock(&mu);
    infos.push_back({id, std::move(done)});
  }
  void Poll(rpc::PollRequest req, std::function<void(const absl::Status&, rpc::PollReply&&)> done) override {
    absl::MutexLock lock(&mu);
    polls.push_back({std::move(req), std::move(done)});
  }
  bool Await(const std::function<bool()>& pred) {
    absl::MutexLock lock(&mu);
    auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pred(); };
    return mu.AwaitWithTimeout(absl::Condition(&cond), kWait);
  }

  absl::Mutex mu;
  std::vector<Call<rpc::RegisterActorRequest, rpc::RegisterActorReply>> registers ABSL_GUARDED_BY(mu);
  std::vector<Call<ActorId, rpc::GetActorInfoReply>> infos ABSL_GUARDED_BY(mu);
  std::vector<Call<rpc::PollRequest, rpc::PollReply>> polls ABSL_GUARDED_BY(mu);
};

rpc::ActorInfo Info(const ActorId& id, rpc::ActorInfo::State state, const std::string& worker = "", int port = 0,
                    int restarts = 0) {
  rpc::ActorInfo info;
  info.set_actor_id(id.Binary());
  info.set_state(state);
  info.set_num_restarts(restarts);
  if (!worker.empty()) {
    info.mutable_address()->set_ip("10.0.0.2");
    info.mutable_address()->set_port(port);
    info.mutable_address()->set_worker_id(worker);
  }
  return info;
}

class ActorSubmitterTest : public ::testing::Test {
 protected:
  ActorSubmitterTest() {
    resolver_.set_self("driver");
    actors_.set_self("driver");
  }
  ~ActorSubmitterTest() override { actors_.Stop(); }

  // Creates an anonymous actor and waits for its registration request.
  ActorId Create(int max_task_retries) {
    ActorId id = ActorId::FromRandom();
    rpc::TaskSpec spec;
    spec.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    spec.set_task_id(TaskId::FromRandom().Binary());
    spec.set_actor_id(id.Binary());
    spec.mutable_actor_creation()->set_max_task_retries(max_task_retries);
    EXPECT_TRUE(actors_.Create(spec, {}).ok());
    EXPECT_TRUE(gcs_.Await([&] { return !gcs_.registers.empty() && !gcs_.infos.empty(); }));
    return id;
  }
  ObjectId Call(const ActorId& actor, const std::string& arg) {
    rpc::TaskSpec spec;
    spec.set_type(rpc::TaskSpec::ACTOR_TASK);
    spec.set_task_id(TaskId::FromRandom().Binary());
    spec.set_actor_id(actor.Binary());
    spec.add_args()->set_data(arg);
    ObjectId ret = ReturnObjectId(spec.task_id(), 1);
    actors_.Submit(actor, std::move(spec), {});
    return ret;
  }
  // Tells the submitter the actor's state, as GetActorInfo's reply.
  void Tell(const rpc::ActorInfo& info) {
    std::function<void(const absl::Status&, rpc::GetActorInfoReply&&)> done;
    {
      absl::MutexLock lock(&gcs_.mu);
      done = gcs_.infos.back().done;
    }
    rpc::GetActorInfoReply reply;
    *reply.mutable_actor() = info;
    loop_.RunOnLoop([&] { done(absl::OkStatus(), std::move(reply)); });
  }
  void Finish(size_t i, const absl::Status& status) {
    PushCall* call = host_.Push(i);
    call->status = status;
    if (status.ok()) {
      store_.Put(ReturnObjectId(call->request.spec().task_id(), 1), std::make_shared<const std::string>("ok"));
    }
    std::vector<PushCall*> next;
    actors_.OnPushDone(*call, &next);
    host_.StartPushes(next);
  }
  absl::Status Result(const ObjectId& ret) { return store_.Get({ret}, absl::Now() + kWait)[0].status(); }

  MemoryStore store_;
  testing::NoPeers peers_;
  ReferenceCounter refs_{&store_, &peers_};
  FakeSubmitHost host_;
  FakeDirectory gcs_;
  testing::LoopThread loop_;  // stopped before the submitter is gone
  DependencyResolver resolver_{&store_, loop_.loop()};
  ActorSubmitter actors_{SubmitDeps{&store_, &refs_, loop_.loop(), &host_}, &resolver_, &gcs_};
};

TEST_F(ActorSubmitterTest, CallsMadeBeforeTheActorLivesGoOutInOrderOnceItDoes) {
  ActorId id = Create(0);
  Call(id, "a");
  Call(id, "b");
  Call(id, "c");
  EXPECT_EQ(host_.NumPushes(), 0u);
  EXPECT_EQ(actors_.Find(id)->pending, 3);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  ASSERT_EQ(host_.NumPushes(), 3u);
  for (int i = 0; i < 3; ++i) {
    const PushCall& p = *host_.Push(i);
    EXPECT_EQ(p.address, "10.0.0.2:5001");
    EXPECT_EQ(p.request.intended_worker_id(), "w1");
    EXPECT_EQ(p.request.spec().sequence_number(), i);
    EXPECT_EQ(p.request.spec().args(0).data(), std::string(1, static_cast<char>('a' + i)));
  }
  for (int i = 0; i < 3; ++i) Finish(i, absl::OkStatus());
  EXPECT_EQ(actors_.Find(id)->pending, 0);
}

TEST_F(ActorSubmitterTest, ACallWithoutRetriesFailsWhenItsWorkerBreaksAndItsNumberIsSkipped) {
  ActorId id = Create(0);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  ObjectId ret = Call(id, "a");
  ASSERT_EQ(host_.NumPushes(), 1u);
  Finish(0, absl::UnavailableError("connection reset"));
  EXPECT_EQ(GetErrorType(Result(ret)), ErrorType::kActorDied);
  ASSERT_EQ(host_.NumPushes(), 2u);
  const PushCall& skip = *host_.Push(1);
  EXPECT_TRUE(skip.request.skip());
  EXPECT_EQ(skip.request.spec().sequence_number(), 0);
  EXPECT_EQ(skip.request.spec().caller_worker_id(), "driver");
}

TEST_F(ActorSubmitterTest, ARefusedCallFailsForGoodWhateverItsRetries) {
  ActorId id = Create(5);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  ObjectId ret = Call(id, "a");
  Finish(0, absl::InvalidArgumentError("malformed"));
  EXPECT_EQ(GetErrorType(Result(ret)), ErrorType::kInvalidArgument);
}

TEST_F(ActorSubmitterTest, ACallWithRetriesIsPushedAgainToTheSameWorkerALittleLater) {
  ActorId id = Create(1);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  Call(id, "a");
  Finish(0, absl::UnavailableError("connection reset"));
  ASSERT_TRUE(host_.Await([&] { return host_.pushes.size() == 2; }));
  const PushCall& again = *host_.Push(1);
  EXPECT_FALSE(again.request.skip());
  EXPECT_EQ(again.request.spec().sequence_number(), 0);
  EXPECT_EQ(again.request.spec().args(0).data(), "a");
}

TEST_F(ActorSubmitterTest, ANewIncarnationGetsThePendingCallsNumberedAfresh) {
  ActorId id = Create(0);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  Call(id, "a");
  Call(id, "b");
  Finish(0, absl::OkStatus());
  Tell(Info(id, rpc::ActorInfo::RESTARTING, "", 0, 1));
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w2", 5002, 1));
  ASSERT_EQ(host_.NumPushes(), 3u);
  const PushCall& moved = *host_.Push(2);
  EXPECT_EQ(moved.address, "10.0.0.2:5002");
  EXPECT_EQ(moved.request.spec().args(0).data(), "b");
  EXPECT_EQ(moved.request.spec().sequence_number(), 0);
  EXPECT_EQ(moved.incarnation, 1);
  // Stale news of the old incarnation changes nothing.
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001, 0));
  Call(id, "c");
  EXPECT_EQ(host_.Push(3)->address, "10.0.0.2:5002");
}

TEST_F(ActorSubmitterTest, ADeadActorFailsItsCallsAndEveryLaterOne) {
  ActorId id = Create(3);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  ObjectId pending = Call(id, "a");
  rpc::ActorInfo dead = Info(id, rpc::ActorInfo::DEAD);
  dead.mutable_death_cause()->set_message("killed by its owner");
  Tell(dead);
  EXPECT_EQ(GetErrorType(Result(pending)), ErrorType::kActorDied);
  EXPECT_NE(Result(pending).message().find("killed by its owner"), std::string::npos);
  ObjectId later = Call(id, "b");
  EXPECT_EQ(GetErrorType(Result(later)), ErrorType::kActorDied);
  EXPECT_EQ(host_.NumPushes(), 1u);
}

TEST_F(ActorSubmitterTest, ARefusedRegistrationFailsTheActorAndItsCalls) {
  ActorId id = Create(0);
  ObjectId ret = Call(id, "a");
  std::function<void(const absl::Status&, rpc::RegisterActorReply&&)> done;
  {
    absl::MutexLock lock(&gcs_.mu);
    done = gcs_.registers[0].done;
  }
  loop_.RunOnLoop([&] { done(absl::InvalidArgumentError("bad resources"), {}); });
  EXPECT_EQ(GetErrorType(Result(ret)), ErrorType::kActorDied);
  EXPECT_NE(Result(ret).message().find("bad resources"), std::string::npos);
  EXPECT_EQ(actors_.Find(id)->state, rpc::ActorInfo::DEAD);
}

TEST_F(ActorSubmitterTest, ANamedActorIsRegisteredBeforeCreateReturns) {
  rpc::TaskSpec spec;
  spec.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  spec.set_task_id(TaskId::FromRandom().Binary());
  ActorId id = ActorId::FromRandom();
  spec.set_actor_id(id.Binary());
  spec.mutable_actor_creation()->set_name("taken");
  ObjectId arg = ObjectId::FromRandom();
  store_.Put(arg, std::make_shared<const std::string>("v"));
  spec.add_args()->set_object_id(arg.Binary());
  absl::Status created;
  std::thread creator([&] { created = actors_.Create(spec, {}); });
  ASSERT_TRUE(gcs_.Await([&] { return !gcs_.registers.empty(); }));
  std::function<void(const absl::Status&, rpc::RegisterActorReply&&)> done;
  {
    absl::MutexLock lock(&gcs_.mu);
    done = gcs_.registers[0].done;
  }
  loop_.RunOnLoop([&] { done(absl::AlreadyExistsError("the name 'taken' is in use"), {}); });
  creator.join();
  EXPECT_TRUE(absl::IsAlreadyExists(created));
  EXPECT_EQ(refs_.num_holds(), 0u);  // its argument is let go
}

TEST_F(ActorSubmitterTest, APollThatMissedMessagesAsksForEveryActorAgain) {
  ActorId id = Create(0);
  ASSERT_TRUE(gcs_.Await([&] { return gcs_.polls.size() == 1; }));
  std::function<void(const absl::Status&, rpc::PollReply&&)> done;
  size_t infos_before;
  {
    absl::MutexLock lock(&gcs_.mu);
    EXPECT_EQ(gcs_.polls[0].req.max_wait_ms(), ActorSubmitter::kActorPollWaitMs);
    done = gcs_.polls[0].done;
    infos_before = gcs_.infos.size();
  }
  rpc::PollReply reply;
  reply.set_gap(true);
  reply.set_last_sequence(42);
  *reply.add_messages()->mutable_actor_info() = Info(id, rpc::ActorInfo::ALIVE, "w1", 5001);
  loop_.RunOnLoop([&] { done(absl::OkStatus(), std::move(reply)); });
  EXPECT_EQ(actors_.Find(id)->state, rpc::ActorInfo::ALIVE);
  absl::MutexLock lock(&gcs_.mu);
  EXPECT_EQ(gcs_.infos.size(), infos_before + 1);
  ASSERT_EQ(gcs_.polls.size(), 2u);
  EXPECT_EQ(gcs_.polls[1].req.after_sequence(), 42);
}

}  // namespace
}  // namespace manta::core
