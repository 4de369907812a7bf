// Publisher: the GCS side of pub/sub, served as long polls.
//
// Owns a bounded window of recent messages per channel, each message with a
// sequence number that grows by one per message in this GCS incarnation
// (across channels, so a subscriber keeps one cursor), and the polls waiting
// for new ones. A poll replies at once when messages after its sequence
// exist, otherwise when one is published or its wait expires. A subscriber
// that fell out of the window of a channel it reads, or that polls with
// another incarnation's sequence, gets `gap` (re-read full state, then
// continue from last_sequence). Each channel has its own window, so a flood
// of worker output never pushes node, actor or group events out.
//
// Built for thousands of subscribers (every raylet reads every node's
// resources):
// - A message is serialized once, when published; a reply copies bytes.
// - NODE_RESOURCES messages are whole views of one node (key: its id), so a
//   reply carries only the newest of each node's.
// - With kBatchFrom or more polls that read NODE_RESOURCES waiting, a publish
//   does not wake them at once: they are answered together after a batching
//   delay that grows with their number (up to kMaxBatch), and such a poll
//   arriving meanwhile waits for that flush too. Replies then come at most
//   once per delay per subscriber, each carrying everything new, instead of
//   one per message per subscriber. Polls that do not read resources (drivers
//   waiting for actors, jobs, logs) are answered at once, as always.
//
// Thread: the GCS loop thread only.
#pragma once

#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/rpc/done.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class Publisher {
 public:
  // Messages kept per channel.
  static constexpr size_t kDefaultWindow = 10000;
  static constexpr absl::Duration kMaxWait = absl::Seconds(30);
  // Batching: from this many waiting polls, kBatchPerPoll each, at most
  // kMaxBatch (2,000 raylets: 1 s, as Ray's raylets report every 100 ms to
  // 1 s; 32: 16 ms). Below it, each publish answers every poll at once: a
  // placement group over 32 hosts, whose 2PC changes each host's resources
  // twice, cost 64 replies and re-polls per host unbatched.
  static constexpr size_t kBatchFrom = 8;
  static constexpr absl::Duration kBatchPerPoll = absl::Microseconds(500);
  static constexpr absl::Duration kMaxBatch = absl::Seconds(1);

  Publisher(EventLoop* loop, std::string incarnation, size_t window = kDefaultWindow);
  ~Publisher();

  // Assigns the next sequence number and wakes matching polls.
  void Publish(rpc::PubMessage message);

  // Most keys one poll may filter on.
  static constexpr int kMaxPollKeys = 10000;

  // InvalidArgument, changing nothing, for an unknown channel, more than
  // kMaxPollKeys keys, or a subscriber node or job id of the wrong length.
  void HandlePoll(const rpc::PollRequest& request, rpc::PollReply* reply, rpc::Done done);

  // Replies to every waiting poll (empty) so a server can shut down.
  void Shutdown();

  int64_t last_sequence() const { return next_sequence_ - 1; }
  size_t num_waiting() const { return waiting_.size() + batched_.size(); }
  bool flush_pending() const { return flush_timer_ != nullptr; }
  // Messages published on `channel` so far, retained or not.
  int64_t num_published(int channel) const {
    auto it = windows_.find(channel);
    return it == windows_.end() ? 0 : it->second.published;
  }

 private:
  struct Waiting {
    rpc::PollRequest request;
    rpc::PollReply* reply;
    rpc::Done done;
    std::unique_ptr<EventLoop::Timer> timer;
  };

  // A published message as replies carry it.
  struct Stored {
    int64_t sequence;
    int channel;
    std::string key;
    std::string wire;  // the PubMessage serialized, its sequence included
  };

  // One channel's retained messages and the newest sequence it dropped.
  struct Window {
    std::deque<Stored> messages;  // sequences ascending
    int64_t last_dropped = 0;
    int64_t published = 0;
  };

  static bool WantsChannel(const rpc::PollRequest& request, int channel);
  static bool WantsKey(const rpc::PollRequest& request, const std::string& key);
  // The windows `request` reads.
  std::vector<const Window*> WindowsOf(const rpc::PollRequest& request) const;
  // Fills `reply` with what `request` may see; false when there is nothing.
  bool Fill(const rpc::PollRequest& request, rpc::PollReply* reply) const;
  void Finish(std::list<Waiting>* polls, std::list<Waiting>::iterator it);
  // Answers the polls in `polls` that the newest message of `window` wakes.
  void Wake(std::list<Waiting>* polls, const Window& window);
  // Answers every batched poll that has something to read.
  void Flush();

  EventLoop* const loop_;
  const std::string incarnation_;
  const size_t window_;
  std::map<int, Window> windows_;  // by channel
  int64_t next_sequence_ = 1;
  std::list<Waiting> waiting_;                     // answered as soon as something they want arrives
  std::list<Waiting> batched_;                     // read NODE_RESOURCES: answered by flushes when many
  std::unique_ptr<EventLoop::Timer> flush_timer_;  // set while a batch waits
  bool shut_down_ = false;
};

}  // namespace manta::gcs
