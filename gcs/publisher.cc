#include "gcs/publisher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/id.h"

namespace manta::gcs {

Publisher::Publisher(EventLoop* loop, std::string incarnation, size_t window)
    : loop_(loop), incarnation_(std::move(incarnation)), window_(window) {}

Publisher::~Publisher() { Shutdown(); }

void Publisher::Publish(rpc::PubMessage message) {
  message.set_sequence(next_sequence_++);
  const int channel = message.channel();
  Window& window = windows_[channel];
  window.messages.push_back(std::move(message));
  if (window.messages.size() > window_) {
    window.last_dropped = window.messages.front().sequence();
    window.messages.pop_front();
  }
  const rpc::PubMessage& added = window.messages.back();
  // A waiting poll saw nothing it wanted so far: only the new message, or a
  // gap opened by this channel's window moving past it, can wake it.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto next = std::next(it);
    if (WantsChannel(it->request, channel)) {
      bool gap = it->request.after_sequence() < window.last_dropped;
      if ((gap || WantsKey(it->request, added)) && Fill(it->request, it->reply)) Finish(it);
    }
    it = next;
  }
}

bool Publisher::WantsChannel(const rpc::PollRequest& request, int channel) {
  return request.channels().empty() ||
         std::find(request.channels().begin(), request.channels().end(), channel) != request.channels().end();
}

bool Publisher::WantsKey(const rpc::PollRequest& request, const rpc::PubMessage& m) {
  return request.keys().empty() ||
         std::find(request.keys().begin(), request.keys().end(), m.key()) != request.keys().end();
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
    std::deque<rpc::PubMessage>::const_iterator at, end;
  };
  std::vector<Cursor> cursors;
  for (const Window* window : WindowsOf(request)) {
    if (after < window->last_dropped) reply->set_gap(true);
    auto first = std::upper_bound(window->messages.begin(), window->messages.end(), after,
                                  [](int64_t seq, const rpc::PubMessage& m) { return seq < m.sequence(); });
    if (first != window->messages.end()) cursors.push_back({first, window->messages.end()});
  }
  while (!cursors.empty()) {
    auto next = std::min_element(cursors.begin(), cursors.end(), [](const Cursor& a, const Cursor& b) {
      return a.at->sequence() < b.at->sequence();
    });
    if (WantsKey(request, *next->at)) *reply->add_messages() = *next->at;
    if (++next->at == next->end) cursors.erase(next);
  }
  // Nothing of interest yet: skip past the uninteresting ones only when
  // replying; a waiting poll keeps its original position.
  return reply->gap() || reply->messages_size() > 0;
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
  if (absl::Status s = ValidatePollRequest(request); !s.ok()) return done(s);
  if (shut_down_ || Fill(request, reply)) {
    done(absl::OkStatus());
    return;
  }
  absl::Duration wait = std::min(absl::Milliseconds(std::max(0, request.max_wait_ms())), kMaxWait);
  if (wait <= absl::ZeroDuration()) {
    done(absl::OkStatus());
    return;
  }
  waiting_.push_back(Waiting{request, reply, std::move(done), nullptr});
  auto it = std::prev(waiting_.end());
  it->timer = loop_->RunAfter(wait, [this, it] {
    // Nothing arrived: reply empty with the current sequence so the
    // subscriber does not re-scan what it was not interested in.
    Fill(it->request, it->reply);
    Finish(it);
  });
}

void Publisher::Finish(std::list<Waiting>::iterator it) {
  rpc::Done done = std::move(it->done);
  waiting_.erase(it);
  done(absl::OkStatus());
}

void Publisher::Shutdown() {
  shut_down_ = true;
  while (!waiting_.empty()) {
    Fill(waiting_.front().request, waiting_.front().reply);
    Finish(waiting_.begin());
  }
}

}  // namespace manta::gcs
