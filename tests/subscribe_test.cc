// The GCS's Subscribe stream against a real gcs_server and raylets: read by
// a typed client (the replies are written as serialized once, raw), it
// follows nodes joining and dying in sequence order without a call per
// reply, refuses what a poll refuses, and ends when the GCS stops. And the
// lease replies that carry a raylet's view in place of a report.
#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/id.h"
#include "common/event_loop.h"
#include "common/rpc/grpc_util.h"
#include "gcs/client/gcs_client.h"
#include "gtest/gtest.h"
#include "proto/gcs_service.grpc.pb.h"
#include "proto/node_manager.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace manta::testing {
namespace {

// A stream's reader, on a thread of its own, collecting every reply.
class Reader {
 public:
  Reader(const std::string& address, const std::string& token, const rpc::PollRequest& request)
      : stub_(rpc::PubSubGcsService::NewStub(UnlimitedChannel(address))) {
    rpc::PrepareContext(&ctx_, token, absl::InfiniteDuration());
    reader_ = stub_->Subscribe(&ctx_, request);
    thread_ = std::thread([this] {
      rpc::PollReply reply;
      while (reader_->Read(&reply)) {
        std::lock_guard<std::mutex> lock(mu_);
        replies_.push_back(reply);
      }
      grpc::Status s = reader_->Finish();
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      ended_ = true;
    });
  }
  ~Reader() {
    ctx_.TryCancel();
    thread_.join();
  }
  std::vector<rpc::PollReply> replies() {
    std::lock_guard<std::mutex> lock(mu_);
    return replies_;
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  grpc::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  // Whether a reply carried `node` (hex) in `state`.
  bool Saw(const std::string& node, rpc::NodeInfo::State state) {
    for (const rpc::PollReply& r : replies()) {
      for (const rpc::PubMessage& m : r.messages()) {
        auto id = NodeId::FromBinary(m.node_info().node_id());
        if (m.has_node_info() && id.ok() && id->Hex() == node && m.node_info().state() == state) return true;
      }
    }
    return false;
  }

 private:
  std::unique_ptr<rpc::PubSubGcsService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<rpc::PollReply>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<rpc::PollReply> replies_;
  grpc::Status status_;
  bool ended_ = false;
};

rpc::PollRequest NodeEvents() {
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.add_channels(rpc::PubMessage::NODE_RESOURCES);
  req.set_max_wait_ms(30000);
  return req;
}

TEST(SubscribeTest, AStreamFollowsNodesInOrderAndEndsWithTheGcs) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  const std::string head = cluster.raylet(0).node_id;
  Reader reader(cluster.gcs_address(), cluster.token(), NodeEvents());
  ASSERT_TRUE(Cluster::WaitFor([&] { return reader.Saw(head, rpc::NodeInfo::ALIVE); }, absl::Seconds(10)));

  auto added = cluster.AddRaylet();
  ASSERT_TRUE(added.ok()) << added.status();
  const std::string joined = cluster.raylet(*added).node_id;
  ASSERT_TRUE(Cluster::WaitFor([&] { return reader.Saw(joined, rpc::NodeInfo::ALIVE); }, absl::Seconds(10)));
  MANTA_ASSERT_OK(cluster.KillRaylet(*added, SIGKILL));
  ASSERT_TRUE(Cluster::WaitFor([&] { return reader.Saw(joined, rpc::NodeInfo::DEAD); }, absl::Seconds(20)));

  // One stream, several replies, each after the one before and none a gap;
  // the joined node's resources came too.
  std::vector<rpc::PollReply> replies = reader.replies();
  ASSERT_GE(replies.size(), 3u);
  int64_t last = 0;
  bool saw_resources = false;
  for (const rpc::PollReply& r : replies) {
    EXPECT_FALSE(r.gap());
    EXPECT_EQ(r.gcs_incarnation(), replies[0].gcs_incarnation());
    for (const rpc::PubMessage& m : r.messages()) {
      EXPECT_GT(m.sequence(), last);
      last = m.sequence();
      auto id = NodeId::FromBinary(m.node_resources().node_id());
      saw_resources |= m.has_node_resources() && id.ok() && id->Hex() == joined;
    }
    EXPECT_GE(r.last_sequence(), last);
  }
  EXPECT_TRUE(saw_resources);

  MANTA_ASSERT_OK(cluster.StopGcs());
  ASSERT_TRUE(Cluster::WaitFor([&] { return reader.ended(); }, absl::Seconds(10)));
}

// Refused as a poll is, before any reply: no token, a malformed body, an
// unknown channel. The GCS serves on.
TEST(SubscribeTest, ABadSubscriptionIsRefusedAtOnce) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  {
    rpc::PollRequest bad = NodeEvents();
    bad.add_channels(static_cast<rpc::PubMessage::Channel>(99));
    Reader reader(cluster.gcs_address(), cluster.token(), bad);
    ASSERT_TRUE(Cluster::WaitFor([&] { return reader.ended(); }, absl::Seconds(10)));
    EXPECT_EQ(reader.status().error_code(), grpc::StatusCode::INVALID_ARGUMENT) << reader.status().error_message();
    EXPECT_TRUE(reader.replies().empty());
  }
  {
    Reader reader(cluster.gcs_address(), "", NodeEvents());
    ASSERT_TRUE(Cluster::WaitFor([&] { return reader.ended(); }, absl::Seconds(10)));
    EXPECT_EQ(reader.status().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(reader.replies().empty());
  }
  {
    // Not a PollRequest at all: field 1 as a 64-bit value, then a length
    // running past the end.
    grpc::GenericStub stub(UnlimitedChannel(cluster.gcs_address()));
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(10));
    const std::string garbage("\x09\x01\x02\x12\x7f", 5);
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1), reply;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<grpc::Status> status;
    stub.UnaryCall(&ctx, "/manta.rpc.PubSubGcsService/Subscribe", grpc::StubOptions(), &request, &reply,
                   [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = s;
                     cv.notify_all();
                   });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return status.has_value(); });
    EXPECT_EQ(status->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status->error_message();
  }
  auto id = cluster.GetClusterId();
  EXPECT_TRUE(id.ok()) << id.status();
}

