// A worker's PushTasks stream (tasks and actor calls) facing bad input from outside: no
// token, pushes without tags, undecodable pushes, pushes meant for another
// worker or of the wrong kind. Each gets a clear refusal, the worker stays
// up, and its actor still answers its real callers.
#include <grpcpp/grpcpp.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "core_worker.grpc.pb.h"
#include "gcs_service.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

constexpr auto kWait = std::chrono::seconds(10);

class PushStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.head.num_cpus = 2;
    cluster_ = std::make_unique<Cluster>(options);
    MANTA_ASSERT_OK(cluster_->StartHead());
    // A detached actor ("keeper" in "tests"), alive after its driver exits.
    CommandResult created = cluster_->RunProgram("runtime_driver", {"detached_create"});
    ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
    auto gcs = rpc::ActorGcsService::NewStub(rpc::MakeChannel(cluster_->gcs_address()));
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster_->token(), absl::Seconds(10));
    rpc::GetNamedActorRequest req;
    req.set_name("keeper");
    req.set_ray_namespace("tests");
    rpc::GetNamedActorReply reply;
    ASSERT_TRUE(gcs->GetNamedActor(&ctx, req, &reply).ok());
    actor_ = reply.actor();
    ASSERT_EQ(actor_.state(), rpc::ActorInfo::ALIVE);
    worker_ = rpc::CoreWorkerService::NewStub(
        rpc::MakeChannel(absl::StrCat(actor_.address().ip(), ":", actor_.address().port())));
  }

  // A well-formed actor call to the keeper, as its callers send them.
  rpc::PushTaskRequest Call() const {
    rpc::PushTaskRequest push;
    push.set_intended_worker_id(actor_.address().worker_id());
    rpc::TaskSpec* spec = push.mutable_spec();
    spec->set_type(rpc::TaskSpec::ACTOR_TASK);
    spec->set_task_id(TaskId::FromRandom().Binary());
    spec->set_actor_id(actor_.actor_id());
    spec->set_caller_worker_id(WorkerId::FromRandom().Binary());
    spec->set_function_name("Recorder::Tag");
    return push;
  }

  // Opens a stream with `token`, writes `request`, reads results (by tag)
  // until `want` came or the stream ended, then closes its side. Returns
  // how the stream ended.
  grpc::Status Exchange(const std::string& token, const rpc::PushTasksRequest& request, size_t want,
                        std::map<int64_t, rpc::PushResult>* results) {
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, token, absl::InfiniteDuration());
    ctx.set_deadline(std::chrono::system_clock::now() + kWait);
    auto stream = worker_->PushTasks(&ctx);
    stream->Write(request);  // may fail: the stream's end says why
    rpc::PushTasksReply reply;
    while (results->size() < want && stream->Read(&reply)) {
      for (const auto& r : reply.results()) (*results)[r.tag()] = r;
    }
    stream->WritesDone();
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  }

  void ExpectActorStillAnswers() {
    CommandResult used = cluster_->RunProgram("runtime_driver", {"detached_use"});
    EXPECT_EQ(used.exit_code, 0) << used.out << used.err;
    EXPECT_NE(used.out.find("OK detached actor outlived its job"), std::string::npos) << used.out;
  }

  std::unique_ptr<Cluster> cluster_;
  rpc::ActorInfo actor_;
  std::unique_ptr<rpc::CoreWorkerService::Stub> worker_;
};

TEST_F(PushStreamTest, StreamWithoutTheTokenIsRefused) {
  rpc::PushTasksRequest request;
  request.add_tags(1);
  request.add_pushes(Call().SerializeAsString());
  for (const std::string token : {"", "wrong-token"}) {
    std::map<int64_t, rpc::PushResult> results;
    EXPECT_EQ(Exchange(token, request, 1, &results).error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_TRUE(results.empty()) << token;
  }
  ExpectActorStillAnswers();
}

TEST_F(PushStreamTest, PushesWithoutTagsEndTheStream) {
  rpc::PushTasksRequest request;
  request.add_pushes(Call().SerializeAsString());
  std::map<int64_t, rpc::PushResult> results;
  grpc::Status s = Exchange(cluster_->token(), request, 1, &results);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(results.empty());
  ExpectActorStillAnswers();
}

TEST_F(PushStreamTest, EachBadPushIsRefusedAloneAndAGoodOneRuns) {
  rpc::PushTasksRequest request;
  request.add_tags(10);
  request.add_pushes("\xff\xff\xff not a push");
  rpc::PushTaskRequest elsewhere = Call();
  elsewhere.set_intended_worker_id(WorkerId::FromRandom().Binary());
  request.add_tags(11);
  request.add_pushes(elsewhere.SerializeAsString());
  rpc::PushTaskRequest normal = Call();
  normal.mutable_spec()->set_type(rpc::TaskSpec::NORMAL_TASK);
  request.add_tags(12);
  request.add_pushes(normal.SerializeAsString());
  rpc::PushTaskRequest bad_id = Call();
  bad_id.mutable_spec()->set_task_id("short");
  request.add_tags(13);
  request.add_pushes(bad_id.SerializeAsString());
  request.add_tags(14);
  request.add_pushes(Call().SerializeAsString());
  rpc::PushTaskRequest creation = Call();
  creation.mutable_spec()->set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  request.add_tags(15);
  request.add_pushes(creation.SerializeAsString());

  std::map<int64_t, rpc::PushResult> results;
  EXPECT_TRUE(Exchange(cluster_->token(), request, 6, &results).ok());
  ASSERT_EQ(results.size(), 6u);
  EXPECT_EQ(results[10].code(), grpc::StatusCode::INVALID_ARGUMENT) << results[10].message();
  EXPECT_EQ(results[11].code(), grpc::StatusCode::FAILED_PRECONDITION) << results[11].message();
  EXPECT_EQ(results[12].code(), grpc::StatusCode::INVALID_ARGUMENT) << results[12].message();
  EXPECT_EQ(results[13].code(), grpc::StatusCode::INVALID_ARGUMENT) << results[13].message();
  EXPECT_EQ(results[15].code(), grpc::StatusCode::INVALID_ARGUMENT) << results[15].message();
  // The good call ran on the actor: Recorder::Tag of the keeper is 7.
  ASSERT_EQ(results[14].code(), 0) << results[14].message();
  rpc::PushTaskReply ran;
  ASSERT_TRUE(ran.ParseFromString(results[14].reply()));
  ASSERT_EQ(ran.returns_size(), 1);
  EXPECT_EQ(ran.returns(0).data(), std::string("\x07"));  // 7, encoded
  EXPECT_EQ(ran.error().type(), rpc::ErrorInfo::NONE) << ran.error().message();
  ExpectActorStillAnswers();
}

}  // namespace
}  // namespace manta::testing
