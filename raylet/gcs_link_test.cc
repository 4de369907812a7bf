#include "raylet/gcs_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/process.h"
#include "common/id.h"
#include "gcs/client/fake_gcs_client.h"

namespace manta::raylet {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// The raylet as the link sees it: records what it is told.
class FakeRaylet : public GcsLink::Host {
 public:
  explicit FakeRaylet(std::string node_id) : node_id_(std::move(node_id)) {}
  rpc::NodeInfo NodeInfo() const override {
    rpc::NodeInfo info;
    info.set_node_id(node_id_);
    info.set_node_ip("10.0.0.1");
    return info;
  }
  std::optional<rpc::ReportResourcesRequest> Report() override {
    rpc::ReportResourcesRequest req;
    req.mutable_resources()->set_node_id(node_id_);
    req.mutable_resources()->set_version(++version);
    (*req.mutable_resources()->mutable_available())["CPU"] = 4;
    return req;
  }
  void OnRegistered(bool first) override {
    absl::MutexLock lock(&mu);
    ++registrations;
    firsts += first;
  }
  void RequestReport() override {}
  bool OnNodeInfo(const rpc::NodeInfo& info) override {
    absl::MutexLock lock(&mu);
    nodes_seen.push_back(info.node_id());
    return true;
  }
  bool OnNodeResources(const rpc::NodeResources&) override { return false; }
  bool OnWorkerDeath(const rpc::WorkerDeath& death) override {
    absl::MutexLock lock(&mu);
    workers_died.push_back(death.worker_id());
    return true;
  }
  void OnNodesReset() override {
    absl::MutexLock lock(&mu);
    ++resets;
    nodes_seen.push_back(kReset);
  }
  static constexpr char kReset[] = "(reset)";
  void OnClusterChanged() override {
    absl::MutexLock lock(&mu);
    ++cluster_changes;
  }
  void Exit(const std::string& why) override {
    absl::MutexLock lock(&mu);
    exited = why;
  }
  void Rejoin(const std::string& why) override {
    absl::MutexLock lock(&mu);
    rejoined = why;
  }

  int ClusterChanges() {
    absl::MutexLock lock(&mu);
    return cluster_changes;
  }
  bool Await(const std::function<bool()>& pred) {
    absl::MutexLock lock(&mu);
    auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pred(); };
    return mu.AwaitWithTimeout(absl::Condition(&cond), kWait);
  }

  int64_t version = 0;
  absl::Mutex mu;
  int registrations ABSL_GUARDED_BY(mu) = 0;
  int firsts ABSL_GUARDED_BY(mu) = 0;
  int resets ABSL_GUARDED_BY(mu) = 0;
  int cluster_changes ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> nodes_seen ABSL_GUARDED_BY(mu);
  std::vector<std::string> workers_died ABSL_GUARDED_BY(mu);
  std::string exited ABSL_GUARDED_BY(mu);
  std::string rejoined ABSL_GUARDED_BY(mu);

 private:
  const std::string node_id_;
};

