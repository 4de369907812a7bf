// The publisher's Subscribe streams: one reply in flight per stream, the
// cursor moved on by the publisher, batching by flushes, shared replies.
#include <memory>
#include <vector>

#include "gcs/publisher.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

rpc::PollRequest NodeEvents(int max_wait_ms = 10000) {
  rpc::PollRequest req;
  req.add_channels(rpc::PubMessage::NODE_INFO);
  req.add_channels(rpc::PubMessage::NODE_RESOURCES);
  req.set_max_wait_ms(max_wait_ms);
  return req;
}

// One subscriber's end: the replies as they were handed over.
struct Received {
  std::vector<std::shared_ptr<const std::string>> raw;
  bool ended = false;
  size_t size() const { return raw.size(); }
  rpc::PollReply at(size_t i) const {
    rpc::PollReply r;
    EXPECT_TRUE(r.ParseFromString(*raw.at(i)));
    return r;
  }
  Publisher::Send send() {
    return [this](std::shared_ptr<const std::string> reply) { raw.push_back(std::move(reply)); };
  }
  std::function<void()> end() {
    return [this] { ended = true; };
  }
};

TEST(PublisherStreamTest, AStreamGetsEachReplyAfterThePreviousWasWrittenWithTheCursorMovedOn) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(NodeMsg("a"));
  Received got;
  auto id = pub.Subscribe(NodeEvents(), got.send(), got.end());
  ASSERT_TRUE(id.ok()) << id.status();
  // What is there is sent at once.
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.at(0).messages_size(), 1);
  EXPECT_EQ(got.at(0).last_sequence(), 1);
  EXPECT_EQ(got.at(0).gcs_incarnation(), "inc1");
  // Nothing more while that write is in flight: the next carries both.
  pub.Publish(NodeMsg("b"));
  pub.Publish(NodeMsg("c"));
  EXPECT_EQ(got.size(), 1u);
  pub.Sent(*id);
  ASSERT_EQ(got.size(), 2u);
  rpc::PollReply second = got.at(1);
  ASSERT_EQ(second.messages_size(), 2);  // "a" is not sent again
  EXPECT_EQ(second.messages(0).node_info().node_ip(), "b");
  EXPECT_EQ(second.messages(1).node_info().node_ip(), "c");
  EXPECT_FALSE(second.gap());
  // Written, nothing new: held until a publish.
  pub.Sent(*id);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(pub.num_waiting(), 1u);
  pub.Publish(NodeMsg("d"));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.at(2).messages(0).sequence(), 4);
  // A second Sent for one write changes nothing.
  pub.Sent(*id);
  pub.Sent(*id);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_FALSE(got.ended);
}

TEST(PublisherStreamTest, AQuietStreamGetsAnEmptyReplyEachWait) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  pub.Publish(NodeMsg("a"));
  rpc::PollRequest req = NodeEvents(/*max_wait_ms=*/20);
  req.set_after_sequence(1);
  req.set_gcs_incarnation("inc1");
  Received got;
  auto id = pub.Subscribe(req, got.send(), got.end());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(got.size(), 0u);
  auto stop = loop.RunAfter(absl::Seconds(5), [&] { loop.Stop(); });
  auto check = loop.RunEvery(absl::Milliseconds(1), [&] {
    if (got.size() == 1) loop.Stop();
  });
  loop.Run();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.at(0).messages_size(), 0);
  EXPECT_EQ(got.at(0).last_sequence(), 1);
  // It stays subscribed: the next publish reaches it once the empty reply is written.
  pub.Sent(*id);
  pub.Publish(NodeMsg("b"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got.at(1).messages(0).node_info().node_ip(), "b");
}

TEST(PublisherStreamTest, MalformedOrLateSubscriptionsAreRefusedAndChangeNothing) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  std::vector<rpc::PollRequest> bad(3);
  bad[0].add_channels(static_cast<rpc::PubMessage::Channel>(99));
  for (int i = 0; i <= Publisher::kMaxPollKeys; ++i) bad[1].add_keys("k");
  bad[2].set_subscriber_node_id("abc");
  Received got;
  for (const rpc::PollRequest& req : bad) {
    auto id = pub.Subscribe(req, got.send(), got.end());
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  }
  EXPECT_EQ(pub.num_streams(), 0u);
  pub.Shutdown();
  auto late = pub.Subscribe(NodeEvents(), got.send(), got.end());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.size(), 0u);
  EXPECT_FALSE(got.ended);
}

