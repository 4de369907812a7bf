#include "gcs/publisher.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/id.h"
#include "common/status.h"
#include "google/protobuf/unknown_field_set.h"

namespace manta::gcs {

Publisher::Publisher(EventLoop* loop, std::string incarnation, size_t window)
    : loop_(loop), incarnation_(std::move(incarnation)), window_(window) {}

Publisher::~Publisher() { Shutdown(); }

void Publisher::Publish(rpc::PubMessage message) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  message.set_sequence(next_sequence_++);
  const int channel = message.channel();
  Window& window = windows_[channel];
  ++window.published;
  std::string key = message.key();
  // A node's view names its node: the key stays here, off the wire, where it
  // was a fifth of each of the many copies a large cluster's polls carry.
  if (channel == rpc::PubMessage::NODE_RESOURCES) message.clear_key();
  window.messages.push_back(Stored{message.sequence(), channel, std::move(key), message.SerializeAsString()});
  if (window.messages.size() > window_) {
    window.last_dropped = window.messages.front().sequence;
    window.messages.pop_front();
  }
  if (shut_down_) return;
  Wake(&waiting_, window);
  if (flush_timer_ != nullptr) return;  // the pending flush answers for this one too
  if (ResourceReaders() < kBatchFrom) return Wake(&batched_, window);
  StartFlushTimer();
}

size_t Publisher::ResourceReaders() const { return batched_.size() + resource_streams_writing_; }

void Publisher::StartFlushTimer() {
  absl::Duration delay = std::min(kMaxBatch, kBatchPerPoll * static_cast<int64_t>(ResourceReaders()));
  flush_timer_ = loop_->RunAfter(delay, [this] {
    auto fired = std::move(flush_timer_);
    Flush();
  });
}

void Publisher::Wake(std::list<Waiting>* polls, const Window& window) {
  const Stored& added = window.messages.back();
  // A waiting poll saw nothing it wanted so far: only the new message, or a
  // gap opened by this channel's window moving past it, can wake it.
  for (auto it = polls->begin(); it != polls->end();) {
    auto next = std::next(it);
    if (WantsChannel(it->request, added.channel)) {
      bool gap = it->request.after_sequence() < window.last_dropped;
      if ((gap || WantsKey(it->request, added.key)) && Ready(*it)) Finish(polls, it);
    }
    it = next;
  }
}

void Publisher::Flush() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (auto it = batched_.begin(); it != batched_.end();) {
    auto next = std::next(it);
    if (Ready(*it)) Finish(&batched_, it);
    it = next;
  }
}

bool Publisher::WantsChannel(const rpc::PollRequest& request, int channel) {
  return request.channels().empty() ||
         std::find(request.channels().begin(), request.channels().end(), channel) != request.channels().end();
}

bool Publisher::WantsKey(const rpc::PollRequest& request, const std::string& key) {
  return request.keys().empty() || std::find(request.keys().begin(), request.keys().end(), key) != request.keys().end();
}

std::vector<const Publisher::Window*> Publisher::WindowsOf(const rpc::PollRequest& request) const {
  std::vector<const Window*> out;
  for (const auto& [channel, window] : windows_) {
    if (WantsChannel(request, channel)) out.push_back(&window);
  }
  return out;
}

