#include "gcs/resource_manager.h"

#include <limits>

#include "common/placement_group_resources.h"
#include "gcs/fake_timers.h"
#include "gcs/in_memory_store.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

class ResourceManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.AddNodeAddedListener([this](const rpc::NodeInfo& n) { resources_.OnNodeAdded(n); });
    rpc::RegisterNodeRequest req;
    rpc::NodeInfo& n = *req.mutable_node_info();
    n.set_node_id(node_.Binary());
    n.set_node_ip("127.0.0.1");
    n.set_node_manager_port(7000);
    (*n.mutable_resources_total())["TPU"] = 4;
    rpc::RegisterNodeReply reply;
    absl::Status registered = absl::UnknownError("no reply");
    nodes_.HandleRegisterNode(req, &reply, [&](const absl::Status& s) { registered = s; });
    Pump(loop_);
    ASSERT_TRUE(registered.ok()) << registered;
  }

  // The node's view with `tpu` chips free, at `version`.
  rpc::NodeResources View(int64_t version, double tpu) const {
    rpc::NodeResources r;
    r.set_node_id(node_.Binary());
    r.set_version(version);
    (*r.mutable_total())["TPU"] = 4;
    (*r.mutable_available())["TPU"] = tpu;
    return r;
  }

  absl::Status Report(const rpc::NodeResources& view) {
    rpc::ReportResourcesRequest req;
    *req.mutable_resources() = view;
    rpc::ReportResourcesReply reply;
    absl::Status result = absl::UnknownError("no reply");
    resources_.HandleReportResources(req, &reply, [&](const absl::Status& s) { result = s; });
    return result;
  }

  int64_t PublishCount() const { return pub_.num_published(rpc::PubMessage::NODE_RESOURCES); }

  // What a raylet polling NODE_RESOURCES from the start has received: each
  // node's newest view.
  std::vector<rpc::NodeResources> Published() {
    rpc::PollRequest req;
    req.add_channels(rpc::PubMessage::NODE_RESOURCES);
    req.set_gcs_incarnation("inc");
    rpc::PollReply reply;
    pub_.HandlePoll(req, &reply, [](const absl::Status&) {});
    std::vector<rpc::NodeResources> out;
    reply = AsReceived(reply);
    for (const auto& m : reply.messages()) out.push_back(m.node_resources());
    return out;
  }

  EventLoop loop_;
  InMemoryStore store_{&loop_};
  Publisher pub_{&loop_, "inc"};
  NodeManager nodes_{&store_, &pub_, ClusterId::FromRandom(), "inc"};
  FakeTimers timers_;
  ResourceManager resources_{&nodes_, &pub_, timers_.RunAfter()};
  NodeId node_ = NodeId::FromRandom();
};

TEST_F(ResourceManagerTest, ReportsArePublishedAndOlderOnesIgnored) {
  ASSERT_TRUE(Report(View(2, 1)).ok());
  ASSERT_TRUE(Report(View(1, 3)).ok());
  std::vector<rpc::NodeResources> seen = Published();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].version(), 2);
  EXPECT_EQ(seen[0].available().at("TPU"), 1);
  EXPECT_EQ(resources_.Get(node_)->available().at("TPU"), 1);
}

