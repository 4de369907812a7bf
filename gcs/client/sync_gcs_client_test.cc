// SyncGcsClient over the fake GCS: replies reach a blocked thread, an
// unreachable GCS is waited out only when asked, a reply that never comes
// ends at the wait, a cancel ends it at once; and the fake's tables that the
// CLI, the dashboard and the core worker read through it.
#include "gcs/client/sync_gcs_client.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/loop_thread.h"
#include "common/process.h"
#include "gcs/client/fake_gcs_client.h"

namespace manta::gcs {
namespace {

using Options = SyncGcsClient::CallOptions;

class SyncGcsClientTest : public ::testing::Test {
 protected:
  ~SyncGcsClientTest() override { io_.Stop(); }

  template <typename Reply>
  using Start = SyncGcsClient::Start<Reply>;

  absl::StatusOr<rpc::KvGetReply> Get(const std::string& key, Options options = {}) {
    rpc::KvGetRequest req;
    req.set_ns("ns");
    req.set_key(key);
    return sync_.Call<rpc::KvGetReply>([req](GcsClient& c, auto done) { c.KvGet(req, std::move(done)); }, options);
  }
  absl::Status Put(const std::string& key, const std::string& value) {
    rpc::KvPutRequest req;
    req.set_ns("ns");
    req.set_key(key);
    req.set_value(value);
    req.set_overwrite(true);
    return sync_.Call<rpc::KvPutReply>([req](GcsClient& c, auto done) { c.KvPut(req, std::move(done)); }).status();
  }
  int Calls(const std::string& method) {
    int n = 0;
    io_.RunOnLoop([&] { n = fake_.calls(method); });
    return n;
  }

  LoopThread io_;
  FakeGcsClient fake_{io_.loop()};
  SyncGcsClient sync_{io_.loop(), &fake_, absl::Seconds(10)};
};

TEST_F(SyncGcsClientTest, ABlockedThreadGetsTheReply) {
  ASSERT_TRUE(Put("a", "1").ok());
  auto reply = Get("a");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->found());
  EXPECT_EQ(reply->value(), "1");
}

TEST_F(SyncGcsClientTest, AnUnreachableGcsFailsAtOnceUnlessWaitedOut) {
  io_.RunOnLoop([&] { fake_.SetReachable(false); });
  EXPECT_TRUE(absl::IsUnavailable(Get("a").status()));
  EXPECT_EQ(Calls("KvGet"), 1);

  // Back after a few attempts: the waiting call succeeds.
  std::thread head([&] {
    PollUntil([&] { return Calls("KvGet") >= 3; }, absl::Now() + absl::Seconds(10));
    io_.RunOnLoop([&] { fake_.SetReachable(true); });
  });
  Options patient;
  patient.reconnect = absl::Seconds(20);
  auto reply = Get("a", patient);
  head.join();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_GE(Calls("KvGet"), 3);
}

TEST_F(SyncGcsClientTest, AWaitOutGivesUpAfterItsWindow) {
  io_.RunOnLoop([&] { fake_.SetReachable(false); });
  Options patient;
  patient.reconnect = absl::Milliseconds(400);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsUnavailable(Get("a", patient).status()));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_GE(Calls("KvGet"), 2);
}

TEST_F(SyncGcsClientTest, OtherErrorsAreNotRetried) {
  io_.RunOnLoop([&] { fake_.FailNext("KvGet", absl::PermissionDeniedError("no")); });
  Options patient;
  patient.reconnect = absl::Seconds(20);
  EXPECT_TRUE(absl::IsPermissionDenied(Get("a", patient).status()));
  EXPECT_EQ(Calls("KvGet"), 1);
}

TEST_F(SyncGcsClientTest, AReplyThatNeverComesEndsAtTheWait) {
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_max_wait_ms(20000);  // held by the fake: nothing is published
  Options short_wait;
  short_wait.wait = absl::Milliseconds(200);
  auto reply = sync_.Call<rpc::PollReply>([req](GcsClient& c, auto done) { c.Poll(req, std::move(done)); }, short_wait);
  EXPECT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
}

TEST_F(SyncGcsClientTest, CancelEndsAWaitAtOnce) {
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_max_wait_ms(20000);
  auto pending = sync_.Begin<rpc::PollReply>([req](GcsClient& c, auto done) { c.Poll(req, std::move(done)); });
  std::thread canceller([&] {
    PollUntil([&] { return Calls("Poll") == 1; }, absl::Now() + absl::Seconds(10));
    pending->Cancel();
  });
  auto reply = pending->Wait(absl::Seconds(30));
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(reply.status())) << reply.status();
}