bool Publisher::Fill(const rpc::PollRequest& request, rpc::PollReply* reply) const {
  reply->Clear();
  reply->set_gcs_incarnation(incarnation_);
  reply->set_last_sequence(last_sequence());
  int64_t after = request.after_sequence();
  if (request.gcs_incarnation() != incarnation_) {
    // A sequence from another incarnation means nothing here.
    if (!request.gcs_incarnation().empty() || after != 0) {
      reply->set_gap(true);
      return true;
    }
    after = 0;
  }
  if (after > last_sequence()) {
    reply->set_gap(true);
    return true;
  }
  // Merge the wanted channels' messages after `after`, in sequence order.
  struct Cursor {
    std::deque<Stored>::const_iterator at, end;
  };
  std::vector<Cursor> cursors;
  for (const Window* window : WindowsOf(request)) {
    if (after < window->last_dropped) reply->set_gap(true);
    auto first = std::upper_bound(window->messages.begin(), window->messages.end(), after,
                                  [](int64_t seq, const Stored& m) { return seq < m.sequence; });
    if (first != window->messages.end()) cursors.push_back({first, window->messages.end()});
  }
  std::vector<const Stored*> picked;
  while (!cursors.empty()) {
    auto next = std::min_element(cursors.begin(), cursors.end(),
                                 [](const Cursor& a, const Cursor& b) { return a.at->sequence < b.at->sequence; });
    if (WantsKey(request, next->at->key)) picked.push_back(&*next->at);
    if (++next->at == next->end) cursors.erase(next);
  }
  // A node's resources: only its newest view. Later ones win, so walk back.
  absl::flat_hash_set<absl::string_view> newest_seen;
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) {
    if ((*it)->channel != rpc::PubMessage::NODE_RESOURCES || (*it)->key.empty()) continue;
    if (!newest_seen.insert((*it)->key).second) *it = nullptr;
  }
  // Each message goes in as the bytes of a `messages` entry, serialized
  // once at publishing: the wire form of a repeated message field.
  google::protobuf::UnknownFieldSet* wire = reply->GetReflection()->MutableUnknownFields(reply);
  int added = 0;
  for (const Stored* m : picked) {
    if (m == nullptr) continue;
    wire->AddLengthDelimited(rpc::PollReply::kMessagesFieldNumber, m->wire);
    ++added;
  }
  // Nothing of interest yet: skip past the uninteresting ones only when
  // replying; a waiting poll keeps its original position.
  return reply->gap() || added > 0;
}

