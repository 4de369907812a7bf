// GcsLink: a raylet's link to the GCS. Registers the node (again after a GCS
// restart, or when a report finds the node unknown), sends its resource
// reports, subscribes to node events, resource reports and worker deaths
// (re-reading the node table after a gap; deaths lost in a gap are not read
// back), and watches the GCS: a GCS silent for longer than the
// reconnect timeout, or serving another cluster, ends the raylet; a GCS that
// refuses the node after it joined (declared dead while alive) makes it
// rejoin as a new node.
//
// It knows the raylet only through GcsLink::Host and the GCS only through
// GcsClient, and reads time from an injected clock, so its unit tests run it
// against FakeGcsClient.
//
// Thread: the loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "gcs/client/gcs_client.h"

namespace manta::raylet {

struct GcsLinkOptions {
  std::string gcs_address;  // for messages
  // How long the first registration may take, and how long a registered
  // raylet waits out an unreachable GCS.
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration reconnect_timeout = absl::Seconds(60);
  // Binary; when set, registrations name it and a GCS serving another
  // cluster refuses this node.
  std::string cluster_id;
  std::string node_id;  // binary: this node (the poll's subscriber id)
  absl::Duration retry_delay = absl::Milliseconds(300);
  absl::Duration liveness_period = absl::Seconds(1);
  // The GCS health-checks every node every 2 s by default; this much silence
  // means it may be gone: ping it.
  absl::Duration quiet_before_ping = absl::Seconds(5);
  // How long the GCS may go without writing to the node-events stream
  // (it holds at most 30 s).
  int events_wait_ms = 30000;
  // While node events arrive, a report at least this often: the GCS counts
  // what this raylet's loop sends as life, and a held stream sends nothing.
  absl::Duration keepalive = absl::Seconds(5);
};

class GcsLink {
 public:
  class Host {
   public:
    virtual ~Host() = default;
    // What a registration carries.
    virtual rpc::NodeInfo NodeInfo() const = 0;
    // The next resource report (a new version) with the waiting demand, or
    // none when it would tell the GCS nothing new.
    virtual std::optional<rpc::ReportResourcesRequest> Report() = 0;
    // Registered (`first`: the first time); resources are to be reported.
    virtual void OnRegistered(bool first) = 0;
    // A report failed: send one again (through the raylet's throttle).
    virtual void RequestReport() = 0;
    // Node events; each returns whether the cluster view changed.
    virtual bool OnNodeInfo(const rpc::NodeInfo& info) = 0;
    virtual bool OnNodeResources(const rpc::NodeResources& resources) = 0;
    // A worker that was leased exited (WORKER channel); returns whether
    // that changed what this node can grant. Told again, changes nothing.
    virtual bool OnWorkerDeath(const rpc::WorkerDeath& death) = 0;
    // The views are read again from scratch (after a gap).
    virtual void OnNodesReset() = 0;
    virtual void OnClusterChanged() = 0;
    // The raylet must end (exit code 1) for `why`.
    virtual void Exit(const std::string& why) = 0;
    // The GCS refused this node after it had joined and still serves this
    // cluster: it was declared dead while alive.
    virtual void Rejoin(const std::string& why) = 0;
  };

  GcsLink(GcsLinkOptions options, EventLoop* loop, gcs::GcsClient* gcs, Host* host, Clock clock = absl::Now);

  // Starts registering.
  void Start();
  // No more calls or timers; replies still coming are ignored.
  void Stop();
  // The GCS health-checked this node with its incarnation: it is alive
  // (registering again if it restarted).
  void OnHealthCheck(const std::string& gcs_incarnation);
  // Sends one report; `done` when it was answered (or not sent).
  void SendReport(std::function<void()> done);

  bool registered() const { return registered_; }
  const std::string& cluster_id() const { return cluster_id_; }
  absl::Time last_contact() const { return last_contact_; }

 private:
  void Register();
  void OnRegisterReply(const absl::Status& s, const rpc::RegisterNodeReply& reply);
  void RetryRegistration(const absl::Status& s);
  // The GCS refused to register this node again: rejoin when it still serves
  // this cluster, exit when it serves another.
  void RejoinUnlessForeign(const std::string& refusal);
  // Subscribes from the last sequence seen; again, a second later, when the
  // stream ends, and at once when it has been silent past its wait.
  void Subscribe();
  void OnNodeEvents(rpc::PollReply&& reply);
  void OnStreamEnd(const absl::Status& s);
  void SendKeepaliveIfDue();
  void ArmWatchdog();
  // `d` stretched by up to half, the same for this node each time: thousands
  // of raylets that lost the GCS together do not come back together.
  absl::Duration Spread(absl::Duration d) const;
  // Applies one reply's messages; false once the raylet stopped.
  bool Apply(const rpc::PollReply& reply, bool* changed);
  // Re-reads every node and its resources, holding the replies that arrive
  // meanwhile, then applies those.
  void RefreshNodes();
  void FinishRefresh();
  void CheckLiveness();
  void Contact() { last_contact_ = clock_(); }

  const GcsLinkOptions options_;
  EventLoop* const loop_;
  gcs::GcsClient* const gcs_;
  Host* const host_;
  const Clock clock_;

  bool stopped_ = false;
  bool registered_ = false;
  bool registering_ = false;
  bool pinging_ = false;
  std::string cluster_id_;       // binary; options_.cluster_id until the first registration
  std::string gcs_incarnation_;  // of the GCS last registered with
  absl::Time started_;
  absl::Time last_contact_;
  absl::Time last_report_;  // sent: a report or a keepalive
  bool keepalive_in_flight_ = false;
  int64_t events_sequence_ = 0;
  std::string events_incarnation_;
  std::unique_ptr<gcs::GcsClient::Subscription> stream_;
  bool refreshing_ = false;
  std::vector<rpc::PollReply> held_replies_;  // arrived while refreshing
  std::unique_ptr<EventLoop::Timer> stream_watchdog_;
  std::unique_ptr<EventLoop::Timer> refresh_timer_;
  absl::Duration refresh_retry_ = absl::Seconds(1);  // doubles while re-reads fail
  std::unique_ptr<EventLoop::Timer> liveness_timer_;
  std::unique_ptr<EventLoop::Timer> retry_timer_;
  std::unique_ptr<EventLoop::Timer> resubscribe_timer_;
  std::unique_ptr<EventLoop::Timer> report_retry_timer_;
};

}  // namespace manta::raylet