TEST(PublisherStreamTest, UnsubscribeAndShutdownEndStreamsWaitingOrWriting) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  Received waiting, writing, left;
  auto w = pub.Subscribe(NodeEvents(), waiting.send(), waiting.end());
  pub.Publish(NodeMsg("a"));  // answers `waiting`, which then writes
  auto x = pub.Subscribe(NodeEvents(), writing.send(), writing.end());
  auto l = pub.Subscribe(NodeEvents(), left.send(), left.end());
  ASSERT_TRUE(w.ok() && x.ok() && l.ok());
  EXPECT_EQ(pub.num_streams(), 3u);
  EXPECT_TRUE(pub.Unsubscribe(*l));
  EXPECT_FALSE(pub.Unsubscribe(*l));
  pub.Sent(*l);  // a late write's end for a stream that is gone
  EXPECT_EQ(pub.num_streams(), 2u);
  pub.Sent(*w);  // now waiting
  EXPECT_EQ(pub.num_waiting(), 1u);
  pub.Shutdown();
  EXPECT_TRUE(waiting.ended);
  EXPECT_TRUE(writing.ended);
  EXPECT_FALSE(left.ended);  // it was unsubscribed, not ended
  EXPECT_EQ(pub.num_streams(), 0u);
  EXPECT_EQ(pub.num_waiting(), 0u);
  pub.Publish(NodeMsg("b"));
  EXPECT_EQ(waiting.size(), 1u);
  EXPECT_EQ(writing.size(), 1u);
}

// Thousands of raylets: with kBatchFrom or more resource readers, streams
// are answered by flushes only, those at the same cursor share one reply,
// and a stream whose write ended after a flush waits for the next one.
TEST(PublisherStreamTest, ManyStreamsAreAnsweredByFlushesWithOneSharedReply) {
  EventLoop loop;
  Publisher pub(&loop, "inc1");
  const int n = static_cast<int>(Publisher::kBatchFrom);
  std::vector<Received> got(n);
  std::vector<int64_t> ids;
  rpc::PollRequest req = NodeEvents();
  req.set_gcs_incarnation("inc1");
  for (Received& r : got) ids.push_back(*pub.Subscribe(req, r.send(), r.end()));
  pub.Publish(ResourcesMsg("a", 1));
  pub.Publish(ResourcesMsg("a", 2));
  pub.Publish(NodeMsg("x"));
  for (const Received& r : got) EXPECT_EQ(r.size(), 0u);
  EXPECT_TRUE(pub.flush_pending());
  auto run_until = [&](auto done) {
    auto stop = loop.RunAfter(absl::Seconds(5), [&] { loop.Stop(); });
    auto check = loop.RunEvery(absl::Milliseconds(1), [&] {
      if (done()) loop.Stop();
    });
    loop.Run();
  };
  auto all_have = [&](size_t k) {
    return [&, k] {
      for (const Received& r : got) {
        if (r.size() < k) return false;
      }
      return true;
    };
  };
  run_until(all_have(1));
  for (const Received& r : got) {
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r.raw[0], got[0].raw[0]);  // the same bytes, serialized once
  }
  rpc::PollReply first = got[0].at(0);
  ASSERT_EQ(first.messages_size(), 2);  // node a's newest view, and x
  EXPECT_EQ(first.messages(0).node_resources().available().at("CPU"), 2);
  EXPECT_EQ(first.messages(1).node_info().node_ip(), "x");
  // Written: nothing new, nothing sent. Then a publish waits for a flush
  // even for a stream that has just finished writing.
  for (int64_t id : ids) pub.Sent(id);
  pub.Publish(ResourcesMsg("b", 4));
  for (const Received& r : got) EXPECT_EQ(r.size(), 1u);
  EXPECT_TRUE(pub.flush_pending());
  run_until(all_have(2));
  for (const Received& r : got) {
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r.at(1).messages_size(), 1);
    EXPECT_EQ(r.at(1).last_sequence(), 4);
  }
  // While written (not yet Sent), streams still count toward the batch:
  // a publish then starts a flush rather than answering a waiting reader.
  pub.Sent(ids[0]);
  pub.Publish(ResourcesMsg("c", 8));
  EXPECT_EQ(got[0].size(), 2u);
  EXPECT_TRUE(pub.flush_pending());
  run_until([&] { return got[0].size() == 3; });
  ASSERT_EQ(got[0].size(), 3u);
  // The others missed that flush, still writing. Their writes ending with
  // something to read start the next flush; they are not answered at once.
  for (int i = 1; i < n; ++i) pub.Sent(ids[i]);
  for (int i = 1; i < n; ++i) EXPECT_EQ(got[i].size(), 2u);
  EXPECT_TRUE(pub.flush_pending());
  run_until(all_have(3));
  for (int i = 1; i < n; ++i) EXPECT_EQ(got[i].at(2).messages(0).node_resources().available().at("CPU"), 8);
  pub.Shutdown();
}

}  // namespace
}  // namespace manta::gcs
