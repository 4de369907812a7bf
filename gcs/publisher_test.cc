#include "gcs/publisher.h"

#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

TEST(PublisherTest, WaitingPollIsAnsweredByPublish) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_max_wait_ms(10000);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  bool done = false;
  pub.HandlePoll(req, &reply, [&](const absl::Status&) { done = true; });
  EXPECT_FALSE(done);
  EXPECT_EQ(pub.num_waiting(), 1u);
  pub.Publish(NodeMsg("10.0.0.1"));
  ASSERT_TRUE(done);
  ASSERT_EQ(AsReceived(reply).messages_size(), 1);
  EXPECT_EQ(AsReceived(reply).messages(0).sequence(), 1);
  EXPECT_EQ(AsReceived(reply).messages(0).node_info().node_ip(), "10.0.0.1");
}

TEST(PublisherTest, MalformedPollsAreRefusedAtOnce) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  std::vector<rpc::PollRequest> bad(4);
  bad[0].add_channels(static_cast<rpc::PubMessage::Channel>(99));
  for (int i = 0; i <= Publisher::kMaxPollKeys; ++i) bad[1].add_keys("k");
  bad[2].set_subscriber_node_id("abc");
  bad[3].set_subscriber_job_id("abcdefgh");
  for (const rpc::PollRequest& req : bad) {
    rpc::PollReply reply;
    absl::Status got = absl::UnknownError("not answered");
    pub.HandlePoll(req, &reply, [&](const absl::Status& s) { got = s; });
    EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument) << got;
  }
}

TEST(PublisherTest, ReturnsOnlyNewerMessagesOfWantedChannels) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(NodeMsg("a"));
  rpc::PubMessage res;
  res.set_channel(rpc::PubMessage::NODE_RESOURCES);
  pub.Publish(res);
  pub.Publish(NodeMsg("b"));
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_after_sequence(1);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(AsReceived(reply).messages_size(), 1);
  EXPECT_EQ(AsReceived(reply).messages(0).node_info().node_ip(), "b");
  EXPECT_FALSE(reply.gap());
}

TEST(PublisherTest, FiltersByKey) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  for (const char* key : {"job-a", "job-b", "job-a"}) {
    rpc::PubMessage m = NodeMsg(key);
    m.set_key(key);
    pub.Publish(m);
  }
  rpc::PollRequest req;
  req.add_keys("job-a");
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(AsReceived(reply).messages_size(), 2);
  EXPECT_EQ(AsReceived(reply).messages(1).sequence(), 3);
}

TEST(PublisherTest, ReportsGapForOtherIncarnationOrTrimmedWindow) {
  EventLoop loop;
  Publisher pub(&loop, "inc2", /*window=*/2);
  for (int i = 0; i < 5; ++i) pub.Publish(NodeMsg(std::to_string(i)));
  rpc::PollRequest req;
  req.set_gcs_incarnation("inc1");
  req.set_after_sequence(3);
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  EXPECT_TRUE(reply.gap());
  req.set_gcs_incarnation("inc2");
  req.set_after_sequence(1);
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  EXPECT_TRUE(reply.gap());
  EXPECT_EQ(AsReceived(reply).messages_size(), 2);
}

rpc::PubMessage LogMsg(int i) {
  rpc::PubMessage m;
  m.set_channel(rpc::PubMessage::LOGS);
  m.set_key("job-" + std::to_string(i % 3));
  return m;
}

TEST(PublisherTest, ALogFloodNeverPushesNodeEventsOutOfTheirWindow) {
  EventLoop loop;
  Publisher pub(&loop, "inc1", /*window=*/4);
  pub.Publish(NodeMsg("added"));
  for (int i = 0; i < 1000; ++i) pub.Publish(LogMsg(i));
  pub.Publish(NodeMsg("dead"));
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  EXPECT_FALSE(reply.gap());
  ASSERT_EQ(AsReceived(reply).messages_size(), 2);
  EXPECT_EQ(AsReceived(reply).messages(0).node_info().node_ip(), "added");
  EXPECT_EQ(AsReceived(reply).messages(0).sequence(), 1);
  EXPECT_EQ(AsReceived(reply).messages(1).node_info().node_ip(), "dead");
  EXPECT_EQ(AsReceived(reply).messages(1).sequence(), 1002);
  EXPECT_EQ(reply.last_sequence(), 1002);

  // The log reader did fall behind its own window.
  rpc::PollRequest logs;
  logs.add_channels(rpc::PubMessage::LOGS);
  logs.set_gcs_incarnation("inc1");
  pub.HandlePoll(logs, &reply, [](const absl::Status&) {});
  EXPECT_TRUE(reply.gap());
  ASSERT_EQ(AsReceived(reply).messages_size(), 4);
  EXPECT_EQ(AsReceived(reply).messages(3).sequence(), 1001);
}