class GcsLinkTest : public ::testing::Test {
 protected:
  GcsLinkTest() : thread_([this] { loop_.Run(); }) {
    options_.gcs_address = "10.0.0.9:6379";
    options_.node_id = node_id_;
    options_.connect_timeout = absl::Seconds(5);
    options_.reconnect_timeout = absl::Seconds(60);
    options_.retry_delay = absl::Milliseconds(5);
    options_.liveness_period = absl::Milliseconds(5);
  }
  ~GcsLinkTest() override {
    OnLoop([&] {
      if (link_) link_->Stop();
      link_.reset();
      gcs_.reset();
    });
    loop_.Stop();
    thread_.join();
  }
  void OnLoop(std::function<void()> fn) {
    absl::Notification done;
    loop_.Post([&] {
      fn();
      done.Notify();
    });
    done.WaitForNotification();
  }
  void Start() {
    OnLoop([&] {
      gcs_ = std::make_unique<gcs::FakeGcsClient>(&loop_);
      link_ = std::make_unique<GcsLink>(options_, &loop_, gcs_.get(), &raylet_, clock_.AsClock());
      link_->Start();
    });
  }
  void StartRegistered() {
    Start();
    ASSERT_TRUE(raylet_.Await([&] { return raylet_.registrations == 1; }));
  }
  // A gap makes the link read the node table again; the read's second half
  // is answered only on gcs_->ReleaseDelayed(), and a new poll is held.
  void StartHeldReread() {
    OnLoop([&] {
      gcs_->DelayNext("GetClusterResources");
      gcs_->ForgetUpTo(gcs_->last_sequence() + 1);  // the next message: a gap
      rpc::PubMessage m;
      m.set_channel(rpc::PubMessage::NODE_INFO);
      m.mutable_node_info()->set_node_id(NodeId::FromRandom().Binary());
      gcs_->Publish(m);
    });
    ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->delayed() == 1 && gcs_->held_polls() == 1; }));
  }
  void Advance(absl::Duration d) { clock_.Advance(d); }
  // Reads the fake GCS on the loop.
  template <typename T>
  T Read(std::function<T()> fn) {
    T out;
    OnLoop([&] { out = fn(); });
    return out;
  }
  // Waits (with a deadline) until `pred` holds, checking it on the loop.
  bool AwaitOnLoop(const std::function<bool()>& pred) {
    return PollUntil([&] { return Read<bool>(pred); }, absl::Now() + kWait);
  }
  void Report() {
    OnLoop([&] { link_->SendReport([] {}); });
  }

  const std::string node_id_ = NodeId::FromRandom().Binary();
  ManualClock clock_;
  GcsLinkOptions options_;
  FakeRaylet raylet_{node_id_};
  EventLoop loop_;
  std::thread thread_;
  std::unique_ptr<gcs::FakeGcsClient> gcs_;
  std::unique_ptr<GcsLink> link_;
};

TEST_F(GcsLinkTest, RegistersReportsAndFollowsOtherNodes) {
  StartRegistered();
  EXPECT_TRUE(Read<bool>([&] { return link_->registered(); }));
  EXPECT_EQ(Read<std::string>([&] { return link_->cluster_id(); }),
            Read<std::string>([&] { return gcs_->cluster_id(); }));
  {
    absl::MutexLock lock(&raylet_.mu);
    EXPECT_EQ(raylet_.firsts, 1);
  }
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  Report();
  EXPECT_EQ(Read<int>([&] { return gcs_->calls("ReportResources"); }), 1);

  // Another node joins: the held poll brings it.
  const std::string other = NodeId::FromRandom().Binary();
  OnLoop([&] {
    rpc::RegisterNodeRequest req;
    req.mutable_node_info()->set_node_id(other);
    gcs_->RegisterNode(req, [](const absl::Status&, rpc::RegisterNodeReply&&) {});
  });
  ASSERT_TRUE(raylet_.Await([&] {
    return std::find(raylet_.nodes_seen.begin(), raylet_.nodes_seen.end(), other) != raylet_.nodes_seen.end();
  }));
}

TEST_F(GcsLinkTest, APublishedWorkerDeathReachesTheRaylet) {
  StartRegistered();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  const std::string worker = WorkerId::FromRandom().Binary();
  const int changes = raylet_.ClusterChanges();
  OnLoop([&] {
    rpc::PubMessage m;
    m.set_channel(rpc::PubMessage::WORKER);
    m.set_key(worker);
    m.mutable_worker_death()->set_worker_id(worker);
    gcs_->Publish(m);
  });
  ASSERT_TRUE(raylet_.Await([&] { return raylet_.workers_died == std::vector<std::string>{worker}; }));
  EXPECT_TRUE(raylet_.Await([&] { return raylet_.cluster_changes >= changes + 1; })) << "what it freed is scheduled";
}

