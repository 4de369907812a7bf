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
#include "common/resources.h"

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

// ToldView: what the GCS was last told of this node's resources, so that a
// report telling it nothing new is not sent. Each bundle call's reply
// carries the node's view; without this, the change behind it also made a
// report of the same view, one RPC more per node and phase of a placement
// group's commit (32 more for a reservation of two v6e-64 slices).
//
// A report with waiting demand is never redundant. A view told only by a
// reply is confirmed by a report within a while all the same (the raylet
// arms that when it skips a report), in case the reply never arrived.
// Thread: the owner's loop thread.
class ToldView {
 public:
  // A bundle call's reply carried this view (known only once a report has
  // gone out since the last Forget).
  void Replied(const ResourceSet& total, const ResourceSet& available);
  // A report of this view (with or without demand) was sent.
  void Reported(const ResourceSet& total, const ResourceSet& available, bool demand);
  // The GCS may know nothing of this node: it registered again, or a report
  // failed.
  void Forget() { known_ = false; }

  // Whether a report of this view, with or without demand, tells the GCS
  // nothing it was not told.
  bool Redundant(const ResourceSet& total, const ResourceSet& available, bool demand) const;
  // Whether the view was last told by a reply, not by a report.
  bool by_reply() const { return by_reply_; }

 private:
  bool known_ = false;
  bool by_reply_ = false;
  bool demand_ = false;
  ResourceSet total_, available_;
};

}  // namespace manta::raylet
