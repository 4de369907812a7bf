// Publisher: the GCS side of pub/sub, served as long polls and as streams
// (Subscribe: a poll that stays, for raylets).
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
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/event_loop.h"
#include "common/rpc/done.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class Publisher {
 public:
  // Messages kept per channel.
  static constexpr size_t kDefaultWindow = 10000;
  static constexpr absl::Duration kMaxWait = absl::Seconds(30);
  // Batching: from this many resource readers (waiting polls, and streams
  // waiting or being written), kBatchPerPoll each, at most
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

  // A poll that stays (the Subscribe stream): each reply a poll of `request`
  // would get, serialized, with the cursor moved on past it, is handed to
  // `send` to write. The next comes only after Sent(id): one reply in flight
  // per stream, and everything new since in the next. Streams at the same
  // cursor share one serialized reply. With kBatchFrom or more readers of
  // NODE_RESOURCES, such a stream is answered by flushes only. `end` runs
  // once if the publisher shuts down first. InvalidArgument as HandlePoll;
  // Unavailable after Shutdown.
  using Send = std::function<void(std::shared_ptr<const std::string> reply)>;
  absl::StatusOr<int64_t> Subscribe(const rpc::PollRequest& request, Send send, std::function<void()> end);
  // The reply last handed to the stream's `send` has been written.
  void Sent(int64_t id);
  // Ends a stream; false when it had already ended.
  bool Unsubscribe(int64_t id);

  // Replies to every waiting poll (empty) and ends every stream so a server
  // can shut down.
  void Shutdown();

  int64_t last_sequence() const { return next_sequence_ - 1; }
  size_t num_waiting() const { return waiting_.size() + batched_.size(); }
  size_t num_streams() const { return streams_.size(); }
  bool flush_pending() const { return flush_timer_ != nullptr; }
  // Messages published on `channel` so far, retained or not.
  int64_t num_published(int channel) const {
    auto it = windows_.find(channel);
    return it == windows_.end() ? 0 : it->second.published;
  }

 private:
  struct Waiting {
    rpc::PollRequest request;
    rpc::PollReply* reply;  // null for a stream
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

  // A Subscribe stream's state.
  struct Stream {
    rpc::PollRequest request;  // its cursor: the last reply sent
    Send send;
    std::function<void()> end;
    bool reads_resources = false;
    bool writing = false;                   // a reply handed to `send` and not yet Sent
    std::list<Waiting>* held_in = nullptr;  // set while it waits for something to send
    std::list<Waiting>::iterator held;
  };

  // Sends the stream's next reply now, or holds it as a poll until there is
  // one (or its wait ends).
  void Arm(int64_t id, Stream& stream);
  void Deliver(Stream& stream);
  void Written(Stream& stream);
  // Polls and streams that read NODE_RESOURCES, waiting or being written.
  size_t ResourceReaders() const;
  void StartFlushTimer();
  // Holds `request` in `polls` until Wake or Flush answers it, or `wait`
  // passes and it is answered with nothing new.
  std::list<Waiting>::iterator Hold(std::list<Waiting>* polls, const rpc::PollRequest& request, rpc::PollReply* reply,
                                    rpc::Done done, absl::Duration wait);

  static bool WantsChannel(const rpc::PollRequest& request, int channel);
  static bool WantsKey(const rpc::PollRequest& request, const std::string& key);
  // The windows `request` reads.
  std::vector<const Window*> WindowsOf(const rpc::PollRequest& request) const;
  // Fills `reply` with what `request` may see; false when there is nothing.
  bool Fill(const rpc::PollRequest& request, rpc::PollReply* reply) const;
  // Fill's reply serialized, shared by every stream at the same cursor until
  // the next publish; null when there is nothing, unless `even_empty`.
  std::shared_ptr<const std::string> SharedReply(const rpc::PollRequest& request, bool even_empty);
  // Whether a waiting poll or stream has something to read (a poll's reply filled).
  bool Ready(Waiting& waiting);
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
  std::map<int64_t, Stream> streams_;              // by id
  int64_t next_stream_ = 1;
  size_t resource_streams_writing_ = 0;
  // SharedReply's, by cursor and channels, for last_sequence() == cache_sequence_.
  struct Shared {
    bool ready;
    std::shared_ptr<const std::string> bytes;
  };
  std::map<std::string, Shared> reply_cache_;
  int64_t cache_sequence_ = -1;
  bool shut_down_ = false;
};

}  // namespace manta::gcs