TEST_F(SyncGcsClientTest, KvKeysAndDelete) {
  ASSERT_TRUE(Put("job:1", "a").ok());
  ASSERT_TRUE(Put("job:2", "b").ok());
  ASSERT_TRUE(Put("other", "c").ok());
  rpc::KvKeysRequest keys;
  keys.set_ns("ns");
  keys.set_prefix("job:");
  auto listed = sync_.Call<rpc::KvKeysReply>([keys](GcsClient& c, auto done) { c.KvKeys(keys, std::move(done)); });
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->keys_size(), 2);
  EXPECT_EQ(listed->keys(0), "job:1");
  rpc::KvDelRequest del;
  del.set_ns("ns");
  del.set_key("job:1");
  auto deleted = sync_.Call<rpc::KvDelReply>([del](GcsClient& c, auto done) { c.KvDel(del, std::move(done)); });
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->deleted(), 1);
  EXPECT_FALSE(Get("job:1")->found());
}

TEST_F(SyncGcsClientTest, NamedActorsAndKills) {
  rpc::ActorInfo actor;
  actor.set_actor_id(std::string(16, 'a'));
  actor.set_name("trainer");
  actor.set_ray_namespace("ns");
  actor.set_state(rpc::ActorInfo::ALIVE);
  io_.RunOnLoop([&] { fake_.PutActor(actor); });
  rpc::GetNamedActorRequest named;
  named.set_name("trainer");
  named.set_ray_namespace("ns");
  Start<rpc::GetNamedActorReply> lookup = [named](GcsClient& c, auto done) { c.GetNamedActor(named, std::move(done)); };
  auto found = sync_.Call(lookup);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor().actor_id(), actor.actor_id());

  rpc::KillActorRequest kill;
  kill.set_actor_id(actor.actor_id());
  kill.set_no_restart(true);
  ASSERT_TRUE(
      sync_.Call<rpc::KillActorReply>([kill](GcsClient& c, auto done) { c.KillActor(kill, std::move(done)); }).ok());
  EXPECT_TRUE(absl::IsNotFound(sync_.Call(lookup).status()));
}

TEST_F(SyncGcsClientTest, PlacementGroupsByNameUntilRemoved) {
  rpc::CreatePlacementGroupRequest create;
  create.mutable_spec()->set_placement_group_id(std::string(18, 'g'));
  create.mutable_spec()->set_name("slice");
  create.mutable_spec()->set_ray_namespace("ns");
  Start<rpc::CreatePlacementGroupReply> make = [create](GcsClient& c, auto done) {
    c.CreatePlacementGroup(create, std::move(done));
  };
  ASSERT_TRUE(sync_.Call(make).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(sync_.Call(make).status()));

  rpc::GetPlacementGroupRequest get;
  get.set_name("slice");
  get.set_ray_namespace("ns");
  Start<rpc::GetPlacementGroupReply> by_name = [get](GcsClient& c, auto done) {
    c.GetPlacementGroup(get, std::move(done));
  };
  auto found = sync_.Call(by_name);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->placement_group().state(), rpc::PlacementGroupInfo::CREATED);

  rpc::RemovePlacementGroupRequest remove;
  remove.set_placement_group_id(create.spec().placement_group_id());
  ASSERT_TRUE(sync_
                  .Call<rpc::RemovePlacementGroupReply>([remove](GcsClient& c, auto done) {
                    c.RemovePlacementGroup(remove, absl::Seconds(5), std::move(done));
                  })
                  .ok());
  EXPECT_TRUE(absl::IsNotFound(sync_.Call(by_name).status()));
}

TEST_F(SyncGcsClientTest, TrainRunMetricsAccumulate) {
  for (int step = 1; step <= 2; ++step) {
    rpc::ReportTrainRunRequest report;
    report.mutable_run()->set_run_id("run");
    report.mutable_run()->set_state(step == 1 ? rpc::TrainRunInfo::RUNNING : rpc::TrainRunInfo::FINISHED);
    report.add_new_metrics()->set_step(step);
    ASSERT_TRUE(sync_
                    .Call<rpc::ReportTrainRunReply>(
                        [report](GcsClient& c, auto done) { c.ReportTrainRun(report, std::move(done)); })
                    .ok());
  }
  rpc::ListTrainRunsRequest list;
  list.set_with_metrics(true);
  auto runs =
      sync_.Call<rpc::ListTrainRunsReply>([list](GcsClient& c, auto done) { c.ListTrainRuns(list, std::move(done)); });
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->runs_size(), 1);
  EXPECT_EQ(runs->runs(0).state(), rpc::TrainRunInfo::FINISHED);
  ASSERT_EQ(runs->runs(0).metrics_size(), 2);
  EXPECT_EQ(runs->runs(0).metrics(1).step(), 2);
}

TEST(SyncGcsClientConnectTest, NoGcsListeningIsUnavailable) {
  auto sync = SyncGcsClient::Connect("127.0.0.1:1", "token", absl::Seconds(2));
  auto reply = sync->Call<rpc::GetClusterIdReply>([](GcsClient& c, auto done) { c.GetClusterId(std::move(done)); });
  EXPECT_TRUE(absl::IsUnavailable(reply.status())) << reply.status();
}

}  // namespace
}  // namespace manta::gcs