// An EventLoop on a thread of its own, stopped and joined when it goes.
class LoopThread {
 public:
  LoopThread() : thread_([this] { loop_.Run(); }) {}
  ~LoopThread() {
    loop_.Stop();
    thread_.join();
  }
  EventLoop& loop() { return loop_; }
  // Runs `fn` on the loop and waits for it.
  void Run(const std::function<void()>& fn) {
    std::promise<void> done;
    loop_.Post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

 private:
  EventLoop loop_;
  std::thread thread_;
};

// The raylets' client end: GcsClient::Subscribe delivers replies on the
// loop with the cursor moving on, ends (once) when the GCS stops, and runs
// nothing after its handle is gone.
TEST(SubscribeTest, TheClientStreamDeliversOnTheLoopAndEndsOnce) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  std::mutex mu;
  std::vector<int64_t> sequences;
  std::vector<std::string> nodes;  // hex, of the NODE_INFO messages
  std::vector<absl::Status> ends;
  LoopThread loop;  // declared after what its callbacks touch, so it stops first
  std::unique_ptr<gcs::GcsClient> client;
  std::unique_ptr<gcs::GcsClient::Subscription> stream;
  absl::Cleanup release = [&] {  // on the loop, however the test ends
    loop.Run([&] {
      stream.reset();
      client.reset();
    });
  };
  loop.Run([&] {
    client = gcs::MakeGrpcGcsClient(&loop.loop(), cluster.gcs_address(), cluster.token());
    stream = client->Subscribe(
        NodeEvents(),
        [&](rpc::PollReply&& reply) {
          EXPECT_TRUE(loop.loop().IsInLoopThread());
          std::lock_guard<std::mutex> lock(mu);
          sequences.push_back(reply.last_sequence());
          for (const rpc::PubMessage& m : reply.messages()) {
            auto id = NodeId::FromBinary(m.node_info().node_id());
            if (m.has_node_info() && id.ok()) nodes.push_back(id->Hex());
          }
        },
        [&](const absl::Status& s) {
          std::lock_guard<std::mutex> lock(mu);
          ends.push_back(s);
        });
  });
  auto saw = [&](const std::string& node) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
  };
  ASSERT_TRUE(Cluster::WaitFor([&] { return saw(cluster.raylet(0).node_id); }, absl::Seconds(20)));
  auto added = cluster.AddRaylet();
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return saw(cluster.raylet(*added).node_id); }, absl::Seconds(20)));
  MANTA_ASSERT_OK(cluster.StopGcs());
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !ends.empty();
      },
      absl::Seconds(20)));
  loop.Run([&] {
    stream.reset();
    client.reset();
  });
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ends.size(), 1u);
  // A quiet stream's empty reply repeats the sequence.
  for (size_t i = 1; i < sequences.size(); ++i) EXPECT_GE(sequences[i], sequences[i - 1]);
}

// The GCS's actor leases ask a raylet for its view in the reply, in place
// of a report: every outcome carries it, including one the lease manager
// answers by replacing the whole reply (a rejection, a repeated lease).
TEST(SubscribeTest, AnActorLeaseReplyCarriesTheNodesViewWhateverItsOutcome) {
  Cluster cluster;
  MANTA_ASSERT_OK(cluster.StartHead());
  auto raylet =
      rpc::NodeManagerService::NewStub(UnlimitedChannel("127.0.0.1:" + std::to_string(cluster.raylet(0).port)));
  rpc::RequestWorkerLeaseRequest req;
  req.set_lease_id(LeaseId::FromRandom().Binary());
  req.set_grant_or_reject(true);
  req.set_reply_with_resources(true);
  rpc::TaskSpec* spec = req.mutable_spec();
  spec->set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
  spec->set_job_id(std::string(JobId::kSize, '\x01'));
  spec->set_actor_id(ActorId::FromRandom().Binary());
  spec->set_worker_executable("/bin/true");
  (*spec->mutable_resources())["CPU"] = 1000;  // more than the node has: rejected
  int64_t version = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second is answered from the ended lease
    SCOPED_TRACE(attempt);
    grpc::ClientContext ctx;
    rpc::PrepareContext(&ctx, cluster.token(), absl::Seconds(10));
    rpc::RequestWorkerLeaseReply reply;
    grpc::Status s = raylet->RequestWorkerLease(&ctx, req, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(reply.outcome(), rpc::RequestWorkerLeaseReply::REJECTED) << reply.message();
    ASSERT_TRUE(reply.has_resources());
    auto node = NodeId::FromBinary(reply.resources().node_id());
    ASSERT_TRUE(node.ok());
    EXPECT_EQ(node->Hex(), cluster.raylet(0).node_id);
    EXPECT_GT(reply.resources().total().at("CPU"), 0);
    // Nothing changed: the view keeps the version the GCS already holds.
    EXPECT_GE(reply.resources().version(), version);
    if (attempt == 1) EXPECT_EQ(reply.resources().version(), version);
    version = reply.resources().version();
  }
}

}  // namespace
}  // namespace manta::testing
