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

#include <cstdint>
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

// ToldView: whether the GCS has been told of every change of this node's
// resources, so that a report telling it nothing new is not sent. Each
// bundle call's reply carries the node's view, which the GCS publishes;
// without this, the change behind it also made a report of the same view,
// one RPC more per node and phase of a placement group's commit (32 more
// for a reservation of two v6e-64 slices).
//
// It counts changes rather than comparing views: a change undone before the
// report (a lease granted and returned) is still reported, because other
// raylets count the leases they spill to a node against it until the node's
// next view arrives. A report with waiting demand, or after one with
// demand, is never redundant. A view told only by a reply is unconfirmed
// until this node's view at that version comes back from the GCS (published,
// or read back after a gap); the raylet reports it again should that take
// too long (the reply may have been lost).
// Thread: the owner's loop thread.
class ToldView {
 public:
  // The node's resources changed.
  void Changed() { ++changes_; }
  // A bundle call's successful reply carried every change so far, under
  // `version` (counts only once a report has gone out since the last Forget:
  // until then the GCS's idea of the demand is unknown).
  void Replied(int64_t version);
  // A report of every change so far was sent, with or without demand.
  void Reported(bool demand);
  // The GCS sent this node its own view at `version`.
  void Published(int64_t version);
  // The GCS may know nothing of this node: it registered again, or a report
  // failed.
  void Forget() { known_ = false; }

  // Whether the GCS holds this node's view as it is now.
  bool Current() const { return known_ && changes_ == told_changes_; }
  // Whether a report now, with or without demand, tells the GCS nothing.
  bool Redundant(bool demand) const { return known_ && !demand && !demand_ && changes_ == told_changes_; }
  // Whether the last telling was a reply whose view was not seen published.
  bool unconfirmed() const { return known_ && by_reply_; }

 private:
  bool known_ = false;
  bool by_reply_ = false;
  bool demand_ = false;
  int64_t changes_ = 0;
  int64_t told_changes_ = 0;
  int64_t replied_version_ = 0;
};

}  // namespace manta::raylet