// A worker's death is in no table the re-read brings back: applied as it
// arrives, it is not lost with the replies a re-read replaces.
TEST_F(GcsLinkTest, AWorkerDeathArrivingDuringARereadIsAppliedAtOnce) {
  StartRegistered();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  const std::string worker = WorkerId::FromRandom().Binary();
  ASSERT_NO_FATAL_FAILURE(StartHeldReread());
  const int changes = raylet_.ClusterChanges();
  OnLoop([&] {
    rpc::PubMessage m;
    m.set_channel(rpc::PubMessage::WORKER);
    m.mutable_worker_death()->set_worker_id(worker);
    gcs_->Publish(m);
  });
  EXPECT_TRUE(raylet_.Await([&] { return raylet_.workers_died.size() == 1 && raylet_.cluster_changes >= changes + 1; }))
      << "applied and scheduled before the re-read ends";
  OnLoop([&] { gcs_->ReleaseDelayed(); });
  EXPECT_TRUE(raylet_.Await([&] { return raylet_.cluster_changes >= changes + 2; })) << "the re-read's end";
}

TEST_F(GcsLinkTest, AGcsThatNeverAnswersEndsTheFirstRegistrationAfterTheConnectTimeout) {
  OnLoop([&] {
    gcs_ = std::make_unique<gcs::FakeGcsClient>(&loop_);
    gcs_->SetReachable(false);
    link_ = std::make_unique<GcsLink>(options_, &loop_, gcs_.get(), &raylet_, clock_.AsClock());
    link_->Start();
  });
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->calls("RegisterNode") >= 3; }));  // retried meanwhile
  {
    absl::MutexLock lock(&raylet_.mu);
    EXPECT_TRUE(raylet_.exited.empty());
  }
  Advance(options_.connect_timeout + absl::Seconds(1));
  ASSERT_TRUE(raylet_.Await([&] { return !raylet_.exited.empty(); }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_NE(raylet_.exited.find("cannot reach the GCS at 10.0.0.9:6379"), std::string::npos) << raylet_.exited;
}

TEST_F(GcsLinkTest, ARestartedGcsIsRegisteredWithAgainWhenItsHealthCheckSaysSo) {
  StartRegistered();
  OnLoop([&] { gcs_->Restart(); });
  OnLoop([&] { link_->OnHealthCheck(gcs_->incarnation()); });
  ASSERT_TRUE(raylet_.Await([&] { return raylet_.registrations == 2; }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_EQ(raylet_.firsts, 1);  // not a first registration
}

TEST_F(GcsLinkTest, ANodeDeclaredDeadWhileAliveRejoins) {
  StartRegistered();
  OnLoop([&] { gcs_->DeclareDead(node_id_, "health check failed"); });
  Report();  // the GCS no longer knows it: register again, which is refused
  ASSERT_TRUE(raylet_.Await([&] { return !raylet_.rejoined.empty(); }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_NE(raylet_.rejoined.find("marked dead"), std::string::npos) << raylet_.rejoined;
  EXPECT_TRUE(raylet_.exited.empty());
}

TEST_F(GcsLinkTest, AGcsServingAnotherClusterEndsTheRaylet) {
  StartRegistered();
  OnLoop([&] { gcs_->ServeAnotherCluster(); });
  Report();
  ASSERT_TRUE(raylet_.Await([&] { return !raylet_.exited.empty(); }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_NE(raylet_.exited.find("now serves cluster"), std::string::npos) << raylet_.exited;
  EXPECT_TRUE(raylet_.rejoined.empty());
}

TEST_F(GcsLinkTest, AGcsGoneLongerThanTheReconnectTimeoutEndsTheRaylet) {
  StartRegistered();
  // Every reply so far is in: the last contact is before the clock moves.
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  OnLoop([&] { gcs_->SetReachable(false); });
  Advance(options_.reconnect_timeout - absl::Seconds(1));
  // Quiet, not yet too long: the GCS is pinged, nothing ends.
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->calls("GetClusterId") >= 1; }));
  {
    absl::MutexLock lock(&raylet_.mu);
    EXPECT_TRUE(raylet_.exited.empty());
  }
  Advance(absl::Seconds(2));
  ASSERT_TRUE(raylet_.Await([&] { return !raylet_.exited.empty(); }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_NE(raylet_.exited.find("has been unreachable for 1m"), std::string::npos) << raylet_.exited;
}

TEST_F(GcsLinkTest, AGapInTheNodeEventsReReadsTheNodeTable) {
  StartRegistered();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  OnLoop([&] {
    gcs_->ForgetUpTo(1000);
    rpc::PubMessage m;
    m.set_channel(rpc::PubMessage::NODE_INFO);
    m.mutable_node_info()->set_node_id(NodeId::FromRandom().Binary());
    gcs_->Publish(m);  // answers the held poll, which missed what was forgotten
  });
  ASSERT_TRUE(raylet_.Await([&] { return raylet_.resets == 1; }));
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->calls("GetClusterResources") == 1; }));
  absl::MutexLock lock(&raylet_.mu);
  // The table re-read holds this node.
  EXPECT_NE(std::find(raylet_.nodes_seen.begin(), raylet_.nodes_seen.end(), node_id_), raylet_.nodes_seen.end());
}

// Node events that arrive while the table is re-read are applied after it:
// applied before, the re-read's reset would wipe a node it never saw.
TEST_F(GcsLinkTest, NodeEventsArrivingDuringARereadAreAppliedAfterIt) {
  StartRegistered();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  const std::string late = NodeId::FromRandom().Binary();
  ASSERT_NO_FATAL_FAILURE(StartHeldReread());
  OnLoop([&] {
    rpc::PubMessage m;  // joined after the node table was read
    m.set_channel(rpc::PubMessage::NODE_INFO);
    m.mutable_node_info()->set_node_id(late);
    gcs_->Publish(m);
  });
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));  // the event was taken
  OnLoop([&] { gcs_->ReleaseDelayed(); });
  ASSERT_TRUE(raylet_.Await([&] {
    return std::find(raylet_.nodes_seen.begin(), raylet_.nodes_seen.end(), late) != raylet_.nodes_seen.end();
  }));
  absl::MutexLock lock(&raylet_.mu);
  EXPECT_EQ(raylet_.resets, 1);
  auto reset = std::find(raylet_.nodes_seen.begin(), raylet_.nodes_seen.end(), FakeRaylet::kReset);
  ASSERT_NE(std::find(reset, raylet_.nodes_seen.end(), late), raylet_.nodes_seen.end());
  EXPECT_EQ(std::find(raylet_.nodes_seen.begin(), reset, late), reset);
}

// A raylet holding its stream starts no polls, so while node events arrive
// it sends a keepalive report at least every `keepalive`: the GCS counts what
// its loop sends as life. Not more often, and not while reports go anyway.
TEST_F(GcsLinkTest, NodeEventsBringAKeepaliveReportWhenNoneWentForAWhile) {
  StartRegistered();
  Report();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1 && gcs_->calls("ReportResources") == 1; }));
  auto publish = [&] {
    OnLoop([&] {
      rpc::PubMessage m;
      m.set_channel(rpc::PubMessage::NODE_INFO);
      m.mutable_node_info()->set_node_id(NodeId::FromRandom().Binary());
      gcs_->Publish(m);
    });
    // Taken once the subscription polls again.
    ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->held_polls() == 1; }));
  };
  publish();
  EXPECT_EQ(Read<int>([&] { return gcs_->calls("ReportResources"); }), 1) << "a report went just now";
  Advance(options_.keepalive + absl::Seconds(1));
  publish();
  ASSERT_TRUE(AwaitOnLoop([&] { return gcs_->calls("ReportResources") == 2; }));
  publish();
  publish();
  EXPECT_EQ(Read<int>([&] { return gcs_->calls("ReportResources"); }), 2);
  EXPECT_EQ(Read<int>([&] { return gcs_->keepalives(); }), 1);
}

}  // namespace
}  // namespace manta::raylet
