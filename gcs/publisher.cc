#include "gcs/publisher.h"

#include <algorithm>

namespace manta::gcs {

Publisher::Publisher(EventLoop* loop, std::string incarnation, size_t window)
    : loop_(loop), incarnation_(std::move(incarnation)), window_(window) {}

Publisher::~Publisher() { Shutdown(); }

void Publisher::Publish(rpc::PubMessage message) {
  message.set_sequence(next_sequence_++);
  messages_.push_back(std::move(message));
  if (messages_.size() > window_) messages_.pop_front();
  const rpc::PubMessage& added = messages_.back();
  const int64_t first_retained = messages_.front().sequence();
  // A waiting poll saw nothing it wanted so far: only the new message, or a
  // gap opened by the window moving past it, can wake it.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto next = std::next(it);
    bool gap = it->request.after_sequence() + 1 < first_retained;
    if ((gap || Wanted(it->request, added)) && Fill(it->request, it->reply)) Finish(it);
    it = next;
  }
}

bool Publisher::Wanted(const rpc::PollRequest& request, const rpc::PubMessage& m) {
  if (!request.channels().empty() &&
      std::find(request.channels().begin(), request.channels().end(), m.channel()) == request.channels().end()) {
    return false;
  }
  return request.keys().empty() ||
         std::find(request.keys().begin(), request.keys().end(), m.key()) != request.keys().end();
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
  int64_t first_retained = messages_.empty() ? next_sequence_ : messages_.front().sequence();
  if (after + 1 < first_retained) reply->set_gap(true);

  // Messages are contiguous by sequence: jump to the first one after `after`.
  size_t start = after + 1 >= first_retained ? static_cast<size_t>(after + 1 - first_retained) : 0;
  for (size_t i = start; i < messages_.size(); ++i) {
    if (Wanted(request, messages_[i])) *reply->add_messages() = messages_[i];
  }
  // Nothing of interest yet: skip past the uninteresting ones only when
  // replying; a waiting poll keeps its original position.
  return reply->gap() || reply->messages_size() > 0;
}

void Publisher::HandlePoll(const rpc::PollRequest& request, rpc::PollReply* reply, rpc::Done done) {
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