// A keepalive only says the node lives: known or not, it takes no view and
// no demand, and publishes nothing, even carrying a newer version.
TEST_F(ResourceManagerTest, AKeepaliveTakesNothing) {
  rpc::ReportResourcesRequest report;
  *report.mutable_resources() = View(2, 1);
  rpc::ResourceDemand* d = report.add_demands();
  (*d->mutable_shape())["TPU"] = 4;
  d->set_num_ready_requests_queued(3);
  rpc::ReportResourcesReply reply;
  absl::Status result = absl::UnknownError("no reply");
  resources_.HandleReportResources(report, &reply, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok()) << result;
  const int64_t published = PublishCount();

  rpc::ReportResourcesRequest keepalive;
  *keepalive.mutable_resources() = View(9, 4);
  keepalive.set_keepalive(true);
  rpc::ReportResourcesReply alive;
  result = absl::UnknownError("no reply");
  resources_.HandleReportResources(keepalive, &alive, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_TRUE(alive.known_node());
  EXPECT_EQ(PublishCount(), published);
  EXPECT_EQ(resources_.Get(node_)->version(), 2);
  rpc::GetClusterResourcesReply cluster;
  resources_.HandleGetClusterResources({}, &cluster, [](const absl::Status&) {});
  ASSERT_EQ(cluster.demands_size(), 1);
  EXPECT_EQ(cluster.demands(0).num_ready_requests_queued(), 3);

  keepalive.mutable_resources()->set_node_id(NodeId::FromRandom().Binary());  // unknown: register again
  resources_.HandleReportResources(keepalive, &alive, [](const absl::Status&) {});
  EXPECT_FALSE(alive.known_node());
}

// A raylet reports a change (version 3) and then answers the GCS's bundle
// call with its view under a newer version (4). When the answer is applied
// first, the report is too old to be taken, but it must still publish the
// answer's view, or the other raylets' view of this node stays stale for
// good.
TEST_F(ResourceManagerTest, AnOlderReportPublishesTheNewerViewOfABundleReply) {
  ASSERT_TRUE(Report(View(2, 0)).ok());
  ASSERT_TRUE(resources_.Apply(View(4, 4)));
  EXPECT_EQ(PublishCount(), 1) << "a bundle reply alone wakes no raylet";
  ASSERT_TRUE(Report(View(3, 4)).ok());
  EXPECT_EQ(PublishCount(), 2);
  std::vector<rpc::NodeResources> seen = Published();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.back().version(), 4);
  EXPECT_EQ(seen.back().available().at("TPU"), 4);
  // Published once: a later old report adds nothing, a newer one goes out.
  ASSERT_TRUE(Report(View(3, 4)).ok());
  EXPECT_EQ(PublishCount(), 2);
  ASSERT_TRUE(Report(View(5, 2)).ok());
  EXPECT_EQ(PublishCount(), 3);
  EXPECT_EQ(Published().back().version(), 5);
  timers_.FireAll();
  EXPECT_EQ(PublishCount(), 3) << "the reply's view went out with a report already";
}

// The raylet does not report what its bundle replies told the GCS: the GCS
// publishes those views itself, once, a while after the first.
TEST_F(ResourceManagerTest, BundleReplyViewsArePublishedTogetherAfterTheFirst) {
  ASSERT_TRUE(Report(View(1, 4)).ok());
  ASSERT_TRUE(resources_.Apply(View(2, 3)));
  ASSERT_TRUE(resources_.Apply(View(3, 2)));
  EXPECT_EQ(PublishCount(), 1) << "not at once";
  EXPECT_EQ(timers_.num_armed(), 1u) << "one publish for both replies";
  EXPECT_EQ(timers_.last_delay(), ResourceManager::kPublishApplied);
  timers_.FireAll();
  EXPECT_EQ(PublishCount(), 2);
  std::vector<rpc::NodeResources> seen = Published();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].version(), 3);
  EXPECT_EQ(seen[0].available().at("TPU"), 2);
  timers_.FireAll();
  EXPECT_EQ(PublishCount(), 2);
}

// A node that died before its replies' views went out is skipped.
TEST_F(ResourceManagerTest, AReplyViewOfANodeThatDiedIsNotPublished) {
  ASSERT_TRUE(Report(View(1, 4)).ok());
  ASSERT_TRUE(resources_.Apply(View(2, 0)));
  rpc::NodeInfo dead;
  dead.set_node_id(node_.Binary());
  resources_.OnNodeDead(dead);
  timers_.FireAll();
  EXPECT_EQ(PublishCount(), 1);
}

TEST_F(ResourceManagerTest, ViewsOfUnknownNodesOrWithBadValuesChangeNothing) {
  ASSERT_TRUE(Report(View(1, 2)).ok());
  rpc::NodeResources stranger = View(5, 0);
  stranger.set_node_id(NodeId::FromRandom().Binary());
  EXPECT_FALSE(resources_.Apply(stranger));
  rpc::NodeResources nan = View(6, 0);
  (*nan.mutable_available())["TPU"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(resources_.Apply(nan));
  EXPECT_EQ(Report(nan).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PublishCount(), 1);
  EXPECT_EQ(resources_.Get(node_)->version(), 1);
}

TEST_F(ResourceManagerTest, AViewWithAMalformedNodeIdIsInvalidArgumentAndChangesNothing) {
  ASSERT_TRUE(Report(View(1, 2)).ok());
  for (const std::string& bad : {std::string(), std::string("short"), std::string(NodeId::kSize + 1, 'n')}) {
    rpc::NodeResources view = View(7, 0);
    view.set_node_id(bad);
    absl::Status result = Report(view);
    EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument) << result;
    EXPECT_NE(result.message().find("resources.node_id must be 28 bytes"), absl::string_view::npos) << result;
    EXPECT_FALSE(resources_.Apply(view));
  }
  EXPECT_EQ(PublishCount(), 1);
  EXPECT_EQ(resources_.Get(node_)->version(), 1);
}

