#include "runtime/core_worker/actor_submitter.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/process.h"
#include "gcs/client/fake_gcs_client.h"
#include "runtime/core_worker/submit_test_util.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

using testing::FakeSubmitHost;
using testing::kWait;

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
  ~ActorSubmitterTest() override {
    actors_.Stop();
    loop_.RunOnLoop([&] { gcs_.SetReachable(false); });  // ends the held poll
    loop_.Stop();                                        // no timer of the submitter's runs once it is gone
  }

  // Runs `fn` on the loop, then lets what it set off there run too.
  void OnLoop(const std::function<void()>& fn) {
    loop_.RunOnLoop(fn);
    loop_.RunOnLoop([] {});
    loop_.RunOnLoop([] {});
  }
  template <typename T>
  T Read(const std::function<T()>& fn) {
    T out{};
    loop_.RunOnLoop([&] { out = fn(); });
    return out;
  }
  // Waits (with a deadline) until `pred` holds, checking it on the loop.
  bool AwaitOnLoop(const std::function<bool()>& pred) {
    return PollUntil([&] { return Read<bool>(pred); }, absl::Now() + kWait);
  }

  rpc::TaskSpec Creation(const ActorId& id, int max_task_retries, const std::string& name = "") {
    rpc::TaskSpec spec;
    spec.set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    spec.set_task_id(TaskId::FromRandom().Binary());
    spec.set_actor_id(id.Binary());
    spec.mutable_actor_creation()->set_max_task_retries(max_task_retries);
    spec.mutable_actor_creation()->set_name(name);
    return spec;
  }
  // Creates an anonymous actor; returns once the GCS has it and its state
  // is followed.
  ActorId Create(int max_task_retries) {
    ActorId id = ActorId::FromRandom();
    EXPECT_TRUE(actors_.Create(Creation(id, max_task_retries), {}).ok());
    EXPECT_TRUE(AwaitOnLoop([&] { return gcs_.calls("RegisterActor") >= 1 && gcs_.held_polls() == 1; }));
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
  // The GCS publishes the actor's new state (the held poll brings it).
  void Tell(const rpc::ActorInfo& info) {
    OnLoop([&] { gcs_.PutActor(info); });
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
  testing::LoopThread loop_;  // stopped by the destructor, before the submitter is gone
  gcs::FakeGcsClient gcs_{loop_.loop()};
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

TEST_F(ActorSubmitterTest, StopWithACallInFlightMakesNoResendAndNoPoll) {
  ActorId id = Create(1);
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001));
  Call(id, "a");
  Call(id, "b");
  Finish(0, absl::UnavailableError("connection reset"));  // arms the resend of "a" and "b"
  OnLoop([] {});
  const int polls = Read<int>([&] { return gcs_.calls("Poll"); });
  actors_.Stop();
  OnLoop([&] { gcs_.SetReachable(false); });  // the held poll ends: a running submitter would poll again
  // Timers fire in the order of their due times: once this one has run,
  // the resend (kResendDelay) and a failed poll's retry (500 ms) would have.
  static_assert(ActorSubmitter::kResendDelay < absl::Milliseconds(600));
  absl::Notification past_resend;
  loop_.loop()->Post([&] { loop_.loop()->RunOnce(absl::Milliseconds(600), [&] { past_resend.Notify(); }); });
  ASSERT_TRUE(past_resend.WaitForNotificationWithTimeout(kWait));
  OnLoop([&] { gcs_.SetReachable(true); });
  EXPECT_EQ(host_.NumPushes(), 2u) << "no resend once stopping";
  EXPECT_EQ(Read<int>([&] { return gcs_.calls("Poll"); }), polls) << "no poll once stopping";
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
  // Its push to the old incarnation was attempt 0; this is attempt 1, so the
  // GCS's end of attempt 0 (its worker died) leaves this one's row alone.
  EXPECT_EQ(host_.Push(1)->request.spec().attempt(), 0);
  EXPECT_EQ(moved.request.spec().attempt(), 1);
  // Stale news of the old incarnation changes nothing.
  Tell(Info(id, rpc::ActorInfo::ALIVE, "w1", 5001, 0));
  Call(id, "c");
  EXPECT_EQ(host_.Push(3)->address, "10.0.0.2:5002");
  EXPECT_EQ(host_.Push(3)->request.spec().attempt(), 0) << "first pushed to this incarnation";
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
  loop_.RunOnLoop([&] { gcs_.FailNext("RegisterActor", absl::InvalidArgumentError("bad resources")); });
  ActorId id = ActorId::FromRandom();
  ASSERT_TRUE(actors_.Create(Creation(id, 0), {}).ok());
  ObjectId ret = Call(id, "a");
  EXPECT_EQ(GetErrorType(Result(ret)), ErrorType::kActorDied);
  EXPECT_NE(Result(ret).message().find("bad resources"), std::string::npos);
  EXPECT_EQ(actors_.Find(id)->state, rpc::ActorInfo::DEAD);
}

TEST_F(ActorSubmitterTest, ANamedActorIsRegisteredBeforeCreateReturns) {
  ObjectId arg = ObjectId::FromRandom();
  store_.Put(arg, std::make_shared<const std::string>("v"));
  ActorId taken = ActorId::FromRandom();
  rpc::TaskSpec spec = Creation(taken, 0, "taken");
  spec.add_args()->set_object_id(arg.Binary());
  loop_.RunOnLoop([&] { gcs_.FailNext("RegisterActor", absl::AlreadyExistsError("the name 'taken' is in use")); });
  EXPECT_TRUE(absl::IsAlreadyExists(actors_.Create(spec, {}).status()));
  EXPECT_EQ(refs_.num_holds(), 0u);  // its argument is let go

  ActorId free = ActorId::FromRandom();
  ASSERT_TRUE(actors_.Create(Creation(free, 0, "free"), {}).ok());
  // Known and followed before Create returned.
  EXPECT_EQ(actors_.Find(free)->state, rpc::ActorInfo::PENDING_CREATION);
}

TEST_F(ActorSubmitterTest, APollThatMissedMessagesAsksForEveryActorAgain) {
  ActorId id = Create(0);
  const int infos_before = Read<int>([&] { return gcs_.calls("GetActorInfo"); });
  const int polls_before = Read<int>([&] { return gcs_.calls("Poll"); });
  OnLoop([&] {
    // The actor went alive among messages the poll will never see.
    rpc::ActorInfo alive = Info(id, rpc::ActorInfo::ALIVE, "w1", 5001);
    gcs_.PutActor(alive);  // answers the held poll...
  });
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_.held_polls() == 1; }));
  OnLoop([&] {
    gcs_.ForgetUpTo(1000);
    rpc::PubMessage other;
    other.set_channel(rpc::PubMessage::ACTOR);
    *other.mutable_actor_info() = Info(ActorId::FromRandom(), rpc::ActorInfo::ALIVE);
    gcs_.Publish(other);  // ...and this one comes with a gap
  });
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_.calls("GetActorInfo") > infos_before; }));
  EXPECT_GT(Read<int>([&] { return gcs_.calls("Poll"); }), polls_before + 1);
  EXPECT_EQ(actors_.Find(id)->state, rpc::ActorInfo::ALIVE);
}

}  // namespace
}  // namespace manta::core