TEST(PublisherTest, SeveralChannelsAreMergedInSequenceOrder) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(NodeMsg("a"));  // 1
  pub.Publish(LogMsg(0));     // 2
  pub.Publish(LogMsg(1));     // 3
  pub.Publish(NodeMsg("b"));  // 4
  rpc::PubMessage actor;
  actor.set_channel(rpc::PubMessage::ACTOR);
  pub.Publish(actor);  // 5
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.add_channels(rpc::PubMessage::LOGS);
  req.set_after_sequence(1);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(AsReceived(reply).messages_size(), 3);
  EXPECT_EQ(AsReceived(reply).messages(0).sequence(), 2);
  EXPECT_EQ(AsReceived(reply).messages(1).sequence(), 3);
  EXPECT_EQ(AsReceived(reply).messages(2).sequence(), 4);
  // No channel named: every channel.
  req.clear_channels();
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  ASSERT_EQ(AsReceived(reply).messages_size(), 4);
  EXPECT_EQ(AsReceived(reply).messages(3).sequence(), 5);
}

TEST(PublisherTest, AWaitingPollIsWokenOnlyByItsOwnChannelsGap) {
  EventLoop loop;
  Publisher pub(&loop, "inc1", /*window=*/2);
  pub.Publish(NodeMsg("a"));
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.set_after_sequence(1);
  req.set_max_wait_ms(10000);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  bool done = false;
  pub.HandlePoll(req, &reply, [&](const absl::Status&) { done = true; });
  for (int i = 0; i < 50; ++i) pub.Publish(LogMsg(i));
  EXPECT_FALSE(done);
  pub.Publish(NodeMsg("b"));
  ASSERT_TRUE(done);
  EXPECT_FALSE(reply.gap());
  ASSERT_EQ(AsReceived(reply).messages_size(), 1);
  EXPECT_EQ(AsReceived(reply).messages(0).node_info().node_ip(), "b");

  // A subscriber behind on its own channel is woken by the gap.
  rpc::PollRequest behind = req;
  behind.set_after_sequence(52);
  done = false;
  pub.HandlePoll(behind, &reply, [&](const absl::Status&) { done = true; });
  ASSERT_FALSE(done);
  pub.Publish(NodeMsg("c"));
  ASSERT_TRUE(done);
  EXPECT_FALSE(reply.gap());
  done = false;
  behind.set_after_sequence(53);
  pub.HandlePoll(behind, &reply, [&](const absl::Status&) { done = true; });
  pub.Publish(NodeMsg("d"));  // drops "b" (52), which is not after 53: no gap
  ASSERT_TRUE(done);
  EXPECT_FALSE(reply.gap());
  rpc::PollRequest old = req;
  old.set_after_sequence(0);
  pub.HandlePoll(old, &reply, [](const absl::Status&) {});
  EXPECT_TRUE(reply.gap());
}

TEST(PublisherTest, ShutdownAnswersWaitingPolls) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  rpc::PollRequest req;
  req.set_max_wait_ms(10000);
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  bool done = false;
  pub.HandlePoll(req, &reply, [&](const absl::Status&) { done = true; });
  pub.Shutdown();
  EXPECT_TRUE(done);
}

