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
  size_t num_waiting() const { return waiting_.size(); }

 private:
  struct Waiting {
    rpc::PollRequest request;
    rpc::PollReply* reply;
    rpc::Done done;
    std::unique_ptr<EventLoop::Timer> timer;
  };

  // One channel's retained messages and the newest sequence it dropped.
  struct Window {
    std::deque<rpc::PubMessage> messages;  // sequences ascending
    int64_t last_dropped = 0;
  };

  static bool WantsChannel(const rpc::PollRequest& request, int channel);
  static bool WantsKey(const rpc::PollRequest& request, const rpc::PubMessage& m);
  // The windows `request` reads.
  std::vector<const Window*> WindowsOf(const rpc::PollRequest& request) const;
  // Fills `reply` with what `request` may see; false when there is nothing.
  bool Fill(const rpc::PollRequest& request, rpc::PollReply* reply) const;
  void Finish(std::list<Waiting>::iterator it);

  EventLoop* const loop_;
  const std::string incarnation_;
  const size_t window_;
  std::map<int, Window> windows_;  // by channel
  int64_t next_sequence_ = 1;
  std::list<Waiting> waiting_;
  bool shut_down_ = false;
};

}  // namespace manta::gcs
