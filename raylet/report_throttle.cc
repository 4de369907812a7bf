#include "raylet/report_throttle.h"

#include "absl/time/clock.h"

namespace manta::raylet {

ReportThrottle::ReportThrottle(EventLoop* loop, absl::Duration min_interval, Send send)
    : loop_(loop), min_interval_(min_interval), send_(std::move(send)) {}

ReportThrottle::~ReportThrottle() { *alive_ = false; }

void ReportThrottle::Request() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  wanted_ = true;
  MaybeSend();
}

void ReportThrottle::MaybeSend() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (!wanted_ || in_flight_ || timer_) return;
  absl::Duration wait = last_send_ + min_interval_ - absl::Now();
  if (wait > absl::ZeroDuration()) {
    timer_ = loop_->RunAfter(wait, [this] {
      timer_.reset();
      MaybeSend();
    });
    return;
  }
  wanted_ = false;
  in_flight_ = true;
  last_send_ = absl::Now();
  ++num_sent_;
  send_([this, alive = alive_] {
    if (!*alive) return;
    in_flight_ = false;
    MaybeSend();
  });
}

void ToldView::Replied(int64_t version) {
  if (!known_) return;
  by_reply_ = true;
  told_changes_ = changes_;
  replied_version_ = version;
}

void ToldView::Reported(bool demand) {
  known_ = true;
  by_reply_ = false;
  demand_ = demand;
  told_changes_ = changes_;
}

void ToldView::Published(int64_t version) {
  if (version >= replied_version_) by_reply_ = false;
}

}  // namespace manta::raylet
