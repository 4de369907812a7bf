// ReportThrottle: coalesces requests for a report into at most one send per
// interval, with at most one send in flight.
//
// A Request() while a send is in flight or too soon after the last one is
// folded into one send when that is allowed. Nothing is armed while nothing
// is requested. Thread: the owner's loop thread.
//
//   ReportThrottle reports(&loop, absl::Milliseconds(100),
//                          [&](std::function<void()> done) { SendReport(std::move(done)); });
//   reports.Request();  // after every change
#pragma once

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "common/event_loop.h"

namespace manta::raylet {

class ReportThrottle {
 public:
  // `send` makes one report and calls its argument once when it has finished
  // (successfully or not).
  using Send = std::function<void(std::function<void()> done)>;

  ReportThrottle(EventLoop* loop, absl::Duration min_interval, Send send);
  ~ReportThrottle();

  void Request();
  int64_t num_sent() const { return num_sent_; }

 private:
  void MaybeSend();

  EventLoop* const loop_;
  const absl::Duration min_interval_;
  const Send send_;
  bool wanted_ = false;
  bool in_flight_ = false;
  absl::Time last_send_ = absl::InfinitePast();
  std::unique_ptr<EventLoop::Timer> timer_;
  int64_t num_sent_ = 0;
  // Lets a send's completion outlive the throttle safely.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::raylet