namespace {

absl::Status ValidatePollRequest(const rpc::PollRequest& request) {
  for (int channel : request.channels()) {
    if (!rpc::PubMessage::Channel_IsValid(channel)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown channel ", channel));
    }
  }
  if (request.keys_size() > Publisher::kMaxPollKeys) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.keys_size(), " keys; a poll filters on at most ", Publisher::kMaxPollKeys));
  }
  if (!request.subscriber_node_id().empty() && !NodeId::FromBinary(request.subscriber_node_id()).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("subscriber_node_id must be ", NodeId::kSize, " bytes"));
  }
  if (!request.subscriber_job_id().empty() && !JobId::FromBinary(request.subscriber_job_id()).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("subscriber_job_id must be ", JobId::kSize, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

void Publisher::HandlePoll(const rpc::PollRequest& request, rpc::PollReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (absl::Status s = ValidatePollRequest(request); !s.ok()) return done(s);
  const bool batched = WantsChannel(request, rpc::PubMessage::NODE_RESOURCES);
  const bool ready = Fill(request, reply);
  // A resource reader with something to read waits for a pending flush.
  if (shut_down_ || (ready && !(batched && flush_timer_ != nullptr))) {
    done(absl::OkStatus());
    return;
  }
  absl::Duration wait = std::min(absl::Milliseconds(std::max(0, request.max_wait_ms())), kMaxWait);
  if (wait <= absl::ZeroDuration()) {
    done(absl::OkStatus());
    return;
  }
  Hold(batched ? &batched_ : &waiting_, request, reply, std::move(done), wait);
}

std::list<Publisher::Waiting>::iterator Publisher::Hold(std::list<Waiting>* polls, const rpc::PollRequest& request,
                                                        rpc::PollReply* reply, rpc::Done done, absl::Duration wait) {
  polls->push_back(Waiting{request, reply, std::move(done), nullptr});
  auto it = std::prev(polls->end());
  it->timer = loop_->RunAfter(wait, [this, polls, it] {
    // Nothing arrived: reply empty with the current sequence so the
    // subscriber does not re-scan what it was not interested in.
    if (it->reply != nullptr) Fill(it->request, it->reply);
    Finish(polls, it);
  });
  return it;
}

bool Publisher::Ready(Waiting& waiting) {
  if (waiting.reply == nullptr) return SharedReply(waiting.request, /*even_empty=*/false) != nullptr;
  return Fill(waiting.request, waiting.reply);
}

std::shared_ptr<const std::string> Publisher::SharedReply(const rpc::PollRequest& request, bool even_empty) {
  if (cache_sequence_ != last_sequence()) {
    reply_cache_.clear();
    cache_sequence_ = last_sequence();
  }
  auto make = [&] {
    rpc::PollReply reply;
    bool ready = Fill(request, &reply);
    return Shared{ready, std::make_shared<const std::string>(reply.SerializeAsString())};
  };
  Shared shared;
  if (!request.keys().empty()) {
    shared = make();  // a filtered stream is its own
  } else {
    std::string key = absl::StrCat(request.after_sequence(), "/", request.gcs_incarnation(), "/");
    for (int channel : request.channels()) absl::StrAppend(&key, channel, ",");
    auto [it, added] = reply_cache_.try_emplace(std::move(key));
    if (added) it->second = make();
    shared = it->second;
  }
  if (!shared.ready && !even_empty) return nullptr;
  return shared.bytes;
}

absl::StatusOr<int64_t> Publisher::Subscribe(const rpc::PollRequest& request, Send send, std::function<void()> end) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  RETURN_IF_ERROR(ValidatePollRequest(request));
  if (shut_down_) return absl::UnavailableError("the GCS is shutting down");
  const int64_t id = next_stream_++;
  Stream& stream = streams_[id];
  stream.request = request;
  stream.reads_resources = WantsChannel(request, rpc::PubMessage::NODE_RESOURCES);
  stream.send = std::move(send);
  stream.end = std::move(end);
  Arm(id, stream);
  return id;
}

void Publisher::Arm(int64_t id, Stream& stream) {
  const bool batched = stream.reads_resources;
  const bool ready = SharedReply(stream.request, /*even_empty=*/false) != nullptr;
  if (batched && ResourceReaders() + 1 >= kBatchFrom) {
    // Batching: a stream is answered by flushes only, so at most once per
    // batching delay, whenever its last write ended.
    if (ready && flush_timer_ == nullptr) StartFlushTimer();
  } else if (ready && !(batched && flush_timer_ != nullptr)) {
    // As a poll: at once when something is new, unless a flush is pending.
    return Deliver(stream);
  }
  absl::Duration wait = std::min(absl::Milliseconds(stream.request.max_wait_ms()), kMaxWait);
  if (wait <= absl::ZeroDuration()) wait = kMaxWait;
  stream.held_in = batched ? &batched_ : &waiting_;
  stream.held = Hold(
      stream.held_in, stream.request, nullptr,
      [this, id](const absl::Status&) {
        auto it = streams_.find(id);
        if (it == streams_.end()) return;
        it->second.held_in = nullptr;
        Deliver(it->second);
      },
      wait);
}

void Publisher::Deliver(Stream& stream) {
  std::shared_ptr<const std::string> reply = SharedReply(stream.request, /*even_empty=*/true);
  stream.request.set_after_sequence(last_sequence());
  stream.request.set_gcs_incarnation(incarnation_);
  stream.writing = true;
  if (stream.reads_resources) ++resource_streams_writing_;
  stream.send(std::move(reply));
}

void Publisher::Written(Stream& stream) {
  if (!stream.writing) return;
  stream.writing = false;
  if (stream.reads_resources) --resource_streams_writing_;
}

void Publisher::Sent(int64_t id) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second.writing) return;
  Written(it->second);
  Arm(id, it->second);
}

bool Publisher::Unsubscribe(int64_t id) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  auto it = streams_.find(id);
  if (it == streams_.end()) return false;
  Written(it->second);
  if (it->second.held_in != nullptr) it->second.held_in->erase(it->second.held);
  streams_.erase(it);
  return true;
}

void Publisher::Finish(std::list<Waiting>* polls, std::list<Waiting>::iterator it) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  rpc::Done done = std::move(it->done);
  polls->erase(it);
  done(absl::OkStatus());
}

void Publisher::Shutdown() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  shut_down_ = true;
  flush_timer_.reset();
  std::map<int64_t, Stream> streams = std::move(streams_);
  streams_.clear();
  resource_streams_writing_ = 0;
  for (auto& [id, stream] : streams) {
    if (stream.held_in != nullptr) stream.held_in->erase(stream.held);
  }
  for (auto& [id, stream] : streams) stream.end();
  for (std::list<Waiting>* polls : {&waiting_, &batched_}) {
    while (!polls->empty()) {
      Fill(polls->front().request, polls->front().reply);
      Finish(polls, polls->begin());
    }
  }
}

}  // namespace manta::gcs