// A node's resource message is its whole view: a reply carries only each
// node's newest, in sequence order, and other channels untouched.
TEST(PublisherTest, AReplyCarriesOnlyEachNodesNewestResources) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(ResourcesMsg("a", 1));  // 1
  pub.Publish(ResourcesMsg("b", 1));  // 2
  pub.Publish(NodeMsg("x"));          // 3
  pub.Publish(ResourcesMsg("a", 2));  // 4
  pub.Publish(NodeMsg("x"));          // 5: node events are not merged
  rpc::PollRequest req;
  req.set_gcs_incarnation("inc1");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  rpc::PollReply got = AsReceived(reply);
  ASSERT_EQ(got.messages_size(), 4);
  EXPECT_EQ(got.messages(0).sequence(), 2);
  EXPECT_EQ(got.messages(1).sequence(), 3);
  EXPECT_EQ(got.messages(2).sequence(), 4);
  EXPECT_EQ(got.messages(2).node_resources().available().at("CPU"), 2);
  EXPECT_EQ(got.messages(3).sequence(), 5);
  EXPECT_EQ(got.last_sequence(), 5);
}

// A node's view goes out without its key, which only repeats the node id
// the view holds; a poll filtering on that key still gets it.
TEST(PublisherTest, ResourceMessagesAreFilteredByKeyButCarryNone) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(ResourcesMsg("node-a", 1));
  pub.Publish(ResourcesMsg("node-b", 2));
  rpc::PollRequest req;
  req.set_gcs_incarnation("inc1");
  req.add_keys("node-b");
  rpc::PollReply reply;
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  rpc::PollReply got = AsReceived(reply);
  ASSERT_EQ(got.messages_size(), 1);
  EXPECT_EQ(got.messages(0).node_resources().node_id(), "node-b");
  EXPECT_TRUE(got.messages(0).key().empty());
  rpc::PubMessage info = NodeMsg("x");
  info.set_key("node-x");
  pub.Publish(info);
  req.clear_keys();
  req.set_after_sequence(2);
  pub.HandlePoll(req, &reply, [](const absl::Status&) {});
  got = AsReceived(reply);
  ASSERT_EQ(got.messages_size(), 1);
  EXPECT_EQ(got.messages(0).key(), "node-x") << "other channels keep theirs";
}

// Thousands of subscribers: a publish does not answer each waiting poll at
// once; one flush after a short delay answers them all, and a poll that
// arrives meanwhile waits for it too.
TEST(PublisherTest, ManyWaitingPollsAreAnsweredTogetherAfterABatchingDelay) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  const int n = static_cast<int>(Publisher::kBatchFrom);
  rpc::PollRequest req;
  req.set_max_wait_ms(10000);
  req.set_gcs_incarnation("inc1");
  std::vector<rpc::PollReply> replies(n + 1);
  int answered = 0;
  for (int i = 0; i < n; ++i) pub.HandlePoll(req, &replies[i], [&](const absl::Status&) { ++answered; });
  pub.Publish(ResourcesMsg("a", 1));
  pub.Publish(ResourcesMsg("a", 2));
  EXPECT_EQ(answered, 0);
  EXPECT_TRUE(pub.flush_pending());
  pub.HandlePoll(req, &replies[n], [&](const absl::Status&) { ++answered; });  // has something to read
  EXPECT_EQ(answered, 0);
  auto stop = loop.RunAfter(absl::Seconds(5), [&] { loop.Stop(); });
  auto check = loop.RunEvery(absl::Milliseconds(1), [&] {
    if (answered == n + 1) loop.Stop();
  });
  loop.Run();
  ASSERT_EQ(answered, n + 1);
  EXPECT_FALSE(pub.flush_pending());
  for (const rpc::PollReply& r : replies) {
    rpc::PollReply got = AsReceived(r);
    ASSERT_EQ(got.messages_size(), 1);
    EXPECT_EQ(got.messages(0).node_resources().available().at("CPU"), 2);
  }
  // Polls that do not read resources are not batched.
  req.set_after_sequence(2);  // seen everything so far
  for (int i = 0; i < n; ++i) pub.HandlePoll(req, &replies[i], [](const absl::Status&) {});
  rpc::PollRequest actors = req;
  actors.add_channels(rpc::PubMessage::ACTOR);
  bool actor_done = false;
  pub.HandlePoll(actors, &replies[n], [&](const absl::Status&) { actor_done = true; });
  rpc::PubMessage actor;
  actor.set_channel(rpc::PubMessage::ACTOR);
  pub.Publish(actor);
  EXPECT_TRUE(actor_done);
  EXPECT_TRUE(pub.flush_pending());  // for the n resource readers
  pub.Shutdown();
  EXPECT_FALSE(pub.flush_pending());
}

}  // namespace
}  // namespace manta::gcs
