#include "common/rpc/client_call.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/rpc/rpc_chaos_interceptor.h"
#include "common/rpc/test_kv_server.h"
#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

// An EventLoop on a thread of its own, and a stub whose channel injects the
// faults of `spec`.
class RetryingCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    loop_.Stop();
    thread_.join();
  }

  void UseSpec(const std::string& spec) {
    std::vector<std::string> errors;
    chaos_ = std::make_unique<RpcChaos>(ParseRpcFaultSpec(spec, &errors), 11);
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(MakeRpcChaosInterceptorFactory(chaos_.get()));
    stub_ = InternalKvGcsService::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
        server_.address(), grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(interceptors)));
  }

  // A retrying Put; returns its outcome and counts attempts in `attempts_`.
  absl::Status Put(RetryPolicy policy) {
    absl::Status out;
    absl::Notification done;
    KvPutRequest req;
    req.set_key("k");
    RetryingUnaryCall<KvPutReply>(
        &loop_, "", absl::Seconds(5), policy, req,
        [this](auto* ctx, auto* r, auto* reply, auto cb) {
          ++attempts_;
          stub_->async()->Put(ctx, r, reply, std::move(cb));
        },
        [&](const absl::Status& s, KvPutReply&&) {
          EXPECT_TRUE(loop_.IsInLoopThread());
          out = s;
          done.Notify();
        });
    done.WaitForNotification();
    return out;
  }

  static RetryPolicy Fast(int attempts) {
    RetryPolicy p;
    p.max_attempts = attempts;
    p.initial_backoff = absl::Milliseconds(1);
    p.max_backoff = absl::Milliseconds(5);
    return p;
  }

  testing::CountingKvServer server_;
  EventLoop loop_;
  std::thread thread_;
  std::unique_ptr<RpcChaos> chaos_;
  std::unique_ptr<InternalKvGcsService::Stub> stub_;
  std::atomic<int> attempts_{0};
};

// A call still in flight when its loop is destroyed (a daemon exiting) may
// complete afterwards on a gRPC thread: that completion is dropped, and frees
// the call's state and callback, instead of touching the freed loop.
TEST(UnaryCallTest, ACompletionAfterItsLoopIsGoneIsDroppedAndFreesTheCall) {
  std::function<void(grpc::Status)> complete;
  bool delivered = false;
  auto owned = std::make_shared<int>(0);
  std::weak_ptr<int> watch = owned;
  {
    EventLoop loop;
    UnaryCall<KvPutReply>(
        &loop, "", absl::Seconds(5), KvPutRequest(), [&](auto*, auto*, auto*, auto cb) { complete = std::move(cb); },
        [&delivered, owned = std::move(owned)](const absl::Status&, KvPutReply&&) { delivered = true; });
  }
  ASSERT_TRUE(complete != nullptr);
  std::thread grpc_thread([&] { complete(grpc::Status::OK); });
  grpc_thread.join();
  EXPECT_FALSE(delivered);
  EXPECT_TRUE(watch.expired());
}

// A process that exits while a call waits to retry: destroying the loop
// frees the call's state and callback, unrun (the backoff's timer must not
// hold them in a cycle with the state that holds the timer).
TEST(RetryingUnaryCallTest, ALoopDestroyedDuringTheBackoffFreesTheCall) {
  int attempts = 0;
  bool delivered = false;
  auto owned = std::make_shared<int>(0);
  std::weak_ptr<int> watch = owned;
  {
    EventLoop loop;
    RetryPolicy policy;
    policy.initial_backoff = absl::Hours(1);
    RetryingUnaryCall<KvPutReply>(
        &loop, "", absl::Seconds(5), policy, KvPutRequest(),
        [&](auto*, auto*, auto*, auto cb) {
          ++attempts;
          cb(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is away"));
        },
        [&delivered, owned = std::move(owned)](const absl::Status&, KvPutReply&&) { delivered = true; });
    // The failed attempt's completion was posted first: it arms the backoff,
    // then the loop stops.
    loop.Post([&] { loop.Stop(); });
    loop.Run();
  }
  EXPECT_EQ(attempts, 1);
  EXPECT_FALSE(delivered);
  EXPECT_TRUE(watch.expired());
}

TEST_F(RetryingCallTest, DroppedRepliesAreRetriedUntilOneArrives) {
  UseSpec("Put=2:0:100");
  absl::Status s = Put(Fast(5));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts_, 3);
  EXPECT_EQ(server_.puts(), 3);  // the server saw the request every time
}

TEST_F(RetryingCallTest, DroppedRequestsAreRetriedUntilOneArrives) {
  UseSpec("Put=3:100:0");
  absl::Status s = Put(Fast(5));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts_, 4);
  EXPECT_EQ(server_.puts(), 1);
}

TEST_F(RetryingCallTest, GivesUpAfterMaxAttempts) {
  UseSpec("Put=-1:100:0");
  // The caller hears of each failure that is retried, on the loop, while
  // the retries go on (a GCS suspects the raylet it cannot reach).
  RetryPolicy policy = Fast(4);
  std::atomic<int> retried{0};
  policy.on_retry = [&](const absl::Status& s) {
    EXPECT_TRUE(loop_.IsInLoopThread());
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    ++retried;
  };
  absl::Status s = Put(policy);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(attempts_, 4);
  EXPECT_EQ(retried, 3);  // the last failure goes to the callback alone
  EXPECT_EQ(server_.puts(), 0);
}

TEST_F(RetryingCallTest, OtherErrorsAreNotRetried) {
  UseSpec("Get=1:0:0");
  absl::Status out;
  absl::Notification done;
  RetryingUnaryCall<KvGetReply>(
      &loop_, "", absl::Seconds(5), Fast(5), KvGetRequest(),
      [this](auto* ctx, auto* r, auto* reply, auto cb) {
        ++attempts_;
        stub_->async()->Get(ctx, r, reply, std::move(cb));
      },
      [&](const absl::Status& s, KvGetReply&&) {
        out = s;
        done.Notify();
      });
  done.WaitForNotification();
  EXPECT_EQ(out.code(), absl::StatusCode::kUnimplemented) << out;
  EXPECT_EQ(attempts_, 1);
}

}  // namespace
}  // namespace manta::rpc