TEST_F(ResourceManagerTest, TotalsOnlySumsTheAliveNodesInsteadOfListingThemFoldedOnRequest) {
  NodeId other = NodeId::FromRandom();
  rpc::RegisterNodeRequest req;
  req.mutable_node_info()->set_node_id(other.Binary());
  req.mutable_node_info()->set_node_ip("127.0.0.2");
  req.mutable_node_info()->set_node_manager_port(7000);
  (*req.mutable_node_info()->mutable_resources_total())["TPU"] = 4;
  (*req.mutable_node_info()->mutable_resources_total())["CPU"] = 2;
  rpc::RegisterNodeReply registered;
  nodes_.HandleRegisterNode(req, &registered, [](const absl::Status&) {});
  Pump(loop_);
  ASSERT_TRUE(Report(View(1, 1)).ok());
  rpc::NodeResources second;
  second.set_node_id(other.Binary());
  second.set_version(1);
  (*second.mutable_total())["TPU"] = 4;
  (*second.mutable_total())["CPU"] = 2;
  (*second.mutable_available())["TPU"] = 3;
  (*second.mutable_available())["CPU"] = 0.5;
  // A committed bundle of 2 TPU, half in use, and the node's own resource:
  // folded into `reserved` by base name, or left out.
  PlacementGroupId group = PlacementGroupId::FromRandom();
  for (const auto& [name, q] : pg::CommittedResources(*ResourceSet::FromMap({{"TPU", 2}}), group, 0).ToMap()) {
    (*second.mutable_total())[name] = q;
    (*second.mutable_available())[name] = q;
  }
  (*second.mutable_available())[pg::WildcardName("TPU", group)] = 1;
  (*second.mutable_total())["node:127.0.0.2"] = 1;
  (*second.mutable_available())["node:127.0.0.2"] = 1;
  ASSERT_TRUE(Report(second).ok());

  rpc::GetClusterResourcesRequest totals_only;
  totals_only.set_totals_only(true);
  rpc::GetClusterResourcesReply unfolded;
  resources_.HandleGetClusterResources(totals_only, &unfolded, [](const absl::Status&) {});
  EXPECT_EQ(unfolded.nodes_size(), 0);
  EXPECT_EQ(unfolded.totals().total().at("TPU"), 8);
  EXPECT_EQ(unfolded.totals().total().at(pg::WildcardName("TPU", group)), 2);
  EXPECT_EQ(unfolded.totals().available().at(pg::WildcardName("TPU", group)), 1);
  EXPECT_EQ(unfolded.totals().total().at("node:127.0.0.2"), 1);
  EXPECT_FALSE(unfolded.has_reserved());

  rpc::GetClusterResourcesRequest folded = totals_only;
  folded.set_fold(true);
  rpc::GetClusterResourcesReply reply;
  resources_.HandleGetClusterResources(folded, &reply, [](const absl::Status&) {});
  EXPECT_EQ(reply.nodes_size(), 0);
  EXPECT_EQ(reply.totals().total().at("TPU"), 8);
  EXPECT_EQ(reply.totals().total().at("CPU"), 2);
  EXPECT_EQ(reply.totals().available().at("TPU"), 4);
  EXPECT_EQ(reply.totals().available().at("CPU"), 0.5);
  EXPECT_EQ(reply.totals().total_size(), 2);  // no node:<ip>, no group names
  EXPECT_EQ(reply.totals().available_size(), 2);
  EXPECT_EQ(reply.reserved().total_size(), 1);
  EXPECT_EQ(reply.reserved().total().at("TPU"), 2);
  EXPECT_EQ(reply.reserved().available().at("TPU"), 1);

  rpc::GetClusterResourcesReply full;
  resources_.HandleGetClusterResources({}, &full, [](const absl::Status&) {});
  EXPECT_EQ(full.nodes_size(), 2);
  EXPECT_FALSE(full.has_totals());
}

}  // namespace
}  // namespace manta::gcs
